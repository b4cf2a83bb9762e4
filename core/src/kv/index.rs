//! The key index: a pure, ordered map of keys to values, revisions and lease attachments.
//!
//! An entry may exist with no value: a key *name* attached to a lease (`attach` before any
//! put). Such entries are invisible to `get`/`range` and count as no key, but they are
//! persisted, so the lease → keys relation is rebuilt from the `kv` table alone (I-K2).

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::batch::Batch;
use crate::kv::txn::{Compare, CompareOp, CompareTarget};
use crate::rows::{Data, Entry, StoreOp};
use crate::types::{Event, EventKind, KeyValue, LeaseId};

#[derive(Debug, Default)]
pub(crate) struct KvIndex {
    map: BTreeMap<Vec<u8>, Entry>,
    /// The store revision: +1 per write (K4). Owned here, bumped by the state machine.
    pub(crate) revision: i64,
    /// The revision of the last compaction (0: none): reads at a revision below it are
    /// `Compacted` (K10). Raised by `LeaseKv::compact`, persisted by the store.
    pub(crate) compacted: i64,
    live: u64,
}

fn kv_of(key: &[u8], d: &Data, lease: i64) -> KeyValue {
    KeyValue {
        key: key.to_vec(),
        value: d.value.clone(),
        create_revision: d.create,
        mod_revision: d.mod_revision,
        version: d.version,
        lease: (lease != 0).then_some(LeaseId::new(lease)),
    }
}

/// `BTreeMap::range` bounds over keys.
pub(crate) type Bounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

pub(crate) fn prefix_end(prefix: &[u8]) -> Bound<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Bound::Excluded(end);
        }
    }
    Bound::Unbounded
}

impl KvIndex {
    pub(crate) fn live(&self) -> u64 {
        self.live
    }

    /// Loads the persisted entries on open. In key order (as the store reads them) into an empty
    /// index, the map is built in one pass instead of by one ordered insert per key.
    pub(crate) fn load(&mut self, rows: Vec<(Vec<u8>, Entry)>) {
        self.live += rows.iter().filter(|(_, e)| e.data.is_some()).count() as u64;
        if self.map.is_empty() {
            self.map = rows.into_iter().collect();
        } else {
            self.map.extend(rows);
        }
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<KeyValue> {
        let e = self.map.get(key)?;
        e.data.as_ref().map(|d| kv_of(key, d, e.lease))
    }

    /// The revision of `key`'s last write, if it has a value (no copy of it).
    pub(crate) fn mod_revision(&self, key: &[u8]) -> Option<i64> {
        self.map.get(key)?.data.as_ref().map(|d| d.mod_revision)
    }

    pub(crate) fn lease_of(&self, key: &[u8]) -> Option<i64> {
        self.map.get(key).map(|e| e.lease).filter(|&l| l != 0)
    }

    fn prefix_iter<'a>(&'a self, prefix: &[u8]) -> impl Iterator<Item = (&'a Vec<u8>, &'a Entry)> {
        self.map
            .range::<Vec<u8>, _>((Bound::Included(prefix.to_vec()), prefix_end(prefix)))
    }

    pub(crate) fn range(&self, prefix: &[u8], limit: Option<usize>) -> Vec<KeyValue> {
        self.prefix_iter(prefix)
            .filter_map(|(k, e)| e.data.as_ref().map(|d| kv_of(k, d, e.lease)))
            .take(limit.unwrap_or(usize::MAX))
            .collect()
    }

