//! `LeaseKv`: the lessor and the key index composed into one pure state machine.
//!
//! Every write either fails with nothing changed, or applies fully in memory and appends its
//! storage ops, events and expired notices to a [`Batch`] (I-S1). Nothing here does I/O, takes
//! a lock or reads a clock: `now` (monotonic ns) and `wall` (Unix ms) are arguments.

use std::time::Duration;

use crate::alarms::{Alarm, Alarms};
use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::kv::index::KvIndex;
use crate::lease::lessor::{ns, Due, Lessor, NO_TIME};
use crate::limits::check_key;
use crate::rows::{Loaded, StoreOp};
use crate::types::{ExpiredLease, LeaseId, Recovery};

mod apply;

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counters {
    pub(crate) granted: u64,
    pub(crate) revoked: u64,
    pub(crate) renewed: u64,
    pub(crate) expired: u64,
}

#[derive(Debug)]
pub(crate) struct LeaseKv {
    pub(crate) lessor: Lessor,
    pub(crate) kv: KvIndex,
    pub(crate) counters: Counters,
    /// The raised alarms (SPEC E20): what they refuse is the engine's to ask before a write.
    pub(crate) alarms: Alarms,
    auto_revoke: bool,
    /// Manual revoke: redelivery interval, ns.
    retry: u64,
}

impl LeaseKv {
    pub(crate) fn new(
        primary: bool,
        auto_revoke: bool,
        min_ttl: Duration,
        retry: Duration,
    ) -> LeaseKv {
        LeaseKv {
            lessor: Lessor::new(primary, auto_revoke, min_ttl),
            kv: KvIndex::default(),
            counters: Counters::default(),
            alarms: Alarms::default(),
            auto_revoke,
            retry: ns(retry),
        }
    }

    /// Loads what the store read on open into this fresh machine (SPEC L13). `now` (monotonic
    /// ns) and `wall` (Unix ms) rebuild the deadlines as `recovery` says. `Err` is the reason
    /// the image is inconsistent (the engine reports it as `Corrupt`).
    pub(crate) fn recover(
        &mut self,
        loaded: Loaded,
        recovery: Recovery,
        now: u64,
        wall: i64,
    ) -> std::result::Result<(), String> {
        self.kv.revision = loaded.revision;
        self.kv.compacted = loaded.compacted;
        self.lessor.set_next_id(loaded.next_id);
        for a in loaded.alarms {
            self.alarms.raise(a);
        }
        for row in loaded.leases {
            let base = if row.remaining == NO_TIME {
                row.ttl
            } else {
                row.remaining
            };
            let (checkpoint, life) = match recovery {
                Recovery::Wall => {
                    let elapsed_ms = wall.saturating_sub(row.wall_ms).max(0) as u64;
                    let left = base.saturating_sub(elapsed_ms.saturating_mul(1_000_000));
                    (left, left)
                }
                Recovery::Extend(extend) => (row.remaining, base.saturating_add(ns(extend))),
            };
            self.lessor.insert(row.id, row.ttl, checkpoint, life, now);
        }
        for (key, entry) in &loaded.keys {
            let lease = entry.lease;
            if lease != 0 && self.lessor.attach(lease, key).is_err() {
                return Err(format!(
                    "key {:?} is attached to missing lease {lease}",
                    String::from_utf8_lossy(key)
                ));
            }
        }
        self.kv.load(loaded.keys);
        Ok(())
    }

    /// L1–L3.
    pub(crate) fn grant(
        &mut self,
        id: Option<i64>,
        ttl: Duration,
        now: u64,
        wall: i64,
        b: &mut Batch,
    ) -> Result<i64> {
        let ttl = self.lessor.check_ttl(ttl)?;
        let id = self.lessor.check_new_id(id)?;
        self.lessor.insert(id, ttl, NO_TIME, ttl, now);
        self.counters.granted += 1;
        b.op(|| StoreOp::PutLease {
            id,
            ttl,
            remaining: NO_TIME,
            wall_ms: wall,
        });
        Ok(id)
    }

