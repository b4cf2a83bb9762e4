//! Backups and the file's upkeep (SPEC D8–D10): online snapshots, content hashes, size and
//! defragmentation. Each reads the store through [`Tenure::store_view`], never the live
//! machine, so none of them holds the state lock while it works.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::commit::enqueued;
use super::{Shared, Tenure};
use crate::error::{Error, Result};
use crate::lease::lessor::NO_TIME;
use crate::rows::Loaded;
use crate::store::View;
use crate::types::{
    ContentHash, FileContents, KeyValue, LeaseId, LeaseInfo, SnapshotInfo, SnapshotProgress,
    StorageSize,
};

impl Tenure {
    /// What the database file at `path` holds (its revision and live keys and leases; the
    /// engine's counters are 0), read in place without opening an engine: the file is opened
    /// read-only and never written, so a file no one may write (or one another process has
    /// open) can be read. `len`: only that many leading bytes are the database (a saved
    /// snapshot's checksum follows them). The log beside a database is not replayed: for a
    /// database file, use [`read_file`](Tenure::read_file).
    ///
    /// `Corrupt` for a damaged file or one whose writer was killed (redb would repair it);
    /// `Storage` naming the file when it cannot be read.
    pub fn file_stats(path: impl AsRef<Path>, len: Option<u64>) -> Result<crate::types::Stats> {
        let loaded = crate::store::read_in_place(path.as_ref(), len, false)?;
        Ok(contents(loaded).stats())
    }

    /// Everything the database file at `path` holds, read in place without opening an engine
    /// and without writing anything (SPEC E10): the file and its write-ahead log are opened
    /// read-only, so a file with mode 0444 in a read-only directory can be read, and nothing
    /// expires. A file whose writer was killed is repaired, and the records of its log that the
    /// file lacks replayed, in memory only: every acknowledged write is seen.
    ///
    /// `AlreadyOpen` while an engine has the file open (and an engine that opens the file during
    /// the read gets `AlreadyOpen`); `Corrupt` for a damaged file or log;
    /// `Storage` naming the file when it cannot be read.
    pub fn read_file(path: impl AsRef<Path>) -> Result<FileContents> {
        crate::store::read_in_place(path.as_ref(), None, true).map(contents)
    }

    /// Copies the database file at `path` (one no engine has open) to `dest` as a snapshot
    /// would (SPEC D8, E12: `tenure snapshot FILE OUT`), reading it in place as
    /// [`read_file`](Tenure::read_file) does: `path` and its log are never written, and what
    /// the log holds is in the copy.
    pub fn copy_file(path: impl AsRef<Path>, dest: impl AsRef<Path>) -> Result<SnapshotInfo> {
        let (path, dest) = (path.as_ref(), dest.as_ref());
        if same_file(path, dest) {
            return Err(Error::invalid(format!(
                "snapshot destination {} is the database itself",
                dest.display()
            )));
        }
        crate::store::copy_in_place(path, dest, &mut |_| {})
    }

    /// Writes a consistent copy of the database, as of one revision, to `dest` while writes go
    /// on (SPEC D8). The copy is built under a temporary name in `dest`'s directory, fsynced and
    /// renamed over `dest`: a crash or a full disk never leaves a partial file at `dest`, and the
    /// source is only read. It opens as a tenure database holding exactly the keys and leases
    /// as of [`SnapshotInfo::revision`]; each lease's remaining TTL is recorded as of the
    /// snapshot and counts down from then on when the copy is opened (SPEC L13).
    ///
    /// `InvalidArgument` for an in-memory engine or when `dest` is the database's own file;
    /// `Storage` naming `dest` when it cannot be written.
    pub fn snapshot(&self, dest: impl AsRef<Path>) -> Result<SnapshotInfo> {
        self.snapshot_with_progress(dest, |_| {})
    }

    /// [`snapshot`](Tenure::snapshot), calling `progress` every few thousand rows copied and
    /// once at the end (`done == total`).
    pub fn snapshot_with_progress(
        &self,
        dest: impl AsRef<Path>,
        mut progress: impl FnMut(SnapshotProgress),
    ) -> Result<SnapshotInfo> {
        let dest = dest.as_ref();
        if let Some(own) = self.path() {
            if same_file(own, dest) {
                return Err(Error::invalid(format!(
                    "snapshot destination {} is the database itself",
                    dest.display()
                )));
            }
        }
        self.store_view()?.copy_to(dest, &mut progress)
    }

