//! The events of the revision history on disk (SPEC K11, K16, K17): which key each write of
//! each revision touched, in apply order. A watch from a past revision replays them.
//!
//! - `tenure_changes`: one row per group commit (per log record on a replay), keyed by the
//!   (revision, n) of its first write, n counting the writes of that revision from 0; its value
//!   lists the commit's writes in order, each `revision (i64 LE) | key length (u32 LE) | key`,
//!   sealed (`seal`) under the row's key. A row holds at most [`ROW_WRITES`] writes and about
//!   [`ROW_BYTES`] bytes (a bigger commit takes several rows): rows fit a page, so none pins
//!   the end of the file when redb's `compact` moves pages down (`defragment`, SPEC D10).
//!   Rows never overlap: each holds writes from its key up to the next row's key.
//! - `tenure_events` (formats 3 and 4): one row per write, (revision, n) → key, sealed;
//!   `history::upgrade` turns each into a `tenure_changes` row.
//!
//! One row per commit instead of one per write: redb pays about 8 000 instructions per row
//! inserted, and at 64 threads the checkpointer's CPU is the limit (BENCHMARKS 14, 18).
//! Like the versions, neither table is digested: the open never reads them whole, so a
//! digest would be compared by nothing; a damaged row is refused when it is read.

use std::ops::Bound;

use redb::{ReadableTable, TableDefinition};

use super::seal::{seal, unseal};
use super::storage;
use crate::error::{Error, Result};

pub(super) const CHANGES_NAME: &str = "tenure_changes";
pub(super) const CHANGES: TableDefinition<(i64, u32), &[u8]> = TableDefinition::new(CHANGES_NAME);
pub(super) const LEGACY_NAME: &str = "tenure_events";
pub(super) const LEGACY: TableDefinition<(i64, u32), &[u8]> = TableDefinition::new(LEGACY_NAME);

/// Writes per row at most.
pub(super) const ROW_WRITES: usize = 1024;
/// A row is closed once its payload reaches this many bytes (one write may take it beyond).
pub(super) const ROW_BYTES: usize = 3 << 10;
/// Bytes an encoded write adds before its key.
const WRITE_HEADER: usize = 12;

/// The position of an event: its revision and its index among the writes of that revision.
pub(super) type Position = (i64, u32);

fn row_id((rev, n): Position) -> [u8; 12] {
    let mut id = [0u8; 12];
    id[..8].copy_from_slice(&rev.to_be_bytes());
    id[8..].copy_from_slice(&n.to_be_bytes());
    id
}

fn damaged(what: &str, (rev, n): Position, why: &str) -> Error {
    Error::storage(format!(
        "damaged {what} at revision {rev} (write {n}) in the history ({why})"
    ))
}

fn encode_write(out: &mut Vec<u8>, rev: i64, key: &[u8]) {
    out.extend_from_slice(&rev.to_le_bytes());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
}

/// The writes of the `tenure_changes` row `id`, in order; an error if it does not unseal or
/// does not parse, or its revisions go backwards or below its key.
pub(super) fn decode_row(id: Position, stored: &[u8]) -> Result<Vec<(i64, &[u8])>> {
    let mut rest = unseal(CHANGES_NAME, &row_id(id), stored)
        .ok_or_else(|| damaged("events row", id, "checksum"))?;
    let mut out = Vec::new();
    let mut last = id.0;
    while !rest.is_empty() {
        let parsed = rest
            .split_at_checked(WRITE_HEADER)
            .and_then(|(head, tail)| {
                let rev = i64::from_le_bytes(head[..8].try_into().ok()?);
                let len = u32::from_le_bytes(head[8..].try_into().ok()?) as usize;
                let (key, tail) = tail.split_at_checked(len)?;
                Some((rev, key, tail))
            });
        let Some((rev, key, tail)) = parsed else {
            return Err(damaged("events row", id, "truncated write"));
        };
        if rev < last {
            return Err(damaged("events row", id, "revisions out of order"));
        }
        last = rev;
        out.push((rev, key));
        rest = tail;
    }
    Ok(out)
}

