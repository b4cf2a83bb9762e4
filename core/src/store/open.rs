//! The open protocol (SPEC L13, D5): a read-only pass validates the file and its log under
//! shared locks it keeps, then the write open converts them, replays the log and gives the file
//! a fresh log id; two processes opening at once retry until one has the file.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use redb::backends::FileBackend;
use redb::{DatabaseError, Durability};

use super::file_sum;
use super::files::{create, open_read_only_held, probe, Found, WriteBackend};
use super::history;
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

/// Converts the history of a file of formats 3 to 6 to this build's (`history::upgrade`), in
/// one durable transaction; nothing for a file of this build's format.
pub(super) fn upgrade(db: &redb::Database, path: &Path) -> Result<()> {
    let mut tx = db.begin_write().map_err(|e| opening(path, e))?;
    if !history::upgrade(&tx)? {
        return tx.abort().map_err(|e| opening(path, e));
    }
    tx.set_durability(Durability::Immediate)
        .map_err(|e| opening(path, e))?;
    tx.set_quick_repair(true);
    tx.commit().map_err(|e| opening(path, e))
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

/// Whether an open checks every page of the file with redb before it writes the file (D5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageCheck {
    /// redb's `check_integrity` over the whole file (on the scratch copy, `dry_run`).
    Full,
    /// Skipped: the file is byte for byte what a clean close recorded in its log left (K15).
    SkippedAfterCleanClose,
}

/// What the read-only pass of [`Store::open`] found.
enum Checked {
    /// The file read whole and valid (`None`: it has no table yet), its log read against it,
    /// and whether the file needs redb's page check.
    Read(Option<(Loaded, LogMeta)>, wal::Found, PageCheck),
    /// redb must repair the file before it can be read; its log was checked on its own.
    Repair,
}

impl Checked {
    fn page_check(&self) -> PageCheck {
        match self {
            Checked::Read(_, _, check) => *check,
            Checked::Repair => PageCheck::Full,
        }
    }
}

