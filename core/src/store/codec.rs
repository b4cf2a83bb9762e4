//! The on-disk encoding of a key row in `tenure_kv`. Owned by the store: the rest of the
//! engine exchanges typed [`Entry`] values.

use crate::rows::{Data, Entry};

const HEADER: usize = 33;

/// Record layout: flags (bit 0: has value) | create | mod | version | lease (i64 LE) | value.
pub(crate) fn encode(e: &Entry) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(e));
    encode_into(e, &mut out);
    out
}

/// The length of `encode(e)`.
pub(crate) fn encoded_len(e: &Entry) -> usize {
    HEADER + e.data.as_ref().map_or(0, |d| d.value.len())
}

/// Appends `encode(e)` to `out` (the log writes records in place).
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
        assert_eq!(decode(&encode(&e)), Some(e));
        let bare = Entry {
            data: None,
            lease: 7,
        };
        assert_eq!(decode(&encode(&bare)), Some(bare));
        assert_eq!(decode(b"short"), None);
    }
}
