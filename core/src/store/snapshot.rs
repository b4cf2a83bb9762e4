//! Reading the store at one revision: copying it to a new file (SPEC D8), hashing its logical
//! contents (D9), and the file's size and compaction (D10).
//!
//! A [`View`] is one redb read transaction: it sees the last commit made before it began, and
//! no later one, while the committer keeps committing. Nothing here blocks writers.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use redb::backends::FileBackend;
use redb::{Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::{
    codec::{decode, decode_lease},
    guarded, new_private,
    seal::{unseal, write_meta},
    sibling_temp, FaultyBackend, StorageFaults, Store, KV, KV_NAME, LEASES, LEASES_NAME, META,
};
use crate::error::{Error, Result};
use crate::types::{ContentHash, SnapshotInfo, SnapshotProgress, StorageSize};

/// Rows per write transaction of the copy: bounds the memory a big snapshot holds dirty.
const CHUNK: u64 = 1 << 16;
/// Progress is reported every this many rows (and at the end).
const PROGRESS_EVERY: u64 = 1 << 12;

/// A consistent read of the store at one revision.
pub(crate) struct View {
    pub(super) tx: redb::ReadTransaction,
    /// The database file read (errors name it).
    path: PathBuf,
    /// The source's injected faults: the copy gets them too (tests of a full disk).
    faults: StorageFaults,
    /// The history's tables, opened by the first read of the history through this view.
    pub(super) history: HistoryTables,
}

pub(super) type VersionsTable = redb::ReadOnlyTable<(i64, &'static [u8]), &'static [u8]>;
pub(super) type KeysTable = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

/// The history's tables of one view (`history` reads them), each opened at its first use and
/// kept for the view's life: redb's cost per table opened is that of a lookup, and a view may
/// serve many reads.
#[derive(Default)]
pub(super) struct HistoryTables {
    /// `None`: a file without history.
    pub(super) versions: OnceLock<Option<VersionsTable>>,
    pub(super) kv: OnceLock<KeysTable>,
    pub(super) deleted: OnceLock<KeysTable>,
}

/// What a view handed out for reading the history covers, as its caller saw it before the view
/// began (so at most what the view holds): the file's revision and count of relabels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Covers {
    pub(crate) revision: i64,
    pub(crate) relabels: u64,
}

/// The view [`Store::history_view`] handed out last, kept until the store next writes.
pub(super) type SharedView = Option<(Arc<View>, Covers)>;

/// An error reading the source: it names the source file.
fn read_error(path: &Path, e: impl Into<redb::Error>) -> Error {
    match e.into() {
        redb::Error::Io(io) => Error::io("cannot read", path, &io),
        e => Error::Storage {
            message: format!("cannot read {}: {e}", path.display()),
            errno: None,
            path: Some(path.to_path_buf()),
        },
    }
}

/// An error writing the copy: it names the destination.
fn write_error(dest: &Path, e: impl Into<redb::Error>) -> Error {
    match e.into() {
        redb::Error::Io(io) => Error::io("cannot write snapshot", dest, &io),
        e => Error::Storage {
            message: format!("cannot write snapshot {}: {e}", dest.display()),
            errno: None,
            path: Some(dest.to_path_buf()),
        },
    }
}

impl Store {
    /// Begins a read transaction: the store as of its last commit.
    pub(crate) fn view(&self) -> Result<View> {
        let tx = self
            .db
            .begin_read()
            .map_err(|e| read_error(&self.path, e))?;
        Ok(View {
            tx,
            path: self.path.clone(),
            faults: self.faults.clone(),
            history: Default::default(),
        })
    }

    /// A view for reads of the history that need what `wanted` covers: the one handed out
    /// last while it covers that, else a new one, which covers `now` (what the file held
    /// before it began). A view is kept until the store next writes, so it never holds back
    /// the reuse of pages a write frees; reads through one skip redb's begin and table opens.
    pub(crate) fn history_view(&self, wanted: Covers, now: Covers) -> Result<Arc<View>> {
        let mut last = self.reader.borrow_mut();
        if let Some((view, covers)) = &*last {
            if covers.revision >= wanted.revision && covers.relabels >= wanted.relabels {
                return Ok(Arc::clone(view));
            }
        }
        let view = Arc::new(self.view()?);
        *last = Some((Arc::clone(&view), now));
        Ok(view)
    }

    /// Drops the view kept for reads of the history (before a write: see `history_view`).
    pub(super) fn forget_view(&self) {
        self.reader.borrow_mut().take();
    }

    /// The file's length and the bytes its allocated pages hold.
    pub(crate) fn size(&self) -> Result<StorageSize> {
        let file_bytes = std::fs::metadata(&self.path)
            .map_err(|e| Error::io("cannot stat", &self.path, &e))?
            .len();
        guarded(&self.path, || {
            // Aborted, so it frees no page: the kept view needs not be dropped for it.
            let tx = self
                .db
                .begin_write()
                .map_err(|e| read_error(&self.path, e))?;
            let stats = tx.stats().map_err(|e| read_error(&self.path, e))?;
            tx.abort().map_err(|e| read_error(&self.path, e))?;
            let in_use = stats.allocated_pages() * stats.page_size() as u64;
            Ok(StorageSize {
                file_bytes,
                in_use_bytes: in_use.min(file_bytes),
            })
        })
    }

    /// Moves live pages to the front of the file and truncates it (redb's compaction). Fails
    /// while a [`View`] is open.
    pub(crate) fn compact(&mut self) -> Result<()> {
        let path = self.path.clone();
        self.forget_view();
        guarded(&path, || loop {
            match self.db.compact() {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(redb::CompactionError::TransactionInProgress) => {
                    return Err(Error::Storage {
                        message: format!(
                            "cannot defragment {} while a snapshot or hash reads it; retry",
                            path.display()
                        ),
                        errno: None,
                        path: Some(path.clone()),
                    })
                }
                Err(e) => return Err(read_error(&path, e)),
            }
        })
    }
}

impl View {
    /// A view of a database read in place (no engine: no faults to inject).
    pub(crate) fn of(tx: redb::ReadTransaction, path: &Path) -> View {
        View {
            tx,
            path: path.to_path_buf(),
            faults: StorageFaults::default(),
            history: Default::default(),
        }
    }

    /// The store revision this view reads.
    pub(crate) fn revision(&self) -> Result<i64> {
        let meta = self
            .tx
            .open_table(META)
            .map_err(|e| read_error(&self.path, e))?;
        let rev = meta
            .get("revision")
            .map_err(|e| read_error(&self.path, e))?
            .map(|v| v.value());
        Ok(rev.unwrap_or(0))
    }

    /// Writes this view to a new tenure file at `dest`: built under a temporary name in
    /// `dest`'s directory, fsynced, then renamed over `dest` (and the directory fsynced), so
    /// `dest` is either untouched or the whole copy.
    pub(crate) fn copy_to(
        &self,
        dest: &Path,
        progress: &mut dyn FnMut(SnapshotProgress),
    ) -> Result<SnapshotInfo> {
        let (dir, tmp) = sibling_temp(dest, "snapshot")?;
        let copied = self
            .copy_into(&tmp, dest, progress)
            .and_then(|info| {
                File::open(&tmp)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| Error::io("cannot fsync snapshot", dest, &e))?;
                Ok(info)
            })
            .and_then(|info| {
                std::fs::rename(&tmp, dest)
                    .map_err(|e| Error::io("cannot rename the snapshot to", dest, &e))?;
                File::open(&dir)
                    .and_then(|d| d.sync_all())
                    .map_err(|e| Error::io("cannot fsync the directory of", dest, &e))?;
                let bytes = std::fs::metadata(dest)
                    .map_err(|e| Error::io("cannot stat", dest, &e))?
                    .len();
                Ok(SnapshotInfo { bytes, ..info })
            });
        if copied.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        copied
    }

    /// Writes this view to a file no name points to (to be read once, e.g. streamed): built
    /// under the temporary name `temp_beside(beside, tag)`, opened, then unlinked. A kill
    /// before the unlink leaves a temporary of that pattern, which the next call removes (I-O3).
    pub(crate) fn copy_unlinked(&self, beside: &Path, tag: &str) -> Result<(File, SnapshotInfo)> {
        let (_, tmp) = sibling_temp(beside, tag)?;
        let copied = self.copy_into(&tmp, &tmp, &mut |_| {}).and_then(|info| {
            let file = File::open(&tmp).map_err(|e| Error::io("cannot open", &tmp, &e))?;
            let bytes = file
                .metadata()
                .map_err(|e| Error::io("cannot stat", &tmp, &e))?
                .len();
            Ok((file, SnapshotInfo { bytes, ..info }))
        });
        let _ = std::fs::remove_file(&tmp); // an open file keeps its data
        copied
    }

    /// Copies this view into a new file at `tmp` (compacted, not fsynced); errors name `dest`.
    fn copy_into(
        &self,
        tmp: &Path,
        dest: &Path,
        progress: &mut dyn FnMut(SnapshotProgress),
    ) -> Result<SnapshotInfo> {
        let file = new_private()
            .open(tmp)
            .map_err(|e| Error::io("cannot write snapshot", dest, &e))?;
        guarded(&self.path, || {
            let backend = FaultyBackend {
                file: FileBackend::new(file).map_err(|e| write_error(dest, e))?,
                faults: self.faults.clone(),
            };
            let mut db = redb::Builder::new()
                .create_with_backend(backend)
                .map_err(|e| write_error(dest, e))?;
            let info = self.copy_rows(&db, dest, progress)?;
            // Gives back what redb preallocated: the copy holds live pages only.
            while db.compact().map_err(|e| write_error(dest, e))? {}
            Ok(info)
        })
    }

    fn copy_rows(
        &self,
        db: &redb::Database,
        dest: &Path,
        progress: &mut dyn FnMut(SnapshotProgress),
    ) -> Result<SnapshotInfo> {
        let src = |e: redb::StorageError| read_error(&self.path, e);
        let dst = |e: redb::StorageError| write_error(dest, e);
        let open = |e: redb::TableError| read_error(&self.path, e);
        let meta = self.tx.open_table(META).map_err(open)?;
        let leases = self.tx.open_table(LEASES).map_err(open)?;
        let kv = self.tx.open_table(KV).map_err(open)?;
        let total = leases.len().map_err(src)? + kv.len().map_err(src)?;
        let mut info = SnapshotInfo {
            revision: self.revision()?,
            bytes: 0,
            keys: 0,
            leases: 0,
        };
        let mut done = 0u64;
        let begin = |durable: bool| -> Result<redb::WriteTransaction> {
            let mut tx = db.begin_write().map_err(|e| write_error(dest, e))?;
            let d = if durable {
                Durability::Immediate
            } else {
                Durability::None
            };
            tx.set_durability(d).map_err(|e| write_error(dest, e))?;
            Ok(tx)
        };
        let mut tx = begin(false)?;
        {
            let mut out = tx.open_table(META).map_err(|e| write_error(dest, e))?;
            for row in meta.iter().map_err(src)? {
                let (k, v) = row.map_err(src)?;
                // The copy is its own database: no log's records belong to it (I-G2), so a
                // copy put back beside the source's log never replays the source's later writes.
                if super::LOG_ROWS.contains(&k.value()) {
                    continue;
                }
                // Nor its history (not copied): the copy's history starts at its revision.
                if super::HISTORY_ROWS.contains(&k.value()) {
                    continue;
                }
                // ... and it is complete on its own.
                let v = if k.value() == "format" {
                    super::FORMAT_VERSION
                } else {
                    v.value()
                };
                out.insert(k.value(), v).map_err(dst)?;
            }
            // Rows are copied sealed as they are (same tables, same keys), digests with them.
            write_meta(&mut out, &[]).map_err(dst)?;
            let mut out = tx.open_table(LEASES).map_err(|e| write_error(dest, e))?;
            for row in leases.iter().map_err(src)? {
                let (k, v) = row.map_err(src)?;
                self.lease(k.value(), v.value())?;
                out.insert(k.value(), v.value()).map_err(dst)?;
                info.leases += 1;
            }
            tx.open_table(KV).map_err(|e| write_error(dest, e))?;
        }
        done += info.leases;
        let mut in_chunk = 0u64;
        for row in kv.iter().map_err(src)? {
            let (k, v) = row.map_err(src)?;
            if in_chunk == CHUNK {
                tx.commit().map_err(|e| write_error(dest, e))?;
                tx = begin(false)?;
                in_chunk = 0;
            }
            if self.entry(k.value(), v.value())?.data.is_some() {
                info.keys += 1;
            }
            tx.open_table(KV)
                .map_err(|e| write_error(dest, e))?
                .insert(k.value(), v.value())
                .map_err(dst)?;
            in_chunk += 1;
            done += 1;
            if done.is_multiple_of(PROGRESS_EVERY) {
                progress(SnapshotProgress { done, total });
            }
        }
        tx.commit().map_err(|e| write_error(dest, e))?;
        // One durable commit makes every earlier non-durable one durable.
        begin(true)?.commit().map_err(|e| write_error(dest, e))?;
        progress(SnapshotProgress { done, total });
        Ok(info)
    }

    /// A key row read, checked against its seal: a damaged one is `Corrupt`, never copied.
    fn entry(&self, key: &[u8], stored: &[u8]) -> Result<crate::rows::Entry> {
        unseal(KV_NAME, key, stored)
            .and_then(decode)
            .ok_or_else(|| Error::Corrupt {
                path: self.path.clone(),
                detail: format!(
                    "damaged row for key {:?} (checksum)",
                    String::from_utf8_lossy(key)
                ),
            })
    }

    /// A lease row read, checked as [`View::entry`].
    fn lease(&self, id: i64, stored: &[u8]) -> Result<crate::rows::LeaseRow> {
        unseal(LEASES_NAME, &id.to_le_bytes(), stored)
            .and_then(|p| decode_lease(id, p))
            .ok_or_else(|| Error::Corrupt {
                path: self.path.clone(),
                detail: format!("damaged row for lease {id} (checksum)"),
            })
    }

    /// The checksums of SPEC D9, over this view in key (and lease ID) order.
    pub(crate) fn hash(&self) -> Result<ContentHash> {
        guarded(&self.path, || self.hash_inner())
    }

    fn hash_inner(&self) -> Result<ContentHash> {
        let src = |e: redb::StorageError| read_error(&self.path, e);
        let open = |e: redb::TableError| read_error(&self.path, e);
        let revision = self.revision()?;
        let next_id = self
            .tx
            .open_table(META)
            .map_err(open)?
            .get("next_lease_id")
            .map_err(src)?
            .map_or(1, |v| v.value());
        let (mut kv, mut all) = (Crc::new(), Crc::new());
        all.int(revision);
        all.int(next_id);
        for row in self
            .tx
            .open_table(LEASES)
            .map_err(open)?
            .iter()
            .map_err(src)?
        {
            let (id, v) = row.map_err(src)?;
            all.int(id.value());
            all.int(self.lease(id.value(), v.value())?.ttl as i64);
        }
        for row in self.tx.open_table(KV).map_err(open)?.iter().map_err(src)? {
            let (k, v) = row.map_err(src)?;
            let key = k.value();
            let entry = self.entry(key, v.value())?;
            all.field(key);
            match &entry.data {
                Some(d) => {
                    kv.field(key);
                    for h in [&mut kv, &mut all] {
                        h.field(&d.value);
                        h.int(d.create);
                        h.int(d.mod_revision);
                        h.int(d.version);
                        h.int(entry.lease);
                    }
                }
                None => all.int(entry.lease),
            }
        }
        Ok(ContentHash {
            revision,
            kv: kv.finish(),
            all: all.finish(),
        })
    }
}

