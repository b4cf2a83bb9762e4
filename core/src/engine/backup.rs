//! Backups and the file's upkeep (SPEC D8–D10): online snapshots, content hashes, size and
//! defragmentation. Each reads the store through [`Tenure::store_view`], never the live
//! machine, so none of them holds the state lock while it works.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::commit::enqueued;
use super::{Engine, Shared};
use crate::error::{Error, Result};
use crate::lease::lessor::NO_TIME;
use crate::rows::Loaded;
use crate::store::View;
use crate::types::{
    ContentHash, FileContents, KeyValue, LeaseId, LeaseInfo, SnapshotInfo, SnapshotProgress,
    StorageSize,
};

impl Engine {
    /// [`Tenure::file_stats`](crate::Tenure::file_stats), for this engine.
    pub(crate) fn file_stats(
        path: impl AsRef<Path>,
        len: Option<u64>,
    ) -> Result<crate::types::Stats> {
        let loaded = crate::store::read_in_place(path.as_ref(), len, false)?;
        Ok(contents(loaded).stats())
    }

    /// [`Tenure::read_file`](crate::Tenure::read_file), for this engine.
    pub(crate) fn read_file(path: impl AsRef<Path>) -> Result<FileContents> {
        crate::store::read_in_place(path.as_ref(), None, true).map(contents)
    }

    /// [`Tenure::copy_file`](crate::Tenure::copy_file), for this engine.
    pub(crate) fn copy_file(
        path: impl AsRef<Path>,
        dest: impl AsRef<Path>,
    ) -> Result<SnapshotInfo> {
        let (path, dest) = (path.as_ref(), dest.as_ref());
        if same_file(path, dest) {
            return Err(Error::invalid(format!(
                "snapshot destination {} is the database itself",
                dest.display()
            )));
        }
        crate::store::copy_in_place(path, dest, &mut |_| {})
    }

    /// [`Tenure::snapshot`](crate::Tenure::snapshot), for this engine.
    pub(crate) fn snapshot(&self, dest: impl AsRef<Path>) -> Result<SnapshotInfo> {
        self.snapshot_with_progress(dest, |_| {})
    }

    /// [`Tenure::snapshot_with_progress`](crate::Tenure::snapshot_with_progress), for this engine.
    pub(crate) fn snapshot_with_progress(
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

    /// [`Tenure::snapshot_unlinked`](crate::Tenure::snapshot_unlinked), for this engine.
    pub(crate) fn snapshot_unlinked(&self) -> Result<(std::fs::File, SnapshotInfo)> {
        let view = self.store_view()?; // InvalidArgument in memory
        let own = self
            .path()
            .ok_or_else(|| Error::invalid("an in-memory database has no file"))?;
        view.copy_unlinked(own, "streamed-snapshot")
    }

    /// [`Tenure::content_hash`](crate::Tenure::content_hash), for this engine.
    pub(crate) fn content_hash(&self) -> Result<ContentHash> {
        self.store_view()?.hash()
    }

    /// [`Tenure::hash_kv`](crate::Tenure::hash_kv), for this engine.
    pub(crate) fn hash_kv(&self, revision: i64) -> Result<(u32, i64)> {
        let current = self.revision()?;
        if revision == 0 || revision == current {
            let h = self.content_hash()?;
            return Ok((h.kv, h.revision));
        }
        let kvs = self.range_at(b"", None, revision)?;
        Ok((crate::store::kv_hash(&kvs), revision))
    }

    /// [`Tenure::storage_size`](crate::Tenure::storage_size), for this engine.
    pub(crate) fn storage_size(&self) -> Result<StorageSize> {
        let s = self.file_backed()?;
        // The file as it is after a storage failure (D6); else brought up to date first.
        let _ = self.flush_to_file();
        let store = s.store.lock();
        let size = store.as_ref().ok_or_else(|| s.closed.clone())?.size();
        super::quota::note_file_bytes(s);
        size
    }

    /// [`Tenure::defragment`](crate::Tenure::defragment), for this engine.
    pub(crate) fn defragment(&self) -> Result<StorageSize> {
        let s = self.file_backed()?;
        self.flush_to_file()?; // what the log holds is in the file before its pages move
        let mut store = s.store.lock();
        let store = store.as_mut().ok_or_else(|| s.closed.clone())?;
        store.compact()?;
        let size = store.size();
        super::quota::note_file_bytes(s);
        size
    }

    fn file_backed(&self) -> Result<&Shared> {
        let s = self.shared();
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
                if st.lease_kv.lessor.is_primary() && st.lease_kv.lessor.has_dirty() {
                    let (now, wall) = (s.clock.now_ns(), s.clock.wall_ms());
                    while st.lease_kv.lessor.has_dirty() {
                        st.lease_kv
                            .checkpoint_dirty(now, wall, usize::MAX, &mut st.pending);
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