    /// Removes a lease and deletes its attached keys at revision `rev`.
    fn drop_lease(&mut self, id: i64, rev: i64, b: &mut Batch) -> Result<ExpiredLease> {
        let (ttl, keys) = self.lessor.remove(id)?;
        for key in &keys {
            self.kv.delete(key, rev, b);
        }
        b.op(|| StoreOp::DelLease(id));
        if b.track_gone {
            b.gone.push(id);
        }
        Ok(ExpiredLease {
            id: LeaseId::new(id),
            ttl: Duration::from_nanos(ttl),
            keys,
        })
    }

    /// L4: one revision per revoke, keys deleted in key order.
    pub(crate) fn revoke(&mut self, id: i64, b: &mut Batch) -> Result<()> {
        let rev = self.next_revision()?;
        self.drop_lease(id, rev, b)?;
        self.kv.revision = rev;
        self.counters.revoked += 1;
        Ok(())
    }

    /// L5.
    #[inline]
    pub(crate) fn renew(&mut self, id: i64, now: u64) -> Result<u64> {
        let ttl = self.lessor.renew(id, now)?;
        self.counters.renewed += 1;
        Ok(ttl)
    }

    /// L6: all-or-nothing; a key attached elsewhere moves.
    pub(crate) fn attach<K: AsRef<[u8]>>(
        &mut self,
        id: i64,
        keys: &[K],
        b: &mut Batch,
    ) -> Result<()> {
        if !self.lessor.contains(id) {
            return Err(Error::LeaseNotFound(LeaseId::new(id)));
        }
        keys.iter().try_for_each(|k| check_key(k.as_ref()))?;
        for key in keys {
            let key = key.as_ref();
            let old = self.kv.set_lease(key, id, b);
            self.rebind(key, old, id);
        }
        Ok(())
    }

    /// L6: detaches the keys that are attached to `id`; others are left alone.
    pub(crate) fn detach<K: AsRef<[u8]>>(
        &mut self,
        id: i64,
        keys: &[K],
        b: &mut Batch,
    ) -> Result<()> {
        if !self.lessor.contains(id) {
            return Err(Error::LeaseNotFound(LeaseId::new(id)));
        }
        for key in keys {
            let key = key.as_ref();
            if self.kv.lease_of(key) == Some(id) {
                self.kv.set_lease(key, 0, b);
                self.rebind(key, id, 0);
            }
        }
        Ok(())
    }

    /// L8: explicit checkpoint, persisted.
    pub(crate) fn checkpoint(
        &mut self,
        id: i64,
        remaining: Duration,
        wall: i64,
        b: &mut Batch,
    ) -> Result<()> {
        let remaining = ns(remaining);
        let ttl = self.lessor.checkpoint(id, remaining)?;
        b.op(|| StoreOp::PutLease {
            id,
            ttl,
            remaining,
            wall_ms: wall,
        });
        Ok(())
    }

    /// L8: persists the remaining TTL of up to `limit` renewed leases. Returns how many.
    pub(crate) fn checkpoint_dirty(
        &mut self,
        now: u64,
        wall: i64,
        limit: usize,
        b: &mut Batch,
    ) -> usize {
        let mut out = Vec::new();
        self.lessor.take_dirty(now, limit, &mut out);
        for &(id, ttl, remaining) in &out {
            b.op(|| StoreOp::PutLease {
                id,
                ttl,
                remaining,
                wall_ms: wall,
            });
        }
        out.len()
    }

