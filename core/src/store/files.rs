//! The database file on disk: what is at its path before an open, its atomic creation, the
//! temporary names beside it (and the stale ones killed processes left), redb's read-only
//! open whose shared locks outlive it, and the write open's locks, which the close keeps past
//! redb's close until it has recorded what it left (K15).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::result::Result as StdResult;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use redb::backends::FileBackend;
use redb::{BackendError, DatabaseError, StorageBackend};

use super::{guarded, init, storage, FaultyBackend, StorageFaults, CACHE};
use crate::error::{Error, Result};

/// redb's file magic; a non-empty file without it is refused untouched.
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// What is at the path before anything is opened for writing.
pub(super) enum Found {
    /// Nothing, or an empty file: a new database is created (atomically).
    New,
    /// A non-empty regular file with redb's magic.
    Redb,
}

/// Refuses, without opening it for writing, anything that is not a regular file (a FIFO would
/// block the open forever) and a non-empty file without redb's magic.
pub(super) fn probe(path: &Path) -> Result<Found> {
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
pub(super) fn create(path: &Path, faults: &StorageFaults) -> Result<()> {
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

pub(super) fn sibling_temp(path: &Path, tag: &str) -> Result<(PathBuf, PathBuf)> {
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

/// The backend of the store's write open: `FaultyBackend`, whose locks redb's close leaves held
/// once the store asks for it (`CloseLocks::keep`). The store then reads the file redb closed,
/// with no other process able to open it, records its checksum (K15), and releases the locks
/// itself (`CloseLocks::release`).
#[derive(Debug)]
pub(super) struct WriteBackend {
    backend: Arc<FaultyBackend>,
    keep: Arc<AtomicBool>,
}

/// The store's hold on its file beside redb's handle: the file read after redb has closed it,
/// and its locks, kept past that close and released here.
#[derive(Debug)]
pub(super) struct CloseLocks {
    backend: Arc<FaultyBackend>,
    keep: Arc<AtomicBool>,
}

impl WriteBackend {
    pub(super) fn new(backend: FaultyBackend) -> (WriteBackend, CloseLocks) {
        let backend = Arc::new(backend);
        let keep = Arc::new(AtomicBool::new(false));
        let locks = CloseLocks {
            backend: backend.clone(),
            keep: keep.clone(),
        };
        (WriteBackend { backend, keep }, locks)
    }
}

impl CloseLocks {
    /// From now on redb's close and unlocks leave the file's locks held.
    pub(super) fn keep(&self) {
        self.keep.store(true, Ordering::SeqCst);
    }

    /// Reads the file (`StorageBackend::read`), also after redb has closed it.
    pub(super) fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.backend.read(offset, out)
    }

    pub(super) fn len(&self) -> std::io::Result<u64> {
        self.backend.len()
    }

    /// Lets redb's close release the locks after all (it was deferred: redb closes later).
    pub(super) fn leave_to_redb(self) {
        self.keep.store(false, Ordering::SeqCst);
    }

    /// Releases every lock on the file, as redb's close would have.
    pub(super) fn release(self) -> std::io::Result<()> {
        self.keep.store(false, Ordering::SeqCst);
        self.backend.close()
    }
}

impl StorageBackend for WriteBackend {
    fn len(&self) -> std::result::Result<u64, std::io::Error> {
        self.backend.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::result::Result<(), std::io::Error> {
        self.backend.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::result::Result<(), std::io::Error> {
        self.backend.set_len(len)
    }
    fn sync_data(&self) -> std::result::Result<(), std::io::Error> {
        self.backend.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::result::Result<(), std::io::Error> {
        self.backend.write(offset, data)
    }
    fn close(&self) -> std::result::Result<(), std::io::Error> {
        if self.keep.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.backend.close()
    }
    fn unlock_range(&self, s: Bound<u64>, e: Bound<u64>) -> std::result::Result<(), BackendError> {
        if self.keep.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.backend.unlock_range(s, e)
    }
    delegate_locks!(backend);
}
