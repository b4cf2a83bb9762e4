//! Durable storage in a redb file: three tables, one write transaction per group commit.
//!
//! - `tenure_meta`: `format` ([`FORMAT_VERSION`], or [`FORMAT_LOGGED`] while the log may hold
//!   records the file lacks), `revision`, `next_lease_id`.
//! - `tenure_leases`: lease ID → (ttl ns, remaining ns or `NO_TIME`, wall ms when persisted).
//! - `tenure_kv`: key → encoded entry (`codec`): value, revisions, lease.
//!
//! Deadlines are never stored: only durations and the wall time they were measured at.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::result::Result as StdResult;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use redb::backends::FileBackend;
use redb::{
    BackendError, DatabaseError, Durability, ReadableDatabase, ReadableTable, StorageBackend,
    TableDefinition, TableError,
};

use crate::error::{panic_message, Error, Result};
use crate::record::{LeaseRow, Loaded, StoreOp};

mod codec;
mod in_place;
mod snapshot;
pub(crate) mod wal;
use codec::{decode, encode};
pub(crate) use in_place::{copy_in_place, read_in_place};
pub(crate) use snapshot::View;

const META: TableDefinition<&str, i64> = TableDefinition::new("tenure_meta");
const LEASES: TableDefinition<i64, (u64, u64, i64)> = TableDefinition::new("tenure_leases");
const KV: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tenure_kv");

/// On-disk format version of a file complete on its own, stored in `tenure_meta["format"]`.
pub(crate) const FORMAT_VERSION: i64 = 1;
/// The `format` of a file while an engine with the write-ahead log has it (from its open to its
/// clean close) or after that engine died: the log beside it may hold acknowledged records the
/// file lacks. A build that predates the mark refuses it as an unsupported version (`Corrupt`,
/// nothing written) instead of ignoring the log and losing those writes.
pub(crate) const FORMAT_LOGGED: i64 = 2;
/// redb's page cache for an open database file.
const CACHE: usize = 64 << 20;
/// redb's file magic; a non-empty file without it is refused untouched.
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// Switches that make the storage layer fail, for testing SPEC D6. Cloning shares the switches.
/// Each switch covers the database file (redb), its write-ahead log, or both.
#[derive(Clone, Default)]
pub struct StorageFaults {
    inner: Arc<FaultSwitches>,
}

/// Fault targets (bits of the switches).
const DB: u8 = 1;
pub(crate) const LOG: u8 = 2;

#[derive(Default)]
struct FaultSwitches {
    fail_writes: AtomicU8,
    fail_syncs: AtomicU8,
    /// fsyncs that reached a file (`Stats::fsyncs`).
    syncs: AtomicU64,
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

    fn set(switch: &AtomicU8, target: u8, on: bool) {
        if on {
            switch.fetch_or(target, Ordering::SeqCst);
        } else {
            switch.fetch_and(!target, Ordering::SeqCst);
        }
    }

    /// While on, every write to the database file and its log fails with an I/O error.
    pub fn fail_writes(&self, on: bool) {
        Self::set(&self.inner.fail_writes, DB | LOG, on);
    }

    /// While on, every fsync of the database file and its log fails with an I/O error.
    pub fn fail_syncs(&self, on: bool) {
        Self::set(&self.inner.fail_syncs, DB | LOG, on);
    }

    /// While on, every write to the write-ahead log fails (the database file is spared).
    pub fn fail_log_writes(&self, on: bool) {
        Self::set(&self.inner.fail_writes, LOG, on);
    }

    /// While on, every fsync of the write-ahead log fails (the database file is spared).
    pub fn fail_log_syncs(&self, on: bool) {
        Self::set(&self.inner.fail_syncs, LOG, on);
    }

    /// While on, every write to the database file fails (the log is spared): with a log,
    /// this hits the checkpoints that bring the database file up to date.
    pub fn fail_db_writes(&self, on: bool) {
        Self::set(&self.inner.fail_writes, DB, on);
    }

    /// While on, every fsync of the database file fails (the log is spared).
    pub fn fail_db_syncs(&self, on: bool) {
        Self::set(&self.inner.fail_syncs, DB, on);
    }

    pub(crate) fn fails_write(&self, target: u8) -> bool {
        self.inner.fail_writes.load(Ordering::SeqCst) & target != 0
    }

    pub(crate) fn fails_sync(&self, target: u8) -> bool {
        self.inner.fail_syncs.load(Ordering::SeqCst) & target != 0
    }

    pub(crate) fn count_sync(&self) {
        self.inner.syncs.fetch_add(1, Ordering::Relaxed);
    }
}