    /// L11/L12: handles leases popped by `Lessor::pop_due`. Auto revoke: every one is revoked
    /// in this one write, at one revision. Manual: they are delivered and re-armed.
    pub(crate) fn expire(&mut self, due: &[Due], now: u64, b: &mut Batch) {
        if due.is_empty() {
            return;
        }
        let mut notices = Vec::with_capacity(due.len());
        // With no revision left (K7), due leases are reported as without auto-revoke.
        if let (true, Ok(rev)) = (self.auto_revoke, self.next_revision()) {
            for d in due {
                if let Ok(notice) = self.drop_lease(d.id, rev, b) {
                    notices.push(notice);
                }
            }
            self.kv.revision = rev;
            self.counters.expired += notices.len() as u64;
        } else {
            let retry_at = now.saturating_add(self.retry);
            for d in due {
                let Some(lease) = self.lessor.get(d.id) else {
                    continue;
                };
                notices.push(ExpiredLease {
                    id: LeaseId::new(d.id),
                    ttl: Duration::from_nanos(lease.ttl),
                    keys: lease.keys().cloned().collect(),
                });
                if !d.redelivery {
                    self.counters.expired += 1;
                }
                self.lessor.mark_delivered(d.id, retry_at);
            }
        }
        b.expired.push(notices);
    }

    pub(crate) fn check_lease(&self, lease: i64) -> Result<()> {
        if lease != 0 && !self.lessor.contains(lease) {
            return Err(Error::LeaseNotFound(LeaseId::new(lease)));
        }
        Ok(())
    }

    /// Mirrors in the lessor a key moving from lease `old` to lease `new` (0 = none) in the
    /// index. Both leases exist (I-K2 and the caller's validation), so this cannot fail.
    fn rebind(&mut self, key: &[u8], old: i64, new: i64) {
        if old == new {
            return;
        }
        if old != 0 {
            let _ = self.lessor.detach(old, key);
        }
        if new != 0 {
            let _ = self.lessor.attach(new, key);
        }
    }

    pub(crate) fn put_at(&mut self, key: &[u8], value: &[u8], lease: i64, rev: i64, b: &mut Batch) {
        let old = self.kv.put(key, value, lease, rev, b);
        self.rebind(key, old, lease);
    }

    pub(crate) fn delete_at(&mut self, key: &[u8], rev: i64, b: &mut Batch) -> bool {
        let (existed, old) = self.kv.delete(key, rev, b);
        self.rebind(key, old, 0);
        existed
    }

    /// K1 / L6.
    pub(crate) fn put(
        &mut self,
        key: &[u8],
        value: &[u8],
        lease: i64,
        b: &mut Batch,
    ) -> Result<i64> {
        check_key(key)?;
        self.check_lease(lease)?;
        let rev = self.next_revision()?;
        self.put_at(key, value, lease, rev, b);
        self.kv.revision = rev;
        Ok(rev)
    }

    /// K3: the revision moves only if the key existed.
    pub(crate) fn delete(&mut self, key: &[u8], b: &mut Batch) -> Result<bool> {
        check_key(key)?;
        let rev = self.next_revision()?;
        let existed = self.delete_at(key, rev, b);
        if existed {
            self.kv.revision = rev;
        }
        Ok(existed)
    }

    fn delete_prefix_at(&mut self, prefix: &[u8], rev: i64, b: &mut Batch) -> u64 {
        let keys = self.kv.keys_with_prefix(prefix);
        for key in &keys {
            self.delete_at(key, rev, b);
        }
        keys.len() as u64
    }

    /// K3: every key under `prefix`, at one revision.
    pub(crate) fn delete_prefix(&mut self, prefix: &[u8], b: &mut Batch) -> Result<u64> {
        let rev = self.next_revision()?;
        let n = self.delete_prefix_at(prefix, rev, b);
        if n > 0 {
            self.kv.revision = rev;
        }
        Ok(n)
    }

    /// The revision the next write takes (K7: none past `i64::MAX`).
    pub(crate) fn next_revision(&self) -> Result<i64> {
        crate::limits::next_revision(self.kv.revision)
    }

    /// K10, etcd's Compact: every revision below `revision` is forgotten, `revision` itself
    /// stays readable. Refused above the current revision or at or below an earlier compaction.
    /// Moves no revision.
    pub(crate) fn compact(
        &mut self,
        revision: i64,
        b: &mut Batch,
    ) -> std::result::Result<i64, crate::etcd::Refusal> {
        use crate::etcd::Refusal;
        if revision > self.kv.revision {
            return Err(Refusal::FutureRevision);
        }
        if revision <= self.kv.compacted {
            return Err(Refusal::Compacted);
        }
        self.kv.compacted = revision;
        b.op(|| StoreOp::Compact(revision));
        Ok(self.kv.revision)
    }

