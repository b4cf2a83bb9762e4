//! The revision history on disk (SPEC K9, K10, K11, K16, K17): every revision of every key
//! until it is compacted, so that reads at a past revision and watches from one are answered
//! from the file, and memory holds only the present.
//!
//! - `tenure_version_rows`: the versions of consecutive (revision, key) pairs packed into rows
//!   (`version_rows`), each row keyed by its first pair: a version is the key's row as written
//!   at that revision, after the links to its earlier versions (`chain`); no value: a
//!   tombstone, the key deleted then. Keyed by revision, so a checkpoint appends its writes at
//!   the table's end instead of touching every page of a table ordered by key (BENCHMARKS 24),
//!   and packed, so that it inserts one row per [`version_rows::ROW_VERSIONS`] writes instead
//!   of one per write (BENCHMARKS 27).
//! - `tenure_deleted`: key → the revision of its last delete, for each key deleted now whose
//!   tombstone is still held: where a read finds the newest version of a key with no current
//!   row. A live key's newest version is its current row's `mod_revision`.
//! - the events (`events`): which key each write of each revision touched, in apply order
//!   (what a watch replays): one `tenure_changes` row per commit.
//! - `tenure_meta["compacted"]`: the last compaction; `["history"]`: the file keeps history
//!   (absent in files written before it: their present is seeded into it by the first commit).
//!
//! Files of formats 3 to 8 kept the history otherwise: [`upgrade`] converts them before
//! anything else writes them. 7 and 8 had one row per version (`tenure_versions`); 3 to 6
//! ordered it by key (`tenure_history`, and in 3 and 4 one event row per write,
//! `tenure_events`).
//!
//! Compaction at `c` walks the versions up to `c` in revision order: each removes the version
//! it replaced (superseded at `c`), a tombstone below `c` removes itself, and the events rows
//! wholly below `c` go. Removing a version rewrites its row without it (or removes the row
//! with its last version). What remains answers every read at `c` or later exactly as before;
//! no state crosses steps, so a pass cut by a crash is redone as it is.

use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::OnceLock;

use redb::{Durability, ReadableTable, TableDefinition, TableHandle, WriteTransaction};
use rustc_hash::FxHashMap;

use super::chain::{self, Hop, Links};
use super::codec::{decode, decode_mod_revision, encode_into, has_value};
use super::events::{self, Packer, CHANGES, LEGACY, LEGACY_NAME};
use super::seal::{seal, seal_in_place_at, unseal, unseal_at, write_meta, SEAL_LEN};
use super::snapshot::{HistoryTables, KeysTable, VersionsTable, View};
use super::version_rows::{self, Pending, Version};
use super::{guarded, storage, Store, KV, KV_NAME, META};
use crate::error::{Error, Result};
use crate::kv::range::KeyRange;
use crate::rows::Entry;
use crate::types::{Event, EventKind, KeyValue, LeaseId};

const VERSIONS_NAME: &str = "tenure_version_rows";
pub(super) const VERSIONS: TableDefinition<(i64, &[u8]), &[u8]> =
    TableDefinition::new(VERSIONS_NAME);
const DELETED_NAME: &str = "tenure_deleted";
pub(super) const DELETED: TableDefinition<&[u8], &[u8]> = TableDefinition::new(DELETED_NAME);
/// The history of formats 7 and 8, one row per version: (revision, key) → the version, sealed
/// (`upgrade`).
const SINGLE_NAME: &str = "tenure_versions";
const SINGLE: TableDefinition<(i64, &[u8]), &[u8]> = TableDefinition::new(SINGLE_NAME);
/// The history of formats 3 to 6, ordered by key: (key, revision) → the row (`upgrade`).
const KEYED_NAME: &str = "tenure_history";
const KEYED: TableDefinition<(&[u8], i64), &[u8]> = TableDefinition::new(KEYED_NAME);

type WriteVersions<'t> = redb::Table<'t, (i64, &'static [u8]), &'static [u8]>;

/// The meta rows about the history (a copy of the file, which has none, leaves them out).
pub(crate) const HISTORY_ROWS: [&str; 2] = ["history", "compacted"];

/// The formats whose history `upgrade` converts, each with the format it becomes.
const CONVERTED_FORMATS: [(i64, i64); 6] = [
    (3, super::FORMAT_VERSION),
    (5, super::FORMAT_VERSION),
    (7, super::FORMAT_VERSION),
    (4, super::FORMAT_LOGGED),
    (6, super::FORMAT_LOGGED),
    (8, super::FORMAT_LOGGED),
];

/// Whether a file of `format` keeps its history in a layout `upgrade` converts.
pub(crate) fn is_converted(format: i64) -> bool {
    CONVERTED_FORMATS.iter().any(|&(old, _)| old == format)
}

/// Appends to `buf` the version of `key` at `rev` as formats 7 and 8 stored it alone: its
/// links, then the codec's encoding of `e`, sealed (`seal`) under the pair, revision
/// big-endian then key.
fn push_single(buf: &mut Vec<u8>, rev: i64, key: &[u8], links: &Links, e: &Entry) {
    let start = buf.len();
    links.encode_into(rev, buf);
    encode_into(e, buf);
    seal_in_place_at(buf, start, SINGLE_NAME, &[&rev.to_be_bytes(), key]);
}

/// Seals the row payload `buf[start..]` whose first version is that of `key` at `rev`.
fn seal_row(buf: &mut Vec<u8>, start: usize, rev: i64, key: &[u8]) {
    seal_in_place_at(buf, start, VERSIONS_NAME, &[&rev.to_be_bytes(), key]);
}

/// The payload of the row stored under (`rev`, `key`), checked.
fn unseal_row<'a>(rev: i64, key: &[u8], stored: &'a [u8]) -> Result<&'a [u8]> {
    unseal_at(VERSIONS_NAME, &[&rev.to_be_bytes(), key], stored)
        .ok_or_else(|| undecodable_row(key, rev))
}

/// The versions of the row stored under (`rev`, `key`), checked.
fn open_row<'a>(rev: i64, key: &[u8], stored: &'a [u8]) -> Result<Vec<Version<'a>>> {
    version_rows::decode(unseal_row(rev, key, stored)?).map_err(|_| undecodable_row(key, rev))
}