    /// Key-values with a value in `range`, in key order, for which `keep` holds (`keep` sees
    /// every one, so it can count).
    pub(crate) fn visit(
        &self,
        bounds: Option<Bounds>,
        mut keep: impl FnMut(&KeyValue) -> bool,
    ) -> Vec<KeyValue> {
        let Some(bounds) = bounds else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, e) in self.map.range::<Vec<u8>, _>(bounds) {
            if let Some(d) = &e.data {
                let kv = kv_of(k, d, e.lease);
                if keep(&kv) {
                    out.push(kv);
                }
            }
        }
        out
    }

    /// Whether the entries in `bounds` are at most `keys` key-values whose keys and values
    /// take at most `bytes` (SPEC E26). Walks at most `keys + 1` entries, attached names
    /// without a value counted as entries too, so the answer costs no more than the bound.
    #[cfg(feature = "serve")]
    pub(crate) fn holds_at_most(&self, bounds: Option<Bounds>, keys: usize, bytes: usize) -> bool {
        let Some(bounds) = bounds else {
            return true;
        };
        let mut size = 0usize;
        for (n, (k, e)) in self.map.range::<Vec<u8>, _>(bounds).enumerate() {
            if n >= keys {
                return false;
            }
            size += k.len() + e.data.as_ref().map_or(0, |d| d.value.len());
            if size > bytes {
                return false;
            }
        }
        true
    }

    /// Keys with a value under `prefix`, in key order.
    pub(crate) fn keys_with_prefix(&self, prefix: &[u8]) -> Vec<Vec<u8>> {
        self.prefix_iter(prefix)
            .filter(|(_, e)| e.data.is_some())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Writes `key = value` at revision `rev` attached to `lease` (0 = none). Returns the lease
    /// the key was attached to before (0 = none).
    pub(crate) fn put(
        &mut self,
        key: &[u8],
        value: &[u8],
        lease: i64,
        rev: i64,
        b: &mut Batch,
    ) -> i64 {
        let entry = match self.map.get_mut(key) {
            Some(e) => e,
            None => self.map.entry(key.to_vec()).or_insert(Entry {
                data: None,
                lease: 0,
            }),
        };
        let prev = if b.record_events {
            entry.data.as_ref().map(|d| kv_of(key, d, entry.lease))
        } else {
            None
        };
        let old_lease = entry.lease;
        match &mut entry.data {
            Some(d) => {
                d.value.clear();
                d.value.extend_from_slice(value);
                d.mod_revision = rev;
                d.version += 1;
            }
            None => {
                self.live += 1;
                entry.data = Some(Data {
                    value: value.to_vec(),
                    create: rev,
                    mod_revision: rev,
                    version: 1,
                });
            }
        }
        entry.lease = lease;
        let entry = &*entry;
        b.op(|| StoreOp::PutKey(key.to_vec(), entry.clone()));
        if b.record_events {
            let d = entry.data.as_ref().expect("just written");
            b.events.push(Event {
                kind: EventKind::Put,
                kv: kv_of(key, d, lease),
                prev_kv: prev,
            });
        }
        old_lease
    }

    /// Deletes `key` (value and attachment) at revision `rev`. Returns whether it had a value
    /// and the lease it was attached to (0 = none).
    pub(crate) fn delete(&mut self, key: &[u8], rev: i64, b: &mut Batch) -> (bool, i64) {
        let Some(e) = self.map.remove(key) else {
            return (false, 0);
        };
        let existed = e.data.is_some();
        if existed {
            b.op(|| StoreOp::DelKeyAt(key.to_vec(), rev));
        } else {
            b.op(|| StoreOp::DelKey(key.to_vec()));
        }
        if let Some(d) = e.data {
            self.live -= 1;
            if b.record_events {
                let prev = kv_of(key, &d, e.lease);
                b.events.push(Event {
                    kind: EventKind::Delete,
                    kv: KeyValue {
                        key: key.to_vec(),
                        mod_revision: rev,
                        ..KeyValue::default()
                    },
                    prev_kv: Some(prev),
                });
            }
        }
        (existed, e.lease)
    }

    /// Attaches `key` to `lease` (0 = detach) without touching its value or revisions.
    /// Returns the previous lease (0 = none).
    pub(crate) fn set_lease(&mut self, key: &[u8], lease: i64, b: &mut Batch) -> i64 {
        match self.map.get_mut(key) {
            Some(e) => {
                let old = e.lease;
                if old == lease {
                    return old;
                }
                e.lease = lease;
                if e.data.is_none() && lease == 0 {
                    self.map.remove(key);
                    b.op(|| StoreOp::DelKey(key.to_vec()));
                } else if e.data.is_some() {
                    let e = &*e;
                    b.op(|| StoreOp::LeaseKey(key.to_vec(), e.clone()));
                    b.relabeled = true;
                } else {
                    let e = &*e;
                    b.op(|| StoreOp::PutKey(key.to_vec(), e.clone()));
                }
                old
            }
            None if lease == 0 => 0,
            None => {
                let e = Entry { data: None, lease };
                b.op(|| StoreOp::PutKey(key.to_vec(), e.clone()));
                self.map.insert(key.to_vec(), e);
                0
            }
        }
    }

    /// K5: evaluates one compare against the current state. A missing key compares as version,
    /// revisions and lease 0, and fails every value compare (as in etcd).
    pub(crate) fn compare(&self, c: &Compare) -> bool {
        let data = self
            .map
            .get(&c.key)
            .and_then(|e| e.data.as_ref().map(|d| (d, e.lease)));
        let ord = match (&c.target, data) {
            (CompareTarget::Value(_), None) => return false,
            (CompareTarget::Value(v), Some((d, _))) => d.value.as_slice().cmp(v.as_slice()),
            (CompareTarget::Version(n), d) => d.map_or(0, |(d, _)| d.version).cmp(n),
            (CompareTarget::CreateRevision(n), d) => d.map_or(0, |(d, _)| d.create).cmp(n),
            (CompareTarget::ModRevision(n), d) => d.map_or(0, |(d, _)| d.mod_revision).cmp(n),
            (CompareTarget::Lease(n), d) => d.map_or(0, |(_, l)| l).cmp(n),
        };
        match c.op {
            CompareOp::Equal => ord.is_eq(),
            CompareOp::NotEqual => ord.is_ne(),
            CompareOp::Less => ord.is_lt(),
            CompareOp::Greater => ord.is_gt(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_handles_trailing_ff_bytes() {
        assert_eq!(prefix_end(b"a\xff"), Bound::Excluded(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), Bound::Unbounded);
        assert_eq!(prefix_end(b""), Bound::Unbounded);
    }
}
