//! The open protocol (SPEC L13, D5): a read-only pass validates the file and its log under
//! shared locks it keeps, then the write open converts them, replays the log and gives the file
//! a fresh log id; two processes opening at once retry until one has the file.

use std::fs::{File, OpenOptions};
use std::path::Path;

use redb::backends::FileBackend;
use redb::{DatabaseError, Durability};

use super::files::{create, open_read_only_held, probe, Found};
use super::scratch::Scratch;
use super::{
    apply_ops, corrupt_at, guarded, init, load, load_tables, log_meta, new_log_id, storage, wal,
    write_meta, FaultyBackend, LogMeta, Progress, Recorder, StorageFaults, Store, SyncCounter,
    CACHE, FORMAT_LOGGED, FORMAT_VERSION, KV, LEASES, META,
};
use crate::error::{Error, Result};
use crate::rows::Loaded;

/// A redb error while the open writes to `path` (replay, new log id): damage redb found in the
/// file is `Corrupt` for it (D5), anything else `Storage`.
pub(super) fn opening(path: &Path, e: impl Into<redb::Error>) -> Error {
    match e.into() {
        redb::Error::Corrupted(detail) => corrupt_at(path, format!("damaged file: {detail}")),
        other => storage(other),
    }
}

pub(super) fn open_error(path: &Path, e: DatabaseError) -> Error {
    let corrupt = |detail: String| Error::Corrupt {
        path: path.to_path_buf(),
        detail,
    };
    match e {
        DatabaseError::DatabaseAlreadyOpen => Error::AlreadyOpen(path.to_path_buf()),
        DatabaseError::UpgradeRequired(v) => {
            corrupt(format!("redb file format {v} needs an upgrade"))
        }
        // A damaged header can make redb read past the end of the file: damage, not an I/O
        // failure.
        DatabaseError::Storage(redb::StorageError::Io(e))
            if e.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            corrupt(format!("damaged file: {e}"))
        }
        DatabaseError::Storage(redb::StorageError::Io(e)) => Error::io("cannot open", path, &e),
        DatabaseError::Storage(e) => corrupt(e.to_string()),
        other => corrupt(other.to_string()),
    }
}