/// Writes the row of `versions` (at least one, in order) under its first pair; `buf` is
/// scratch.
fn insert_row(
    table: &mut WriteVersions<'_>,
    versions: &[Version<'_>],
    buf: &mut Vec<u8>,
) -> Result<()> {
    let first = versions[0];
    buf.clear();
    version_rows::encode(versions.iter().copied(), buf);
    seal_row(buf, 0, first.rev, first.key);
    table
        .insert((first.rev, first.key), buf.as_slice())
        .map_err(storage)?;
    Ok(())
}

/// A row of `tenure_version_rows` read out: its first pair's revision and key, and its stored
/// bytes.
type StoredRow = (i64, Vec<u8>, Vec<u8>);

/// The row of `table` that holds the version of `key` at `rev` if any version does: the last
/// row at or before the pair.
fn row_at(
    table: &impl ReadableTable<(i64, &'static [u8]), &'static [u8]>,
    rev: i64,
    key: &[u8],
) -> Result<Option<StoredRow>> {
    let mut range = table
        .range::<(i64, &[u8])>(..=(rev, key))
        .map_err(storage)?;
    Ok(match range.next_back().transpose().map_err(storage)? {
        Some((k, v)) => {
            let (r, k) = k.value();
            Some((r, k.to_vec(), v.value().to_vec()))
        }
        None => None,
    })
}

/// Calls `f` with the stored bytes (links, then the row) of the version of `key` at `rev` in
/// `table`, if it holds one.
fn with_version<R>(
    table: &impl ReadableTable<(i64, &'static [u8]), &'static [u8]>,
    key: &[u8],
    rev: i64,
    f: impl FnOnce(&[u8]) -> Result<R>,
) -> Result<Option<R>> {
    let mut range = table
        .range::<(i64, &[u8])>(..=(rev, key))
        .map_err(storage)?;
    let Some((k, v)) = range.next_back().transpose().map_err(storage)? else {
        return Ok(None);
    };
    let (first_rev, first_key) = k.value();
    let payload = unseal_row(first_rev, first_key, v.value())?;
    match version_rows::find(payload, rev, key) {
        Ok(Some(bytes)) => f(bytes).map(Some),
        Ok(None) => Ok(None),
        Err(_) => Err(undecodable_row(first_key, first_rev)),
    }
}

/// The (revision, key) of the last version `table` holds.
fn last_pair(table: &WriteVersions<'_>) -> Result<Option<(i64, Vec<u8>)>> {
    let Some((k, v)) = table.last().map_err(storage)? else {
        return Ok(None);
    };
    let (rev, key) = k.value();
    let payload = unseal_row(rev, key, v.value())?;
    let mut last = None;
    for version in version_rows::versions(payload) {
        let version = version.map_err(|_| undecodable_row(key, rev))?;
        last = Some((version.rev, version.key.to_vec()));
    }
    last.map(Some).ok_or_else(|| undecodable_row(key, rev))
}

/// Stores the version `v`, which may lie within the span of a row the table holds (a version
/// rewritten, or one older than the table's last): into that row, replacing the version of
/// the same pair if the row holds one.
fn upsert(table: &mut WriteVersions<'_>, v: Version<'_>, buf: &mut Vec<u8>) -> Result<()> {
    let Some((rev, key, stored)) = row_at(table, v.rev, v.key)? else {
        return insert_row(table, &[v], buf);
    };
    let mut all = open_row(rev, &key, &stored)?;
    match all.binary_search_by(|x| x.cmp_at(v.rev, v.key)) {
        Ok(i) => all[i] = v,
        Err(i) => all.insert(i, v),
    }
    insert_row(table, &all, buf)
}

/// The links and row of the version of `key` at `rev` from its stored bytes; a storage error
/// worded as damage if they do not parse.
fn open_version(rev: i64, key: &[u8], bytes: &[u8]) -> Result<(Links, Entry)> {
    Links::decode(rev, bytes)
        .and_then(|(links, rest)| Some((links, decode(rest)?)))
        .ok_or_else(|| undecodable(key, rev))
}

/// Of the version of `key` at `rev`: the revision of the version it replaced, and whether it
/// is a tombstone.
fn version_outline(rev: i64, key: &[u8], bytes: &[u8]) -> Result<(Option<i64>, bool)> {
    chain::prev_and_rest(rev, bytes)
        .and_then(|(prev, rest)| Some((prev, !has_value(rest)?)))
        .ok_or_else(|| undecodable(key, rev))
}

/// The revision a `tenure_deleted` row holds.
fn open_deleted(key: &[u8], stored: &[u8]) -> Result<i64> {
    unseal(DELETED_NAME, key, stored)
        .and_then(|p| p.try_into().ok())
        .map(i64::from_le_bytes)
        .ok_or_else(|| {
            Error::storage(format!(
                "undecodable deleted-key row for key {:?}",
                String::from_utf8_lossy(key)
            ))
        })
}

/// The revision of the last write of a key whose current (`tenure_kv`) row is `stored`, if it
/// has a value (a bare name has no history). Not checked against its seal: redb just read it
/// for the write that replaces it, and a version it would misname is refused when read.
pub(super) fn present_revision(key: &[u8], stored: &[u8]) -> Result<Option<i64>> {
    stored
        .len()
        .checked_sub(SEAL_LEN)
        .and_then(|end| decode_mod_revision(&stored[..end]))
        .ok_or_else(|| {
            Error::storage(format!(
                "undecodable row for key {:?}",
                String::from_utf8_lossy(key)
            ))
        })
}

/// The revision of `key`'s newest version, the one decision of the write side and the read
/// side: its current row's last write (`current`, `tenure_kv`'s stored row) if it has a value,
/// else its last delete (`last_delete`: what `tenure_deleted` holds of it).
fn newest_version(
    key: &[u8],
    current: Option<&[u8]>,
    last_delete: impl FnOnce() -> Result<Option<i64>>,
) -> Result<Option<i64>> {
    match current {
        Some(stored) => match present_revision(key, stored)? {
            Some(rev) => Ok(Some(rev)),
            None => last_delete(),
        },
        None => last_delete(),
    }
}

/// The row of `key` at `rev` in the keyed history of formats 3 to 6.
fn open_keyed_row(key: &[u8], rev: i64, stored: &[u8]) -> Result<Entry> {
    let mut at = Vec::with_capacity(key.len() + 8);
    at.extend_from_slice(key);
    at.extend_from_slice(&rev.to_be_bytes());
    unseal(KEYED_NAME, &at, stored)
        .and_then(decode)
        .ok_or_else(|| undecodable(key, rev))
}

/// Versions a compaction step looks at in one write transaction: bounds how long it holds the
/// store (a writer without the log waits for at most one step).
pub(super) const STEP: usize = 4096;

/// The store's progress on history: whether this file keeps it, and how far the physical
/// compaction got. Touched only by the holder of `Shared::store`.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// The file has the `history` mark (checked by the first write).
    ready: Cell<bool>,
    /// The compaction the steps have finished (physically).
    done: Cell<i64>,
    /// The last version the running pass went through.
    cursor: RefCell<Option<(i64, Vec<u8>)>>,
    /// The newest version (revision, encoded links) of keys recent commits wrote, about
    /// [`KNOWN_HEADS`]: a write's links follow from its key's newest version, read from here
    /// instead of the file when the key was written lately (BENCHMARKS 25, 27). A transaction
    /// updates it as it writes ([`Recorder::open_with`]); one that fails empties it
    /// ([`Progress::forget_heads`]), so it only ever holds what the file holds. A compaction
    /// never removes a put's version.
    heads: RefCell<Heads>,
}

/// Key → the revision and encoded links of its newest version.
type Heads = FxHashMap<Vec<u8>, (i64, Vec<u8>)>;

/// How many keys' newest versions `Progress::heads` keeps between transactions (cleared by
/// the next transaction when it holds more: memory stays bounded whatever the number of keys).
const KNOWN_HEADS: usize = 1 << 16;

impl Progress {
    /// Empties the newest versions kept, after a transaction that updated them failed.
    pub(super) fn forget_heads(&self) {
        self.heads.borrow_mut().clear();
    }
}

/// The newest versions a recorder reads and updates: its own, or its store's.
enum HeadsOf<'t> {
    Own(Heads),
    Store(std::cell::RefMut<'t, Heads>),
}

impl std::ops::Deref for HeadsOf<'_> {
    type Target = Heads;
    fn deref(&self) -> &Heads {
        match self {
            HeadsOf::Own(h) => h,
            HeadsOf::Store(h) => h,
        }
    }
}

impl std::ops::DerefMut for HeadsOf<'_> {
    fn deref_mut(&mut self) -> &mut Heads {
        match self {
            HeadsOf::Own(h) => h,
            HeadsOf::Store(h) => h,
        }
    }
}

/// What a write found as its key's current row.
#[derive(Clone, Copy, Debug)]
pub(super) enum Present<'a> {
    /// `tenure_kv`'s stored row, if any.
    Row(Option<&'a [u8]>),
    /// A row this transaction wrote (and did not store: a later write of the key in it
    /// replaces it): the revision of its value's last write, `None` without a value or row.
    Written(Option<i64>),
}

/// The history tables of one write transaction, and the position in the revision being
/// written (events of one revision are numbered in apply order).
pub(super) struct Recorder<'t> {
    versions: WriteVersions<'t>,
    deleted: redb::Table<'t, &'static [u8], &'static [u8]>,
    changes: redb::Table<'t, (i64, u32), &'static [u8]>,
    /// The writes of this transaction not yet stored as rows.
    packer: Packer,
    /// The versions of this transaction not yet stored as rows (`flush`).
    pending: Pending,
    /// The newest version of each key this transaction (and, with `open_with`, recent ones)
    /// wrote: its revision and encoded links (the next version's links follow from them
    /// without a read).
    heads: HeadsOf<'t>,
    /// The encoded links of the version the row being built follows.
    links: Vec<u8>,
    /// The row being built.
    row: Vec<u8>,
    rev: i64,
    n: u32,
}

impl<'t> Recorder<'t> {
    pub(super) fn open(tx: &'t WriteTransaction) -> Result<Recorder<'t>> {
        Ok(Recorder {
            versions: tx.open_table(VERSIONS).map_err(storage)?,
            deleted: tx.open_table(DELETED).map_err(storage)?,
            changes: tx.open_table(CHANGES).map_err(storage)?,
            packer: Packer::default(),
            pending: Pending::default(),
            heads: HeadsOf::Own(Heads::default()),
            links: Vec::new(),
            row: Vec::new(),
            rev: 0,
            n: 0,
        })
    }

    /// A recorder that reads and updates the newest versions `progress` keeps for its store;
    /// if the transaction fails, the caller calls `Progress::forget_heads`.
    pub(super) fn open_with(
        tx: &'t WriteTransaction,
        progress: &'t Progress,
    ) -> Result<Recorder<'t>> {
        let mut rec = Recorder::open(tx)?;
        let mut heads = progress.heads.borrow_mut();
        if heads.len() > KNOWN_HEADS {
            heads.clear();
        }
        rec.heads = HeadsOf::Store(heads);
        Ok(rec)
    }