/// [`ContentHash::kv`] of `kvs` (every key with a value, in key order), computed from key-values
/// read at any revision (SPEC E11's HashKV at a revision).
pub(crate) fn kv_hash(kvs: &[crate::types::KeyValue]) -> u32 {
    let mut h = Crc::new();
    for kv in kvs {
        h.field(&kv.key);
        h.field(&kv.value);
        h.int(kv.create_revision);
        h.int(kv.mod_revision);
        h.int(kv.version);
        h.int(kv.lease.map_or(0, |l| l.get()));
    }
    h.finish()
}

/// CRC-32C (Castagnoli, the polynomial etcd's hashes use), table-driven.
struct Crc(u32);

const CRC_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

impl Crc {
    fn new() -> Crc {
        Crc(!0)
    }

    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = CRC_TABLE[((self.0 ^ x as u32) & 0xff) as usize] ^ (self.0 >> 8);
        }
    }

    /// A length-prefixed byte string, so that field boundaries are part of the hash.
    fn field(&mut self, b: &[u8]) {
        self.bytes(&(b.len() as u64).to_le_bytes());
        self.bytes(b);
    }

    fn int(&mut self, v: i64) {
        self.bytes(&v.to_le_bytes());
    }

    fn finish(self) -> u32 {
        !self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Crc;

    #[test]
    fn crc32c_check_value() {
        // The standard check value of CRC-32C.
        let mut c = Crc::new();
        c.bytes(b"123456789");
        assert_eq!(c.finish(), 0xE306_9283);
    }
}
