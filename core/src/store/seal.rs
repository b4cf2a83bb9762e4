//! Checksums of what is stored (SPEC D5): redb checks its own page checksums only when it
//! repairs a file, so a damaged page could otherwise be read as data.
//!
//! - Every row of a data table is *sealed*: its stored value is the payload followed by a
//!   CRC-32 of the table's name, the row's key and the payload. A damaged row, or a row found
//!   under another key or in another table, does not unseal.
//! - Every data table has a *digest* in the meta table (`rows:TABLE`, `sum:TABLE`): its row count
//!   and the wrapping sum of its rows' checksums, kept up to date by each write transaction
//!   from the rows it inserts, replaces and removes. A row lost, duplicated or read from a stale
//!   page (a damaged branch page pointing elsewhere) breaks the digest.
//! - The meta table's own rows are covered by one checksum row (`checksum`), rewritten by every
//!   transaction that writes a meta row.
//!
//! A new table gets all three by sealing its rows with [`seal`], counting them with [`Digest`]
//! and calling [`write_meta`] in its write transactions.

use redb::{ReadableTable, StorageError, Table};

/// Bytes a seal adds to a payload.
pub(crate) const SEAL_LEN: usize = 4;

/// The meta row holding the checksum of every other meta row.
const META_CHECKSUM: &str = "checksum";

fn record_crc(table: &str, key: &[u8], payload: &[u8]) -> u32 {
    record_crc_of_parts(table, &[key], payload)
}

/// `record_crc` of the key that is `parts` one after the other (without building it).
fn record_crc_of_parts(table: &str, parts: &[&[u8]], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&(table.len() as u64).to_le_bytes());
    h.update(table.as_bytes());
    let key_len: usize = parts.iter().map(|p| p.len()).sum();
    h.update(&(key_len as u64).to_le_bytes());
    for p in parts {
        h.update(p);
    }
    h.update(payload);
    h.finalize()
}

/// Seals in place the payload `row` holds as the row of `table` whose key is `parts` one
/// after the other: the same bytes as [`seal`] of the joined key, without a copy of the key
/// or of the payload (the history writes one such row per write).
pub(crate) fn seal_in_place(row: &mut Vec<u8>, table: &str, parts: &[&[u8]]) {
    seal_in_place_at(row, 0, table, parts);
}

/// [`seal_in_place`] of the payload `buf[start..]` (rows gathered in one buffer).
pub(crate) fn seal_in_place_at(buf: &mut Vec<u8>, start: usize, table: &str, parts: &[&[u8]]) {
    let crc = record_crc_of_parts(table, parts, &buf[start..]);
    buf.extend_from_slice(&crc.to_le_bytes());
}

/// `payload` sealed as the row `key` of `table`.
pub(crate) fn seal(table: &str, key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + SEAL_LEN);
    out.extend_from_slice(payload);
    out.extend_from_slice(&record_crc(table, key, payload).to_le_bytes());
    out
}

/// The payload of a row sealed by [`seal`] as `key` of `table`; `None` if it is not one.
pub(crate) fn unseal<'a>(table: &str, key: &[u8], stored: &'a [u8]) -> Option<&'a [u8]> {
    let (payload, crc) = stored.split_at_checked(stored.len().checked_sub(SEAL_LEN)?)?;
    let crc = u32::from_le_bytes(crc.try_into().ok()?);
    (record_crc(table, key, payload) == crc).then_some(payload)
}

/// [`unseal`] of a row whose key is `parts` one after the other (without building it).
pub(crate) fn unseal_at<'a>(table: &str, parts: &[&[u8]], stored: &'a [u8]) -> Option<&'a [u8]> {
    let (payload, crc) = stored.split_at_checked(stored.len().checked_sub(SEAL_LEN)?)?;
    let crc = u32::from_le_bytes(crc.try_into().ok()?);
    (record_crc_of_parts(table, parts, payload) == crc).then_some(payload)
}

