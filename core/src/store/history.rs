//! The revision history on disk (SPEC K9, K10, K11, K16, K17): every revision of every key
//! until it is compacted, so that reads at a past revision and watches from one are answered
//! from the file, and memory holds only the present.
//!
//! - `tenure_history`: (key, revision) → the key's row as written at that revision (`codec`;
//!   no value: a tombstone, the key deleted then).
//! - the events (`events`): which key each write of each revision touched, in apply order
//!   (what a watch replays, what the compaction walks): one `tenure_changes` row per commit,
//!   and in files written before those rows, `tenure_events`, one row per write.
//! - `tenure_meta["compacted"]`: the last compaction; `["history"]`: the file keeps history
//!   (absent in files written before it: their present is seeded into it by the first commit).
//!
//! Compaction at `c` removes, in bounded steps, every history row below `c` that a later row
//! at or below `c` supersedes, and the tombstones below `c` with their events: what remains
//! answers every read at `c` or later exactly as before.

use std::cell::Cell;
use std::ops::Bound;

use redb::{
    Durability, ReadableTable, ReadableTableMetadata, TableDefinition, TableHandle,
    WriteTransaction,
};

use super::codec::{decode, encode_into, encoded_len};
use super::events::{self, Packer, Position, CHANGES, LEGACY, LEGACY_NAME};
use super::seal::{seal_in_place_at, unseal, write_meta, SEAL_LEN};
use super::snapshot::View;
use super::{guarded, storage, Store, KV, KV_NAME, META, PER_WRITE_EVENTS};
use crate::error::{Error, Result};
use crate::kv::range::KeyRange;
use crate::rows::Entry;
use crate::types::{Event, EventKind, KeyValue, LeaseId};

const HISTORY_NAME: &str = "tenure_history";
pub(super) const HISTORY: TableDefinition<(&[u8], i64), &[u8]> = TableDefinition::new(HISTORY_NAME);

/// `tenure_history` in a read transaction.
type HistoryTable = redb::ReadOnlyTable<(&'static [u8], i64), &'static [u8]>;
/// An events table (`tenure_changes`, `tenure_events`) in a read transaction.
type EventsTable = redb::ReadOnlyTable<(i64, u32), &'static [u8]>;

/// The meta rows about the history (a copy of the file, which has none, leaves them out).
pub(crate) const HISTORY_ROWS: [&str; 2] = ["history", "compacted"];

/// Appends to `buf` the row of `key` at `rev` as stored: the codec's encoding, sealed
/// (`seal`) under the pair, key then revision big-endian. (The history tables are not
/// digested: the open never reads them whole.)
fn push_sealed_row(buf: &mut Vec<u8>, key: &[u8], rev: i64, e: &Entry) {
    let start = buf.len();
    buf.reserve(encoded_len(e) + SEAL_LEN);
    encode_into(e, buf);
    seal_in_place_at(buf, start, HISTORY_NAME, &[key, &rev.to_be_bytes()]);
}

fn pair(key: &[u8], rev: i64) -> Vec<u8> {
    let mut p = Vec::with_capacity(key.len() + 8);
    p.extend_from_slice(key);
    p.extend_from_slice(&rev.to_be_bytes());
    p
}

/// The row of `key` at `rev`; `Corrupt`-worded storage error if it does not unseal.
fn open_row(key: &[u8], rev: i64, stored: &[u8]) -> Result<Entry> {
    unseal(HISTORY_NAME, &pair(key, rev), stored)
        .and_then(decode)
        .ok_or_else(|| undecodable(key, rev))
}

/// Writes a compaction step looks at in one write transaction (plus the rest of the last
/// `tenure_changes` row, at most `events::ROW_WRITES`): bounds how long it holds the store (a
/// writer without the log waits for at most one step).
pub(super) const STEP: usize = 4096;

/// The store's progress on history: whether this file keeps it, and how far the physical
/// compaction got. Touched only by the holder of `Shared::store`.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// The file has the `history` mark and its format says `tenure_changes` (checked by the
    /// first write).
    ready: Cell<bool>,
    /// The file has no `tenure_events` (written before `tenure_changes`) any more: `Some(false)`
    /// once a step found it absent or dropped it.
    legacy: Cell<Option<bool>>,
    /// The compaction the steps have finished (physically).
    done: Cell<i64>,
    /// The last `tenure_changes` row the running pass went through.
    cursor: Cell<Option<Position>>,
}