    /// Raises (`raised`) or disarms `alarm`, recording the change (SPEC E20); false if it
    /// already was so. Moves no revision.
    pub(crate) fn set_alarm(&mut self, alarm: Alarm, raised: bool, b: &mut Batch) -> bool {
        let changed = if raised {
            self.alarms.raise(alarm)
        } else {
            self.alarms.disarm(alarm)
        };
        if changed {
            b.op(|| StoreOp::Alarm(alarm, raised));
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::{Data, Entry, LeaseRow};

    const SEC: u64 = 1_000_000_000;

    fn fresh() -> LeaseKv {
        LeaseKv::new(true, true, Duration::ZERO, Duration::from_secs(3))
    }

    fn image(remaining: u64, wall_ms: i64) -> Loaded {
        Loaded {
            revision: 7,
            compacted: 0,
            next_id: 10,
            leases: vec![LeaseRow {
                id: 5,
                ttl: 10 * SEC,
                remaining,
                wall_ms,
            }],
            keys: vec![(
                b"k".to_vec(),
                Entry {
                    data: Some(Data {
                        value: b"v".to_vec(),
                        create: 3,
                        mod_revision: 7,
                        version: 2,
                    }),
                    lease: 5,
                },
            )],
            alarms: Vec::new(),
        }
    }

    #[test]
    fn recover_restores_revision_ids_keys_and_attachments() {
        let mut lease_kv = fresh();
        lease_kv
            .recover(image(NO_TIME, 1_000), Recovery::Wall, 0, 1_000)
            .unwrap();
        assert_eq!(lease_kv.kv.revision, 7);
        assert_eq!(lease_kv.lessor.next_id(), 10);
        assert_eq!(lease_kv.kv.lease_of(b"k"), Some(5));
        assert_eq!(lease_kv.kv.get(b"k").unwrap().mod_revision, 7);
        let l = lease_kv.lessor.get(5).unwrap();
        assert_eq!(l.keys().cloned().collect::<Vec<_>>(), vec![b"k".to_vec()]);
    }

    #[test]
    fn recover_wall_subtracts_the_downtime_from_the_checkpointed_remaining() {
        let mut lease_kv = fresh();
        // 4 s remaining when persisted at wall 1 000 ms, reopened 1.5 s later.
        lease_kv
            .recover(image(4 * SEC, 1_000), Recovery::Wall, 100, 2_500)
            .unwrap();
        assert_eq!(
            lease_kv
                .lessor
                .info(lease_kv.lessor.get(5).unwrap(), 100)
                .remaining,
            Some(Duration::from_millis(2_500))
        );
    }

    #[test]
    fn recover_wall_with_a_clock_gone_backwards_loses_nothing() {
        let mut lease_kv = fresh();
        lease_kv
            .recover(image(NO_TIME, 5_000), Recovery::Wall, 0, 1_000)
            .unwrap();
        assert_eq!(
            lease_kv
                .lessor
                .info(lease_kv.lessor.get(5).unwrap(), 0)
                .remaining,
            Some(Duration::from_secs(10))
        );
    }

    #[test]
    fn recover_extend_grants_the_extension_plus_the_ttl_when_none_was_checkpointed() {
        let mut lease_kv = fresh();
        lease_kv
            .recover(
                image(NO_TIME, 0),
                Recovery::Extend(Duration::from_secs(2)),
                0,
                i64::MAX,
            )
            .unwrap();
        assert_eq!(
            lease_kv
                .lessor
                .info(lease_kv.lessor.get(5).unwrap(), 0)
                .remaining,
            Some(Duration::from_secs(12))
        );
    }

    #[test]
    fn recover_refuses_a_key_attached_to_a_missing_lease() {
        let mut img = image(NO_TIME, 0);
        img.leases.clear();
        let err = fresh().recover(img, Recovery::Wall, 0, 0).unwrap_err();
        assert!(err.contains("missing lease 5"), "{err}");
    }
}