/// The checksum a stored row carries (whether or not it is right: the digest counts what is
/// stored).
fn stored_crc(stored: &[u8]) -> u32 {
    stored
        .len()
        .checked_sub(SEAL_LEN)
        .and_then(|at| stored[at..].try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

/// A table's row count and the wrapping sum of its rows' checksums (or a change to them).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Digest {
    rows: i64,
    sum: i64,
}

impl Digest {
    /// Counts a stored row in.
    pub(crate) fn add(&mut self, stored: &[u8]) {
        self.rows = self.rows.wrapping_add(1);
        self.sum = self.sum.wrapping_add(stored_crc(stored) as i64);
    }

    /// Counts a stored row out (replaced or removed).
    pub(crate) fn remove(&mut self, stored: &[u8]) {
        self.rows = self.rows.wrapping_sub(1);
        self.sum = self.sum.wrapping_sub(stored_crc(stored) as i64);
    }

    fn rows_row(table: &str) -> String {
        format!("rows:{table}")
    }

    fn sum_row(table: &str) -> String {
        format!("sum:{table}")
    }

    /// The digest of `table` the meta table holds (`None`: a row missing).
    pub(crate) fn stored(
        meta: &impl ReadableTable<&'static str, i64>,
        table: &str,
    ) -> Result<Option<Digest>, StorageError> {
        let rows = meta
            .get(Digest::rows_row(table).as_str())?
            .map(|v| v.value());
        let sum = meta
            .get(Digest::sum_row(table).as_str())?
            .map(|v| v.value());
        Ok(rows.zip(sum).map(|(rows, sum)| Digest { rows, sum }))
    }

    /// The row count this digest says.
    pub(crate) fn rows(&self) -> i64 {
        self.rows
    }
}

/// Adds each table's change to its digest in `meta`, then rewrites the meta checksum: the last
/// step of every write transaction that changes a meta row or a data table.
pub(crate) fn write_meta(
    meta: &mut Table<&'static str, i64>,
    changes: &[(&str, Digest)],
) -> Result<(), StorageError> {
    for (table, change) in changes {
        let now = Digest::stored(meta, table)?.unwrap_or_default();
        meta.insert(
            Digest::rows_row(table).as_str(),
            now.rows.wrapping_add(change.rows),
        )?;
        meta.insert(
            Digest::sum_row(table).as_str(),
            now.sum.wrapping_add(change.sum),
        )?;
    }
    let crc = meta_crc(meta)?;
    meta.insert(META_CHECKSUM, crc)?;
    Ok(())
}

/// The checksum of every meta row but the checksum row, in key order.
fn meta_crc(meta: &impl ReadableTable<&'static str, i64>) -> Result<i64, StorageError> {
    let mut h = crc32fast::Hasher::new();
    for row in meta.iter()? {
        let (k, v) = row?;
        if k.value() == META_CHECKSUM {
            continue;
        }
        h.update(&(k.value().len() as u64).to_le_bytes());
        h.update(k.value().as_bytes());
        h.update(&v.value().to_le_bytes());
    }
    Ok(h.finalize() as i64)
}

/// Whether the meta table's rows match its checksum row.
pub(crate) fn meta_intact(
    meta: &impl ReadableTable<&'static str, i64>,
) -> Result<bool, StorageError> {
    let stored = meta.get(META_CHECKSUM)?.map(|v| v.value());
    Ok(stored == Some(meta_crc(meta)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_row_unseals_only_as_itself() {
        let s = seal("t", b"k", b"payload");
        assert_eq!(unseal("t", b"k", &s), Some(&b"payload"[..]));
        assert_eq!(unseal("t", b"k2", &s), None, "another key");
        assert_eq!(unseal("u", b"k", &s), None, "another table");
        let mut flipped = s.clone();
        flipped[2] ^= 1;
        assert_eq!(unseal("t", b"k", &flipped), None, "a flipped bit");
        assert_eq!(unseal("t", b"k", b"abc"), None, "too short");
        assert_eq!(unseal("t", b"", &seal("t", b"", b"")), Some(&b""[..]));
    }

    #[test]
    fn a_row_sealed_in_place_is_the_row_sealed_with_its_key_joined() {
        let mut row = b"payload".to_vec();
        seal_in_place(&mut row, "t", &[b"key", &7i64.to_be_bytes()]);
        let mut key = b"key".to_vec();
        key.extend_from_slice(&7i64.to_be_bytes());
        assert_eq!(row, seal("t", &key, b"payload"));
    }

    #[test]
    fn a_digest_counts_rows_in_and_out() {
        let (a, b) = (seal("t", b"a", b"1"), seal("t", b"b", b"2"));
        let mut d = Digest::default();
        d.add(&a);
        d.add(&b);
        d.remove(&a);
        let mut only_b = Digest::default();
        only_b.add(&b);
        assert_eq!(d, only_b);
        d.add(&b);
        assert_ne!(d, only_b, "a duplicated row changes the digest");
    }
}
