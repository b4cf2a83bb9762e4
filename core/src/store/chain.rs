//! The links between the versions of one key in the history (SPEC K9, K17): pure, no I/O.
//!
//! The history stores each write of a key as a row keyed by (revision, key), appended in
//! revision order (`history`), so a key's versions are scattered through the table. Each row
//! carries [`Links`] to the key's earlier versions, from which a read at a past revision finds
//! the version it wants in a few lookups, and a write computes its own links from the row of
//! the version it replaces alone (no other read).
//!
//! A key's versions are numbered by depth (1 for the oldest its chain holds). Level `l` of a
//! version's links lists the revisions of the last [`FANOUT`] earlier versions whose depth is a
//! multiple of `FANOUT^l`, newest first: level 0 the last 16 versions, level 1 the last 16 at
//! depths divisible by 16, and so on, so a version deep in the chain is at most one hop per
//! level away ([`find`]). A version's lists are its predecessor's, shifted by one entry where
//! the predecessor's depth is a multiple of the level's unit ([`Links::after`]).

/// Entries per level, and the factor between the units of two levels.
pub(super) const FANOUT: usize = 16;

/// The links of one version: its depth and, per level, earlier versions' revisions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Links {
    pub(super) depth: u64,
    /// `levels[l]`: revisions, newest first, of the last `FANOUT` earlier versions at depths
    /// divisible by `FANOUT^l`.
    pub(super) levels: Vec<Vec<i64>>,
}

impl Links {
    /// The first version of a chain.
    pub(super) fn first() -> Links {
        Links {
            depth: 1,
            levels: Vec::new(),
        }
    }

    /// The links of the version that follows this one, written at `rev` (this one's revision).
    pub(super) fn after(&self, rev: i64) -> Links {
        let depth = self.depth;
        let mut levels = Vec::with_capacity(self.levels.len() + 1);
        let mut unit = 1u64;
        while unit <= depth {
            let mut list = Vec::with_capacity(FANOUT);
            if depth.is_multiple_of(unit) {
                list.push(rev);
            }
            if let Some(older) = self.levels.get(levels.len()) {
                let room = FANOUT - list.len();
                list.extend(older.iter().take(room));
            }
            levels.push(list);
            match unit.checked_mul(FANOUT as u64) {
                Some(u) => unit = u,
                None => break,
            }
        }
        Links {
            depth: depth + 1,
            levels,
        }
    }

    /// The revision of the version this one replaced, if the chain holds one.
    pub(super) fn prev(&self) -> Option<i64> {
        self.levels.first().and_then(|l| l.first().copied())
    }

    /// Appends the encoding of these links of the version at `rev`: depth, level count, then
    /// each level's length and its revisions as distances below `rev` (LEB128).
    pub(super) fn encode_into(&self, rev: i64, out: &mut Vec<u8>) {
        put_varint(out, self.depth);
        out.push(self.levels.len() as u8);
        for list in &self.levels {
            out.push(list.len() as u8);
            for &r in list {
                put_varint(out, rev.wrapping_sub(r) as u64);
            }
        }
    }

    /// The links at the start of `bytes` (of the version at `rev`) and the bytes after them;
    /// `None` if they are not links `encode_into` could have written there.
    pub(super) fn decode(rev: i64, bytes: &[u8]) -> Option<(Links, &[u8])> {
        let mut rest = bytes;
        let depth = take_varint(&mut rest)?;
        let (&n, tail) = rest.split_first()?;
        rest = tail;
        if depth == 0 || n as usize > 16 {
            return None;
        }
        let mut levels = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let (&len, tail) = rest.split_first()?;
            rest = tail;
            if len as usize > FANOUT {
                return None;
            }
            let mut list = Vec::with_capacity(len as usize);
            let mut last = rev;
            for _ in 0..len {
                let d = take_varint(&mut rest)?;
                let r = rev.checked_sub(i64::try_from(d).ok()?)?;
                // Each strictly older than the one before it, all older than `rev`.
                if r >= last {
                    return None;
                }
                last = r;
                list.push(r);
            }
            levels.push(list);
        }
        Some((Links { depth, levels }, rest))
    }
}

/// Appends the encoding of [`Links::first`].
pub(super) fn write_first(out: &mut Vec<u8>) {
    put_varint(out, 1);
    out.push(0);
}