    fn event(&mut self, key: &[u8], rev: i64) -> Result<()> {
        if rev != self.rev {
            (self.rev, self.n) = (rev, 0);
        }
        self.packer.push(&mut self.changes, (rev, self.n), key)?;
        self.n += 1;
        Ok(())
    }

    /// Stores the versions and events recorded so far: rows for the ops of one commit (or one
    /// record of the log replayed). Event positions go on from where they were.
    pub(super) fn flush(&mut self) -> Result<()> {
        self.packer.flush(&mut self.changes)?;
        if self.pending.is_empty() {
            return Ok(());
        }
        let sorted = self.pending.sorted();
        // Versions past the table's last are appended as new rows; any other (a version
        // rewritten) goes into the row whose span holds it.
        let appended_from = match last_pair(&self.versions)? {
            Some((rev, key)) => sorted.partition_point(|v| v.cmp_at(rev, &key).is_le()),
            None => 0,
        };
        for &v in &sorted[..appended_from] {
            upsert(&mut self.versions, v, &mut self.row)?;
        }
        let mut rest = &sorted[appended_from..];
        while !rest.is_empty() {
            let (row, tail) = rest.split_at(version_rows::first_row_len(rest.iter().copied()));
            insert_row(&mut self.versions, row, &mut self.row)?;
            rest = tail;
        }
        self.pending.clear();
        Ok(())
    }

    /// Loads into `links` the encoded links of the version of `key` at `rev` from the file,
    /// which holds it.
    fn load_links(&mut self, key: &[u8], rev: i64) -> Result<()> {
        self.links.clear();
        let links = &mut self.links;
        let found = with_version(&self.versions, key, rev, |bytes| {
            let (_, rest) =
                chain::prev_and_rest(rev, bytes).ok_or_else(|| undecodable(key, rev))?;
            links.extend_from_slice(&bytes[..bytes.len() - rest.len()]);
            Ok(())
        })?;
        found.ok_or_else(|| missing(key, rev))
    }

    /// Starts `row` with the links of a new version of `key` at `rev`, whose newest version
    /// was at `prev`, and records the new version as the key's newest. The links follow from
    /// the newest version's, kept in `heads` (one lookup) or read from the file.
    fn start_row(&mut self, key: &[u8], rev: i64, prev: Option<i64>) -> Result<()> {
        self.row.clear();
        let order = |p: i64| {
            Error::storage(format!(
                "history of key {:?}: revision {rev} written after {p}",
                String::from_utf8_lossy(key)
            ))
        };
        if let Some(head) = self.heads.get_mut(key) {
            if let Some(p) = prev.filter(|&p| p == head.0) {
                match p.cmp(&rev) {
                    // The same write again (a replayed record, an attach): its links stay.
                    Ordering::Equal => self.row.extend_from_slice(&head.1),
                    Ordering::Less => {
                        chain::write_after(&head.1, p, rev, &mut self.row)
                            .ok_or_else(|| undecodable(key, p))?;
                        head.0 = rev;
                        head.1.clear();
                        head.1.extend_from_slice(&self.row);
                    }
                    Ordering::Greater => return Err(order(p)),
                }
                return Ok(());
            }
        }
        match prev {
            None => chain::write_first(&mut self.row),
            Some(p) if p == rev => {
                self.load_links(key, rev)?;
                self.row.extend_from_slice(&self.links);
            }
            Some(p) if p < rev => {
                self.load_links(key, p)?;
                chain::write_after(&self.links, p, rev, &mut self.row)
                    .ok_or_else(|| undecodable(key, p))?;
            }
            Some(p) => return Err(order(p)),
        }
        match self.heads.get_mut(key) {
            Some(head) => {
                head.0 = rev;
                head.1.clear();
                head.1.extend_from_slice(&self.row);
            }
            None => {
                self.heads.insert(key.to_vec(), (rev, self.row.clone()));
            }
        }
        Ok(())
    }

    /// Finishes `row` with `e` and adds it as the version of `key` at `rev` (stored by
    /// `flush`).
    fn insert(&mut self, key: &[u8], rev: i64, e: &Entry) -> Result<()> {
        encode_into(e, &mut self.row);
        self.pending.push(rev, key, &self.row);
        Ok(())
    }

    /// The newest version of `key` before a write that found `present` as its current row
    /// (`tenure_kv`'s stored row, if any): its last write, or else its last delete.
    /// A write makes the key live again: its `tenure_deleted` row goes.
    fn newest(&mut self, key: &[u8], present: Present<'_>) -> Result<Option<i64>> {
        let current = match present {
            Present::Row(row) => row,
            // A value's last write is the newest version; without one, the last delete is.
            Present::Written(Some(rev)) => return Ok(Some(rev)),
            Present::Written(None) => None,
        };
        newest_version(key, current, || {
            match self.deleted.remove(key).map_err(storage)? {
                Some(row) => Ok(Some(open_deleted(key, row.value())?)),
                None => Ok(None),
            }
        })
    }

    /// `key` written at `rev` as `e`; `present`: the current row it replaces.
    pub(super) fn put(
        &mut self,
        key: &[u8],
        rev: i64,
        e: &Entry,
        present: Present<'_>,
    ) -> Result<()> {
        let prev = self.newest(key, present)?;
        self.start_row(key, rev, prev)?;
        self.insert(key, rev, e)?;
        self.event(key, rev)
    }

    /// `key`, last written at `rev`, attached or detached (no revision moves): its version at
    /// `rev` takes the new lease, no event is added.
    pub(super) fn relabel(&mut self, key: &[u8], rev: i64, e: &Entry) -> Result<()> {
        self.start_row(key, rev, Some(rev))?;
        self.insert(key, rev, e)
    }

    /// `key` deleted at `rev`; `present`: the current row the delete removed.
    pub(super) fn tombstone(&mut self, key: &[u8], rev: i64, present: Present<'_>) -> Result<()> {
        let prev = self.newest(key, present)?;
        self.start_row(key, rev, prev)?;
        let none = Entry {
            data: None,
            lease: 0,
        };
        self.insert(key, rev, &none)?;
        let row = seal(DELETED_NAME, key, &rev.to_le_bytes());
        self.deleted.insert(key, row.as_slice()).map_err(storage)?;
        self.event(key, rev)
    }

    /// The first version of `key`, at `rev`: a file's present seeded into the history.
    fn seeded(&mut self, key: &[u8], rev: i64, e: &Entry) -> Result<()> {
        self.start_row(key, rev, None)?;
        self.insert(key, rev, e)
    }
}

/// Marks a new file as keeping history from revision 0.
pub(super) fn init(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(VERSIONS).map_err(storage)?;
    tx.open_table(DELETED).map_err(storage)?;
    tx.open_table(CHANGES).map_err(storage)?;
    let mut meta = tx.open_table(META).map_err(storage)?;
    meta.insert("history", 1).map_err(storage)?;
    meta.insert("compacted", 0).map_err(storage)?;
    Ok(())
}

/// The `compacted` a file's meta table says: its row, or for a file written before history
/// was kept, its revision (nothing older can be answered).
pub(super) fn compacted_of(
    meta: &impl ReadableTable<&'static str, i64>,
    revision: i64,
) -> std::result::Result<i64, redb::StorageError> {
    if meta.get("history")?.is_none() {
        return Ok(revision);
    }
    Ok(meta.get("compacted")?.map_or(0, |v| v.value()))
}