/// The `tenure_changes` row `id` holding `writes`, sealed.
pub(super) fn encode_row<'k>(
    id: Position,
    writes: impl IntoIterator<Item = (i64, &'k [u8])>,
) -> Vec<u8> {
    let mut payload = Vec::new();
    for (rev, key) in writes {
        encode_write(&mut payload, rev, key);
    }
    seal(CHANGES_NAME, &row_id(id), &payload)
}

/// The key a `tenure_events` row names; an error if it does not unseal.
pub(super) fn legacy_key(at: Position, stored: &[u8]) -> Result<&[u8]> {
    unseal(LEGACY_NAME, &row_id(at), stored).ok_or_else(|| damaged("event row", at, "checksum"))
}

/// `tenure_changes` rows being written: writes are appended in order and stored as rows of at
/// most [`ROW_WRITES`] writes, each keyed by the position of its first write.
#[derive(Default)]
pub(super) struct Packer {
    /// The key of the row being filled, if any.
    first: Option<Position>,
    /// Its payload so far.
    payload: Vec<u8>,
    writes: usize,
}

impl Packer {
    /// Appends the write of `key` at position `at` (positions only increase).
    pub(super) fn push(
        &mut self,
        table: &mut redb::Table<'_, (i64, u32), &'static [u8]>,
        at: Position,
        key: &[u8],
    ) -> Result<()> {
        self.first.get_or_insert(at);
        encode_write(&mut self.payload, at.0, key);
        self.writes += 1;
        if self.writes >= ROW_WRITES || self.payload.len() >= ROW_BYTES {
            self.flush(table)?;
        }
        Ok(())
    }

    /// Stores the row being filled, if any.
    pub(super) fn flush(
        &mut self,
        table: &mut redb::Table<'_, (i64, u32), &'static [u8]>,
    ) -> Result<()> {
        if let Some(first) = self.first.take() {
            let row = seal(CHANGES_NAME, &row_id(first), &self.payload);
            table.insert(first, row.as_slice()).map_err(storage)?;
            self.payload.clear();
            self.writes = 0;
        }
        Ok(())
    }
}

/// A table of events in a read or write transaction.
pub(super) trait EventTable: ReadableTable<(i64, u32), &'static [u8]> {}
impl<T: ReadableTable<(i64, u32), &'static [u8]>> EventTable for T {}

/// Calls `each(revision, key)` for every write of revisions `from..=to` in `changes`, in
/// (revision, n) order.
pub(super) fn for_each(
    changes: &impl EventTable,
    from: i64,
    to: i64,
    mut each: impl FnMut(i64, &[u8]) -> Result<()>,
) -> Result<()> {
    if from > to {
        return Ok(());
    }
    // The row holding `from`'s first write may begin before it: start at the last row keyed
    // at or before (from, 0).
    let start = changes
        .range(..=(from, 0))
        .map_err(storage)?
        .next_back()
        .transpose()
        .map_err(storage)?
        .map_or(Bound::Unbounded, |(k, _)| Bound::Included(k.value()));
    for row in changes
        .range::<Position>((start, Bound::Included((to, u32::MAX))))
        .map_err(storage)?
    {
        let (k, v) = row.map_err(storage)?;
        for (rev, key) in decode_row(k.value(), v.value())? {
            if rev < from {
                continue;
            }
            if rev > to {
                break;
            }
            each(rev, key)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_round_trips_and_refuses_damage() {
        let id = (7, 2);
        let row = encode_row(id, [(7, &b"a"[..]), (7, b""), (9, b"key")]);
        assert_eq!(
            decode_row(id, &row).unwrap(),
            vec![(7, &b"a"[..]), (7, &b""[..]), (9, &b"key"[..])]
        );
        assert!(decode_row((7, 3), &row).is_err(), "another row's key");
        let mut flipped = row.clone();
        flipped[3] ^= 1;
        assert!(decode_row(id, &flipped).is_err());
        // Sealed but not parseable: a truncated write, revisions going backwards.
        let short = seal(CHANGES_NAME, &row_id(id), &[1, 2, 3]);
        assert!(decode_row(id, &short).is_err());
        let backwards = encode_row(id, [(9, &b"a"[..]), (8, b"b")]);
        assert!(decode_row(id, &backwards).is_err());
        let below = encode_row(id, [(6, &b"a"[..])]);
        assert!(decode_row(id, &below).is_err());
    }
}