/// Appends the encoding of the links of the version at `rev` that follows the one at
/// `parent_rev` whose encoded links begin `parent`: [`Links::after`] without building either
/// (a checkpoint writes one per write). `None` if `parent` holds no links `encode_into` wrote.
pub(super) fn write_after(
    parent: &[u8],
    parent_rev: i64,
    rev: i64,
    out: &mut Vec<u8>,
) -> Option<()> {
    let offset = u64::try_from(rev.checked_sub(parent_rev)?)
        .ok()
        .filter(|&o| o > 0)?;
    let mut p = parent;
    let depth = take_varint(&mut p)?;
    let (&n, tail) = p.split_first()?;
    p = tail;
    put_varint(out, depth + 1);
    let count_at = out.len();
    out.push(0);
    let (mut levels, mut unit) = (0u8, 1u64);
    while unit <= depth {
        let include = depth.is_multiple_of(unit);
        let older = if levels < n {
            let (&len, tail) = p.split_first()?;
            p = tail;
            len as usize
        } else {
            0
        };
        if older > FANOUT {
            return None;
        }
        let kept = older.min(FANOUT - usize::from(include));
        out.push((usize::from(include) + kept) as u8);
        if include {
            put_varint(out, offset);
        }
        for i in 0..older {
            let d = take_varint(&mut p)?;
            if i < kept {
                put_varint(out, d.checked_add(offset)?);
            }
        }
        levels += 1;
        match unit.checked_mul(FANOUT as u64) {
            Some(u) => unit = u,
            None => break,
        }
    }
    out[count_at] = levels;
    Some(())
}