/// A `FileBackend` with injectable faults.
#[derive(Debug)]
struct FaultyBackend {
    file: FileBackend,
    faults: StorageFaults,
}

pub(crate) fn injected() -> std::io::Error {
    std::io::Error::other("injected storage fault")
}

/// The lock calls of a backend that wraps a `FileBackend` in `$field`, passed through (its
/// `unlock_range` is its own).
macro_rules! delegate_locks {
    ($field:tt) => {
        fn try_lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> StdResult<bool, BackendError> {
            self.$field.try_lock_range(s, e)
        }
        fn try_lock_shared_range(
            &self,
            s: Bound<u64>,
            e: Bound<u64>,
        ) -> StdResult<bool, BackendError> {
            self.$field.try_lock_shared_range(s, e)
        }
        fn lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> StdResult<(), BackendError> {
            self.$field.lock_range(s, e)
        }
        fn lock_shared_range(&self, s: Bound<u64>, e: Bound<u64>) -> StdResult<(), BackendError> {
            self.$field.lock_shared_range(s, e)
        }
        fn query_lock_range(&self, s: Bound<u64>, e: Bound<u64>) -> StdResult<bool, BackendError> {
            self.$field.query_lock_range(s, e)
        }
    };
}

impl StorageBackend for FaultyBackend {
    fn len(&self) -> std::result::Result<u64, std::io::Error> {
        self.file.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::result::Result<(), std::io::Error> {
        self.file.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::result::Result<(), std::io::Error> {
        if self.faults.fails_write(DB) {
            return Err(injected());
        }
        self.file.set_len(len)
    }
    fn sync_data(&self) -> std::result::Result<(), std::io::Error> {
        if self.faults.fails_sync(DB) {
            return Err(injected());
        }
        self.file.sync_data()?;
        self.faults.count_sync();
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::result::Result<(), std::io::Error> {
        if self.faults.fails_write(DB) {
            return Err(injected());
        }
        self.file.write(offset, data)
    }
    fn close(&self) -> std::result::Result<(), std::io::Error> {
        self.file.close()
    }
    fn unlock_range(&self, s: Bound<u64>, e: Bound<u64>) -> std::result::Result<(), BackendError> {
        self.file.unlock_range(s, e)
    }
    delegate_locks!(file);
}

/// The backend of a read-only pass whose shared locks outlive it: redb's unlocks and close are
/// ignored, so its locks stay with the file's open file description until the last descriptor
/// of that description is closed, or a write open through it converts them into its own
/// exclusive ones (an atomic conversion: it fails, changing nothing, while another process
/// holds the file). Meanwhile no process can open the file for writing, so what the pass read
/// is what the file holds. Never writes.
#[derive(Debug)]
pub(crate) struct HeldLocks(FileBackend);

impl StorageBackend for HeldLocks {
    fn len(&self) -> std::result::Result<u64, std::io::Error> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::result::Result<(), std::io::Error> {
        self.0.read(offset, out)
    }
    fn set_len(&self, _: u64) -> std::result::Result<(), std::io::Error> {
        Err(std::io::ErrorKind::PermissionDenied.into())
    }
    fn sync_data(&self) -> std::result::Result<(), std::io::Error> {
        Ok(())
    }
    fn write(&self, _: u64, _: &[u8]) -> std::result::Result<(), std::io::Error> {
        Err(std::io::ErrorKind::PermissionDenied.into())
    }
    fn close(&self) -> std::result::Result<(), std::io::Error> {
        Ok(())
    }
    fn unlock_range(&self, _: Bound<u64>, _: Bound<u64>) -> std::result::Result<(), BackendError> {
        Ok(())
    }
    delegate_locks!(0);
}

/// redb's read-only open of `file`, its shared locks held by `file`'s open file description
/// beyond the handle (`HeldLocks`): also when the open fails because redb must repair the
/// file (`RepairAborted`; the locks are taken before anything is read).
pub(crate) fn open_read_only_held(
    file: &File,
    path: &Path,
) -> Result<std::result::Result<redb::ReadOnlyDatabase, DatabaseError>> {
    let dup = file
        .try_clone()
        .map_err(|e| Error::io("cannot open", path, &e))?;
    let backend = HeldLocks(FileBackend::new(dup).map_err(storage)?);
    Ok(redb::Builder::new()
        .set_cache_size(CACHE)
        .open_read_only_with_backend(backend))
}

pub(crate) struct Store {
    db: redb::Database,
    path: PathBuf,
    /// The faults injected into this store; a snapshot's copy gets them too.
    faults: StorageFaults,
}

/// Counts the fsyncs of one open store (shared with its backend).
#[derive(Clone, Default)]
pub(crate) struct SyncCounter(StorageFaults);

impl SyncCounter {
    pub(crate) fn get(&self) -> u64 {
        self.0.inner.syncs.load(Ordering::Relaxed)
    }
}

fn storage(e: impl fmt::Display) -> Error {
    Error::storage(e.to_string())
}

/// A redb error while the open writes to `path` (replay, new log id): damage redb found in the
/// file is `Corrupt` for it (D5), anything else `Storage`.
fn opening(path: &Path, e: impl Into<redb::Error>) -> Error {
    match e.into() {
        redb::Error::Corrupted(detail) => corrupt_at(path, format!("damaged file: {detail}")),
        other => storage(other),
    }
}

/// Runs `f`, turning a panic into `Corrupt` for `path`. redb trusts the file's structure and can
/// reach `unreachable!()` on a damaged one; nothing it built inside `f` is used after a panic.
fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        Err(Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "damaged file (the storage layer failed on it: {})",
                panic_message(&*p)
            ),
        })
    })
}

