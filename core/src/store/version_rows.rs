//! The rows of `tenure_version_rows` (SPEC K17): pure, no I/O.
//!
//! The versions of consecutive (revision, key) pairs are packed into one row, keyed by its
//! first pair, so that a checkpoint of thousands of writes inserts tens of rows instead of one
//! per write (BENCHMARKS 27). Rows never overlap: the version of a pair is in the last row
//! whose key is at or before it, or nowhere.
//!
//! A row's payload is its versions in (revision, key) order, each
//! `revision (i64 LE) ‖ key length (u32 LE) ‖ key ‖ version length (u32 LE) ‖ version`,
//! where a version is its links and its row (`history`). `history` seals the payload as a
//! whole under the row's key.

use std::cmp::Ordering;

/// The most versions one new row packs.
pub(super) const ROW_VERSIONS: usize = 16;
/// A new row takes no further version once its payload is this long (a version larger than
/// this has a row of its own): a read checks the whole row, so rows stay small.
pub(super) const ROW_BYTES: usize = 1024;

/// One version in a row: its pair and its stored bytes (links, then the row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Version<'a> {
    pub(super) rev: i64,
    pub(super) key: &'a [u8],
    pub(super) bytes: &'a [u8],
}

impl Version<'_> {
    /// Orders versions by (revision, key), the table's order.
    pub(super) fn cmp_at(&self, rev: i64, key: &[u8]) -> Ordering {
        (self.rev, self.key).cmp(&(rev, key))
    }
}

/// A row's payload that is not one [`encode`] could have written.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Malformed;

/// Appends to `out` the payload of a row of `versions` (in (revision, key) order).
pub(super) fn encode<'a>(versions: impl IntoIterator<Item = Version<'a>>, out: &mut Vec<u8>) {
    for v in versions {
        out.extend_from_slice(&v.rev.to_le_bytes());
        out.extend_from_slice(&(v.key.len() as u32).to_le_bytes());
        out.extend_from_slice(v.key);
        out.extend_from_slice(&(v.bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(v.bytes);
    }
}

/// Bytes [`encode`] writes for one version of `key` whose stored bytes are `len` long.
pub(super) fn encoded_len(key: &[u8], len: usize) -> usize {
    16 + key.len() + len
}

/// The versions of a row's payload, in order; an item is `Err` where the payload is malformed
/// (and the iteration ends there).
pub(super) fn versions(payload: &[u8]) -> Versions<'_> {
    Versions { rest: payload }
}

/// See [`versions`].
pub(super) struct Versions<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Versions<'a> {
    type Item = Result<Version<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let item = take_version(&mut self.rest);
        if item.is_none() {
            self.rest = &[];
        }
        Some(item.ok_or(Malformed))
    }
}

fn take_version<'a>(rest: &mut &'a [u8]) -> Option<Version<'a>> {
    let rev = i64::from_le_bytes(take(rest, 8)?.try_into().ok()?);
    let key_len = u32::from_le_bytes(take(rest, 4)?.try_into().ok()?) as usize;
    let key = take(rest, key_len)?;
    let len = u32::from_le_bytes(take(rest, 4)?.try_into().ok()?) as usize;
    let bytes = take(rest, len)?;
    Some(Version { rev, key, bytes })
}

fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, tail) = rest.split_at_checked(n)?;
    *rest = tail;
    Some(head)
}

/// The stored bytes of the version of `key` at `rev` in a row's payload, if it holds it.
pub(super) fn find<'a>(
    payload: &'a [u8],
    rev: i64,
    key: &[u8],
) -> Result<Option<&'a [u8]>, Malformed> {
    for v in versions(payload) {
        let v = v?;
        match v.cmp_at(rev, key) {
            Ordering::Less => {}
            Ordering::Equal => return Ok(Some(v.bytes)),
            Ordering::Greater => return Ok(None),
        }
    }
    Ok(None)
}

/// The versions of a row's payload, checked to be in strictly increasing order.
pub(super) fn decode(payload: &[u8]) -> Result<Vec<Version<'_>>, Malformed> {
    let mut out: Vec<Version<'_>> = Vec::new();
    for v in versions(payload) {
        let v = v?;
        if out
            .last()
            .is_some_and(|last| last.cmp_at(v.rev, v.key) != Ordering::Less)
        {
            return Err(Malformed);
        }
        out.push(v);
    }
    Ok(out)
}

/// `versions` without those of the pairs `gone` lists (sorted).
pub(super) fn without<'a>(versions: &[Version<'a>], gone: &[(i64, &[u8])]) -> Vec<Version<'a>> {
    versions
        .iter()
        .copied()
        .filter(|v| gone.binary_search(&(v.rev, v.key)).is_err())
        .collect()
}

/// How a run of versions in order is cut into new rows: the length of the first row's share,
/// at least one version, at most [`ROW_VERSIONS`], closed by the version that reaches
/// [`ROW_BYTES`].
pub(super) fn first_row_len<'a>(versions: impl IntoIterator<Item = Version<'a>>) -> usize {
    let mut bytes = 0;
    let mut n = 0;
    for v in versions {
        if n == ROW_VERSIONS || (n > 0 && bytes >= ROW_BYTES) {
            break;
        }
        bytes += encoded_len(v.key, v.bytes.len());
        n += 1;
    }
    n
}