/// Of the links encoded at the start of `bytes` (of the version at `rev`): the revision of the
/// version they name first (the one this version replaced), and the bytes after them.
pub(super) fn prev_and_rest(rev: i64, bytes: &[u8]) -> Option<(Option<i64>, &[u8])> {
    let mut rest = bytes;
    take_varint(&mut rest)?;
    let (&n, tail) = rest.split_first()?;
    rest = tail;
    let mut prev = None;
    for l in 0..n {
        let (&len, tail) = rest.split_first()?;
        rest = tail;
        if len as usize > FANOUT {
            return None;
        }
        for i in 0..len {
            let d = take_varint(&mut rest)?;
            if l == 0 && i == 0 {
                prev = Some(rev.checked_sub(i64::try_from(d).ok()?)?);
            }
        }
    }
    Some((prev, rest))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn take_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        v |= u64::from(b & 0x7f).checked_shl(shift)?;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// What [`find`] needs of a version it hops to.
pub(super) enum Hop {
    Links(Links),
    /// The chain names a version the history does not hold.
    Missing,
}

/// The revision of the newest version at or before `at` in the chain whose newest version is
/// `head` (at `head_rev`): `None` if the chain holds none. `fetch(rev)` gives the links of the
/// version at `rev`; it is asked only for versions newer than `at`, which a compaction at or
/// below `at` never removes. A chain that names a version it lacks, or lists that contradict
/// each other, is `Err` with a description.
pub(super) fn find<E>(
    head_rev: i64,
    head: Links,
    at: i64,
    mut fetch: impl FnMut(i64) -> Result<Hop, E>,
) -> Result<Result<Option<i64>, String>, E> {
    if head_rev <= at {
        return Ok(Ok(Some(head_rev)));
    }
    let mut cur = (head_rev, head);
    loop {
        let (rev, links) = &cur;
        let Some(top) = links.levels.last() else {
            return Ok(Ok(None));
        };
        // The lowest level reaching at or below `at`: at level 0 it names the answer; above,
        // the entry before it is a version whose level below reaches the answer.
        let mut hop = None;
        for (l, list) in links.levels.iter().enumerate() {
            if let Some(j) = list.iter().position(|&r| r <= at) {
                match (l, j) {
                    (0, _) => return Ok(Ok(Some(list[j]))),
                    (_, 0) => {
                        return Ok(Err(format!(
                            "the links of revision {rev} skip a version (level {l})"
                        )))
                    }
                    _ => hop = Some(list[j - 1]),
                }
                break;
            }
        }
        // No level reaches: the oldest version the top level names is the nearest hop.
        let next = match hop {
            Some(r) => r,
            None => match top.last() {
                Some(&r) => r,
                None => return Ok(Err(format!("revision {rev} has an empty level"))),
            },
        };
        match fetch(next)? {
            Hop::Links(l) if l.depth < links.depth => cur = (next, l),
            Hop::Links(_) => {
                return Ok(Err(format!(
                    "revision {next} is not deeper in the chain than {rev}"
                )))
            }
            Hop::Missing => {
                return Ok(Err(format!(
                    "revision {next}, linked from revision {rev}, is missing"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A chain of `n` versions at revisions 10, 20, 30, …: each one's links.
    fn chain(n: usize) -> BTreeMap<i64, Links> {
        let mut out = BTreeMap::new();
        let mut links = Links::first();
        for i in 1..=n as i64 {
            let rev = 10 * i;
            if i > 1 {
                links = links.after(rev - 10);
            }
            out.insert(rev, links.clone());
        }
        out
    }

    #[test]
    fn k17_links_round_trip_and_refuse_what_no_write_makes() {
        let c = chain(300);
        for (&rev, links) in &c {
            let mut buf = Vec::new();
            links.encode_into(rev, &mut buf);
            buf.extend_from_slice(b"entry");
            let (back, rest) = Links::decode(rev, &buf).unwrap();
            assert_eq!(&back, links);
            assert_eq!(rest, b"entry");
            assert_eq!(back.prev(), (rev > 10).then(|| rev - 10));
        }
        // A link not below its own revision; a truncated list; a zero depth.
        let mut bad = Vec::new();
        Links {
            depth: 2,
            levels: vec![vec![50]],
        }
        .encode_into(50, &mut bad);
        assert!(Links::decode(50, &bad).is_none());
        let mut cut = Vec::new();
        c[&3000].encode_into(3000, &mut cut);
        assert!(Links::decode(3000, &cut[..cut.len() - 1]).is_none());
        assert!(Links::decode(1, &[0, 0]).is_none());
    }

    #[test]
    fn k17_links_written_from_the_encoded_predecessor_are_those_it_derives() {
        let c = chain(5000);
        let mut parent = Vec::new();
        write_first(&mut parent);
        assert_eq!(Links::decode(10, &parent).unwrap().0, c[&10]);
        for (&rev, links) in c.iter().skip(1) {
            let mut out = Vec::new();
            write_after(&parent, rev - 10, rev, &mut out).unwrap();
            assert_eq!(&Links::decode(rev, &out).unwrap().0, links, "at {rev}");
            let (prev, rest) = prev_and_rest(rev, &out).unwrap();
            assert_eq!((prev, rest.len()), (Some(rev - 10), 0));
            parent = out;
        }
        assert!(
            write_after(&parent, 100, 100, &mut Vec::new()).is_none(),
            "not later"
        );
    }

    #[test]
    fn k17_every_version_is_found_from_every_newer_one_in_a_few_hops() {
        for n in [1, 2, 15, 16, 17, 31, 256, 257, 300, 4100] {
            let c = chain(n);
            let levels = c.values().map(|l| l.levels.len()).max().unwrap();
            for (&head_rev, head) in c.iter().step_by(if n > 500 { 37 } else { 1 }) {
                for at in (0..=head_rev + 5).step_by(if n > 500 { 53 } else { 5 }) {
                    let mut hops = 0;
                    let found = find::<()>(head_rev, head.clone(), at, |r| {
                        hops += 1;
                        assert!(r > at, "asked for {r}, at or below {at}");
                        Ok(c.get(&r).cloned().map_or(Hop::Missing, Hop::Links))
                    })
                    .unwrap()
                    .unwrap();
                    let want = c.range(..=at).next_back().map(|(&r, _)| r);
                    assert_eq!(found, want, "n {n} head {head_rev} at {at}");
                    assert!(hops <= levels + 1, "{hops} hops, {levels} levels");
                }
            }
        }
    }

    #[test]
    fn k17_a_version_within_the_last_sixteen_needs_no_hop() {
        let c = chain(40);
        let (&head_rev, head) = c.iter().next_back().unwrap();
        for back in 1..=16 {
            let at = head_rev - 10 * back;
            let found = find::<()>(head_rev, head.clone(), at, |_| panic!("no hop"))
                .unwrap()
                .unwrap();
            assert_eq!(found, Some(at));
        }
    }

    #[test]
    fn k17_a_chain_naming_a_missing_version_is_an_error() {
        let c = chain(100);
        let (&head_rev, head) = c.iter().next_back().unwrap();
        let found = find::<()>(head_rev, head.clone(), 15, |_| Ok(Hop::Missing)).unwrap();
        assert!(found.unwrap_err().contains("missing"));
    }
}