/// Converts the history of a file of formats 3 to 8 (7 and 8 one row per version; 3 to 6
/// ordered by key, events of 3 and 4 one row per write) to this build's, in `tx`, and gives
/// the file the format that says so (SPEC K16, K17). `true` if it did (the caller has no
/// history table open and rewrites nothing else of the meta table: its checksum is rewritten
/// here).
pub(super) fn upgrade(tx: &WriteTransaction) -> Result<bool> {
    let mut meta = tx.open_table(META).map_err(storage)?;
    let format = meta.get("format").map_err(storage)?.map(|v| v.value());
    let Some(&(_, now)) = CONVERTED_FORMATS
        .iter()
        .find(|(old, _)| Some(*old) == format)
    else {
        return Ok(false);
    };
    let tables: Vec<String> = tx
        .list_tables()
        .map_err(storage)?
        .map(|t| t.name().to_string())
        .collect();
    let has = |name: &str| tables.iter().any(|t| t == name);
    // Keyed by key: first into one row per version, as formats 7 and 8 kept it.
    if has(KEYED_NAME) {
        let keyed = tx.open_table(KEYED).map_err(storage)?;
        let mut versions = tx.open_table(SINGLE).map_err(storage)?;
        let mut deleted = tx.open_table(DELETED).map_err(storage)?;
        let mut row = Vec::new();
        // Each key's rows in revision order: one chain per key. A key whose last row is a
        // tombstone is deleted now.
        let mut last: Option<(Vec<u8>, i64, Links, bool)> = None;
        let mut ended = |last: Option<(Vec<u8>, i64, Links, bool)>| -> Result<()> {
            if let Some((key, rev, _, true)) = last {
                let stored = seal(DELETED_NAME, &key, &rev.to_le_bytes());
                deleted
                    .insert(key.as_slice(), stored.as_slice())
                    .map_err(storage)?;
            }
            Ok(())
        };
        for item in keyed.iter().map_err(storage)? {
            let (k, v) = item.map_err(storage)?;
            let (key, rev) = k.value();
            let e = open_keyed_row(key, rev, v.value())?;
            let links = match last.take() {
                Some((lk, lrev, llinks, _)) if lk == key => llinks.after(lrev),
                other => {
                    ended(other)?;
                    Links::first()
                }
            };
            row.clear();
            push_single(&mut row, rev, key, &links, &e);
            versions
                .insert((rev, key), row.as_slice())
                .map_err(storage)?;
            last = Some((key.to_vec(), rev, links, e.data.is_none()));
        }
        ended(last)?;
        drop(keyed);
        tx.delete_table(KEYED).map_err(storage)?;
    }
    // One row per version: packed into rows.
    if has(KEYED_NAME) || has(SINGLE_NAME) {
        pack_single(tx)?;
    } else {
        tx.open_table(VERSIONS).map_err(storage)?;
    }
    tx.open_table(DELETED).map_err(storage)?;
    if has(LEGACY_NAME) {
        // One events row per write of `tenure_events`, each under its own position: rows never
        // overlap those `tenure_changes` holds.
        let legacy = tx.open_table(LEGACY).map_err(storage)?;
        let mut changes = tx.open_table(CHANGES).map_err(storage)?;
        for item in legacy.iter().map_err(storage)? {
            let (k, v) = item.map_err(storage)?;
            let at = k.value();
            let key = events::legacy_key(at, v.value())?;
            let row = events::encode_row(at, [(at.0, key)]);
            changes.insert(at, row.as_slice()).map_err(storage)?;
        }
        drop(legacy);
        tx.delete_table(LEGACY).map_err(storage)?;
    } else {
        tx.open_table(CHANGES).map_err(storage)?;
    }
    meta.insert("format", now).map_err(storage)?;
    write_meta(&mut meta, &[]).map_err(storage)?;
    Ok(true)
}

/// Moves the versions of `tenure_versions` (one row each, formats 7 and 8) into rows of
/// `tenure_version_rows`, and drops the former. A version that does not unseal is damage
/// (`Corrupt` for the open), never dropped.
fn pack_single(tx: &WriteTransaction) -> Result<()> {
    let single = tx.open_table(SINGLE).map_err(storage)?;
    let mut versions = tx.open_table(VERSIONS).map_err(storage)?;
    let mut pending = Pending::default();
    let mut buf = Vec::new();
    let mut store = |pending: &mut Pending| -> Result<()> {
        let sorted = pending.sorted();
        if !sorted.is_empty() {
            insert_row(&mut versions, &sorted, &mut buf)?;
        }
        pending.clear();
        Ok(())
    };
    let (mut n, mut bytes) = (0, 0);
    for item in single.iter().map_err(storage)? {
        let (k, v) = item.map_err(storage)?;
        let (rev, key) = k.value();
        let payload = unseal_at(SINGLE_NAME, &[&rev.to_be_bytes(), key], v.value())
            .ok_or_else(|| undecodable(key, rev))?;
        pending.push(rev, key, payload);
        n += 1;
        bytes += version_rows::encoded_len(key, payload.len());
        if n == version_rows::ROW_VERSIONS || bytes >= version_rows::ROW_BYTES {
            store(&mut pending)?;
            (n, bytes) = (0, 0);
        }
    }
    store(&mut pending)?;
    drop(single);
    tx.delete_table(SINGLE).map_err(storage)?;
    Ok(())
}

/// Before the first write of this store (a commit or a compaction step), once: a file written
/// before history was kept gets its present as the history's first versions, compacted at its
/// revision. `true` if it changed a meta row (the caller rewrites the meta checksum).
pub(super) fn seed(tx: &WriteTransaction, progress: &Progress) -> Result<bool> {
    if progress.ready.get() {
        return Ok(false);
    }
    let mut changed = false;
    let mut meta = tx.open_table(META).map_err(storage)?;
    if meta.get("history").map_err(storage)?.is_none() {
        let revision = meta
            .get("revision")
            .map_err(storage)?
            .map_or(0, |v| v.value());
        let kv = tx.open_table(KV).map_err(storage)?;
        let mut rec = Recorder::open(tx)?;
        // The events in revision order (the rows of `tenure_changes` are), keys in key order
        // within one revision.
        let mut writes = Vec::new();
        for row in kv.iter().map_err(storage)? {
            let (k, v) = row.map_err(storage)?;
            let key = k.value();
            if let Some(e) = unseal(KV_NAME, key, v.value()).and_then(decode) {
                if let Some(d) = &e.data {
                    rec.seeded(key, d.mod_revision, &e)?;
                    writes.push((d.mod_revision, key.to_vec()));
                }
            }
        }
        writes.sort_unstable();
        for (rev, key) in &writes {
            rec.event(key, *rev)?;
        }
        rec.flush()?;
        meta.insert("history", 1).map_err(storage)?;
        meta.insert("compacted", revision).map_err(storage)?;
        changed = true;
    }
    progress.ready.set(true);
    Ok(changed)
}

fn kv_of(key: &[u8], e: Entry) -> Option<KeyValue> {
    let d = e.data?;
    Some(KeyValue {
        key: key.to_vec(),
        value: d.value,
        create_revision: d.create,
        mod_revision: d.mod_revision,
        version: d.version,
        lease: (e.lease != 0).then(|| LeaseId::new(e.lease)),
    })
}

fn undecodable(key: &[u8], rev: i64) -> Error {
    Error::storage(format!(
        "undecodable history row for key {:?} at revision {rev}",
        String::from_utf8_lossy(key)
    ))
}

fn undecodable_row(first_key: &[u8], first_rev: i64) -> Error {
    Error::storage(format!(
        "undecodable history row of the versions from key {:?} at revision {first_rev}",
        String::from_utf8_lossy(first_key)
    ))
}

fn missing(key: &[u8], rev: i64) -> Error {
    Error::storage(format!(
        "damaged history: no version of key {:?} at revision {rev}, which its chain names",
        String::from_utf8_lossy(key)
    ))
}

/// The tables a read at a past revision needs, in one read transaction.
struct Tables<'v> {
    tx: &'v redb::ReadTransaction,
    versions: &'v VersionsTable,
    opened: &'v HistoryTables,
}

/// `cell`'s table, opened from `tx` at the first call (two threads may both open it; one
/// keeps it).
fn opened<'c>(
    cell: &'c OnceLock<KeysTable>,
    tx: &redb::ReadTransaction,
    def: TableDefinition<'static, &'static [u8], &'static [u8]>,
) -> Result<&'c KeysTable> {
    if let Some(t) = cell.get() {
        return Ok(t);
    }
    let t = tx.open_table(def).map_err(storage)?;
    Ok(cell.get_or_init(|| t))
}

