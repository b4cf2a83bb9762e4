//! Durable storage in a redb file: three tables, one write transaction per group commit.
//!
//! - `tenure_meta`: `format` (= [`FORMAT_VERSION`]), `revision`, `next_lease_id`.
//! - `tenure_leases`: lease ID → (ttl ns, remaining ns or `NO_TIME`, wall ms when persisted).
//! - `tenure_kv`: key → encoded entry (`codec`): value, revisions, lease.
//!
//! Deadlines are never stored: only durations and the wall time they were measured at.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redb::backends::FileBackend;
use redb::{
    BackendError, DatabaseError, Durability, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, StorageBackend, TableDefinition, TableError,
};

use crate::error::{Error, Result};
use crate::record::{LeaseRow, Loaded, StoreOp};

mod codec;
use codec::{decode, encode};

const META: TableDefinition<&str, i64> = TableDefinition::new("tenure_meta");
const LEASES: TableDefinition<i64, (u64, u64, i64)> = TableDefinition::new("tenure_leases");
const KV: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tenure_kv");

/// On-disk format version, stored in `tenure_meta["format"]`.
pub(crate) const FORMAT_VERSION: i64 = 1;
/// redb's file magic; a non-empty file without it is refused untouched.
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// Switches that make the storage layer fail, for testing SPEC D6. Cloning shares the switches.
#[derive(Clone, Default)]
pub struct StorageFaults {
    inner: Arc<FaultSwitches>,
}

#[derive(Default)]
struct FaultSwitches {
    fail_writes: AtomicBool,
    fail_syncs: AtomicBool,
}

impl fmt::Debug for StorageFaults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageFaults")
            .field(
                "fail_writes",
                &self.inner.fail_writes.load(Ordering::SeqCst),
            )
            .field("fail_syncs", &self.inner.fail_syncs.load(Ordering::SeqCst))
            .finish()
    }
}

impl StorageFaults {
    /// No faults armed.
    pub fn new() -> StorageFaults {
        StorageFaults::default()
    }

    /// While on, every write to the file fails with an I/O error.
    pub fn fail_writes(&self, on: bool) {
        self.inner.fail_writes.store(on, Ordering::SeqCst);
    }

    /// While on, every fsync fails with an I/O error.
    pub fn fail_syncs(&self, on: bool) {
        self.inner.fail_syncs.store(on, Ordering::SeqCst);
    }
}

/// A `FileBackend` with injectable faults.
#[derive(Debug)]
struct FaultyBackend {
    file: FileBackend,
    faults: StorageFaults,
}

fn injected() -> std::io::Error {
    std::io::Error::other("injected storage fault")
}

