//! The revision history on disk (SPEC K9, K10, K11): every revision of every key until it is
//! compacted, so that reads at a past revision and watches from one are answered from the
//! file, and memory holds only the present.
//!
//! - `tenure_history`: (key, revision) → the key's row as written at that revision (`codec`;
//!   no value: a tombstone, the key deleted then).
//! - `tenure_events`: (revision, n) → key: the n-th write of that revision, in apply order
//!   (what a watch replays).
//! - `tenure_meta["compacted"]`: the last compaction; `["history"]`: the file keeps history
//!   (absent in files written before it: their present is seeded into it by the first commit).
//!
//! Compaction at `c` removes, in bounded steps, every history row below `c` that a later row
//! at or below `c` supersedes, and the tombstones below `c` with their events: what remains
//! answers every read at `c` or later exactly as before.

use std::cell::Cell;
use std::ops::Bound;

use redb::{ReadableTable, TableDefinition, WriteTransaction};

use super::codec::{decode, encode};
use super::seal::{seal, unseal};
use super::snapshot::View;
use super::{guarded, storage, Store, KV, KV_NAME, META};
use crate::error::{Error, Result};
use crate::kv::range::KeyRange;
use crate::rows::Entry;
use crate::types::{Event, EventKind, KeyValue, LeaseId};

const HISTORY_NAME: &str = "tenure_history";
const EVENTS_NAME: &str = "tenure_events";
pub(super) const HISTORY: TableDefinition<(&[u8], i64), &[u8]> = TableDefinition::new(HISTORY_NAME);
pub(super) const EVENTS: TableDefinition<(i64, u32), &[u8]> = TableDefinition::new(EVENTS_NAME);

/// `tenure_history` in a read transaction.
type HistoryTable = redb::ReadOnlyTable<(&'static [u8], i64), &'static [u8]>;

/// The meta rows about the history (a copy of the file, which has none, leaves them out).
pub(crate) const HISTORY_ROWS: [&str; 2] = ["history", "compacted"];

/// The row of `key` at `rev` as stored: the codec's encoding, sealed (`seal`) under the pair.
/// (The history tables are not digested: the open never reads them whole.)
fn sealed_row(key: &[u8], rev: i64, e: &Entry) -> Vec<u8> {
    seal(HISTORY_NAME, &pair(key, rev), &encode(e))
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

fn event_id(rev: i64, n: u32) -> [u8; 12] {
    let mut id = [0u8; 12];
    id[..8].copy_from_slice(&rev.to_be_bytes());
    id[8..].copy_from_slice(&n.to_be_bytes());
    id
}

/// The key an event row names; an error if it does not unseal.
fn event_key(rev: i64, n: u32, stored: &[u8]) -> Result<&[u8]> {
    unseal(EVENTS_NAME, &event_id(rev, n), stored).ok_or_else(|| {
        Error::storage(format!(
            "damaged event row {n} of revision {rev} in the history (checksum)"
        ))
    })
}

/// Event rows a compaction step looks at in one write transaction: bounds how long it holds
/// the store (a writer without the log waits for at most one step).
const STEP: usize = 4096;

/// The store's progress on history: whether this file keeps it, and how far the physical
/// compaction got. Touched only by the holder of `Shared::store`.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// The file has the `history` mark (checked by the first commit).
    ready: Cell<bool>,
    /// The compaction the steps have finished (physically).
    done: Cell<i64>,
    /// Where the running pass resumes in `tenure_events`.
    cursor: Cell<(i64, u32)>,
}

/// The history tables of one write transaction, and the position in the revision being
/// written (events of one revision are numbered in apply order).
pub(super) struct Recorder<'t> {
    history: redb::Table<'t, (&'static [u8], i64), &'static [u8]>,
    events: redb::Table<'t, (i64, u32), &'static [u8]>,
    rev: i64,
    n: u32,
}