impl Tables<'_> {
    fn kv(&self) -> Result<&KeysTable> {
        opened(&self.opened.kv, self.tx, KV)
    }

    fn deleted(&self) -> Result<&KeysTable> {
        opened(&self.opened.deleted, self.tx, DELETED)
    }

    /// The revision of the newest version of `key` the history holds: its current row's last
    /// write, or its last delete.
    fn newest(&self, key: &[u8]) -> Result<Option<i64>> {
        let current = self.kv()?.get(key).map_err(storage)?;
        newest_version(key, current.as_ref().map(|row| row.value()), || match self
            .deleted()?
            .get(key)
            .map_err(storage)?
        {
            Some(row) => Ok(Some(open_deleted(key, row.value())?)),
            None => Ok(None),
        })
    }

    /// The version of `key` at `rev`, if the history holds it.
    fn version(&self, key: &[u8], rev: i64) -> Result<Option<(Links, Entry)>> {
        with_version(self.versions, key, rev, |bytes| {
            open_version(rev, key, bytes)
        })
    }

    /// The row of the version of `key` at `rev`, if the history holds it.
    fn entry(&self, key: &[u8], rev: i64) -> Result<Option<Entry>> {
        Ok(self.version(key, rev)?.map(|(_, e)| e))
    }

    /// The links of the version of `key` at `rev`, if the history holds it (its row is checked
    /// but not decoded: a walk only passes through).
    fn links(&self, key: &[u8], rev: i64) -> Result<Option<Links>> {
        with_version(self.versions, key, rev, |bytes| {
            match Links::decode(rev, bytes) {
                Some((links, _)) => Ok(links),
                None => Err(undecodable(key, rev)),
            }
        })
    }

    /// `key` as it was at `revision` (not below the compaction): its newest version at or
    /// before it, `None` for a tombstone or no version.
    ///
    /// `known`: a version of `key` the caller saw as its newest at some revision at or after
    /// `revision` (memory's last write): the walk starts there when the file holds it, which
    /// saves finding the newest. Later versions cannot answer for `revision`, and compaction
    /// keeps the newest version at or below its point, so that start gives the same answer.
    fn at(&self, key: &[u8], revision: i64, known: Option<i64>) -> Result<Option<KeyValue>> {
        if let Some(start) = known {
            if let Some(out) = self.walk_from(key, revision, start)? {
                return Ok(out);
            }
        }
        match self.newest(key)? {
            Some(head) => self
                .walk_from(key, revision, head)?
                .ok_or_else(|| missing(key, head)),
            None => Ok(None),
        }
    }

    /// `key` at `revision`, walking back from its version at `start`, a version that was its
    /// newest at or after `revision`; `None` when the history does not hold that version.
    fn walk_from(&self, key: &[u8], revision: i64, start: i64) -> Result<Option<Option<KeyValue>>> {
        if start <= revision {
            return Ok(self.entry(key, start)?.map(|e| kv_of(key, e)));
        }
        let Some(links) = self.links(key, start)? else {
            return Ok(None);
        };
        let found = chain::find(start, links, revision, |r| {
            Ok::<_, Error>(match self.links(key, r)? {
                Some(l) => Hop::Links(l),
                None => Hop::Missing,
            })
        })?
        .map_err(|why| {
            Error::storage(format!(
                "damaged history of key {:?}: {why}",
                String::from_utf8_lossy(key)
            ))
        })?;
        Ok(Some(match found {
            // Gone: a tombstone the compaction removed (the key did not exist then).
            Some(r) => self.entry(key, r)?.and_then(|e| kv_of(key, e)),
            None => None,
        }))
    }
}

impl View {
    /// The history's tables in this read transaction; `None` for a file without history.
    fn tables(&self) -> Result<Option<Tables<'_>>> {
        let opened = &self.history;
        let versions = match opened.versions.get() {
            Some(v) => v,
            None => {
                let v = match self.tx.open_table(VERSIONS) {
                    Ok(t) => Some(t),
                    Err(redb::TableError::TableDoesNotExist(_)) => None,
                    Err(e) => return Err(storage(e)),
                };
                opened.versions.get_or_init(|| v)
            }
        };
        Ok(versions.as_ref().map(|versions| Tables {
            tx: &self.tx,
            versions,
            opened,
        }))
    }

    /// The keys of `range` as they were at `revision`, in key order (SPEC K9); `known`: for a
    /// single key, a version that was its newest at or after `revision` (see `Tables::at`).
    pub(crate) fn range_at(
        &self,
        range: &KeyRange,
        revision: i64,
        known: Option<i64>,
    ) -> Result<Vec<KeyValue>> {
        let mut out = Vec::new();
        let Some(t) = self.tables()? else {
            return Ok(out);
        };
        if let Some(key) = range.single_key() {
            out.extend(t.at(key, revision, known)?);
            return Ok(out);
        }
        let Some((start, end)) = range.bounds() else {
            return Ok(out);
        };
        let bounds = (
            start.as_ref().map(Vec::as_slice),
            end.as_ref().map(Vec::as_slice),
        );
        // Every key with a version: those with a current row and those deleted now, merged
        // in key order.
        let mut live = t.kv()?.range::<&[u8]>(bounds).map_err(storage)?;
        let mut gone = t.deleted()?.range::<&[u8]>(bounds).map_err(storage)?;
        let next_key = |it: &mut redb::Range<'_, &'static [u8], &'static [u8]>| {
            it.next()
                .transpose()
                .map_err(storage)
                .map(|kv| kv.map(|(k, _)| k.value().to_vec()))
        };
        let (mut a, mut b) = (next_key(&mut live)?, next_key(&mut gone)?);
        loop {
            let key = match (&a, &b) {
                (None, None) => break,
                (Some(x), Some(y)) if x == y => {
                    let key = a.take().expect("some");
                    (a, b) = (next_key(&mut live)?, next_key(&mut gone)?);
                    key
                }
                (Some(x), Some(y)) if x < y => {
                    std::mem::replace(&mut a, next_key(&mut live)?).expect("some")
                }
                (Some(_), None) => std::mem::replace(&mut a, next_key(&mut live)?).expect("some"),
                _ => std::mem::replace(&mut b, next_key(&mut gone)?).expect("some"),
            };
            out.extend(t.at(&key, revision, None)?);
        }
        Ok(out)
    }

    /// The events of revisions `from..=to` on keys of `range`, in revision order and, within
    /// one, in apply order (SPEC K11, K16); with the previous key-value of each if `prev_kv`.
    pub(crate) fn events(
        &self,
        range: &KeyRange,
        from: i64,
        to: i64,
        prev_kv: bool,
    ) -> Result<Vec<Event>> {
        let mut out = Vec::new();
        let Some(t) = self.tables()? else {
            return Ok(out);
        };
        let changes = match self.tx.open_table(CHANGES) {
            Ok(c) => c,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(out),
            Err(e) => return Err(storage(e)),
        };
        events::for_each(&changes, from, to, |rev, key| {
            if !range.contains(key) {
                return Ok(());
            }
            let Some((links, e)) = t.version(key, rev)? else {
                return Err(missing(key, rev));
            };
            let prev = match links.prev().filter(|_| prev_kv) {
                // Gone only below the compaction, where etcd has no previous value either.
                Some(p) => t.version(key, p)?.and_then(|(_, e)| kv_of(key, e)),
                None => None,
            };
            out.push(match kv_of(key, e) {
                Some(kv) => Event {
                    kind: EventKind::Put,
                    kv,
                    prev_kv: prev,
                },
                None => Event {
                    kind: EventKind::Delete,
                    kv: KeyValue {
                        key: key.to_vec(),
                        mod_revision: rev,
                        ..KeyValue::default()
                    },
                    prev_kv: prev,
                },
            });
            Ok(())
        })?;
        Ok(out)
    }
}

impl Store {
    /// One bounded step of the physical compaction (SPEC K10, K17); `true` while there is more
    /// to do. Reads the compaction point from the file, so only a compaction the file holds
    /// is carried out.
    pub(crate) fn compact_step(&self) -> Result<bool> {
        let stepped = guarded(&self.path, || {
            let mut tx = self.begin_write().map_err(storage)?;
            let stepped = self.compact_within(&tx, STEP, Within::Own)?;
            if matches!(stepped, Stepped::Idle) {
                tx.abort().map_err(storage)?;
                return Ok(stepped);
            }
            // A step before the pass's last need not reach the disk by itself: lost in a
            // crash, it is redone (the file's `compacted` is durable since `compact`), and the
            // next durable commit (a checkpoint, or the pass's last step) carries it. One
            // fsync per pass, not per step, leaves the disk to the log's appends (SPEC K10).
            if matches!(stepped, Stepped::More { .. }) {
                tx.set_durability(Durability::None).map_err(storage)?;
            }
            tx.commit().map_err(storage)?;
            Ok(stepped)
        });
        self.compacted(stepped)
    }

