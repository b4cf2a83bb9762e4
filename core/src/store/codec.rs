//! The on-disk encoding of the payloads of a key row in `tenure_kv` and of a lease row in
//! `tenure_leases` (sealed with their checksums by `seal` when stored; the log stores key payloads
//! as they are, under its own checksums). Owned by the store: the rest of the engine exchanges
//! typed [`Entry`] and [`LeaseRow`] values.

use crate::rows::{Data, Entry, LeaseRow};

const HEADER: usize = 33;

/// `encode_into` a new vector (the store writes with `encode_into`, into rows it seals in
/// place).
#[cfg(test)]
pub(crate) fn encode(e: &Entry) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(e));
    encode_into(e, &mut out);
    out
}

/// The length of `encode(e)`.
pub(crate) fn encoded_len(e: &Entry) -> usize {
    HEADER + e.data.as_ref().map_or(0, |d| d.value.len())
}

/// Appends the record of `e` to `out` (the log writes records in place). Record layout: flags
/// (bit 0: has value) | create | mod | version | lease (i64 LE) | value.
pub(crate) fn encode_into(e: &Entry, out: &mut Vec<u8>) {
    let (flags, create, modr, version, value): (u8, i64, i64, i64, &[u8]) = match &e.data {
        Some(d) => (1, d.create, d.mod_revision, d.version, &d.value),
        None => (0, 0, 0, 0, &[]),
    };
    out.push(flags);
    for n in [create, modr, version, e.lease] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.extend_from_slice(value);
}

/// `None` for a row that is not one `encode` could have written.
pub(crate) fn decode(rec: &[u8]) -> Option<Entry> {
    if rec.len() < HEADER || rec[0] > 1 {
        return None;
    }
    let n = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&rec[1 + 8 * i..9 + 8 * i]);
        i64::from_le_bytes(b)
    };
    let data = (rec[0] == 1).then(|| Data {
        create: n(0),
        mod_revision: n(1),
        version: n(2),
        value: rec[HEADER..].to_vec(),
    });
    Some(Entry { data, lease: n(3) })
}

/// The mod revision of the record `rec` without decoding its value: `Some(None)` for a
/// record without a value, `None` for one `encode` could not have written.
pub(crate) fn decode_mod_revision(rec: &[u8]) -> Option<Option<i64>> {
    if rec.len() < HEADER || rec[0] > 1 {
        return None;
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&rec[9..17]);
    Some((rec[0] == 1).then_some(i64::from_le_bytes(b)))
}

/// Whether the record `rec` has a value (`None`: not a record `encode` could have written).
pub(crate) fn has_value(rec: &[u8]) -> Option<bool> {
    (rec.len() >= HEADER && rec[0] <= 1).then_some(rec[0] == 1)
}

/// A lease row's payload: ttl ns | remaining ns or `NO_TIME` | wall ms (LE).
pub(crate) fn encode_lease(ttl: u64, remaining: u64, wall_ms: i64) -> [u8; 24] {
    let mut out = [0u8; 24];
    out[..8].copy_from_slice(&ttl.to_le_bytes());
    out[8..16].copy_from_slice(&remaining.to_le_bytes());
    out[16..].copy_from_slice(&wall_ms.to_le_bytes());
    out
}

/// `None` for a payload that is not one `encode_lease` could have written.
pub(crate) fn decode_lease(id: i64, payload: &[u8]) -> Option<LeaseRow> {
    let b: &[u8; 24] = payload.try_into().ok()?;
    let n = |i: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[8 * i..8 * i + 8]);
        x
    };
    Some(LeaseRow {
        id,
        ttl: u64::from_le_bytes(n(0)),
        remaining: u64::from_le_bytes(n(1)),
        wall_ms: i64::from_le_bytes(n(2)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_through_encode_and_decode() {
        let e = Entry {
            data: Some(Data {
                value: b"v\xff".to_vec(),
                create: 3,
                mod_revision: 9,
                version: 2,
            }),
            lease: 42,
        };
        assert_eq!(decode_mod_revision(&encode(&e)), Some(Some(9)));
        assert_eq!(has_value(&encode(&e)), Some(true));
        assert_eq!(decode(&encode(&e)), Some(e));
        let bare = Entry {
            data: None,
            lease: 7,
        };
        assert_eq!(decode_mod_revision(&encode(&bare)), Some(None));
        assert_eq!(has_value(&encode(&bare)), Some(false));
        assert_eq!(decode(&encode(&bare)), Some(bare));
        assert_eq!(decode_mod_revision(b"short"), None);
        assert_eq!(decode(b"short"), None);
        let l = decode_lease(5, &encode_lease(10, 7, -3)).unwrap();
        assert_eq!((l.id, l.ttl, l.remaining, l.wall_ms), (5, 10, 7, -3));
        assert!(decode_lease(5, b"short").is_none());
    }
}