/// The history tables of one write transaction, and the position in the revision being
/// written (events of one revision are numbered in apply order).
pub(super) struct Recorder<'t> {
    history: redb::Table<'t, (&'static [u8], i64), &'static [u8]>,
    changes: redb::Table<'t, (i64, u32), &'static [u8]>,
    /// The writes of this transaction not yet stored as rows.
    packer: Packer,
    /// The history rows not yet inserted, keys and sealed rows one after another; inserted in
    /// key order by `flush` (`Pending`).
    arena: Vec<u8>,
    pending: Vec<Pending>,
    rev: i64,
    n: u32,
}

/// A history row waiting in `Recorder::arena`: its key, then its sealed row.
struct Pending {
    at: usize,
    key_len: usize,
    row_len: usize,
    rev: i64,
}

impl<'t> Recorder<'t> {
    pub(super) fn open(tx: &'t WriteTransaction) -> Result<Recorder<'t>> {
        Ok(Recorder {
            history: tx.open_table(HISTORY).map_err(storage)?,
            changes: tx.open_table(CHANGES).map_err(storage)?,
            packer: Packer::default(),
            arena: Vec::new(),
            pending: Vec::new(),
            rev: 0,
            n: 0,
        })
    }

    fn event(&mut self, key: &[u8], rev: i64) -> Result<()> {
        if rev != self.rev {
            (self.rev, self.n) = (rev, 0);
        }
        self.packer.push(&mut self.changes, (rev, self.n), key)?;
        self.n += 1;
        Ok(())
    }

    /// Stores the events recorded so far: one row for the ops of one commit (or one record of
    /// the log replayed). Positions go on from where they were.
    pub(super) fn flush(&mut self) -> Result<()> {
        self.insert_pending()?;
        self.packer.flush(&mut self.changes)
    }

    /// Inserts the pending history rows in (key, revision) order: consecutive inserts then
    /// descend to the same pages, where the order of writes scatters them over the whole
    /// table (BENCHMARKS 23). The sort is stable: a relabel of a row written in the same batch
    /// comes after it and wins.
    fn insert_pending(&mut self) -> Result<()> {
        let arena = &self.arena;
        let key = |p: &Pending| &arena[p.at..p.at + p.key_len];
        self.pending
            .sort_by(|a, b| key(a).cmp(key(b)).then(a.rev.cmp(&b.rev)));
        for p in &self.pending {
            let row = &arena[p.at + p.key_len..p.at + p.key_len + p.row_len];
            self.history.insert((key(p), p.rev), row).map_err(storage)?;
        }
        self.pending.clear();
        self.arena.clear();
        Ok(())
    }

    /// The history row of `key` at `rev`: `e` (inserted by `flush`).
    fn row(&mut self, key: &[u8], rev: i64, e: &Entry) -> Result<()> {
        let at = self.arena.len();
        self.arena.extend_from_slice(key);
        push_sealed_row(&mut self.arena, key, rev, e);
        self.pending.push(Pending {
            at,
            key_len: key.len(),
            row_len: self.arena.len() - at - key.len(),
            rev,
        });
        Ok(())
    }

    /// `key` written at `rev` as `e`.
    pub(super) fn put(&mut self, key: &[u8], rev: i64, e: &Entry) -> Result<()> {
        self.row(key, rev, e)?;
        self.event(key, rev)
    }

    /// `key`, last written at `rev`, attached or detached (no revision moves): its row at
    /// `rev` takes the new lease, no event is added.
    pub(super) fn relabel(&mut self, key: &[u8], rev: i64, e: &Entry) -> Result<()> {
        self.row(key, rev, e)
    }

    /// `key` deleted at `rev`.
    pub(super) fn tombstone(&mut self, key: &[u8], rev: i64) -> Result<()> {
        let none = Entry {
            data: None,
            lease: 0,
        };
        self.row(key, rev, &none)?;
        self.event(key, rev)
    }
}

/// Marks a new file as keeping history from revision 0.
pub(super) fn init(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(HISTORY).map_err(storage)?;
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

/// Before the first write of this store (a commit or a compaction step), once: a file written
/// before history was kept gets its present as the history's first rows, compacted at its
/// revision; a file written before `tenure_changes` gets the format that says it has them
/// (SPEC K16). `true` if it changed a meta row (the caller rewrites the meta checksum).
pub(super) fn seed(tx: &WriteTransaction, progress: &Progress) -> Result<bool> {
    if progress.ready.get() {
        return Ok(false);
    }
    let mut changed = false;
    let mut meta = tx.open_table(META).map_err(storage)?;
    let format = meta.get("format").map_err(storage)?.map(|v| v.value());
    if let Some(&(_, now)) = PER_WRITE_EVENTS
        .iter()
        .find(|(old, _)| Some(*old) == format)
    {
        meta.insert("format", now).map_err(storage)?;
        changed = true;
    }
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
                    rec.row(key, d.mod_revision, &e)?;
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

/// `key` as it was at `revision`: its last row at or before it (a tombstone is `None`).
fn last_at(history: &HistoryTable, key: &[u8], revision: i64) -> Result<Option<KeyValue>> {
    let last = history
        .range((key, i64::MIN)..=(key, revision))
        .map_err(storage)?
        .next_back();
    match last {
        Some(row) => {
            let (k, v) = row.map_err(storage)?;
            Ok(kv_of(key, open_row(key, k.value().1, v.value())?))
        }
        None => Ok(None),
    }
}

fn undecodable(key: &[u8], rev: i64) -> Error {
    Error::storage(format!(
        "undecodable history row for key {:?} at revision {rev}",
        String::from_utf8_lossy(key)
    ))
}

impl View {
    fn history(&self) -> Result<Option<HistoryTable>> {
        match self.tx.open_table(HISTORY) {
            Ok(t) => Ok(Some(t)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(storage(e)),
        }
    }

    /// The keys of `range` as they were at `revision`, in key order (SPEC K9).
    pub(crate) fn range_at(&self, range: &KeyRange, revision: i64) -> Result<Vec<KeyValue>> {
        let mut out = Vec::new();
        let Some(history) = self.history()? else {
            return Ok(out);
        };
        if let Some(key) = range.single_key() {
            // One key: one seek to its last row at or before `revision` (the general walk
            // below takes three, finding the key first and the next key after it).
            out.extend(last_at(&history, key, revision)?);
            return Ok(out);
        }
        let Some((start, end)) = range.bounds() else {
            return Ok(out);
        };
        // One seek to each key of the range, one to its last row at or before `revision`.
        let mut from: Bound<(Vec<u8>, i64)> = match start {
            Bound::Included(k) => Bound::Included((k, i64::MIN)),
            _ => Bound::Unbounded,
        };
        loop {
            let next = {
                let lower = match &from {
                    Bound::Included((k, r)) => Bound::Included((k.as_slice(), *r)),
                    Bound::Excluded((k, r)) => Bound::Excluded((k.as_slice(), *r)),
                    Bound::Unbounded => Bound::Unbounded,
                };
                let mut it = history
                    .range::<(&[u8], i64)>((lower, Bound::Unbounded))
                    .map_err(storage)?;
                match it.next() {
                    Some(row) => row.map_err(storage)?.0.value().0.to_vec(),
                    None => break,
                }
            };
            let beyond = match &end {
                Bound::Included(e) => next.as_slice() > e.as_slice(),
                Bound::Excluded(e) => next.as_slice() >= e.as_slice(),
                Bound::Unbounded => false,
            };
            if beyond {
                break;
            }
            out.extend(last_at(&history, &next, revision)?);
            from = Bound::Excluded((next, i64::MAX));
        }
        Ok(out)
    }

    /// An events table of this read transaction, `None` if the file has none.
    fn events_table(&self, def: TableDefinition<(i64, u32), &[u8]>) -> Result<Option<EventsTable>> {
        match self.tx.open_table(def) {
            Ok(t) => Ok(Some(t)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(storage(e)),
        }
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
        let Some(history) = self.history()? else {
            return Ok(out);
        };
        let changes = self.events_table(CHANGES)?;
        let legacy = self.events_table(LEGACY)?;
        events::for_each(changes.as_ref(), legacy.as_ref(), from, to, |rev, key| {
            if !range.contains(key) {
                return Ok(());
            }
            // An event whose history row a compaction removed (none is left by this build's
            // compaction; kept for files it did not write).
            let Some(row) = history.get((key, rev)).map_err(storage)? else {
                return Ok(());
            };
            let e = open_row(key, rev, row.value())?;
            let prev = if prev_kv {
                match history
                    .range((key, i64::MIN)..(key, rev))
                    .map_err(storage)?
                    .next_back()
                {
                    Some(p) => {
                        let (pk, pv) = p.map_err(storage)?;
                        kv_of(key, open_row(key, pk.value().1, pv.value())?)
                    }
                    None => None,
                }
            } else {
                None
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

/// An events row's position and its writes (revision, key), decoded.
type DecodedRow<'w> = (Position, Vec<(i64, &'w [u8])>);

/// Of the `writes` below `target` (events rows, each with its writes), those the compaction at
/// `target` keeps, sorted: the key's last put at or below `target` is its value there; a
/// superseded row or a tombstone goes. One seek per key: its newest row at or below `target`.
fn decide<'w>(
    history: &redb::Table<'_, (&'static [u8], i64), &'static [u8]>,
    writes: &[DecodedRow<'w>],
    target: i64,
) -> Result<Vec<(&'w [u8], i64)>> {
    let mut asked: Vec<(&[u8], i64)> = writes
        .iter()
        .flat_map(|(_, w)| w.iter())
        .filter(|(rev, _)| *rev < target)
        .map(|&(rev, key)| (key, rev))
        .collect();
    asked.sort_unstable();
    asked.dedup();
    let mut keeps = Vec::new();
    for group in asked.chunk_by(|a, b| a.0 == b.0) {
        let (key, first, last) = (group[0].0, group[0].1, group[group.len() - 1].1);
        let newest = history
            .range((key, first)..=(key, target))
            .map_err(storage)?
            .next_back()
            .transpose()
            .map_err(storage)?;
        if let Some((k, v)) = newest {
            let rev = k.value().1;
            if rev <= last
                && group.binary_search(&(key, rev)).is_ok()
                && open_row(key, rev, v.value())?.data.is_some()
            {
                keeps.push((key, rev));
            }
        }
    }
    Ok(keeps)
}

impl Store {
    /// One bounded step of the physical compaction (SPEC K10, K17); `true` while there is more
    /// to do. Reads the compaction point from the file, so only a compaction the file holds
    /// is carried out.
    pub(crate) fn compact_step(&self) -> Result<bool> {
        let stepped = guarded(&self.path, || {
            let mut tx = self.db.begin_write().map_err(storage)?;
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

    /// The compaction's work in `tx`, about `budget` writes (none if the file's compaction is
    /// done); `tx` commits it, then `compacted` records it. The caller has no table of the
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
        // This step may write `tenure_changes`: the format must say so first.
        if seed(tx, p)? {
            let mut meta = tx.open_table(META).map_err(storage)?;
            write_meta(&mut meta, &[]).map_err(storage)?;
        }
        self.compact_writes(tx, target, budget, within)
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
        if let Stepped::More {
            legacy_gone: true, ..
        }
        | Stepped::Finished {
            legacy_gone: true, ..
        } = stepped
        {
            p.legacy.set(Some(false));
        }
        match stepped {
            Stepped::Idle => Ok(false),
            Stepped::More { cursor, .. } => {
                p.cursor.set(cursor);
                Ok(true)
            }
            Stepped::Finished { target, .. } => {
                // The next compaction starts over: rows kept by this one may be superseded
                // by then.
                p.done.set(target);
                p.cursor.set(None);
                Ok(false)
            }
        }
    }

    /// Whether the file still has `tenure_events` (written before `tenure_changes`); looked
    /// up once per store (nothing creates it again).
    fn has_legacy(&self, tx: &WriteTransaction) -> Result<bool> {
        let p = &self.history;
        if let Some(known) = p.legacy.get() {
            return Ok(known);
        }
        let exists = tx
            .list_tables()
            .map_err(storage)?
            .any(|t| t.name() == LEGACY_NAME);
        p.legacy.set(Some(exists));
        Ok(exists)
    }

    /// The writes of one step, in (revision, n) order from the cursor: about `budget` of them
    /// below `target`. Each the compaction does not keep is removed with its history row: from
    /// its `tenure_changes` row, rewritten without it (removed once empty), or from
    /// `tenure_events`, whose rows the step removes in any case, moving those it keeps into
    /// `tenure_changes` under their own positions (below every row written since, above those
    /// moved before: rows stay ordered). The order matters: a key's tombstone goes only after
    /// the rows it supersedes were looked at. `tenure_events` is dropped once empty.
    fn compact_writes(
        &self,
        tx: &WriteTransaction,
        target: i64,
        budget: usize,
        within: Within,
    ) -> Result<Stepped> {
        let p = &self.history;
        let has_legacy = self.has_legacy(tx)?;
        if has_legacy && within == Within::Checkpoint {
            return Ok(Stepped::Idle);
        }
        let mut history = tx.open_table(HISTORY).map_err(storage)?;
        let mut changes = tx.open_table(CHANGES).map_err(storage)?;
        let mut legacy = match has_legacy {
            true => Some(tx.open_table(LEGACY).map_err(storage)?),
            false => None,
        };
        let below = (target, 0);
        let mut cursor = p.cursor.get();
        let mut looked = 0;
        // The rows of `tenure_changes` the step goes through, decided at its end (`decide`).
        let mut rows: Vec<(Position, Vec<u8>)> = Vec::new();
        // The history rows this step frees, removed in key order at its end (as `flush`
        // inserts them). Every decision is made on the rows as they were before the step: a
        // key's tombstone goes only with the rows it supersedes.
        let mut freed: Vec<(Vec<u8>, i64)> = Vec::new();
        // Reads only, but for the rows of `tenure_events` (never in a checkpoint).
        let gathered = (|| loop {
            if looked >= budget {
                return Ok(false);
            }
            // The next row of `tenure_changes` after the cursor; the first of `tenure_events`
            // (those the pass went through are gone from it).
            let row = changes
                .range::<Position>((
                    cursor.map_or(Bound::Unbounded, Bound::Excluded),
                    Bound::Excluded(below),
                ))
                .map_err(storage)?
                .next()
                .transpose()
                .map_err(storage)?
                .map(|(k, v)| (k.value(), v.value().to_vec()));
            let old = match &legacy {
                Some(t) => t
                    .range(..below)
                    .map_err(storage)?
                    .next()
                    .transpose()
                    .map_err(storage)?
                    .map(|(k, _)| k.value()),
                None => None,
            };
            match (row, old) {
                (None, None) => return Ok(true),
                (Some((id, stored)), old) if old.is_none_or(|o| id <= o) => {
                    looked += events::decode_row(id, &stored)?.len();
                    rows.push((id, stored));
                    cursor = Some(id);
                }
                (row, _) => {
                    let t = legacy.as_mut().expect("a row of it was found");
                    // Its rows below the next row of `tenure_changes`.
                    let until = row.map_or(below, |(id, _)| id);
                    let batch: Vec<(Position, Vec<u8>)> = t
                        .range(..until)
                        .map_err(storage)?
                        .take(budget - looked)
                        .map(|r| {
                            let (k, v) = r.map_err(storage)?;
                            Ok((
                                k.value(),
                                events::legacy_key(k.value(), v.value())?.to_vec(),
                            ))
                        })
                        .collect::<Result<_>>()?;
                    let writes = batch.iter().map(|(at, key)| (at.0, key.as_slice()));
                    let keeps = decide(&history, &[(until, writes.collect())], target)?;
                    let mut moved = Packer::default();
                    for (at, key) in &batch {
                        if keeps.binary_search(&(key.as_slice(), at.0)).is_ok() {
                            moved.push(&mut changes, *at, key)?;
                        } else {
                            freed.push((key.clone(), at.0));
                        }
                        t.remove(*at).map_err(storage)?;
                    }
                    moved.flush(&mut changes)?;
                    looked += batch.len();
                    // Past what was moved: the pass does not look at it again.
                    cursor = batch.last().map(|(at, _)| *at).max(cursor);
                }
            }
        })();
        // A row the step cannot read, before it changed anything: in a checkpoint, the
        // compaction is left to the compactor's own steps, which report it, and the
        // checkpoint's writes commit.
        let refused = |e: Error| match within {
            Within::Checkpoint => Ok(Stepped::Idle),
            Within::Own => Err(e),
        };
        let finished = match gathered {
            Ok(finished) => finished,
            Err(e) => return refused(e),
        };
        let decoded = match rows
            .iter()
            .map(|(id, stored)| Ok((*id, events::decode_row(*id, stored)?)))
            .collect::<Result<Vec<_>>>()
        {
            Ok(decoded) => decoded,
            Err(e) => return refused(e),
        };
        let keeps = match decide(&history, &decoded, target) {
            Ok(keeps) => keeps,
            Err(e) => return refused(e),
        };
        for (id, writes) in &decoded {
            let mut keep = Vec::with_capacity(writes.len());
            for &(rev, key) in writes {
                if rev >= target || keeps.binary_search(&(key, rev)).is_ok() {
                    keep.push((rev, key));
                } else {
                    freed.push((key.to_vec(), rev));
                }
            }
            if keep.is_empty() {
                changes.remove(*id).map_err(storage)?;
            } else if keep.len() < writes.len() {
                let row = events::encode_row(*id, keep);
                changes.insert(*id, row.as_slice()).map_err(storage)?;
            }
        }
        freed.sort_unstable();
        for (key, rev) in &freed {
            history.remove((key.as_slice(), *rev)).map_err(storage)?;
        }
        let legacy_gone = match legacy {
            Some(t) if t.is_empty().map_err(storage)? => {
                drop(t);
                tx.delete_table(LEGACY).map_err(storage)?;
                true
            }
            _ => false,
        };
        Ok(if finished {
            Stepped::Finished {
                target,
                legacy_gone,
            }
        } else {
            Stepped::More {
                cursor,
                legacy_gone,
            }
        })
    }
}

/// Whose transaction a compaction step is part of.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Within {
    /// Its own (the compactor's, `wait_compacted`'s): any failure fails it.
    Own,
    /// A checkpoint's: never on a file that still has `tenure_events` (whose rows a step
    /// changes as it reads them), and a row it cannot read leaves the compaction to the
    /// compactor instead of failing the checkpoint's writes.
    Checkpoint,
}

/// What a compaction step did.
pub(super) enum Stepped {
    /// Nothing to do: the file's compaction is done.
    Idle,
    /// A step committed, more follow: the pass resumes after `cursor`; `legacy_gone`: the
    /// step dropped `tenure_events`.
    More {
        cursor: Option<Position>,
        legacy_gone: bool,
    },
    /// The compaction at `target` is done.
    Finished { target: i64, legacy_gone: bool },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::{Data, StoreOp};
    use crate::store::seal::seal;
    use crate::store::FORMAT_VERSION;
    use redb::ReadableDatabase;

    const KEYS: usize = 150;

    fn key(rev: i64, i: usize) -> Vec<u8> {
        format!("k{:03}", (rev as usize * 100 + i) % KEYS).into_bytes()
    }

    /// Writes in both event tables: `tenure_events` (if the file has it) and `tenure_changes`,
    /// at every revision.
    fn writes(tx: &WriteTransaction) -> usize {
        let mut n = 0;
        if tx.list_tables().unwrap().any(|t| t.name() == LEGACY_NAME) {
            n += tx.open_table(LEGACY).unwrap().len().unwrap() as usize;
        }
        let changes = tx.open_table(CHANGES).unwrap();
        for row in changes.iter().unwrap() {
            let (k, v) = row.unwrap();
            n += events::decode_row(k.value(), v.value()).unwrap().len();
        }
        n
    }

    /// A store over a file of revisions 1..=100, 100 puts each over 150 keys (`legacy`:
    /// 1..=50 with one event row per write, as written before tenure_changes), compacted at
    /// 100, none of it physically.
    fn compacted_fixture(dir: &tempfile::TempDir, legacy: bool) -> Store {
        let path = dir.path().join("steps.redb");
        // Through the store's own backend, which keeps the file's locks for its close.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let (backend, locks) =
            super::super::files::WriteBackend::new(super::super::FaultyBackend {
                file: redb::backends::FileBackend::new(file).unwrap(),
                faults: Default::default(),
            });
        let db = redb::Builder::new().create_with_backend(backend).unwrap();
        // Revisions 1..=100 of 100 puts each over 150 keys: 1..=50 with one event row per
        // write (a file written before tenure_changes), 51..=100 one row per revision.
        let tx = db.begin_write().unwrap();
        {
            let mut history = tx.open_table(HISTORY).unwrap();
            let mut old_rows = legacy.then(|| tx.open_table(LEGACY).unwrap());
            let mut changes = tx.open_table(CHANGES).unwrap();
            let mut row = Vec::new();
            for rev in 1..=100i64 {
                let mut packer = Packer::default();
                for i in 0..100 {
                    let k = key(rev, i);
                    let e = Entry {
                        data: Some(Data {
                            value: b"v".to_vec(),
                            create: 1,
                            mod_revision: rev,
                            version: 1,
                        }),
                        lease: 0,
                    };
                    row.clear();
                    push_sealed_row(&mut row, &k, rev, &e);
                    history.insert((k.as_slice(), rev), row.as_slice()).unwrap();
                    let at = (rev, i as u32);
                    if let Some(old_rows) = old_rows.as_mut().filter(|_| rev <= 50) {
                        let mut id = rev.to_be_bytes().to_vec();
                        id.extend_from_slice(&(i as u32).to_be_bytes());
                        let sealed = seal(LEGACY_NAME, &id, &k);
                        old_rows.insert(at, sealed.as_slice()).unwrap();
                    } else {
                        packer.push(&mut changes, at, &k).unwrap();
                    }
                }
                packer.flush(&mut changes).unwrap();
            }
            let mut meta = tx.open_table(META).unwrap();
            for (row, v) in [
                ("format", 3),
                ("history", 1),
                ("compacted", 100),
                ("revision", 100),
            ] {
                meta.insert(row, v).unwrap();
            }
            write_meta(&mut meta, &[]).unwrap();
        }
        assert_eq!(writes(&tx), 10_000);
        tx.commit().unwrap();
        Store {
            db,
            path,
            faults: Default::default(),
            history: Progress::default(),
            locks,
            log_id: None,
        }
    }

    #[test]
    fn k17_each_compaction_step_is_bounded_and_the_pass_keeps_one_write_per_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = compacted_fixture(&dir, true);
        let mut steps = 0;
        let mut left = 10_000;
        loop {
            let more = store.compact_step().unwrap();
            steps += 1;
            if !more {
                break;
            }
            // (Aborted: a `tenure_events` it opens once dropped is not made again.)
            let tx = store.db.begin_write().unwrap();
            let now = writes(&tx);
            tx.abort().unwrap();
            assert!(left - now <= STEP + events::ROW_WRITES, "{left} → {now}");
            left = now;
        }
        assert!(steps >= 3, "{steps} steps");
        assert_eq!(
            store.history.legacy.get(),
            Some(false),
            "tenure_events dropped"
        );
        let tx = store.db.begin_read().unwrap();
        assert!(matches!(
            tx.open_table(LEGACY),
            Err(redb::TableError::TableDoesNotExist(_))
        ));
        let changes = tx.open_table(CHANGES).unwrap();
        let mut kept = Vec::new();
        for row in changes.iter().unwrap() {
            let (k, v) = row.unwrap();
            for (rev, key) in events::decode_row(k.value(), v.value()).unwrap() {
                kept.push((key.to_vec(), rev));
            }
        }
        // Revision 100's writes (the compaction keeps its own revision) and the last put of
        // each of the 50 keys it does not write.
        assert_eq!(kept.len(), KEYS);
        kept.sort();
        kept.dedup_by(|a, b| a.0 == b.0);
        assert_eq!(kept.len(), KEYS, "one write per key");
        let history = tx.open_table(HISTORY).unwrap();
        assert_eq!(
            history.len().unwrap() as usize,
            KEYS,
            "their history rows only"
        );
        let meta = tx.open_table(META).unwrap();
        assert_eq!(meta.get("format").unwrap().unwrap().value(), FORMAT_VERSION);
    }

    #[test]
    fn k10_a_checkpoint_compacts_more_writes_than_it_brings() {
        // The compactor's steps come between checkpoints: at one step per checkpoint of a
        // region's writes, history grew for as long as writes came. Each checkpoint does at
        // least its own share.
        let dir = tempfile::tempdir().unwrap();
        let store = compacted_fixture(&dir, false);
        let count = |store: &Store| {
            let tx = store.db.begin_write().unwrap();
            let n = writes(&tx);
            tx.abort().unwrap();
            n
        };
        let before = count(&store);
        let put = |rev: i64| {
            let e = Entry {
                data: Some(Data {
                    value: b"w".to_vec(),
                    create: rev,
                    mod_revision: rev,
                    version: 1,
                }),
                lease: 0,
            };
            StoreOp::PutKey(format!("new{rev}").into_bytes(), e)
        };
        let ops: Vec<StoreOp> = (101..101 + STEP as i64).map(put).collect();
        store.commit(&ops, 100 + STEP as i64, 1, Some(1)).unwrap();
        let after = count(&store);
        // The checkpoint added STEP writes and compacted at least 2 × STEP of the old ones.
        assert!(
            after + STEP <= before,
            "{before} writes before the checkpoint, {after} after"
        );
        // A commit without the log (its ops are one group commit, not a region) leaves the
        // compaction to the compactor.
        let rev = 101 + STEP as i64;
        store.commit(&[put(rev)], rev, 1, None).unwrap();
        assert_eq!(count(&store), after + 1);
        // Nor does a checkpoint compact a file that still has `tenure_events`: a step changes
        // its rows as it reads them, and only the compactor's own steps may fail on a row.
        let dir = tempfile::tempdir().unwrap();
        let store = compacted_fixture(&dir, true);
        store.commit(&ops, 100 + STEP as i64, 1, Some(1)).unwrap();
        assert_eq!(count(&store), 10_000 + STEP);
    }
}