/// Validates the file open as `file` and its log read-only (D5), leaving redb's shared locks
/// held by `file`'s open file description (`open_read_only_held`).
///
/// If the log records a clean close of a file of this length (K15) and the open is to write
/// the file (`writing`), the file is hashed whole meanwhile, on a second thread, under those
/// locks (nothing can write it): the page check is skipped only if the hash, the length and the
/// log id all match the record.
fn read_only_pass(file: &File, path: &Path, writing: bool) -> Result<Checked> {
    match open_read_only_held(file, path)? {
        Ok(db) => {
            let cannot = |e: std::io::Error| Error::io("cannot read", path, &e);
            let len = file.metadata().map_err(cannot)?.len();
            let record = wal::clean_close(path).filter(|r| writing && r.len == len);
            let read_at = |at, out: &mut [u8]| file.read_exact_at(out, at);
            let (crc, read) = file_sum::crc_while(&read_at, record.map(|r| r.len), || {
                let read = load(&db, path)?;
                let found = match &read {
                    Some((_, lm)) => wal::read(path, lm.id, lm.applied)?,
                    None => wal::read(path, None, 0)?,
                };
                Ok::<_, Error>((read, found))
            });
            let (read, found) = read?;
            let check = match (record, crc, &read) {
                (Some(r), Some(Ok(crc)), Some((_, m))) if crc == r.crc && m.id == Some(r.id) => {
                    PageCheck::SkippedAfterCleanClose
                }
                _ => PageCheck::Full,
            };
            Ok(Checked::Read(read, found, check))
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
        Checked::Read(read, found, _) => (read.as_ref().map(|(_, m)| *m), found),
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
    // Before anything else writes it: the history of formats 3 to 6 converted (K16).
    upgrade(db, path)?;
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
///
/// The page check reads every page (most of them history's, gigabytes for a long history): it
/// is skipped for a file byte for byte as a clean close left it (K15), whose pages are those
/// redb wrote, synced and closed.
fn dry_run(file: &File, path: &Path, checked: &Checked, use_log: bool, new_id: u64) -> Result<()> {
    let cannot = |e: std::io::Error| Error::io("cannot read", path, &e);
    let len = file.metadata().map_err(cannot)?.len();
    let scratch = Scratch::new(file.try_clone().map_err(cannot)?, len);
    let mut db = redb::Builder::new()
        .set_cache_size(CACHE)
        .create_with_backend(scratch)
        .map_err(|e| open_error(path, e))?;
    if checked.page_check() == PageCheck::Full
        && !db.check_integrity().map_err(|e| open_error(path, e))?
    {
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
    /// Whether redb's page check ran before the file was written (K15).
    pub(crate) page_check: PageCheck,
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
                guarded(path, || read_only_pass(&ro, path, false).map(drop))?;
                return Err(Error::io("cannot open", path, &e).into());
            }
        };
        let checked = guarded(path, || read_only_pass(&file, path, true))?;
        // With the log in use, every open gives it a new id: records left from an earlier
        // session can never be replayed onto another copy of the file.
        let new_id = new_log_id();
        guarded(path, || dry_run(&file, path, &checked, use_log, new_id))?;
        let opened = guarded(path, || {
            let (backend, locks) = WriteBackend::new(FaultyBackend {
                file: FileBackend::new(file).map_err(storage)?,
                faults: faults.clone(),
            });
            let db = redb::Builder::new()
                .set_cache_size(CACHE)
                .create_with_backend(backend)
                .map_err(|e| open_error(path, e))?;
            let written = write_open(&db, path, &checked, use_log, new_id)?;
            // What the writes read (a replay, a load after a repair), else what the read-only
            // pass read, still true under the lock it held.
            let page_check = checked.page_check();
            let loaded = match (written.loaded, checked) {
                (Some(l), _) => l,
                (None, Checked::Read(Some((l, _)), _, _)) => l,
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
                    locks,
                    log_id: lm.id.filter(|_| use_log),
                    reader: Default::default(),
                },
                loaded,
                syncs: counter,
                log,
                page_check,
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

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::path::PathBuf;
    use std::process::{Command, Stdio};

    use super::*;
    use crate::{Error, Tenure};

    /// A file with `key` written twice (`old` first, then only in the history) and `filler`
    /// more keys, closed cleanly with the log in use; and the revision of `old`.
    fn closed_file(dir: &Path, old: &[u8], filler: usize) -> (PathBuf, i64) {
        let path = dir.join("db.tenure");
        let db = Tenure::open(&path).unwrap();
        let first = db.put("key", old, None).unwrap();
        db.put("key", "new", None).unwrap();
        for i in 0..filler {
            db.put(format!("filler/{i}"), vec![b'f'; 200], None)
                .unwrap();
        }
        db.close().unwrap();
        (path, first)
    }

    /// Opens `path` as the engine does and reports which page check ran; closes it again
    /// without recording a clean close (as a killed process leaves it, K15).
    fn page_check_of(path: &Path) -> Result<PageCheck> {
        let opened = Store::open(path, None, true, wal::REGION)?;
        let check = opened.page_check;
        drop(opened.log);
        opened.store.close(false)?;
        Ok(check)
    }

    /// The record a clean close of `path` would leave now (its log id from the file).
    fn record_of(path: &Path) -> wal::CleanClose {
        let bytes = std::fs::read(path).unwrap();
        wal::CleanClose {
            id: wal::clean_close(path).expect("a recorded clean close").id,
            len: bytes.len() as u64,
            crc: crc32fast::hash(&bytes),
        }
    }

    /// Flips a bit in every copy of `needle` in the file; how many there were.
    fn damage_every(path: &Path, needle: &[u8]) -> usize {
        let mut bytes = std::fs::read(path).unwrap();
        let mut found = 0;
        for at in 0..bytes.len().saturating_sub(needle.len()) {
            if bytes[at..at + needle.len()] == *needle {
                bytes[at + needle.len() / 2] ^= 1;
                found += 1;
            }
        }
        std::fs::write(path, bytes).unwrap();
        found
    }

    fn assert_contents(path: &Path, first: i64, old: &[u8]) {
        let db = Tenure::open(path).unwrap();
        assert_eq!(db.get("key").unwrap().unwrap().value, b"new");
        assert_eq!(db.get_at("key", first).unwrap().unwrap().value, old);
        db.close().unwrap();
    }

    #[test]
    fn k15_a_clean_close_records_the_whole_files_checksum_and_the_next_open_alone_skips_the_page_check(
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (path, first) = closed_file(dir.path(), b"old", 10);
        let bytes = std::fs::read(&path).unwrap();
        let rec = wal::clean_close(&path).expect("recorded");
        assert_eq!(
            (rec.len, rec.crc),
            (bytes.len() as u64, crc32fast::hash(&bytes)),
            "the record is the checksum of the file as the close left it"
        );
        assert_eq!(
            page_check_of(&path).unwrap(),
            PageCheck::SkippedAfterCleanClose
        );
        // That open took the file: its new log header removed the record, so an open after
        // it (here: no clean close) checks every page.
        assert_eq!(wal::clean_close(&path), None);
        assert_eq!(page_check_of(&path).unwrap(), PageCheck::Full);
        // An engine's clean close records it again.
        Tenure::open(&path).unwrap().close().unwrap();
        assert_eq!(
            page_check_of(&path).unwrap(),
            PageCheck::SkippedAfterCleanClose
        );
        assert_contents(&path, first, b"old");
        // That session read the past, through a read transaction it keeps between reads: its
        // close still closed redb's file and recorded it.
        assert_eq!(
            page_check_of(&path).unwrap(),
            PageCheck::SkippedAfterCleanClose
        );
    }

    #[test]
    fn k15_a_session_without_the_log_records_nothing_and_what_it_wrote_voids_the_earlier_record() {
        let dir = tempfile::tempdir().unwrap();
        let (path, first) = closed_file(dir.path(), b"old", 1);
        let before = wal::clean_close(&path).expect("recorded");
        let db = Tenure::builder()
            .path(&path)
            .write_ahead_log(false)
            .open()
            .unwrap();
        db.put("without-log", "v", None).unwrap();
        db.close().unwrap();
        // The log is left as the last session with it left it: its record no longer
        // matches the file.
        assert_eq!(wal::clean_close(&path), Some(before));
        assert_eq!(page_check_of(&path).unwrap(), PageCheck::Full);
        assert_contents(&path, first, b"old");
    }

    #[test]
    fn k15_a_byte_flipped_in_a_live_page_after_a_clean_close_is_refused_by_the_full_check_untouched(
    ) {
        // The old value lives only in a history page, which the open does not read (only
        // redb's page check does).
        let old = b"an-old-value-only-the-history-holds";
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = closed_file(dir.path(), old, 10);
        assert!(wal::clean_close(&path).is_some());
        assert!(damage_every(&path, old) > 0, "the value is in the file");
        let (file, log) = (
            std::fs::read(&path).unwrap(),
            std::fs::read(wal::path_of(&path)).unwrap(),
        );
        match Tenure::open(&path) {
            Err(Error::Corrupt { .. }) => {}
            other => panic!("expected Corrupt from the page check, got {other:?}"),
        }
        assert!(
            std::fs::read(&path).unwrap() == file,
            "the file is untouched"
        );
        assert!(
            std::fs::read(wal::path_of(&path)).unwrap() == log,
            "its log is untouched"
        );
        // Control: with a record that matched the damaged bytes, the page check would be
        // skipped and the file would open (the damaged row is refused only when read): so
        // the refusal above is the full check's.
        let copy = dir.path().join("copy.tenure");
        std::fs::write(&copy, &file).unwrap();
        std::fs::write(wal::path_of(&copy), &log).unwrap();
        let matching = wal::CleanClose {
            crc: crc32fast::hash(&file),
            ..wal::clean_close(&copy).unwrap()
        };
        wal::forge_clean_close(&copy, Some(matching), None, false);
        assert_eq!(
            page_check_of(&copy).unwrap(),
            PageCheck::SkippedAfterCleanClose
        );
    }

    #[test]
    fn k15_a_byte_flipped_in_any_page_after_a_clean_close_means_the_full_check_then_corrupt_untouched_or_opened_right(
    ) {
        // Every page of a cleanly closed file in turn, a byte flipped in it (its record then
        // no longer matches): refused as `Corrupt` with the file untouched (a live page), or
        // opened, after the full page check, with exactly its contents (a free page, the
        // header page's unused part). Both happen.
        let dir = tempfile::tempdir().unwrap();
        let (pristine, first) = closed_file(dir.path(), b"old", 10);
        let bytes = std::fs::read(&pristine).unwrap();
        let log = std::fs::read(wal::path_of(&pristine)).unwrap();
        let contents = Tenure::read_file(&pristine).unwrap();
        let path = dir.path().join("damaged.tenure");
        let (mut opened, mut refused) = (0, 0);
        for page in 0..bytes.len() / 4096 {
            let mut damaged = bytes.clone();
            damaged[page * 4096 + 2048] ^= 0x10;
            std::fs::write(&path, &damaged).unwrap();
            std::fs::write(wal::path_of(&path), &log).unwrap();
            match page_check_of(&path) {
                Ok(check) => {
                    assert_eq!(check, PageCheck::Full, "page {page}");
                    assert!(
                        Tenure::read_file(&path).unwrap() == contents,
                        "page {page}: opened with other contents"
                    );
                    assert_contents(&path, first, b"old");
                    opened += 1;
                }
                Err(Error::Corrupt { .. }) => {
                    assert!(
                        std::fs::read(&path).unwrap() == damaged,
                        "page {page}: refused, yet written"
                    );
                    refused += 1;
                }
                Err(e) => panic!("page {page}: expected Corrupt or the file, got {e:?}"),
            }
        }
        assert!(
            opened > 0 && refused > 0,
            "{opened} opened, {refused} refused"
        );
    }

    #[test]
    fn k15_a_record_absent_damaged_or_of_another_id_length_or_checksum_means_the_full_check() {
        // The record as the close wrote it, edited (`None`: removed), the id the log's header
        // then carries (`None`: the close's), and the page check expected.
        type Edit = fn(wal::CleanClose) -> Option<wal::CleanClose>;
        let cases: [(&str, Edit, bool, PageCheck); 7] = [
            (
                "as the close wrote it (control)",
                Some,
                false,
                PageCheck::SkippedAfterCleanClose,
            ),
            ("absent", |_| None, false, PageCheck::Full),
            (
                "another id than its log header's",
                |r| Some(wal::CleanClose { id: r.id ^ 1, ..r }),
                false,
                PageCheck::Full,
            ),
            (
                "another session's log (header and record under an id the file lacks)",
                |r| Some(wal::CleanClose { id: r.id ^ 1, ..r }),
                true,
                PageCheck::Full,
            ),
            (
                "another length",
                |r| {
                    Some(wal::CleanClose {
                        len: r.len + 4096,
                        ..r
                    })
                },
                false,
                PageCheck::Full,
            ),
            (
                "another checksum",
                |r| {
                    Some(wal::CleanClose {
                        crc: r.crc ^ 1,
                        ..r
                    })
                },
                false,
                PageCheck::Full,
            ),
            (
                "damaged (its own checksum fails)",
                Some,
                false,
                PageCheck::Full,
            ),
        ];
        for (what, edit, header_too, expected) in cases {
            let dir = tempfile::tempdir().unwrap();
            let (path, first) = closed_file(dir.path(), b"old", 10);
            let rec = record_of(&path);
            let forged = edit(rec);
            let header_id = forged.filter(|_| header_too).map(|r| r.id);
            wal::forge_clean_close(&path, forged, header_id, what.starts_with("damaged"));
            assert_eq!(page_check_of(&path).unwrap(), expected, "{what}");
            assert_contents(&path, first, b"old");
        }
    }

    #[test]
    fn k15_a_fifo_in_place_of_the_log_is_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = closed_file(dir.path(), b"old", 1);
        let log = wal::path_of(&path);
        std::fs::remove_file(&log).unwrap();
        let made = Command::new("mkfifo").arg(&log).status().unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || tx.send(page_check_of(&p)).unwrap());
        // A generous bound: the refusal is immediate; opening the FIFO would block forever.
        match rx.recv_timeout(std::time::Duration::from_secs(20)) {
            Ok(Err(e @ Error::Corrupt { .. })) => {
                assert!(e.to_string().contains("regular file"), "{e}")
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    const CHILD_ENV: &str = "TENURE_K15_CHILD_PATH";

    /// The writer `k15_a_killed_writer...` starts and kills: opens the file, puts, says so,
    /// and waits to be killed.
    #[test]
    #[ignore = "the child process of k15_a_killed_writer_leaves_no_record_and_the_next_open_checks_every_page"]
    fn k15_child_writer() {
        let Some(path) = std::env::var_os(CHILD_ENV) else {
            return;
        };
        let db = Tenure::open(PathBuf::from(path)).unwrap();
        db.put("child", "acknowledged", None).unwrap();
        println!("K15-CHILD ready");
        loop {
            std::thread::park();
        }
    }

    #[test]
    fn k15_a_killed_writer_leaves_no_record_and_the_next_open_checks_every_page() {
        let dir = tempfile::tempdir().unwrap();
        let (path, first) = closed_file(dir.path(), b"old", 10);
        assert!(wal::clean_close(&path).is_some());
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "store::open::tests::k15_child_writer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let ready = BufReader::new(child.stdout.take().unwrap())
            .lines()
            .map_while(|l| l.ok())
            .any(|l| l.contains("K15-CHILD ready"));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        assert!(ready, "the child opened the file and wrote");
        assert_eq!(page_check_of(&path).unwrap(), PageCheck::Full);
        let db = Tenure::open(&path).unwrap();
        assert_eq!(
            db.get("child").unwrap().unwrap().value,
            b"acknowledged",
            "the killed writer's acknowledged put is kept"
        );
        db.close().unwrap();
        assert_contents(&path, first, b"old");
    }

    #[test]
    fn k15_the_close_checksums_the_file_under_its_locks_and_records_nothing_unless_clean() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = closed_file(dir.path(), b"old", 10);
        let opened = Store::open(&path, None, true, wal::REGION).unwrap();
        drop(opened.log);
        let Store { db, locks, .. } = opened.store;
        // The close's steps: redb closes the file, its locks kept for the checksum.
        locks.keep();
        db.close().unwrap();
        match Store::open(&path, None, true, wal::REGION) {
            Err(Error::AlreadyOpen(_)) => {}
            Err(e) => panic!("expected AlreadyOpen while the close holds the file, got {e:?}"),
            Ok(_) => panic!("expected AlreadyOpen while the close holds the file, got it open"),
        }
        locks.release().unwrap();
        // Closed, but not cleanly: no record.
        let opened = Store::open(&path, None, true, wal::REGION).unwrap();
        assert_eq!(opened.page_check, PageCheck::Full);
        drop(opened.log);
        opened.store.close(false).unwrap();
        assert_eq!(wal::clean_close(&path), None);
        assert_eq!(page_check_of(&path).unwrap(), PageCheck::Full);
    }
}