fn open_error(path: &Path, e: DatabaseError) -> Error {
    let corrupt = |detail: String| Error::Corrupt {
        path: path.to_path_buf(),
        detail,
    };
    match e {
        DatabaseError::DatabaseAlreadyOpen => Error::AlreadyOpen(path.to_path_buf()),
        DatabaseError::UpgradeRequired(v) => {
            corrupt(format!("redb file format {v} needs an upgrade"))
        }
        DatabaseError::Storage(redb::StorageError::Io(e)) => Error::io("cannot open", path, &e),
        DatabaseError::Storage(e) => corrupt(e.to_string()),
        other => corrupt(other.to_string()),
    }
}

/// What is at the path before anything is opened for writing.
enum Found {
    /// Nothing, or an empty file: a new database is created (atomically).
    New,
    /// A non-empty regular file with redb's magic.
    Redb,
}

/// Refuses, without opening it for writing, anything that is not a regular file (a FIFO would
/// block the open forever) and a non-empty file without redb's magic.
fn inspect(path: &Path) -> Result<Found> {
    let corrupt = |detail: &str| Error::Corrupt {
        path: path.to_path_buf(),
        detail: detail.into(),
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::New),
        Err(e) => return Err(Error::io("cannot open", path, &e)),
    };
    if meta.is_dir() {
        // In the OS's words and with its errno (EISDIR): opening a directory for writing
        // always fails, and changes nothing.
        let e = OpenOptions::new()
            .write(true)
            .open(path)
            .err()
            .unwrap_or_else(|| std::io::Error::other("is a directory"));
        return Err(Error::io("cannot open", path, &e));
    }
    if !meta.is_file() {
        return Err(corrupt("not a regular file"));
    }
    if meta.len() == 0 {
        return Ok(Found::New);
    }
    let mut f = File::open(path).map_err(|e| Error::io("cannot open", path, &e))?;
    if !f.metadata().map_err(storage)?.is_file() {
        return Err(corrupt("not a regular file"));
    }
    let mut head = [0u8; REDB_MAGIC.len()];
    if f.read_exact(&mut head).is_err() || head != REDB_MAGIC {
        return Err(corrupt(if head.iter().all(|&b| b == 0) {
            "not a redb/tenure file (it starts with zeros: an interrupted creation? remove it)"
        } else {
            "not a redb/tenure file (bad magic)"
        }));
    }
    Ok(Found::Redb)
}

/// Builds an empty tenure database under a temporary name in the same directory, makes it
/// durable, and only then gives it its name (and makes the name durable): an interrupted first
/// open leaves no half-made file where the database belongs.
fn create(path: &Path, faults: &StorageFaults) -> Result<()> {
    let cannot = |what: &str, e: &dyn fmt::Display| {
        Error::storage(format!("cannot create {}: {what}: {e}", path.display()))
    };
    let (dir, tmp) = sibling_temp(path, "creating")?;
    let file = new_private()
        .open(&tmp)
        .map_err(|e| Error::io("cannot create", path, &e))?;
    let built = guarded(path, || {
        let backend = FaultyBackend {
            file: FileBackend::new(file).map_err(storage)?,
            faults: faults.clone(),
        };
        let db = redb::Builder::new()
            .create_with_backend(backend)
            .map_err(|e| cannot("initialising", &e))?;
        init(&db).map_err(|e| cannot("initialising", &e))?;
        drop(db);
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| cannot("fsync", &e))
    })
    .and_then(|()| {
        // Never replace a database another process has just created; an empty file is ours
        // to replace.
        let existing_empty = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0);
        let linked = if existing_empty {
            std::fs::rename(&tmp, path)
        } else {
            match std::fs::hard_link(&tmp, path) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                Err(_) => std::fs::rename(&tmp, path), // no hard links on this filesystem
                ok => ok,
            }
        };
        linked.map_err(|e| cannot("rename", &e))?;
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| cannot("fsync of the directory", &e))
    });
    let _ = std::fs::remove_file(&tmp);
    built
}