    /// The compaction's work in `tx`, about `budget` versions (none if the file's compaction
    /// is done); `tx` commits it, then `compacted` records it. The caller has no table of the
    /// history open in `tx`.
    pub(super) fn compact_within(
        &self,
        tx: &WriteTransaction,
        budget: usize,
        within: Within,
    ) -> Result<Stepped> {
        let p = &self.history;
        let target = tx
            .open_table(META)
            .map_err(storage)?
            .get("compacted")
            .map_err(storage)?
            .map_or(0, |v| v.value());
        if target <= p.done.get() {
            return Ok(Stepped::Idle);
        }
        if seed(tx, p)? {
            let mut meta = tx.open_table(META).map_err(storage)?;
            write_meta(&mut meta, &[]).map_err(storage)?;
        }
        self.compact_versions(tx, target, budget, within)
    }

    /// Records the compaction work of a transaction once it committed (`stepped`) or failed;
    /// `true` while there is more to do.
    pub(super) fn compacted(&self, stepped: Result<Stepped>) -> Result<bool> {
        let p = &self.history;
        let stepped = match stepped {
            Ok(stepped) => stepped,
            Err(e) => {
                // Nothing of the step was committed: its first write is still to come.
                p.ready.set(false);
                return Err(e);
            }
        };
        match stepped {
            Stepped::Idle => Ok(false),
            Stepped::More { cursor } => {
                *p.cursor.borrow_mut() = cursor;
                Ok(true)
            }
            Stepped::Finished { target } => {
                // The next compaction starts over: versions kept by this one may be superseded
                // by then.
                p.done.set(target);
                *p.cursor.borrow_mut() = None;
                Ok(false)
            }
        }
    }

    /// The versions of one step, in (revision, key) order from the cursor: about `budget` of
    /// them at or below `target`. Each removes the version it replaced; a tombstone below
    /// `target` removes itself (and the key's `tenure_deleted` row, if it is its last delete).
    /// Then the events rows wholly below `target`, as many as the budget allows.
    fn compact_versions(
        &self,
        tx: &WriteTransaction,
        target: i64,
        budget: usize,
        within: Within,
    ) -> Result<Stepped> {
        let p = &self.history;
        let mut versions = tx.open_table(VERSIONS).map_err(storage)?;
        let mut deleted = tx.open_table(DELETED).map_err(storage)?;
        let mut changes = tx.open_table(CHANGES).map_err(storage)?;
        let cursor = p.cursor.borrow().clone();
        // Reads first (a step decides on the rows as they were before it), then the removals.
        let gathered = (|| -> Result<(Vec<Walked>, bool)> {
            // From the row that holds the cursor's version (or would), past that version.
            let first = match &cursor {
                Some((rev, key)) => row_at(&versions, *rev, key)?.map(|(r, k, _)| (r, k)),
                None => None,
            };
            let lower = match &first {
                Some((rev, key)) => Bound::Included((*rev, key.as_slice())),
                None => Bound::Unbounded,
            };
            let mut seen = Vec::new();
            for item in versions
                .range::<(i64, &[u8])>((lower, Bound::Unbounded))
                .map_err(storage)?
            {
                let (k, v) = item.map_err(storage)?;
                let (row_rev, row_key) = k.value();
                let payload = unseal_row(row_rev, row_key, v.value())?;
                for version in version_rows::versions(payload) {
                    let Version { rev, key, bytes } =
                        version.map_err(|_| undecodable_row(row_key, row_rev))?;
                    if cursor
                        .as_ref()
                        .is_some_and(|(r, k)| (rev, key) <= (*r, k.as_slice()))
                    {
                        continue;
                    }
                    if rev > target {
                        return Ok((seen, true));
                    }
                    if seen.len() >= budget {
                        return Ok((seen, false));
                    }
                    let (prev, tombstone) = version_outline(rev, key, bytes)?;
                    seen.push((rev, key.to_vec(), prev, tombstone));
                }
            }
            Ok((seen, true))
        })();
        let (seen, walked) = match gathered {
            Ok(g) => g,
            // A row the step cannot read, before it changed anything: in a checkpoint, the
            // compaction is left to the compactor's own steps, which report it, and the
            // checkpoint's writes commit.
            Err(_) if within == Within::Checkpoint => return Ok(Stepped::Idle),
            Err(e) => return Err(e),
        };
        // The versions this step frees: each one a version it walked replaced, and its
        // tombstones below `target`.
        let mut freed: Vec<(i64, &[u8])> = seen
            .iter()
            .filter_map(|(_, key, prev, _)| prev.map(|p| (p, key.as_slice())))
            .chain(
                seen.iter()
                    .filter(|(rev, _, _, tombstone)| *tombstone && *rev < target)
                    .map(|(rev, key, ..)| (*rev, key.as_slice())),
            )
            .collect();
        freed.sort_unstable();
        freed.dedup();
        match remove_versions(&mut versions, &freed) {
            Ok(()) => {}
            // A row it cannot read: rows rewritten so far stand (each alone is right), the
            // rest is left to the compactor's own steps, which walk these versions again and
            // report it; the checkpoint's writes commit.
            Err(_) if within == Within::Checkpoint => return Ok(Stepped::Idle),
            Err(e) => return Err(e),
        }
        for (rev, key, _, tombstone) in &seen {
            if *tombstone && *rev < target {
                let last = match deleted.get(key.as_slice()).map_err(storage)? {
                    Some(row) => Some(open_deleted(key, row.value())?),
                    None => None,
                };
                if last == Some(*rev) {
                    deleted.remove(key.as_slice()).map_err(storage)?;
                }
            }
        }
        // The events rows whose writes are all below `target` (no watch starts there).
        let mut events_walked = false;
        for _ in 0..budget.div_ceil(64).max(1) {
            let first = changes
                .first()
                .map_err(storage)?
                .map(|(k, v)| (k.value(), v.value().to_vec()));
            let Some((id, stored)) = first else {
                events_walked = true;
                break;
            };
            let below = match events::decode_row(id, &stored) {
                Ok(writes) => writes.last().is_none_or(|&(rev, _)| rev < target),
                Err(_) if within == Within::Checkpoint => return Ok(Stepped::Idle),
                Err(e) => return Err(e),
            };
            if !below {
                events_walked = true;
                break;
            }
            changes.remove(id).map_err(storage)?;
        }
        Ok(if walked && events_walked {
            Stepped::Finished { target }
        } else {
            Stepped::More {
                cursor: seen
                    .last()
                    .map(|(rev, key, ..)| (*rev, key.clone()))
                    .or(cursor),
            }
        })
    }
}

/// Removes the versions `freed` (sorted): each row that holds some is rewritten without them,
/// or removed with its last version. Where they lie close together, one sweep of their rows
/// (redb's `retain_in`, which removes in place as it walks); the rest row by row. A step of a
/// busy file frees most versions of a revision span: one sweep costs far less than seeking
/// each row (BENCHMARKS 25, 27).
fn remove_versions(versions: &mut WriteVersions<'_>, freed: &[(i64, &[u8])]) -> Result<()> {
    // The first version from which on the span of revisions is at most `SWEEP` per version:
    // the sweep visits few rows it keeps.
    const SWEEP: i64 = 4;
    let Some(&(last, _)) = freed.last() else {
        return Ok(());
    };
    let dense = (0..freed.len())
        .find(|&i| last - freed[i].0 <= SWEEP * (freed.len() - i) as i64)
        .unwrap_or(freed.len());
    remove_row_by_row(versions, &freed[..dense])?;
    let swept = &freed[dense..];
    let (Some(&(first_rev, first_key)), Some(&end)) = (swept.first(), swept.last()) else {
        return Ok(());
    };
    // From the row that holds the first version.
    let start = row_at(versions, first_rev, first_key)?
        .map_or((first_rev, first_key.to_vec()), |(r, k, _)| (r, k));
    let mut rewritten: Vec<(i64, Vec<u8>, Vec<u8>)> = Vec::new();
    let mut damaged = None;
    versions
        .retain_in((start.0, start.1.as_slice())..=end, |(rev, key), stored| {
            let all = match open_row(rev, key, stored) {
                Ok(all) => all,
                Err(e) => {
                    damaged.get_or_insert(e);
                    return true;
                }
            };
            let kept = version_rows::without(&all, swept);
            if kept.len() == all.len() {
                return true;
            }
            if let Some(first) = kept.first() {
                let mut buf = Vec::new();
                version_rows::encode(kept.iter().copied(), &mut buf);
                seal_row(&mut buf, 0, first.rev, first.key);
                rewritten.push((first.rev, first.key.to_vec(), buf));
            }
            false
        })
        .map_err(storage)?;
    if let Some(e) = damaged {
        return Err(e);
    }
    for (rev, key, row) in &rewritten {
        versions
            .insert((*rev, key.as_slice()), row.as_slice())
            .map_err(storage)?;
    }
    Ok(())
}