    /// A snapshot (as [`snapshot`](Tenure::snapshot)) in a file no name points to, open for
    /// reading from its start: for sending it on (Maintenance.Snapshot of `tenure serve`). It is
    /// built beside the database under the engine's temporary name
    /// (`.NAME.streamed-snapshot-PID-N`, [`temp_beside`](crate::temp_beside)) and unlinked once
    /// opened; a kill before that leaves the temporary, which the next call removes (I-O3).
    ///
    /// `InvalidArgument` for an in-memory engine; `Storage` when the copy cannot be written.
    pub fn snapshot_unlinked(&self) -> Result<(std::fs::File, SnapshotInfo)> {
        let view = self.store_view()?; // InvalidArgument in memory
        let own = self
            .path()
            .ok_or_else(|| Error::invalid("an in-memory database has no file"))?;
        view.copy_unlinked(own, "streamed-snapshot")
    }

    /// Checksums of the logical contents at the current durable revision (SPEC D9): equal for
    /// equal contents, stable across restarts and snapshots.
    pub fn content_hash(&self) -> Result<ContentHash> {
        self.store_view()?.hash()
    }

    /// The file's size and the bytes in use (SPEC D10).
    pub fn storage_size(&self) -> Result<StorageSize> {
        let s = self.file_backed()?;
        // The file as it is after a storage failure (D6); else brought up to date first.
        let _ = self.flush_to_file();
        let store = s.store.lock();
        store.as_ref().ok_or_else(|| s.closed.clone())?.size()
    }

    /// Gives the file's free pages back to the filesystem (SPEC D10) and returns the new size.
    /// Commits wait meanwhile (writes still apply in memory); `Storage` while a snapshot or
    /// a hash is reading the file.
    pub fn defragment(&self) -> Result<StorageSize> {
        let s = self.file_backed()?;
        self.flush_to_file()?; // what the log holds is in the file before its pages move
        let mut store = s.store.lock();
        let store = store.as_mut().ok_or_else(|| s.closed.clone())?;
        store.compact()?;
        store.size()
    }

    fn file_backed(&self) -> Result<&Shared> {
        let s = self.shared()?;
        if !s.cfg.persist {
            return Err(Error::invalid("an in-memory database has no file"));
        }
        if s.state.lock().closed {
            return Err(s.closed.clone());
        }
        Ok(s)
    }

    /// The one way backups read the store: first checkpoints every renewed lease (so each lease
    /// row holds its remaining TTL as of now) and brings the file itself up to date with
    /// everything applied (`flush_to_file`: with the write-ahead log, the file lags the log), then
    /// begins a redb read transaction, which sees that commit or a later one and nothing that
    /// commits after it begins.
    fn store_view(&self) -> Result<View> {
        let s = self.file_backed()?;
        let flush = {
            let mut st = s.state.lock();
            let st = &mut *st;
            if st.closed {
                return Err(s.closed.clone());
            }
            // After a failed commit (D6) the file holds the last good commit: read that.
            if st.poisoned.is_some() {
                false
            } else {
                if st.m.lessor.is_primary() && st.m.lessor.has_dirty() {
                    let (now, wall) = (s.clock.now_ns(), s.clock.wall_ms());
                    while st.m.lessor.has_dirty() {
                        st.m.checkpoint_dirty(now, wall, usize::MAX, &mut st.pending);
                    }
                    enqueued(s, st, false);
                }
                true
            }
        };
        if flush {
            self.flush_to_file()?;
        }
        let store = s.store.lock();
        store.as_ref().ok_or_else(|| s.closed.clone())?.view()
    }
}

/// Whether `a` and `b` name the same file (`b` may not exist yet).
fn same_file(a: &Path, b: &Path) -> bool {
    fn resolve(p: &Path) -> Option<PathBuf> {
        if let Ok(c) = p.canonicalize() {
            return Some(c);
        }
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(dir.canonicalize().ok()?.join(p.file_name()?))
    }
    matches!((resolve(a), resolve(b)), (Some(x), Some(y)) if x == y)
}

/// The public view of what a file holds: leases by ID with their keys, live keys in key order.
fn contents(loaded: Loaded) -> FileContents {
    let mut leases: Vec<LeaseInfo> = loaded
        .leases
        .iter()
        .map(|r| LeaseInfo {
            id: LeaseId::new(r.id),
            ttl: Duration::from_nanos(r.ttl),
            remaining: Some(Duration::from_nanos(if r.remaining == NO_TIME {
                r.ttl
            } else {
                r.remaining
            })),
            keys: Vec::new(),
        })
        .collect();
    leases.sort_by_key(|l| l.id);
    let mut keys = Vec::with_capacity(loaded.keys.len());
    for (key, entry) in loaded.keys {
        if entry.lease != 0 {
            if let Ok(i) = leases.binary_search_by_key(&entry.lease, |l| l.id.get()) {
                leases[i].keys.push(key.clone());
            }
        }
        if let Some(d) = entry.data {
            keys.push(KeyValue {
                key,
                value: d.value,
                create_revision: d.create,
                mod_revision: d.mod_revision,
                version: d.version,
                lease: (entry.lease != 0).then(|| LeaseId::new(entry.lease)),
            });
        }
    }
    FileContents {
        revision: loaded.revision,
        leases,
        keys,
    }
}