/// Applies the log's records beyond redb's position (and gives the file a log id if it has
/// none) in one write transaction, validates the result there, and commits it durably only if
/// it is valid: a log that would break the database leaves the file as it was.
pub(super) fn replay(
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
        let mut history = Recorder::open(&tx)?;
        let mut changes = Vec::new();
        for r in records {
            changes.extend(apply_ops(
                &mut leases,
                &mut kv,
                &mut meta,
                &mut history,
                &r.ops,
            )?);
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
        write_meta(&mut meta, &changes).map_err(|e| opening(path, e))?;
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
        write_meta(&mut meta, &[]).map_err(|e| opening(path, e))?;
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

/// What [`write_open`] did.
struct Written {
    /// What the database holds, when the writes read it (a replay; a load after a repair).
    loaded: Option<Loaded>,
    /// Where it stands with respect to its log.
    log: LogMeta,
    /// The log beside the file is this file's (its records were replayed or are none).
    log_is_ours: bool,
}

/// The writes of an open, made on `db` (the file itself, or a scratch copy of it that keeps
/// them in memory): the log's records replayed, or a new log id given, or the tables of a file
/// that has none made. After a repair (`Checked::Repair`) the database is read and validated
/// here first.
fn write_open(
    db: &redb::Database,
    path: &Path,
    checked: &Checked,
    use_log: bool,
    new_id: u64,
) -> Result<Written> {
    let after_repair;
    let (read, found) = match checked {
        Checked::Read(read, found) => (read.as_ref().map(|(_, m)| *m), found),
        Checked::Repair => {
            let before = log_meta(db, path)?;
            after_repair = wal::read(
                path,
                before.and_then(|m| m.id),
                before.map_or(0, |m| m.applied),
            )?;
            (before, &after_repair)
        }
    };
    let log_is_ours = matches!(found, wal::Found::Ours(_));
    let records = match found {
        wal::Found::Ours(r) => r.as_slice(),
        _ => &[],
    };
    let fresh_id = |m: LogMeta| match m.id {
        Some(id) if !use_log => id,
        _ => new_id,
    };
    if let Some(m) = read.filter(|_| !records.is_empty()) {
        let (loaded, log) = replay(db, path, records, fresh_id(m), use_log)?;
        return Ok(Written {
            loaded: Some(loaded),
            log,
            log_is_ours,
        });
    }
    let (loaded, read) = match checked {
        Checked::Repair => match load(db, path)? {
            Some((l, m)) => (Some(l), Some(m)),
            None => (None, None),
        },
        Checked::Read(..) => (None, read),
    };
    let log = match read {
        // Nothing to replay: the new id alone (as fast as without a log).
        Some(m) if use_log => {
            let id = fresh_id(m);
            set_log_id(db, path, id)?;
            LogMeta { id: Some(id), ..m }
        }
        Some(m) => m,
        None => LogMeta {
            id: Some(init(db)?),
            applied: 0,
        },
    };
    Ok(Written {
        loaded,
        log,
        log_is_ours,
    })
}

/// Makes the open's writes ([`write_open`]) on a scratch copy of `file` that keeps them in
/// memory, after redb's check of its pages (D5): a damaged file that reads as valid rows can
/// still fail redb's writes part way (a damaged allocator state), and redb writes the file as
/// soon as it opens it for writing, so the real write open comes only after this succeeded.
/// The same writes on the same bytes then succeed on the file.
fn dry_run(file: &File, path: &Path, checked: &Checked, use_log: bool, new_id: u64) -> Result<()> {
    let cannot = |e: std::io::Error| Error::io("cannot read", path, &e);
    let len = file.metadata().map_err(cannot)?.len();
    let scratch = Scratch::new(file.try_clone().map_err(cannot)?, len);
    let mut db = redb::Builder::new()
        .set_cache_size(CACHE)
        .create_with_backend(scratch)
        .map_err(|e| open_error(path, e))?;
    if !db.check_integrity().map_err(|e| open_error(path, e))? {
        return Err(corrupt_at(
            path,
            "damaged file: redb's page checksums or allocator state do not match its trees",
        ));
    }
    write_open(&db, path, checked, use_log, new_id).map(drop)
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
        if let Found::New = probe(path)? {
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
        // With the log in use, every open gives it a new id: records left from an earlier
        // session can never be replayed onto another copy of the file.
        let new_id = new_log_id();
        guarded(path, || dry_run(&file, path, &checked, use_log, new_id))?;
        let opened = guarded(path, || {
            let backend = FaultyBackend {
                file: FileBackend::new(file).map_err(storage)?,
                faults: faults.clone(),
            };
            let db = redb::Builder::new()
                .set_cache_size(CACHE)
                .create_with_backend(backend)
                .map_err(|e| open_error(path, e))?;
            let written = write_open(&db, path, &checked, use_log, new_id)?;
            // What the writes read (a replay, a load after a repair), else what the read-only
            // pass read, still true under the lock it held.
            let loaded = match (written.loaded, checked) {
                (Some(l), _) => l,
                (None, Checked::Read(Some((l, _)), _)) => l,
                (None, _) => Loaded::default(),
            };
            let lm = written.log;
            let log = match (use_log, lm.id) {
                (true, Some(id)) => Some(wal::Writer::open(
                    path,
                    id,
                    lm.applied,
                    faults.clone(),
                    written.log_is_ours,
                    log_region,
                )?),
                _ => None,
            };
            Ok(Opened {
                store: Store {
                    db,
                    path: path.to_path_buf(),
                    faults,
                    history: Progress::default(),
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
}