impl StorageBackend for FaultyBackend {
    fn len(&self) -> std::result::Result<u64, std::io::Error> {
        self.file.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::result::Result<(), std::io::Error> {
        self.file.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::result::Result<(), std::io::Error> {
        if self.faults.inner.fail_writes.load(Ordering::SeqCst) {
            return Err(injected());
        }
        self.file.set_len(len)
    }
    fn sync_data(&self) -> std::result::Result<(), std::io::Error> {
        if self.faults.inner.fail_syncs.load(Ordering::SeqCst) {
            return Err(injected());
        }
        self.file.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::result::Result<(), std::io::Error> {
        if self.faults.inner.fail_writes.load(Ordering::SeqCst) {
            return Err(injected());
        }
        self.file.write(offset, data)
    }
    fn close(&self) -> std::result::Result<(), std::io::Error> {
        self.file.close()
    }
    fn try_lock_range(
        &self,
        s: Bound<u64>,
        e: Bound<u64>,
    ) -> std::result::Result<bool, BackendError> {
        self.file.try_lock_range(s, e)
    }
    fn try_lock_shared_range(
        &self,
        s: Bound<u64>,
        e: Bound<u64>,
    ) -> std::result::Result<bool, BackendError> {
        self.file.try_lock_shared_range(s, e)
    }
    fn lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> std::result::Result<(), BackendError> {
        self.file.lock_range(s, e)
    }
    fn lock_shared_range(
        &self,
        s: Bound<u64>,
        e: Bound<u64>,
    ) -> std::result::Result<(), BackendError> {
        self.file.lock_shared_range(s, e)
    }
    fn unlock_range(&self, s: Bound<u64>, e: Bound<u64>) -> std::result::Result<(), BackendError> {
        self.file.unlock_range(s, e)
    }
    fn query_lock_range(
        &self,
        s: Bound<u64>,
        e: Bound<u64>,
    ) -> std::result::Result<bool, BackendError> {
        self.file.query_lock_range(s, e)
    }
}

pub(crate) struct Store {
    db: redb::Database,
    path: PathBuf,
}

fn storage(e: impl fmt::Display) -> Error {
    Error::Storage(e.to_string())
}

impl Store {
    /// Opens or creates the database at `path` and reads it whole (SPEC L13, D5).
    pub(crate) fn open(path: &Path, faults: Option<StorageFaults>) -> Result<(Store, Loaded)> {
        let corrupt = |detail: String| Error::Corrupt {
            path: path.to_path_buf(),
            detail,
        };
        // Refuse a non-redb file before redb could touch it.
        if let Ok(mut f) = File::open(path) {
            let len = f.metadata().map_err(storage)?.len();
            if len > 0 {
                let mut head = [0u8; REDB_MAGIC.len()];
                if len < head.len() as u64 || f.read_exact(&mut head).is_err() || head != REDB_MAGIC
                {
                    return Err(corrupt("not a redb/tenure file (bad magic)".into()));
                }
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::Storage(format!("cannot open {}: {e}", path.display())))?;
        let backend = FaultyBackend {
            file: FileBackend::new(file).map_err(storage)?,
            faults: faults.unwrap_or_default(),
        };
        let db = redb::Builder::new()
            .set_cache_size(64 << 20)
            .create_with_backend(backend)
            .map_err(|e| match e {
                DatabaseError::DatabaseAlreadyOpen => Error::AlreadyOpen(path.to_path_buf()),
                DatabaseError::UpgradeRequired(v) => {
                    corrupt(format!("redb file format {v} needs an upgrade"))
                }
                DatabaseError::Storage(redb::StorageError::Corrupted(m)) => corrupt(m),
                other => storage(other),
            })?;
        let store = Store {
            db,
            path: path.to_path_buf(),
        };
        let loaded = store.load()?;
        Ok((store, loaded))
    }

    fn corrupt(&self, detail: impl Into<String>) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            detail: detail.into(),
        }
    }

    fn load(&self) -> Result<Loaded> {
        let tx = self.db.begin_read().map_err(storage)?;
        let meta = match tx.open_table(META) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => {
                if tx.list_tables().map_err(storage)?.next().is_some() {
                    return Err(self.corrupt("a redb database, but not a tenure one"));
                }
                drop(tx);
                self.init()?;
                return Ok(Loaded::default());
            }
            Err(e) => return Err(self.corrupt(e.to_string())),
        };
        let get = |k: &str| -> Result<Option<i64>> {
            Ok(meta.get(k).map_err(storage)?.map(|v| v.value()))
        };
        match get("format")? {
            Some(FORMAT_VERSION) => {}
            Some(v) => return Err(self.corrupt(format!("unsupported format version {v}"))),
            None => return Err(self.corrupt("missing format version")),
        }
        let mut loaded = Loaded {
            revision: get("revision")?.unwrap_or(0),
            next_id: get("next_lease_id")?.unwrap_or(1),
            ..Loaded::default()
        };
        let leases = tx
            .open_table(LEASES)
            .map_err(|e| self.corrupt(e.to_string()))?;
        loaded
            .leases
            .reserve(leases.len().map_err(storage)? as usize);
        for row in leases.iter().map_err(storage)? {
            let (k, v) = row.map_err(storage)?;
            let (ttl, remaining, wall_ms) = v.value();
            loaded.leases.push(LeaseRow {
                id: k.value(),
                ttl,
                remaining,
                wall_ms,
            });
        }
        let kv = tx.open_table(KV).map_err(|e| self.corrupt(e.to_string()))?;
        loaded.keys.reserve(kv.len().map_err(storage)? as usize);
        for row in kv.iter().map_err(storage)? {
            let (k, v) = row.map_err(storage)?;
            let entry = decode(v.value()).ok_or_else(|| self.corrupt("undecodable key record"))?;
            loaded.keys.push((k.value().to_vec(), entry));
        }
        Ok(loaded)
    }

    fn init(&self) -> Result<()> {
        let tx = self.db.begin_write().map_err(storage)?;
        {
            let mut meta = tx.open_table(META).map_err(storage)?;
            meta.insert("format", FORMAT_VERSION).map_err(storage)?;
            meta.insert("revision", 0).map_err(storage)?;
            meta.insert("next_lease_id", 1).map_err(storage)?;
            tx.open_table(LEASES).map_err(storage)?;
            tx.open_table(KV).map_err(storage)?;
        }
        tx.commit().map_err(storage)
    }

    /// Writes `ops` and the meta row in one durable (fsynced) transaction.
    pub(crate) fn commit(&self, ops: &[StoreOp], revision: i64, next_id: i64) -> Result<()> {
        let mut tx = self.db.begin_write().map_err(storage)?;
        tx.set_durability(Durability::Immediate).map_err(storage)?;
        {
            let mut leases = tx.open_table(LEASES).map_err(storage)?;
            let mut kv = tx.open_table(KV).map_err(storage)?;
            for op in ops {
                match op {
                    StoreOp::PutLease {
                        id,
                        ttl,
                        remaining,
                        wall_ms,
                    } => {
                        leases
                            .insert(*id, (*ttl, *remaining, *wall_ms))
                            .map_err(storage)?;
                    }
                    StoreOp::DelLease(id) => {
                        leases.remove(*id).map_err(storage)?;
                    }
                    StoreOp::PutKey(k, rec) => {
                        kv.insert(k.as_slice(), encode(rec).as_slice())
                            .map_err(storage)?;
                    }
                    StoreOp::DelKey(k) => {
                        kv.remove(k.as_slice()).map_err(storage)?;
                    }
                }
            }
            let mut meta = tx.open_table(META).map_err(storage)?;
            meta.insert("revision", revision).map_err(storage)?;
            meta.insert("next_lease_id", next_id).map_err(storage)?;
        }
        tx.commit().map_err(storage)
    }
}