/// [`remove_versions`] of versions far apart: each row that holds some found on its own.
fn remove_row_by_row(versions: &mut WriteVersions<'_>, freed: &[(i64, &[u8])]) -> Result<()> {
    let mut buf = Vec::new();
    let mut i = 0;
    while let Some(&(rev, key)) = freed.get(i) {
        let Some((row_rev, row_key, stored)) = row_at(versions, rev, key)? else {
            i += 1; // before every row: a version the table does not hold
            continue;
        };
        // The row's span ends where the next row begins.
        let next = versions
            .range::<(i64, &[u8])>((
                Bound::Excluded((row_rev, row_key.as_slice())),
                Bound::Unbounded,
            ))
            .map_err(storage)?
            .next()
            .transpose()
            .map_err(storage)?
            .map(|(k, _)| {
                let (r, k) = k.value();
                (r, k.to_vec())
            });
        let end = match &next {
            Some((r, k)) => i + freed[i..].partition_point(|&at| at < (*r, k.as_slice())),
            None => freed.len(),
        };
        let gone = &freed[i..end];
        i = end;
        let all = open_row(row_rev, &row_key, &stored)?;
        let kept = version_rows::without(&all, gone);
        if kept.len() == all.len() {
            continue;
        }
        if kept
            .first()
            .is_none_or(|v| v.cmp_at(row_rev, &row_key) != Ordering::Equal)
        {
            versions
                .remove((row_rev, row_key.as_slice()))
                .map_err(storage)?;
        }
        if !kept.is_empty() {
            insert_row(versions, &kept, &mut buf)?;
        }
    }
    Ok(())
}

/// A version a compaction step walked: its revision, key, the revision of the version it
/// replaced, and whether it is a tombstone.
type Walked = (i64, Vec<u8>, Option<i64>, bool);

/// Whose transaction a compaction step is part of.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Within {
    /// Its own (the compactor's, `wait_compacted`'s): any failure fails it.
    Own,
    /// A checkpoint's: a row it cannot read leaves the compaction to the compactor instead of
    /// failing the checkpoint's writes.
    Checkpoint,
}

/// What a compaction step did.
pub(super) enum Stepped {
    /// Nothing to do: the file's compaction is done.
    Idle,
    /// A step committed, more follow: the pass resumes after `cursor`.
    More { cursor: Option<(i64, Vec<u8>)> },
    /// The compaction at `target` is done.
    Finished { target: i64 },
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::{Data, StoreOp};
    use crate::store::FORMAT_VERSION;
    use redb::{ReadableDatabase, ReadableTableMetadata};

    const KEYS: usize = 150;

    fn key(rev: i64, i: usize) -> Vec<u8> {
        format!("k{:03}", (rev as usize * 100 + i) % KEYS).into_bytes()
    }

    fn entry(rev: i64, create: i64) -> Entry {
        Entry {
            data: Some(Data {
                value: format!("v{rev}").into_bytes(),
                create,
                mod_revision: rev,
                version: 1,
            }),
            lease: 0,
        }
    }

    fn count(store: &Store, def: TableDefinition<'_, impl redb::Key + 'static, &[u8]>) -> usize {
        let tx = store.db.begin_read().unwrap();
        tx.open_table(def).unwrap().len().unwrap() as usize
    }

    /// The versions `tenure_version_rows` holds, checked to be in order across rows.
    fn held(store: &Store) -> usize {
        let tx = store.db.begin_read().unwrap();
        let mut all: Vec<(i64, Vec<u8>)> = Vec::new();
        for row in tx.open_table(VERSIONS).unwrap().iter().unwrap() {
            let (k, v) = row.unwrap();
            let (rev, key) = k.value();
            let versions = open_row(rev, key, v.value()).unwrap();
            assert_eq!((versions[0].rev, versions[0].key), (rev, key));
            all.extend(versions.iter().map(|v| (v.rev, v.key.to_vec())));
        }
        assert!(all.windows(2).all(|w| w[0] < w[1]), "rows overlap");
        all.len()
    }

    /// The writes `tenure_changes` lists.
    fn writes(store: &Store) -> Vec<(i64, Vec<u8>)> {
        let tx = store.db.begin_read().unwrap();
        let changes = tx.open_table(CHANGES).unwrap();
        let mut out = Vec::new();
        for row in changes.iter().unwrap() {
            let (k, v) = row.unwrap();
            for (rev, key) in events::decode_row(k.value(), v.value()).unwrap() {
                out.push((rev, key.to_vec()));
            }
        }
        out
    }

    /// A new store at `path`, through the store's own backend (which keeps the file's locks
    /// for its close).
    fn new_store(path: &std::path::Path) -> Store {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .unwrap();
        let (backend, locks) =
            super::super::files::WriteBackend::new(super::super::FaultyBackend {
                file: redb::backends::FileBackend::new(file).unwrap(),
                faults: Default::default(),
            });
        let db = redb::Builder::new().create_with_backend(backend).unwrap();
        super::super::init(&db).unwrap();
        Store {
            db,
            path: path.to_path_buf(),
            faults: Default::default(),
            history: Progress::default(),
            locks,
            log_id: None,
            reader: Default::default(),
        }
    }

    /// A store over a file of revisions 1..=100, 100 puts each over 150 keys (the first 10
    /// revisions also delete `gone`), compacted at 100, none of it physically.
    fn compacted_fixture(dir: &tempfile::TempDir) -> Store {
        let path = dir.path().join("steps.redb");
        let store = new_store(&path);
        let tx = store.db.begin_write().unwrap();
        {
            let mut kv = tx.open_table(KV).unwrap();
            let mut rec = Recorder::open(&tx).unwrap();
            for rev in 1..=100i64 {
                for i in 0..100 {
                    let k = key(rev, i);
                    let e = entry(rev, 1);
                    let row = super::super::sealed_key_row(&k, &e);
                    let old = kv.insert(k.as_slice(), row.as_slice()).unwrap();
                    rec.put(&k, rev, &e, Present::Row(old.as_ref().map(|o| o.value())))
                        .unwrap();
                }
                rec.flush().unwrap();
            }
            let mut meta = tx.open_table(META).unwrap();
            for (row, v) in [("compacted", 100), ("revision", 100)] {
                meta.insert(row, v).unwrap();
            }
            write_meta(&mut meta, &[]).unwrap();
        }
        tx.commit().unwrap();
        assert_eq!(held(&store), 10_000);
        store
    }