/// Versions a write transaction adds to the table, gathered until it stores them: in the
/// order they came (a transaction's keys within one revision come in apply order, a seed's in
/// key order), sorted when taken.
#[derive(Default)]
pub(super) struct Pending {
    /// The keys and stored bytes of the versions, one after the other.
    bytes: Vec<u8>,
    /// Each version's revision and where its key and bytes lie in `bytes`.
    slots: Vec<Slot>,
}

#[derive(Clone, Copy)]
struct Slot {
    rev: i64,
    key: (u32, u32),
    bytes: (u32, u32),
}

impl Pending {
    /// Adds the version of `key` at `rev` whose stored bytes are `bytes`; it replaces one of
    /// the same pair added before.
    pub(super) fn push(&mut self, rev: i64, key: &[u8], bytes: &[u8]) {
        let at = |buf: &mut Vec<u8>, part: &[u8]| {
            let start = buf.len() as u32;
            buf.extend_from_slice(part);
            (start, part.len() as u32)
        };
        let key = at(&mut self.bytes, key);
        let bytes = at(&mut self.bytes, bytes);
        self.slots.push(Slot { rev, key, bytes });
    }

    pub(super) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The versions added, in (revision, key) order, each pair once (the last added).
    pub(super) fn sorted(&self) -> Vec<Version<'_>> {
        let bytes = &self.bytes;
        let part = |(start, len): (u32, u32)| &bytes[start as usize..(start + len) as usize];
        let mut out: Vec<(usize, Version<'_>)> = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let v = Version {
                    rev: s.rev,
                    key: part(s.key),
                    bytes: part(s.bytes),
                };
                (i, v)
            })
            .collect();
        // Stable and adaptive: a checkpoint's versions are nearly in order already. Of a pair
        // added twice, the later one stays.
        out.sort_by(|(i, a), (j, b)| a.cmp_at(b.rev, b.key).then(j.cmp(i)));
        out.dedup_by(|later, earlier| later.1.cmp_at(earlier.1.rev, earlier.1.key).is_eq());
        out.into_iter().map(|(_, v)| v).collect()
    }

    /// Forgets every version added.
    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.slots.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v<'a>(rev: i64, key: &'a [u8], bytes: &'a [u8]) -> Version<'a> {
        Version { rev, key, bytes }
    }

    #[test]
    fn k17_a_row_gives_back_each_version_it_packs_and_no_other() {
        let vs = [v(3, b"a", b"x"), v(3, b"b", b""), v(7, b"a", b"yy")];
        let mut payload = Vec::new();
        encode(vs, &mut payload);
        assert_eq!(decode(&payload).unwrap(), vs);
        assert_eq!(find(&payload, 3, b"b").unwrap(), Some(&b""[..]));
        assert_eq!(find(&payload, 7, b"a").unwrap(), Some(&b"yy"[..]));
        for (rev, key) in [(2, &b"a"[..]), (3, b"c"), (7, b""), (8, b"a")] {
            assert_eq!(find(&payload, rev, key).unwrap(), None, "{rev}");
        }
        // Cut anywhere: malformed, or (between versions) the versions before the cut; never a
        // version that was not written (the seal over the row catches the cut itself).
        for cut in 1..payload.len() {
            if let Ok(some) = decode(&payload[..cut]) {
                assert_eq!(some, vs[..some.len()], "cut at {cut}");
                assert!(some.len() < vs.len());
            }
        }
        // Out of order: malformed.
        let mut swapped = Vec::new();
        encode([vs[2], vs[0]], &mut swapped);
        assert_eq!(decode(&swapped), Err(Malformed));
    }

    #[test]
    fn k17_pending_versions_come_out_in_order_each_pair_once_the_last_added() {
        let mut p = Pending::default();
        p.push(5, b"b", b"1");
        p.push(5, b"a", b"2");
        p.push(4, b"z", b"3");
        p.push(5, b"b", b"4");
        assert_eq!(
            p.sorted(),
            [v(4, b"z", b"3"), v(5, b"a", b"2"), v(5, b"b", b"4")]
        );
        p.clear();
        assert!(p.is_empty());
    }

    #[test]
    fn k17_new_rows_are_cut_by_count_and_by_bytes() {
        let small: Vec<Version<'_>> = (0..100).map(|r| v(r, b"k", b"v")).collect();
        assert_eq!(first_row_len(small.iter().copied()), ROW_VERSIONS);
        let big = vec![0u8; ROW_BYTES];
        let large = [v(1, b"k", &big), v(2, b"k", b"v")];
        assert_eq!(first_row_len(large), 1);
        let half = vec![0u8; ROW_BYTES / 2];
        let halves = [v(1, b"k", &half), v(2, b"k", &half), v(3, b"k", b"v")];
        assert_eq!(first_row_len(halves), 2);
        assert_eq!(first_row_len([]), 0);
    }
}
