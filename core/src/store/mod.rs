//! Durable storage in a redb file: three tables, one write transaction per group commit.
//!
//! - `tenure_meta`: `format` ([`FORMAT_VERSION`], or [`FORMAT_LOGGED`] while the log may hold
//!   records the file lacks), `revision`, `next_lease_id`, the digests of the data tables and
//!   the checksum of the meta rows (`seal`).
//! - `tenure_leases`: lease ID → sealed (ttl ns, remaining ns or `NO_TIME`, wall ms when
//!   persisted) (`codec`, `seal`).
//! - `tenure_kv`: key → sealed encoded entry (`codec`, `seal`): value, revisions, lease.
//! - `tenure_version_rows`, `tenure_deleted`, `tenure_changes`: every revision until
//!   compacted, sealed rows (`history`, `version_rows`, `chain`, `events`).
//!
//! Deadlines are never stored: only durations and the wall time they were measured at.

use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};

use redb::{Durability, ReadableDatabase, ReadableTable, TableDefinition, TableError};

use crate::alarms::{Alarm, AlarmKind};
use crate::error::{panic_message, Error, Result};
use crate::rows::{Loaded, StoreOp};

/// The lock calls of a backend that wraps a `FileBackend` in `$field`, passed through (its
/// `unlock_range` is its own): shared by the fault-injecting and the read-only backends. Its
/// callers import `Bound`, `StdResult` and `BackendError`.
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

mod chain;
mod codec;
mod events;
mod faults;
mod file_sum;
mod files;
mod history;
mod in_place;
mod open;
mod scratch;
mod seal;
mod snapshot;
mod version_rows;
pub(crate) mod wal;
use codec::{decode, decode_lease, encode_lease};
pub use faults::StorageFaults;
pub(crate) use faults::SyncCounter;
use faults::{injected, FaultyBackend, LOG};
pub use files::temp_beside;
use files::{new_private, open_read_only_held, sibling_temp, CloseLocks};
pub(crate) use history::Progress;
use history::{present_revision, Present, Recorder, HISTORY_ROWS};
pub(crate) use in_place::{copy_in_place, range_at_in_place, read_in_place};
use open::{open_error, replay};
use seal::{meta_intact, seal, unseal, write_meta, Digest};
pub(crate) use snapshot::{kv_hash, Covers, View};

const META: TableDefinition<&str, i64> = TableDefinition::new("tenure_meta");
const LEASES_NAME: &str = "tenure_leases";
const LEASES: TableDefinition<i64, &[u8]> = TableDefinition::new(LEASES_NAME);
const KV_NAME: &str = "tenure_kv";
const KV: TableDefinition<&[u8], &[u8]> = TableDefinition::new(KV_NAME);

/// On-disk format version of a file complete on its own, stored in `tenure_meta["format"]`.
/// 9: the history keyed by revision, versions packed into rows (`tenure_version_rows`, SPEC
/// K17). 7 kept one row per version (`tenure_versions`); 3 to 6 kept it keyed by key
/// (`tenure_history`; 3 and 4 with one event row per write): converted at the first write
/// open (`history::upgrade`), read in place through a converted copy in memory. 1 and 2 were
/// the tables of 3 unsealed, refused with [`LEGACY_FORMAT`].
pub(crate) const FORMAT_VERSION: i64 = 9;
/// The `format` of a file while an engine with the write-ahead log has it (from its open to its
/// clean close) or after that engine died: the log beside it may hold acknowledged records the
/// file lacks. A build that predates the mark refuses it as an unsupported version (`Corrupt`,
/// nothing written) instead of ignoring the log and losing those writes.
/// 10 (4, 6 and 8 in the formats `history::upgrade` converts).
pub(crate) const FORMAT_LOGGED: i64 = 10;
/// Why a file of format 1 or 2 (written before rows had checksums) is refused.
pub(crate) const LEGACY_FORMAT: &str = "format version {v} predates per-record checksums \
     (tenure before issue 29): this build reads formats 3 to 10 only; export its keys and leases \
     with the build that wrote it and load them into a new file";
/// redb's page cache for an open database file.
const CACHE: usize = 64 << 20;