    #[test]
    fn k17_each_compaction_step_is_bounded_and_the_pass_keeps_one_version_per_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = compacted_fixture(&dir);
        let mut steps = 0;
        let mut left = 10_000;
        loop {
            let more = store.compact_step().unwrap();
            steps += 1;
            let now = held(&store);
            // Each version looked at removes at most the one it replaced and itself.
            assert!(left - now <= 2 * STEP, "{left} → {now}");
            left = now;
            if !more {
                break;
            }
        }
        assert!(steps >= 3, "{steps} steps");
        assert_eq!(left, KEYS, "one version per key");
        // Revision 100's events only (the compaction keeps its own revision).
        let kept = writes(&store);
        assert_eq!(kept.len(), 100);
        assert!(kept.iter().all(|(rev, _)| *rev == 100));
        let tx = store.db.begin_read().unwrap();
        let meta = tx.open_table(META).unwrap();
        assert_eq!(meta.get("format").unwrap().unwrap().value(), FORMAT_VERSION);
    }

    #[test]
    fn k10_a_checkpoint_compacts_more_writes_than_it_brings() {
        // The compactor's steps come between checkpoints: at one step per checkpoint of a
        // region's writes, history grew for as long as writes came. Each checkpoint does at
        // least its own share.
        let dir = tempfile::tempdir().unwrap();
        let store = compacted_fixture(&dir);
        let before = held(&store);
        let put = |rev: i64| StoreOp::PutKey(format!("new{rev}").into_bytes(), entry(rev, rev));
        let ops: Vec<StoreOp> = (101..101 + STEP as i64).map(put).collect();
        store.commit(&ops, 100 + STEP as i64, 1, Some(1)).unwrap();
        let after = held(&store);
        // The checkpoint added STEP versions and looked at 2 × STEP old ones, each removing
        // the one it replaced (the first of each key replaced none).
        assert!(
            before + STEP - after >= 2 * STEP - KEYS,
            "{before} versions before the checkpoint, {after} after"
        );
        // A commit without the log (its ops are one group commit, not a region) leaves the
        // compaction to the compactor.
        let rev = 101 + STEP as i64;
        store.commit(&[put(rev)], rev, 1, None).unwrap();
        assert_eq!(held(&store), after + 1);
    }

    #[test]
    fn k9_a_commit_writing_a_key_many_times_keeps_every_version_and_stores_the_last_row() {
        // A checkpoint brings a region in which a key is written again and again: only its
        // last write reaches `tenure_kv`, and the digests still hold (`load` checks them).
        let dir = tempfile::tempdir().unwrap();
        let store = new_store(&dir.path().join("rewritten.redb"));
        let put = |k: &str, rev: i64, create: i64| {
            StoreOp::PutKey(k.as_bytes().to_vec(), entry(rev, create))
        };
        let ops = vec![
            StoreOp::PutLease {
                id: 7,
                ttl: 60_000_000_000,
                remaining: 60_000_000_000,
                wall_ms: 0,
            },
            put("k", 1, 1),
            put("j", 2, 2),
            put("k", 3, 1),
            StoreOp::DelKeyAt(b"k".to_vec(), 4),
            put("k", 5, 5),
            StoreOp::LeaseKey(b"k".to_vec(), {
                let mut e = entry(5, 5);
                e.lease = 7;
                e
            }),
            StoreOp::DelKeyAt(b"j".to_vec(), 6),
        ];
        store.commit(&ops, 6, 8, Some(1)).unwrap();
        let (loaded, _) = super::super::load(&store.db, &store.path).unwrap().unwrap();
        let keys: Vec<(Vec<u8>, i64, i64)> = loaded
            .keys
            .iter()
            .map(|(k, e)| (k.clone(), e.data.as_ref().unwrap().mod_revision, e.lease))
            .collect();
        assert_eq!(keys, [(b"k".to_vec(), 5, 7)]);
        let k = b"k".as_slice();
        let at = |rev| read_at(&store, k, rev, None);
        assert_eq!(
            (at(1), at(2), at(3), at(4), at(5), at(6)),
            (Some(1), Some(1), Some(3), None, Some(5), Some(5))
        );
        assert_eq!(read_at(&store, b"j", 5, None), Some(2));
        assert_eq!(read_at(&store, b"j", 6, None), None);
        assert_eq!(held(&store), 6, "every version, the relabeled one once");
        let lease_at_5 = store
            .view()
            .unwrap()
            .range_at(&KeyRange::new(k, b""), 5, None)
            .unwrap()[0]
            .lease;
        assert_eq!(lease_at_5, Some(LeaseId::new(7)));
        assert_eq!(count(&store, DELETED), 1, "j deleted now; k live again");
    }

    /// Writes `k`'s `writes` (revision, put or delete), each put creating the key anew after
    /// a delete, through the recorder as a checkpoint does.
    fn write_history(store: &Store, k: &[u8], writes: &[(i64, bool)]) {
        let tx = store.db.begin_write().unwrap();
        {
            let mut kv = tx.open_table(KV).unwrap();
            let mut rec = Recorder::open(&tx).unwrap();
            let mut create = 0;
            for &(rev, put) in writes {
                if put {
                    if create == 0 {
                        create = rev;
                    }
                    let e = entry(rev, create);
                    let row = super::super::sealed_key_row(k, &e);
                    let old = kv.insert(k, row.as_slice()).unwrap();
                    rec.put(k, rev, &e, Present::Row(old.as_ref().map(|o| o.value())))
                        .unwrap();
                } else {
                    create = 0;
                    let old = kv.remove(k).unwrap();
                    rec.tombstone(k, rev, Present::Row(old.as_ref().map(|o| o.value())))
                        .unwrap();
                }
                rec.flush().unwrap();
            }
        }
        tx.commit().unwrap();
    }

    /// The mod revision of `k` at `at` in `store`'s history, entered at `known` if given.
    fn read_at(store: &Store, k: &[u8], at: i64, known: Option<i64>) -> Option<i64> {
        let view = store.view().unwrap();
        view.range_at(&KeyRange::new(k, b""), at, known)
            .unwrap()
            .into_iter()
            .next()
            .map(|kv| kv.mod_revision)
    }

    #[test]
    fn k9_a_read_entered_at_a_version_memory_knew_answers_as_one_from_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let store = new_store(&dir.path().join("known.redb"));
        let k = b"known".as_slice();
        // put 1, put 2, put 3, delete 4, put 5, put 6: 20 versions make the walk hop.
        let mut writes = vec![(1, true), (2, true), (3, true), (4, false)];
        writes.extend((5..=24).map(|rev| (rev, true)));
        write_history(&store, k, &writes);
        let next_after = |rev: i64| writes.iter().map(|w| w.0).find(|&r| r > rev);
        for at in 0..=24 {
            let want = read_at(&store, k, at, None);
            // Memory knew a put as the key's newest at some revision at or after `at`; 99 is a
            // write the file does not hold yet (the read falls back to the file's newest).
            let known = writes.iter().filter(|w| w.1).map(|w| w.0).chain([99]);
            for start in known.filter(|&r| r == 99 || next_after(r).is_none_or(|n| n > at)) {
                assert_eq!(
                    read_at(&store, k, at, Some(start)),
                    want,
                    "at {at} from {start}"
                );
            }
        }
        assert_eq!(read_at(&store, k, 3, Some(24)), Some(3));
        assert_eq!(read_at(&store, k, 4, Some(24)), None);
    }

    #[test]
    fn k9_reads_of_the_past_share_a_view_while_it_covers_them_until_the_store_writes() {
        use super::super::Covers;
        let dir = tempfile::tempdir().unwrap();
        let store = new_store(&dir.path().join("shared.redb"));
        let k = b"k".as_slice();
        write_history(&store, k, &[(1, true), (2, true)]);
        let covers = |revision, relabels| Covers { revision, relabels };
        let first = store.history_view(covers(2, 0), covers(2, 0)).unwrap();
        let same = store.history_view(covers(1, 0), covers(9, 9)).unwrap();
        assert!(std::sync::Arc::ptr_eq(&first, &same));
        // A later revision, or a relabel since, is not covered: a new view, kept from then on.
        let later = store.history_view(covers(3, 0), covers(3, 0)).unwrap();
        assert!(!std::sync::Arc::ptr_eq(&first, &later));
        let relabeled = store.history_view(covers(3, 1), covers(3, 1)).unwrap();
        assert!(!std::sync::Arc::ptr_eq(&later, &relabeled));
        assert!(std::sync::Arc::ptr_eq(
            &relabeled,
            &store.history_view(covers(2, 1), covers(2, 1)).unwrap()
        ));
        // A write drops the kept view; one still in use reads what it read before.
        let put = StoreOp::PutKey(k.to_vec(), entry(3, 1));
        store.commit(&[put], 3, 1, None).unwrap();
        assert!(store.reader.borrow().is_none());
        let at = |view: &View, rev| {
            view.range_at(&KeyRange::new(k, b""), rev, None)
                .unwrap()
                .first()
                .map(|kv| kv.mod_revision)
        };
        assert_eq!(at(&relabeled, 3), Some(2));
        let fresh = store.history_view(covers(3, 1), covers(3, 1)).unwrap();
        assert_eq!(at(&fresh, 3), Some(3));
    }

    #[test]
    fn k17_a_deleted_key_is_found_through_its_tombstone_and_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = new_store(&dir.path().join("gone.redb"));
        let k = b"gone".as_slice();
        // put 1, put 2, delete 3, put 4, delete 5
        write_history(
            &store,
            k,
            &[(1, true), (2, true), (3, false), (4, true), (5, false)],
        );
        let read = |at: i64| read_at(&store, k, at, None);
        let all = [None, Some(1), Some(2), None, Some(4), None];
        for (at, want) in all.iter().enumerate() {
            assert_eq!(read(at as i64), *want, "at {at}");
        }
        assert_eq!(count(&store, DELETED), 1);
        // Compacted at 4: the delete at 3 and what it replaced go; 4 and 5 stay.
        let tx = store.db.begin_write().unwrap();
        tx.open_table(META).unwrap().insert("compacted", 4).unwrap();
        tx.commit().unwrap();
        while store.compact_step().unwrap() {}
        assert_eq!(held(&store), 2);
        assert_eq!((read(4), read(5)), (Some(4), None));
        // Compacted at 6: the delete at 5 is below it and goes with its deleted-key row.
        let tx = store.db.begin_write().unwrap();
        tx.open_table(META).unwrap().insert("compacted", 6).unwrap();
        tx.commit().unwrap();
        while store.compact_step().unwrap() {}
        assert_eq!((held(&store), count(&store, DELETED)), (0, 0));
    }
}