/// `path`'s directory and a fresh temporary name beside `path` (`.NAME.TAG-PID-SEQ`): a file
/// built there and renamed over `path` is on the same filesystem, so the rename is atomic.
/// Options that create a new file, readable and writable by its owner only from the start
/// (a database or a snapshot: leases, locks and keys are nobody else's business). An existing
/// file is never opened by them, so it keeps the mode it has.
pub(crate) fn new_private() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// A fresh temporary name beside `path` (`.NAME.TAG-PID-SEQ`) for a file built there and
/// then linked or renamed to `path`, after removing the temporaries under the same tag that
/// killed processes left (see `remove_stale_temps`): the one way the engine and the tools
/// (`tenure snapshot restore`) name such files.
pub fn temp_beside(path: &Path, tag: &str) -> Result<PathBuf> {
    sibling_temp(path, tag).map(|(_, tmp)| tmp)
}

fn sibling_temp(path: &Path, tag: &str) -> Result<(PathBuf, PathBuf)> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{} names no file", path.display())))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let prefix = format!(".{}.{tag}-", name.to_string_lossy());
    remove_stale_temps(&dir, &prefix);
    let tmp = dir.join(format!(
        "{prefix}{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    Ok((dir, tmp))
}

/// Removes what killed writers left in `dir` under `prefix` (`sibling_temp`'s `PREFIX PID-SEQ`
/// names, and `PREFIX PID`, the older name of a restore's temporary; nothing else): only a file whose process is gone and that no one has open as a
/// database (redb locks the file it builds), so a live writer's file, even one in another PID
/// namespace, is left alone. Best effort: where the liveness of a process cannot be told (no
/// /proc), nothing is removed.
fn remove_stale_temps(dir: &Path, prefix: &str) {
    let proc_fs = Path::new("/proc/self");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    if !proc_fs.exists() {
        return;
    }
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        // `PID` alone: how `tenure snapshot restore` named its temporary before this helper.
        let (pid, seq) = rest.split_once('-').unwrap_or((rest, "0"));
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), seq.parse::<u64>()) else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_file()) && !open_as_database(&path) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Whether a process holds `path` open as a redb database (its lock refuses a read-only open;
/// the file is only read). An unreadable file counts as held: it is not ours to remove.
fn open_as_database(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return true;
    };
    let opened = guarded(path, || {
        let backend = FileBackend::new(file).map_err(storage)?;
        Ok(redb::Builder::new().open_read_only_with_backend(backend))
    });
    matches!(opened, Ok(Err(DatabaseError::DatabaseAlreadyOpen)))
}

/// A fresh id tying a log to its database (std's `RandomState` keys are random).
fn new_log_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() >> 1 // fits an i64 meta value
}

fn init(db: &redb::Database) -> Result<u64> {
    let id = new_log_id();
    let mut tx = db.begin_write().map_err(storage)?;
    tx.set_durability(Durability::Immediate).map_err(storage)?;
    {
        let mut meta = tx.open_table(META).map_err(storage)?;
        meta.insert("format", FORMAT_VERSION).map_err(storage)?;
        meta.insert("revision", 0).map_err(storage)?;
        meta.insert("next_lease_id", 1).map_err(storage)?;
        meta.insert("log_id", id as i64).map_err(storage)?;
        tx.open_table(LEASES).map_err(storage)?;
        tx.open_table(KV).map_err(storage)?;
    }
    tx.commit().map_err(storage)?;
    Ok(id)
}

/// The meta rows about the write-ahead log (a copy of the file leaves them out).
pub(crate) const LOG_ROWS: [&str; 2] = ["log_id", "log_applied"];

/// Where the database stands with respect to its write-ahead log (meta rows `log_id`,
/// `log_applied`; absent in files written before the log: no id, nothing applied).
#[derive(Debug, Clone, Copy)]
struct LogMeta {
    id: Option<u64>,
    applied: u64,
}