pub(crate) struct Store {
    db: redb::Database,
    path: PathBuf,
    /// The faults injected into this store; a snapshot's copy gets them too.
    faults: StorageFaults,
    /// The history's seeding and physical compaction.
    history: Progress,
    /// The file beside `db`: read by the close once redb has closed it, under its locks (K15).
    locks: CloseLocks,
    /// The log id of this session, with the log in use (where a clean close is recorded).
    log_id: Option<u64>,
    /// The view last handed out for reads of the history (`history_view`); dropped by
    /// `begin_write`. A cell: the store is only reached under the engine's store lock.
    reader: RefCell<snapshot::SharedView>,
}

fn storage(e: impl fmt::Display) -> Error {
    Error::storage(e.to_string())
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
    // First: the meta rows it writes are covered by the checksum `write_meta` writes below.
    history::init(&tx)?;
    {
        let mut meta = tx.open_table(META).map_err(storage)?;
        meta.insert("format", FORMAT_VERSION).map_err(storage)?;
        meta.insert("revision", 0).map_err(storage)?;
        meta.insert("next_lease_id", 1).map_err(storage)?;
        meta.insert("log_id", id as i64).map_err(storage)?;
        tx.open_table(LEASES).map_err(storage)?;
        tx.open_table(KV).map_err(storage)?;
        let empty = Digest::default();
        write_meta(&mut meta, &[(LEASES_NAME, empty), (KV_NAME, empty)]).map_err(storage)?;
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
    // Before the other tables, whose types an older format may not share.
    check_format(&meta, path)?;
    let leases = tx.open_table(LEASES).map_err(|e| corrupt(e.to_string()))?;
    let kv = tx.open_table(KV).map_err(|e| corrupt(e.to_string()))?;
    load_tables(&meta, &leases, &kv, path).map(Some)
}

/// Refuses a file whose format this build does not read (nothing is written).
fn check_format(meta: &impl ReadableTable<&'static str, i64>, path: &Path) -> Result<()> {
    let format = meta
        .get("format")
        .map_err(|e| corrupt_at(path, e.to_string()))?
        .map(|v| v.value());
    match format {
        Some(FORMAT_VERSION | FORMAT_LOGGED) => Ok(()),
        Some(v) if history::is_converted(v) => Ok(()),
        Some(v @ (1 | 2)) => Err(corrupt_at(
            path,
            LEGACY_FORMAT.replace("{v}", &v.to_string()),
        )),
        Some(v) => Err(corrupt_at(path, format!("unsupported format version {v}"))),
        None => Err(corrupt_at(path, "missing format")),
    }
}

/// The digest `meta` holds for `table` against the one its rows add up to.
fn check_digest(
    meta: &impl ReadableTable<&'static str, i64>,
    table: &str,
    found: Digest,
    path: &Path,
) -> Result<()> {
    let stored = Digest::stored(meta, table).map_err(|e| corrupt_at(path, e.to_string()))?;
    if stored != Some(found) {
        return Err(corrupt_at(
            path,
            format!(
                "table {table} does not match its digest ({} rows read, {:?} recorded): rows \
                 lost, duplicated or stale",
                found.rows(),
                stored.map(|d| d.rows())
            ),
        ));
    }
    Ok(())
}

/// `load` over open tables: those of a read transaction, or of the write transaction that
/// replays the log (validated before it commits).
fn load_tables(
    meta: &impl ReadableTable<&'static str, i64>,
    leases: &impl ReadableTable<i64, &'static [u8]>,
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
    check_format(meta, path)?;
    if !meta_intact(meta).map_err(read)? {
        return Err(corrupt("the meta rows do not match their checksum".into()));
    }
    let log = log_rows(meta, path)?;
    let mut loaded = Loaded {
        revision: get("revision")?,
        next_id: get("next_lease_id")?,
        ..Loaded::default()
    };
    loaded.compacted = history::compacted_of(meta, loaded.revision).map_err(read)?;
    loaded.alarms = alarms_of(meta).map_err(corrupt)?;
    if loaded.compacted < 0 || loaded.compacted > loaded.revision {
        return Err(corrupt(format!(
            "impossible compaction revision {} (store revision {})",
            loaded.compacted, loaded.revision
        )));
    }
    if loaded.revision < 0 || loaded.next_id < 1 {
        return Err(corrupt(format!(
            "impossible revision {} or next lease ID {}",
            loaded.revision, loaded.next_id
        )));
    }
    // The cheap invariants a damaged file breaks: I-L2, I-K1, I-K3 (DESIGN).
    reserve(&mut loaded.leases, leases.len().map_err(read)?);
    reserve(&mut loaded.keys, kv.len().map_err(read)?);
    let (mut lease_digest, mut kv_digest) = (Digest::default(), Digest::default());
    for row in leases.iter().map_err(read)? {
        let (k, v) = row.map_err(read)?;
        let id = k.value();
        lease_digest.add(v.value());
        let lease = unseal(LEASES_NAME, &id.to_le_bytes(), v.value())
            .and_then(|p| decode_lease(id, p))
            .ok_or_else(|| corrupt(format!("damaged row for lease {id} (checksum)")))?;
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
        loaded.leases.push(lease);
    }
    check_digest(meta, LEASES_NAME, lease_digest, path)?;
    for row in kv.iter().map_err(read)? {
        let (k, v) = row.map_err(read)?;
        let key = k.value();
        let shown = || String::from_utf8_lossy(key).into_owned();
        kv_digest.add(v.value());
        let entry = unseal(KV_NAME, key, v.value())
            .and_then(decode)
            .ok_or_else(|| corrupt(format!("damaged row for key {:?} (checksum)", shown())))?;
        if let Some(d) = &entry.data {
            if d.create <= 0
                || d.mod_revision < d.create
                || d.mod_revision > loaded.revision
                || d.version <= 0
            {
                return Err(corrupt(format!(
                    "key {:?} has revisions create {} mod {} (store revision {}, I-K1)",
                    shown(),
                    d.create,
                    d.mod_revision,
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
        // In key order (a damaged branch page can break it).
        if loaded
            .keys
            .last()
            .is_some_and(|(last, _)| last.as_slice() >= key)
        {
            return Err(corrupt(format!(
                "key {:?} out of order in its table",
                shown()
            )));
        }
        loaded.keys.push((key.to_vec(), entry));
    }
    check_digest(meta, KV_NAME, kv_digest, path)?;
    Ok((loaded, log))
}

/// The meta row of a raised alarm (SPEC E20): `alarm/<etcd's AlarmType number>/<member>`.
fn alarm_row(a: &Alarm) -> String {
    format!("{ALARM_ROWS}{}/{}", a.kind.etcd_number(), a.member)
}

/// Where the alarm rows of the meta table begin.
const ALARM_ROWS: &str = "alarm/";

/// The raised alarms the meta table holds.
fn alarms_of(
    meta: &impl ReadableTable<&'static str, i64>,
) -> std::result::Result<Vec<Alarm>, String> {
    let mut out = Vec::new();
    // '0' follows '/': the rows that start with "alarm/".
    for row in meta
        .range(ALARM_ROWS.."alarm0")
        .map_err(|e| e.to_string())?
    {
        let (k, _) = row.map_err(|e| e.to_string())?;
        let name = k.value();
        let alarm = name
            .strip_prefix(ALARM_ROWS)
            .and_then(|rest| rest.split_once('/'))
            .and_then(|(kind, member)| {
                Some(Alarm {
                    kind: AlarmKind::from_etcd_number(kind.parse().ok()?)?,
                    member: member.parse().ok()?,
                })
            })
            .ok_or_else(|| format!("unreadable alarm row {name:?}"))?;
        out.push(alarm);
    }
    Ok(out)
}

/// Room for the `rows` a table says it has, up to 2^20: a damaged file can claim any count, and
/// beyond the bound (or if the room cannot be had) the vector grows as the rows come.
fn reserve<T>(v: &mut Vec<T>, rows: u64) {
    let _ = v.try_reserve(rows.min(1 << 20) as usize);
}

/// The `tenure_kv` row of `key`: `e` encoded and sealed, in one allocation.
fn sealed_key_row(key: &[u8], e: &crate::rows::Entry) -> Vec<u8> {
    let mut row = Vec::with_capacity(codec::encoded_len(e) + seal::SEAL_LEN);
    codec::encode_into(e, &mut row);
    seal::seal_in_place(&mut row, KV_NAME, &[key]);
    row
}

/// The key an op writes in `tenure_kv`, if it writes one.
fn op_key(op: &StoreOp) -> Option<&[u8]> {
    match op {
        StoreOp::PutKey(k, _)
        | StoreOp::DelKey(k)
        | StoreOp::DelKeyAt(k, _)
        | StoreOp::LeaseKey(k, _) => Some(k),
        _ => None,
    }
}

/// A key that `ops` write more than once: only the last write reaches `tenure_kv` (the others'
/// rows would be replaced in the same transaction); each still adds its history.
struct Rewritten {
    /// The position of the key's last op.
    last: usize,
    /// The key's row after the ops applied so far, if one of them wrote it (as history needs
    /// it: the revision of its value's last write).
    written: Option<Option<i64>>,
}

/// The keys `ops` write more than once (a checkpoint brings a region of writes, in which a
/// busy key is written many times: BENCHMARKS 27).
fn rewritten_keys(ops: &[StoreOp]) -> rustc_hash::FxHashMap<&[u8], Rewritten> {
    let mut seen: rustc_hash::FxHashMap<&[u8], (usize, bool)> = Default::default();
    if ops.len() > 1 {
        for (i, op) in ops.iter().enumerate() {
            if let Some(k) = op_key(op) {
                seen.entry(k)
                    .and_modify(|(last, again)| (*last, *again) = (i, true))
                    .or_insert((i, false));
            }
        }
    }
    seen.into_iter()
        .filter(|(_, (_, again))| *again)
        .map(|(k, (last, _))| {
            (
                k,
                Rewritten {
                    last,
                    written: None,
                },
            )
        })
        .collect()
}

/// The revision of the last write of the value `op` leaves as `key`'s row (`None`: no value).
fn written_revision(op: &StoreOp) -> Option<i64> {
    match op {
        StoreOp::PutKey(_, e) | StoreOp::LeaseKey(_, e) => e.data.as_ref().map(|d| d.mod_revision),
        _ => None,
    }
}

/// Writes `ops` sealed; the change to each table's digest, for `write_meta`.
fn apply_ops(
    leases: &mut redb::Table<i64, &[u8]>,
    kv: &mut redb::Table<&[u8], &[u8]>,
    meta: &mut redb::Table<&str, i64>,
    history: &mut Recorder<'_>,
    ops: &[StoreOp],
) -> Result<[(&'static str, Digest); 2]> {
    let (mut lease_digest, mut kv_digest) = (Digest::default(), Digest::default());
    let mut rewritten = rewritten_keys(ops);
    for (i, op) in ops.iter().enumerate() {
        // The key's row as this commit's earlier writes left it, if they wrote it.
        let mut written = None;
        if let Some((key, r)) = op_key(op).and_then(|k| Some((k, rewritten.get_mut(k)?))) {
            if r.last != i {
                // Not the key's last write: history only, from the row as the writes before
                // it left it.
                let present = match r.written {
                    Some(written) => written,
                    None => match kv.get(key).map_err(storage)? {
                        Some(row) => present_revision(key, row.value())?,
                        None => None,
                    },
                };
                record(history, op, Present::Written(present))?;
                r.written = Some(written_revision(op));
                continue;
            }
            written = r.written;
        }
        match op {
            StoreOp::PutLease {
                id,
                ttl,
                remaining,
                wall_ms,
            } => {
                let row = seal(
                    LEASES_NAME,
                    &id.to_le_bytes(),
                    &encode_lease(*ttl, *remaining, *wall_ms),
                );
                if let Some(old) = leases.insert(*id, row.as_slice()).map_err(storage)? {
                    lease_digest.remove(old.value());
                }
                lease_digest.add(&row);
            }
            StoreOp::DelLease(id) => {
                if let Some(old) = leases.remove(*id).map_err(storage)? {
                    lease_digest.remove(old.value());
                }
            }
            StoreOp::PutKey(k, rec) | StoreOp::LeaseKey(k, rec) => {
                let row = sealed_key_row(k, rec);
                let old = kv.insert(k.as_slice(), row.as_slice()).map_err(storage)?;
                if let Some(old) = &old {
                    kv_digest.remove(old.value());
                }
                kv_digest.add(&row);
                let present = match written {
                    Some(w) => Present::Written(w),
                    None => Present::Row(old.as_ref().map(|o| o.value())),
                };
                record(history, op, present)?;
            }
            StoreOp::DelKey(k) | StoreOp::DelKeyAt(k, _) => {
                let old = kv.remove(k.as_slice()).map_err(storage)?;
                if let Some(old) = &old {
                    kv_digest.remove(old.value());
                }
                let present = match written {
                    Some(w) => Present::Written(w),
                    None => Present::Row(old.as_ref().map(|o| o.value())),
                };
                record(history, op, present)?;
            }
            StoreOp::Compact(rev) => {
                meta.insert("compacted", *rev).map_err(storage)?;
            }
            StoreOp::Alarm(a, raised) => {
                let row = alarm_row(a);
                if *raised {
                    meta.insert(row.as_str(), 1).map_err(storage)?;
                } else {
                    meta.remove(row.as_str()).map_err(storage)?;
                }
            }
        }
    }
    // The events of these ops: one row (SPEC K16).
    history.flush()?;
    Ok([(LEASES_NAME, lease_digest), (KV_NAME, kv_digest)])
}

/// The history a key's op adds (SPEC K9): a put with a value a version, a delete of a value a
/// tombstone, an attach or detach the relabeled version; `present`: the row it replaces.
fn record(history: &mut Recorder<'_>, op: &StoreOp, present: Present<'_>) -> Result<()> {
    match op {
        StoreOp::PutKey(k, rec) => match &rec.data {
            Some(d) => history.put(k, d.mod_revision, rec, present),
            None => Ok(()),
        },
        StoreOp::DelKeyAt(k, rev) => history.tombstone(k, *rev, present),
        StoreOp::LeaseKey(k, rec) => match &rec.data {
            Some(d) => history.relabel(k, d.mod_revision, rec),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

impl Store {
    /// Begins a write transaction, first dropping the view kept for reads of the history: a
    /// read transaction left open would keep redb from reusing the pages this write frees.
    fn begin_write(&self) -> std::result::Result<redb::WriteTransaction, redb::TransactionError> {
        self.forget_view();
        self.db.begin_write()
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
        let committed = guarded(&self.path, || {
            let mut tx = self.begin_write().map_err(storage)?;
            tx.set_durability(Durability::Immediate).map_err(storage)?;
            // Checkpoints of the log are rare: each may as well save redb's allocator state,
            // so that the open after a crash needs no walk of the whole file.
            tx.set_quick_repair(applied.is_some());
            history::seed(&tx, &self.history)?;
            {
                let mut leases = tx.open_table(LEASES).map_err(storage)?;
                let mut kv = tx.open_table(KV).map_err(storage)?;
                let mut meta = tx.open_table(META).map_err(storage)?;
                let mut history = Recorder::open_with(&tx, &self.history)?;
                let changes = apply_ops(&mut leases, &mut kv, &mut meta, &mut history, ops)?;
                meta.insert("revision", revision).map_err(storage)?;
                meta.insert("next_lease_id", next_id).map_err(storage)?;
                if let Some(lsn) = applied {
                    meta.insert("log_applied", lsn as i64).map_err(storage)?;
                }
                write_meta(&mut meta, &changes).map_err(storage)?;
            }
            // A checkpoint brings a region's writes (thousands) at once: it also compacts as
            // many, and more, in the same transaction, or the compactor's steps between
            // checkpoints would fall behind for as long as writes come (SPEC K10).
            let stepped = match applied {
                Some(_) => Some(self.compact_within(
                    &tx,
                    ops.len() + history::STEP,
                    history::Within::Checkpoint,
                )?),
                None => None,
            };
            tx.commit().map_err(storage)?;
            if let Some(stepped) = stepped {
                self.compacted(Ok(stepped))?;
            }
            Ok(())
        });
        if committed.is_err() {
            // The newest versions it recorded may not be in the file.
            self.history.forget_heads();
        }
        committed
    }

    /// Marks the file complete on its own (`FORMAT_VERSION`), durably: on close, once redb holds
    /// every record of the log.
    pub(crate) fn mark_complete(&self) -> Result<()> {
        guarded(&self.path, || {
            let mut tx = self.begin_write().map_err(storage)?;
            tx.set_durability(Durability::Immediate).map_err(storage)?;
            tx.set_quick_repair(true);
            {
                let mut meta = tx.open_table(META).map_err(storage)?;
                meta.insert("format", FORMAT_VERSION).map_err(storage)?;
                write_meta(&mut meta, &[]).map_err(storage)?;
            }
            tx.commit().map_err(storage)
        })
    }

    /// Closes the file (redb writes on close); a panic there is reported as in `commit`.
    ///
    /// `clean`: the engine's close lost nothing (every writer of the file has ended, its last
    /// checkpoint succeeded). Then, with the log in use, the file redb closed is checksummed
    /// whole, still under its locks, and the checksum recorded in the log's header (K15), so
    /// that the next open can skip redb's check of every page if the file is still byte for
    /// byte what this close left. A failure to record costs only that: the next open checks
    /// every page, as without a record.
    pub(crate) fn close(self, clean: bool) -> Result<()> {
        let Store {
            db,
            path,
            faults,
            locks,
            log_id,
            reader,
            ..
        } = self;
        // A read transaction still open would keep redb from closing the file.
        drop(reader);
        locks.keep();
        let closed = guarded(&path, || match db.close() {
            Ok(()) => Ok(true),
            // A write transaction outlives the close (none should): redb closes the file, and
            // lets go of its locks, when it ends.
            Err(redb::DatabaseError::TransactionInProgress) => Ok(false),
            Err(e) => Err(storage(e)),
        });
        if let (Ok(true), true, Some(id)) = (&closed, clean, log_id) {
            if let Err(e) = record_clean_close(&locks, &path, id, &faults) {
                log::warn!(
                    "{}: the clean close was not recorded, the next open checks every page: {e}",
                    path.display()
                );
            }
        }
        match closed {
            Ok(false) => {
                locks.leave_to_redb();
                Ok(())
            }
            closed => {
                let released = locks
                    .release()
                    .map_err(|e| Error::io("cannot unlock", &path, &e));
                closed.and(released).map(drop)
            }
        }
    }
}

/// Checksums the file redb has just closed (`locks`: its locks still held) and records it as
/// this session's clean close in its log (K15).
fn record_clean_close(
    locks: &CloseLocks,
    path: &Path,
    id: u64,
    faults: &StorageFaults,
) -> Result<()> {
    let cannot = |e: std::io::Error| Error::io("cannot read", path, &e);
    let len = locks.len().map_err(cannot)?;
    let crc = file_sum::crc_of(&|at, out| locks.read(at, out), len).map_err(cannot)?;
    wal::record_clean_close(path, wal::CleanClose { id, len, crc }, faults).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, Tenure, Txn};

    /// A tenure file at `revision`, crafted: one key written, then the meta row changed and
    /// resealed as a damaged-but-consistent or hostile file would have it.
    fn file_at(dir: &Path, revision: i64) -> PathBuf {
        let path = dir.join("db.tenure");
        let db = Tenure::open(&path).unwrap();
        db.put("k", "v", None).unwrap();
        db.close().unwrap();
        let raw = redb::Database::open(&path).unwrap();
        let tx = raw.begin_write().unwrap();
        {
            let mut meta = tx.open_table(META).unwrap();
            meta.insert("revision", revision).unwrap();
            write_meta(&mut meta, &[]).unwrap();
        }
        tx.commit().unwrap();
        path
    }

    fn assert_refused(r: crate::Result<impl std::fmt::Debug>, what: &str) {
        match r {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("i64::MAX"), "{what}: {m}"),
            other => panic!("{what}: expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn k7_a_file_at_the_last_revision_opens_refuses_every_write_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_at(dir.path(), i64::MAX);
        let db = Tenure::open(&path).unwrap();
        assert_eq!(db.revision().unwrap(), i64::MAX);
        assert_eq!(db.get("k").unwrap().unwrap().value, b"v");
        assert_refused(db.put("k2", "v", None), "put");
        assert_refused(db.delete("k"), "delete");
        assert_refused(db.delete_prefix(""), "delete_prefix");
        assert_refused(
            db.txn(Txn::new().then([crate::Op::put("t", "v", None)])),
            "txn",
        );
        let lease = db.grant(std::time::Duration::from_secs(60)).unwrap();
        assert_refused(db.revoke(lease), "revoke");
        db.close().unwrap();
        let db = Tenure::open(&path).unwrap();
        assert_eq!(db.revision().unwrap(), i64::MAX);
        assert_eq!(db.range("", None).unwrap().len(), 1, "nothing was written");
        db.close().unwrap();
    }

    #[test]
    fn k7_the_write_that_takes_the_last_revision_is_kept_and_the_next_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_at(dir.path(), i64::MAX - 1);
        let db = Tenure::open(&path).unwrap();
        assert_eq!(db.put("last", "v", None).unwrap(), i64::MAX);
        assert_refused(db.put("after", "v", None), "put after the last revision");
        db.close().unwrap();
        let db = Tenure::open(&path).unwrap();
        assert_eq!(db.revision().unwrap(), i64::MAX);
        assert_eq!(db.get("last").unwrap().unwrap().mod_revision, i64::MAX);
        assert!(db.get("after").unwrap().is_none());
        db.close().unwrap();
    }
}