impl<'t> Recorder<'t> {
    pub(super) fn open(tx: &'t WriteTransaction) -> Result<Recorder<'t>> {
        Ok(Recorder {
            history: tx.open_table(HISTORY).map_err(storage)?,
            events: tx.open_table(EVENTS).map_err(storage)?,
            rev: 0,
            n: 0,
        })
    }

    fn event(&mut self, key: &[u8], rev: i64) -> Result<()> {
        if rev != self.rev {
            (self.rev, self.n) = (rev, 0);
        }
        let row = seal(EVENTS_NAME, &event_id(rev, self.n), key);
        self.events
            .insert((rev, self.n), row.as_slice())
            .map_err(storage)?;
        self.n += 1;
        Ok(())
    }

    /// `key` written at `rev` as `e`.
    pub(super) fn put(&mut self, key: &[u8], rev: i64, e: &Entry) -> Result<()> {
        self.history
            .insert((key, rev), sealed_row(key, rev, e).as_slice())
            .map_err(storage)?;
        self.event(key, rev)
    }

    /// `key`, last written at `rev`, attached or detached (no revision moves): its row at
    /// `rev` takes the new lease, no event is added.
    pub(super) fn relabel(&mut self, key: &[u8], rev: i64, e: &Entry) -> Result<()> {
        self.history
            .insert((key, rev), sealed_row(key, rev, e).as_slice())
            .map_err(storage)?;
        Ok(())
    }

    /// `key` deleted at `rev`.
    pub(super) fn tombstone(&mut self, key: &[u8], rev: i64) -> Result<()> {
        let none = Entry {
            data: None,
            lease: 0,
        };
        self.history
            .insert((key, rev), sealed_row(key, rev, &none).as_slice())
            .map_err(storage)?;
        self.event(key, rev)
    }
}

/// Marks a new file as keeping history from revision 0.
pub(super) fn init(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(HISTORY).map_err(storage)?;
    tx.open_table(EVENTS).map_err(storage)?;
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

/// Before the first commit of a file written before history was kept: its present becomes
/// the history's first rows, compacted at its revision.
pub(super) fn seed(tx: &WriteTransaction, progress: &Progress) -> Result<()> {
    if progress.ready.get() {
        return Ok(());
    }
    let mut meta = tx.open_table(META).map_err(storage)?;
    if meta.get("history").map_err(storage)?.is_none() {
        let revision = meta
            .get("revision")
            .map_err(storage)?
            .map_or(0, |v| v.value());
        let kv = tx.open_table(KV).map_err(storage)?;
        let mut rec = Recorder::open(tx)?;
        for row in kv.iter().map_err(storage)? {
            let (k, v) = row.map_err(storage)?;
            let key = k.value();
            if let Some(e) = unseal(KV_NAME, key, v.value()).and_then(decode) {
                if let Some(d) = &e.data {
                    rec.put(key, d.mod_revision, &e)?;
                }
            }
        }
        meta.insert("history", 1).map_err(storage)?;
        meta.insert("compacted", revision).map_err(storage)?;
    }
    progress.ready.set(true);
    Ok(())
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

    /// The events of revisions `from..=to` on keys of `range`, in revision order and, within
    /// one, in apply order (SPEC K11); with the previous key-value of each if `prev_kv`.
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
        let events = match self.tx.open_table(EVENTS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(out),
            Err(e) => return Err(storage(e)),
        };
        for row in events.range((from, 0)..=(to, u32::MAX)).map_err(storage)? {
            let (k, v) = row.map_err(storage)?;
            let (rev, n) = k.value();
            let key = event_key(rev, n, v.value())?;
            if !range.contains(key) {
                continue;
            }
            // A tombstone compacted at the compaction revision itself leaves its event behind.
            let Some(row) = history.get((key, rev)).map_err(storage)? else {
                continue;
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
        }
        Ok(out)
    }
}

impl Store {
    /// One bounded step of the physical compaction (SPEC K10); `true` while there is more to
    /// do. Reads the compaction point from the file, so only a compaction the file holds is
    /// carried out.
    pub(crate) fn compact_step(&self) -> Result<bool> {
        let p = &self.history;
        guarded(&self.path, || {
            let tx = self.db.begin_write().map_err(storage)?;
            let target = {
                let meta = tx.open_table(META).map_err(storage)?;
                let target = meta
                    .get("compacted")
                    .map_err(storage)?
                    .map_or(0, |v| v.value());
                target
            };
            if target <= p.done.get() {
                tx.abort().map_err(storage)?;
                return Ok(false);
            }
            let mut finished = false;
            {
                let mut history = tx.open_table(HISTORY).map_err(storage)?;
                let mut events = tx.open_table(EVENTS).map_err(storage)?;
                let batch: Vec<((i64, u32), Vec<u8>)> = events
                    .range(p.cursor.get()..(target, 0))
                    .map_err(storage)?
                    .take(STEP)
                    .map(|r| {
                        let (k, v) = r.map_err(storage)?;
                        let (rev, n) = k.value();
                        Ok(((rev, n), event_key(rev, n, v.value())?.to_vec()))
                    })
                    .collect::<Result<_>>()?;
                if batch.len() < STEP {
                    finished = true;
                }
                for ((rev, n), key) in &batch {
                    let superseded = history
                        .range((key.as_slice(), rev + 1)..=(key.as_slice(), target))
                        .map_err(storage)?
                        .next()
                        .is_some();
                    let keep = !superseded
                        && match history.get((key.as_slice(), *rev)).map_err(storage)? {
                            Some(v) => open_row(key, *rev, v.value())?.data.is_some(),
                            None => false,
                        };
                    if !keep {
                        history.remove((key.as_slice(), *rev)).map_err(storage)?;
                        events.remove((*rev, *n)).map_err(storage)?;
                    }
                }
                if let Some(((rev, n), _)) = batch.last() {
                    p.cursor.set((*rev, n.saturating_add(1)));
                }
            }
            tx.commit().map_err(storage)?;
            if finished {
                // The next compaction starts over: rows kept by this one may be superseded
                // by then.
                p.done.set(target);
                p.cursor.set((i64::MIN, 0));
            }
            Ok(!finished)
        })
    }
}