fn corrupt_at(path: &Path, detail: impl Into<String>) -> Error {
    Error::Corrupt {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// The log rows of the meta table; `None` when there is no meta table (an uninitialised or
/// foreign file: `load` decides which).
fn log_meta(db: &impl ReadableDatabase, path: &Path) -> Result<Option<LogMeta>> {
    let tx = db
        .begin_read()
        .map_err(|e| corrupt_at(path, e.to_string()))?;
    match tx.open_table(META) {
        Ok(meta) => log_rows(&meta, path).map(Some),
        Err(TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(corrupt_at(path, e.to_string())),
    }
}

fn log_rows(meta: &impl ReadableTable<&'static str, i64>, path: &Path) -> Result<LogMeta> {
    let row = |k: &str| -> Result<Option<i64>> {
        Ok(meta
            .get(k)
            .map_err(|e| corrupt_at(path, e.to_string()))?
            .map(|v| v.value()))
    };
    let applied = row("log_applied")?.unwrap_or(0);
    let id = row("log_id")?;
    if applied < 0 || id.is_some_and(|i| i < 0) {
        return Err(corrupt_at(
            path,
            format!("impossible log position {applied} or id {id:?}"),
        ));
    }
    Ok(LogMeta {
        id: id.map(|i| i as u64),
        applied: applied as u64,
    })
}

/// Reads and validates the whole database (SPEC L13, D5; DESIGN "Persistence and recovery").
/// Only reads, so a refused file is never written. `None`: no table at all.
fn load(db: &impl ReadableDatabase, path: &Path) -> Result<Option<(Loaded, LogMeta)>> {
    let corrupt = |detail: String| corrupt_at(path, detail);
    let read = |e: redb::StorageError| corrupt(e.to_string());
    let tx = db.begin_read().map_err(|e| corrupt(e.to_string()))?;
    let meta = match tx.open_table(META) {
        Ok(t) => t,
        Err(TableError::TableDoesNotExist(_)) => {
            if tx.list_tables().map_err(read)?.next().is_some() {
                return Err(corrupt("a redb database, but not a tenure one".into()));
            }
            // No table at all: a creation interrupted before its first commit (by a version
            // that did not create atomically). Nothing to lose: it is initialised.
            return Ok(None);
        }
        Err(e) => return Err(corrupt(e.to_string())),
    };
    let leases = tx.open_table(LEASES).map_err(|e| corrupt(e.to_string()))?;
    let kv = tx.open_table(KV).map_err(|e| corrupt(e.to_string()))?;
    load_tables(&meta, &leases, &kv, path).map(Some)
}

/// `load` over open tables: those of a read transaction, or of the write transaction that
/// replays the log (validated before it commits).
fn load_tables(
    meta: &impl ReadableTable<&'static str, i64>,
    leases: &impl ReadableTable<i64, (u64, u64, i64)>,
    kv: &impl ReadableTable<&'static [u8], &'static [u8]>,
    path: &Path,
) -> Result<(Loaded, LogMeta)> {
    let corrupt = |detail: String| corrupt_at(path, detail);
    let read = |e: redb::StorageError| corrupt(e.to_string());
    let get = |k: &str| -> Result<i64> {
        meta.get(k)
            .map_err(read)?
            .map(|v| v.value())
            .ok_or_else(|| corrupt(format!("missing {k}")))
    };
    match get("format")? {
        FORMAT_VERSION | FORMAT_LOGGED => {}
        v => return Err(corrupt(format!("unsupported format version {v}"))),
    }
    let log = log_rows(meta, path)?;
    let mut loaded = Loaded {
        revision: get("revision")?,
        next_id: get("next_lease_id")?,
        ..Loaded::default()
    };
    if loaded.revision < 0 || loaded.next_id < 1 {
        return Err(corrupt(format!(
            "impossible revision {} or next lease ID {}",
            loaded.revision, loaded.next_id
        )));
    }
    // The cheap invariants a damaged file breaks: I-L2, I-K1, I-K3 (DESIGN).
    reserve(&mut loaded.leases, leases.len().map_err(read)?);
    reserve(&mut loaded.keys, kv.len().map_err(read)?);
    for row in leases.iter().map_err(read)? {
        let (k, v) = row.map_err(read)?;
        let (ttl, remaining, wall_ms) = v.value();
        let id = k.value();
        if id <= 0 || id >= loaded.next_id {
            return Err(corrupt(format!(
                "lease {id} is not below the next lease ID {} (I-L2)",
                loaded.next_id
            )));
        }
        // In ID order, so that a key's lease is found by binary search.
        if loaded.leases.last().is_some_and(|last| last.id >= id) {
            return Err(corrupt(format!("lease {id} out of order in its table")));
        }
        loaded.leases.push(LeaseRow {
            id,
            ttl,
            remaining,
            wall_ms,
        });
    }
    for row in kv.iter().map_err(read)? {
        let (k, v) = row.map_err(read)?;
        let key = k.value();
        let shown = || String::from_utf8_lossy(key).into_owned();
        let entry = decode(v.value())
            .ok_or_else(|| corrupt(format!("undecodable record for key {:?}", shown())))?;
        if let Some(d) = &entry.data {
            if d.create <= 0 || d.modr < d.create || d.modr > loaded.revision || d.version <= 0 {
                return Err(corrupt(format!(
                    "key {:?} has revisions create {} mod {} (store revision {}, I-K1)",
                    shown(),
                    d.create,
                    d.modr,
                    loaded.revision
                )));
            }
        }
        if entry.lease != 0
            && loaded
                .leases
                .binary_search_by_key(&entry.lease, |l| l.id)
                .is_err()
        {
            return Err(corrupt(format!(
                "key {:?} is attached to missing lease {} (I-K3)",
                shown(),
                entry.lease
            )));
        }
        loaded.keys.push((key.to_vec(), entry));
    }
    Ok((loaded, log))
}

/// Room for the `rows` a table says it has, up to 2^20: a damaged file can claim any count, and
/// beyond the bound (or if the room cannot be had) the vector grows as the rows come.
fn reserve<T>(v: &mut Vec<T>, rows: u64) {
    let _ = v.try_reserve(rows.min(1 << 20) as usize);
}

fn apply_ops(
    leases: &mut redb::Table<i64, (u64, u64, i64)>,
    kv: &mut redb::Table<&[u8], &[u8]>,
    ops: &[StoreOp],
) -> Result<()> {
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
    Ok(())
}

/// Applies the log's records beyond redb's position (and gives the file a log id if it has
/// none) in one write transaction, validates the result there, and commits it durably only if
/// it is valid: a log that would break the database leaves the file as it was.
fn replay(
    db: &redb::Database,
    path: &Path,
    records: &[wal::Record],
    id: u64,
    use_log: bool,
) -> Result<(Loaded, LogMeta)> {
    let tx = db.begin_write().map_err(|e| opening(path, e))?;
    let loaded = (|| {
        let mut meta = tx.open_table(META).map_err(|e| opening(path, e))?;
        let mut leases = tx.open_table(LEASES).map_err(|e| opening(path, e))?;
        let mut kv = tx.open_table(KV).map_err(|e| opening(path, e))?;
        for r in records {
            apply_ops(&mut leases, &mut kv, &r.ops)?;
        }
        if let Some(last) = records.last() {
            meta.insert("revision", last.revision)
                .map_err(|e| opening(path, e))?;
            meta.insert("next_lease_id", last.next_id)
                .map_err(|e| opening(path, e))?;
            meta.insert("log_applied", last.lsn as i64)
                .map_err(|e| opening(path, e))?;
        }
        meta.insert("log_id", id as i64)
            .map_err(|e| opening(path, e))?;
        let format = if use_log {
            FORMAT_LOGGED
        } else {
            FORMAT_VERSION
        };
        meta.insert("format", format)
            .map_err(|e| opening(path, e))?;
        load_tables(&meta, &leases, &kv, path)
    })();
    match loaded {
        Ok(l) => {
            let mut tx = tx;
            tx.set_durability(Durability::Immediate)
                .map_err(|e| opening(path, e))?;
            tx.set_quick_repair(true);
            tx.commit().map_err(|e| opening(path, e))?;
            Ok(l)
        }
        Err(e) => {
            let _ = tx.abort();
            Err(e)
        }
    }
}

/// Commits a new log id (I-G2) and the mark of a file with a log in use, durably.
fn set_log_id(db: &redb::Database, path: &Path, id: u64) -> Result<()> {
    let mut tx = db.begin_write().map_err(|e| opening(path, e))?;
    tx.set_durability(Durability::Immediate)
        .map_err(|e| opening(path, e))?;
    tx.set_quick_repair(true);
    {
        let mut meta = tx.open_table(META).map_err(|e| opening(path, e))?;
        meta.insert("log_id", id as i64)
            .map_err(|e| opening(path, e))?;
        meta.insert("format", FORMAT_LOGGED)
            .map_err(|e| opening(path, e))?;
    }
    tx.commit().map_err(|e| opening(path, e))
}

/// What the read-only pass of [`Store::open`] found.
enum Checked {
    /// The file read whole and valid (`None`: it has no table yet), and its log read against it.
    Read(Option<(Loaded, LogMeta)>, wal::Found),
    /// redb must repair the file before it can be read; its log was checked on its own.
    Repair,
}

/// Validates the file open as `file` and its log read-only (D5), leaving redb's shared locks
/// held by `file`'s open file description (`open_read_only_held`).
fn read_only_pass(file: &File, path: &Path) -> Result<Checked> {
    match open_read_only_held(file, path)? {
        Ok(db) => {
            let read = load(&db, path)?;
            let found = match &read {
                Some((_, lm)) => wal::read(path, lm.id, lm.applied)?,
                None => wal::read(path, None, 0)?,
            };
            Ok(Checked::Read(read, found))
        }
        // redb must repair the file before saying where the log stands: the log is checked
        // on its own first, so a damaged one is refused before the repair.
        Err(DatabaseError::RepairAborted) => wal::check(path).map(|()| Checked::Repair),
        Err(e) => Err(open_error(path, e)),
    }
}

/// What [`Store::open`] gives the engine.
pub(crate) struct Opened {
    pub(crate) store: Store,
    pub(crate) loaded: Loaded,
    pub(crate) syncs: SyncCounter,
    /// The log, positioned after everything redb holds; `None` without a log.
    pub(crate) log: Option<wal::Writer>,
}

/// Why [`Store::open_once`] failed.
enum Opening {
    /// The write open could not convert the read-only pass's shared locks: another process
    /// holds shared locks on the file too (retried).
    Contended(Error),
    Failed(Error),
}

impl From<Error> for Opening {
    fn from(e: Error) -> Opening {
        Opening::Failed(e)
    }
}

impl Store {
    /// Opens or creates the database at `path` and reads it whole (SPEC L13, D5), replaying
    /// its write-ahead log; with `use_log`, opens the log for appending (creating it if needed).
    ///
    /// An existing file and its log are validated read-only first, so a refused file is never
    /// written; only then is the file opened for writing (redb's lock also covers the log).
    /// Both opens go through one open file description, which holds the read-only pass's
    /// shared locks until the write open converts them (`HeldLocks`): no other process can
    /// write the file in between, so what the read-only pass read is used as is, not read
    /// again. A file redb must repair (a writer was killed) cannot be opened read-only: redb
    /// repairs it to its last commit, then it and its log are validated.
    /// `log_region`: the region size of a log made by this open (`wal::REGION` by default).
    ///
    /// Two processes opening at once both hold shared locks after their read-only passes, and
    /// neither can convert them: the one whose conversion fails lets go of its locks and tries
    /// again a few times, after a short random pause, so one of them gets the file (D5).
    pub(crate) fn open(
        path: &Path,
        faults: Option<StorageFaults>,
        use_log: bool,
        log_region: u64,
    ) -> Result<Opened> {
        const RETRIES: u32 = 8;
        let mut retries = 0;
        loop {
            match Store::open_once(path, faults.clone(), use_log, log_region) {
                Err(Opening::Contended(e)) if retries == RETRIES => return Err(e),
                Err(Opening::Contended(_)) => {
                    retries += 1;
                    // 1-8 ms, different in each process.
                    let jitter = new_log_id() % 8_000;
                    std::thread::sleep(std::time::Duration::from_micros(1_000 + jitter));
                }
                Err(Opening::Failed(e)) => return Err(e),
                Ok(opened) => return Ok(opened),
            }
        }
    }

    fn open_once(
        path: &Path,
        faults: Option<StorageFaults>,
        use_log: bool,
        log_region: u64,
    ) -> std::result::Result<Opened, Opening> {
        let faults = faults.unwrap_or_default();
        let counter = SyncCounter(faults.clone());
        if let Found::New = inspect(path)? {
            create(path, &faults)?;
        }
        let file = match OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => f,
            Err(e) => {
                // Not writable here: a file that is no valid database is still refused as such.
                let ro = File::open(path).map_err(|e| Error::io("cannot open", path, &e))?;
                guarded(path, || read_only_pass(&ro, path).map(drop))?;
                return Err(Error::io("cannot open", path, &e).into());
            }
        };
        let checked = guarded(path, || read_only_pass(&file, path))?;
        let opened = guarded(path, || {
            let backend = FaultyBackend {
                file: FileBackend::new(file).map_err(storage)?,
                faults: faults.clone(),
            };
            let db = redb::Builder::new()
                .set_cache_size(CACHE)
                .create_with_backend(backend)
                .map_err(|e| open_error(path, e))?;
            // What the read-only pass read, still true under the lock it held; after a repair,
            // read now.
            let (before, found, read) = match checked {
                Checked::Read(Some((l, m)), found) => (Some(m), found, Some(Some((l, m)))),
                Checked::Read(None, found) => (None, found, Some(None)),
                Checked::Repair => {
                    let before = log_meta(&db, path)?;
                    let found = wal::read(
                        path,
                        before.and_then(|m| m.id),
                        before.map_or(0, |m| m.applied),
                    )?;
                    (before, found, None)
                }
            };
            let records = match &found {
                wal::Found::Ours(r) => r.as_slice(),
                _ => &[],
            };
            // With the log in use, every open gives it a new id: records left from an earlier
            // session can never be replayed onto another copy of the file.
            let fresh_id = |m: LogMeta| match m.id {
                Some(id) if !use_log => id,
                _ => new_log_id(),
            };
            let (loaded, lm) = match before {
                Some(m) if !records.is_empty() => replay(&db, path, records, fresh_id(m), use_log)?,
                _ => match read.map_or_else(|| load(&db, path), Ok)? {
                    // Nothing to replay: the new id alone (as fast as without a log).
                    Some((l, m)) if use_log => {
                        let id = fresh_id(m);
                        set_log_id(&db, path, id)?;
                        (l, LogMeta { id: Some(id), ..m })
                    }
                    Some(l) => l,
                    None => {
                        let id = init(&db)?;
                        (
                            Loaded::default(),
                            LogMeta {
                                id: Some(id),
                                applied: 0,
                            },
                        )
                    }
                },
            };
            let log = match (use_log, lm.id) {
                (true, Some(id)) => Some(wal::Writer::open(
                    path,
                    id,
                    lm.applied,
                    faults.clone(),
                    matches!(found, wal::Found::Ours(_)),
                    log_region,
                )?),
                _ => None,
            };
            Ok(Opened {
                store: Store {
                    db,
                    path: path.to_path_buf(),
                    faults,
                },
                loaded,
                syncs: counter,
                log,
            })
        });
        // The read-only pass got its shared locks, so an AlreadyOpen now is a conversion that
        // another open's (or an offline read's) shared locks refused.
        opened.map_err(|e| match e {
            Error::AlreadyOpen(_) => Opening::Contended(e),
            e => Opening::Failed(e),
        })
    }

    /// Writes `ops` and the meta row in one durable (fsynced) transaction; `applied` (with a
    /// log) is the LSN of the last log record these ops include.
    /// A panic in the storage layer (a damaged file redb trusted) is `Corrupt`, not a dead
    /// committer.
    pub(crate) fn commit(
        &self,
        ops: &[StoreOp],
        revision: i64,
        next_id: i64,
        applied: Option<u64>,
    ) -> Result<()> {
        guarded(&self.path, || {
            let mut tx = self.db.begin_write().map_err(storage)?;
            tx.set_durability(Durability::Immediate).map_err(storage)?;
            // Checkpoints of the log are rare: each may as well save redb's allocator state,
            // so that the open after a crash needs no walk of the whole file.
            tx.set_quick_repair(applied.is_some());
            {
                let mut leases = tx.open_table(LEASES).map_err(storage)?;
                let mut kv = tx.open_table(KV).map_err(storage)?;
                apply_ops(&mut leases, &mut kv, ops)?;
                let mut meta = tx.open_table(META).map_err(storage)?;
                meta.insert("revision", revision).map_err(storage)?;
                meta.insert("next_lease_id", next_id).map_err(storage)?;
                if let Some(lsn) = applied {
                    meta.insert("log_applied", lsn as i64).map_err(storage)?;
                }
            }
            tx.commit().map_err(storage)
        })
    }

    /// Marks the file complete on its own (`FORMAT_VERSION`), durably: on close, once redb holds
    /// every record of the log.
    pub(crate) fn mark_complete(&self) -> Result<()> {
        guarded(&self.path, || {
            let mut tx = self.db.begin_write().map_err(storage)?;
            tx.set_durability(Durability::Immediate).map_err(storage)?;
            tx.set_quick_repair(true);
            tx.open_table(META)
                .map_err(storage)?
                .insert("format", FORMAT_VERSION)
                .map_err(storage)?;
            tx.commit().map_err(storage)
        })
    }

    /// Closes the file (redb writes on close); a panic there is reported as in `commit`.
    pub(crate) fn close(self) -> Result<()> {
        let path = self.path.clone();
        guarded(&path, move || {
            drop(self);
            Ok(())
        })
    }
}
