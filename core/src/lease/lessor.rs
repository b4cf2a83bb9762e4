//! The lessor: a pure state machine of leases, their deadlines, attached key names, checkpoints
//! and the primary flag. No I/O, no threads, no clock: every call that needs the time takes
//! `now` (nanoseconds of the engine's monotonic clock). The engine serialises calls under its
//! state lock.
//!
//! Deadlines are kept *lazily* in the expiry heap: an entry's key is a lower bound of the
//! lease's real deadline. Renew, the hot path, only moves `Lease::deadline` later; the heap
//! entry is fixed up when it surfaces. Anything that can move a deadline *earlier* updates the
//! heap eagerly. Invariant (I-L1): for a lease on a primary that is not yet delivered as
//! expired, `queue.deadline_of(slot) <= lease.deadline`.

use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::time::Duration;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

use super::queue::DeadlineHeap;
use crate::error::{Error, Result};
use crate::types::{LeaseId, LeaseInfo};

/// Sentinel for "no time" (no deadline on a standby, no checkpointed remaining TTL).
pub(crate) const NO_TIME: u64 = u64::MAX;

#[derive(Debug)]
pub(crate) struct Lease {
    /// 0 while the slot is free.
    pub(crate) id: i64,
    pub(crate) ttl: u64,
    /// Monotonic deadline; `NO_TIME` on a standby.
    pub(crate) deadline: u64,
    /// Checkpointed remaining TTL used by the next promote; `NO_TIME` when none.
    pub(crate) remaining: u64,
    /// Manual revoke: delivered on `expired()`, awaiting the application's revoke.
    pub(crate) expired: bool,
    /// Renewed since its remaining TTL was last persisted.
    pub(crate) dirty: bool,
    /// The key this lease's heap entry has (`NO_TIME`: none), so renew can check I-L1 without
    /// touching the heap.
    queued: u64,
    /// Attached key names, in key order. Boxed on purpose: most leases have no keys, and 8
    /// bytes instead of 24 per lease is a third of the per-lease memory budget.
    #[allow(clippy::box_collection)]
    keys: Option<Box<BTreeSet<Vec<u8>>>>,
}

impl Lease {
    /// The attached key names, in key order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.keys.iter().flat_map(|k| k.iter())
    }
}

/// What became of a due lease popped by [`Lessor::pop_due`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Due {
    pub(crate) id: i64,
    /// True when this is a redelivery of a lease already delivered for a manual revoke.
    pub(crate) redelivery: bool,
    /// How far past its deadline the lease was found due, in nanoseconds.
    pub(crate) late_ns: u64,
}

#[derive(Debug)]
pub(crate) struct Lessor {
    slab: Vec<Lease>,
    free: Vec<u32>,
    /// Lease ID → slot. Holds only slots (4 bytes a bucket); IDs are read from the slab.
    index: HashTable<u32>,
    queue: DeadlineHeap,
    primary: bool,
    auto_revoke: bool,
    /// Next ID `grant` allocates; above every ID ever used (I-L2).
    next_id: i64,
    min_ttl: u64,
    /// How many live leases have `dirty` set (I-L4). Checkpoints find them by scanning the
    /// slab from `dirty_cursor`, so renew only flips a flag: no list to push to.
    dirty_count: usize,
    dirty_cursor: usize,
}

pub(crate) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(NO_TIME - 1)
}

#[inline]
fn hash(id: i64) -> u64 {
    FxBuildHasher.hash_one(id)
}

impl Lessor {
    #[inline]
    fn slot_of(&self, id: i64) -> Option<u32> {
        let slab = &self.slab;
        self.index
            .find(hash(id), |&s| slab[s as usize].id == id)
            .copied()
    }

    fn queue_set(&mut self, slot: u32, key: u64) {
        self.slab[slot as usize].queued = key;
        self.queue.register_or_update(slot, key);
    }

    fn queue_remove(&mut self, slot: u32) {
        self.slab[slot as usize].queued = NO_TIME;
        self.queue.remove(slot);
    }

    fn queue_clear(&mut self) {
        while let Some((_, slot)) = self.queue.pop() {
            self.slab[slot as usize].queued = NO_TIME;
        }
    }

    pub(crate) fn new(primary: bool, auto_revoke: bool, min_ttl: Duration) -> Lessor {
        Lessor {
            slab: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            queue: DeadlineHeap::new(),
            primary,
            auto_revoke,
            next_id: 1,
            min_ttl: ns(min_ttl),
            dirty_count: 0,
            dirty_cursor: 0,
        }
    }

    pub(crate) fn is_primary(&self) -> bool {
        self.primary
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    pub(crate) fn next_id(&self) -> i64 {
        self.next_id
    }

    pub(crate) fn set_next_id(&mut self, next: i64) {
        self.next_id = self.next_id.max(next);
    }

    /// Validates a TTL (L2) and applies `min_ttl`.
    pub(crate) fn check_ttl(&self, ttl: Duration) -> Result<u64> {
        Ok(ns(crate::limits::check_ttl(ttl)?).max(self.min_ttl))
    }

    /// Picks the ID for a grant (L1) without changing anything.
    pub(crate) fn check_new_id(&self, id: Option<i64>) -> Result<i64> {
        match id {
            Some(id) if id <= 0 => crate::limits::check_lease_id(id),
            Some(id) if self.slot_of(id).is_some() => Err(Error::LeaseExists(LeaseId::new(id))),
            Some(id) => Ok(id),
            None if self.next_id == i64::MAX => Err(Error::invalid(
                "lease ID space exhausted (an ID of i64::MAX was used)",
            )),
            None => Ok(self.next_id),
        }
    }

    /// Inserts a lease; `id` must come from [`check_new_id`](Self::check_new_id) and `ttl`
    /// from [`check_ttl`](Self::check_ttl). `remaining` is a checkpointed remaining TTL or
    /// `NO_TIME`; on a primary the deadline is `now + life`.
    pub(crate) fn insert(&mut self, id: i64, ttl: u64, remaining: u64, life: u64, now: u64) {
        debug_assert!(id > 0 && self.slot_of(id).is_none());
        if id >= self.next_id {
            self.next_id = id.saturating_add(1);
        }
        let deadline = if self.primary {
            now.saturating_add(life)
        } else {
            NO_TIME
        };
        let lease = Lease {
            id,
            ttl,
            deadline,
            remaining,
            expired: false,
            dirty: false,
            queued: NO_TIME,
            keys: None,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slab[slot as usize] = lease;
                slot
            }
            None => {
                self.slab.push(lease);
                (self.slab.len() - 1) as u32
            }
        };
        let slab = &self.slab;
        self.index
            .insert_unique(hash(id), slot, |&s| hash(slab[s as usize].id));
        if deadline != NO_TIME {
            self.queue_set(slot, deadline);
        }
    }

    #[inline]
    pub(crate) fn get(&self, id: i64) -> Option<&Lease> {
        self.slot_of(id).map(|s| &self.slab[s as usize])
    }

    pub(crate) fn contains(&self, id: i64) -> bool {
        self.slot_of(id).is_some()
    }

    fn get_mut(&mut self, id: i64) -> Result<&mut Lease> {
        match self.slot_of(id) {
            Some(s) => Ok(&mut self.slab[s as usize]),
            None => Err(Error::LeaseNotFound(LeaseId::new(id))),
        }
    }

    /// Removes a lease and returns its attached keys (L4). The caller deletes those keys.
    pub(crate) fn remove(&mut self, id: i64) -> Result<(u64, Vec<Vec<u8>>)> {
        let slab = &self.slab;
        let slot = match self
            .index
            .find_entry(hash(id), |&s| slab[s as usize].id == id)
        {
            Ok(entry) => entry.remove().0,
            Err(_) => return Err(Error::LeaseNotFound(LeaseId::new(id))),
        };
        self.queue_remove(slot);
        let lease = &mut self.slab[slot as usize];
        lease.id = 0;
        if std::mem::take(&mut lease.dirty) {
            self.dirty_count -= 1;
        }
        lease.expired = false;
        let keys = lease
            .keys
            .take()
            .map(|k| k.into_iter().collect())
            .unwrap_or_default();
        self.free.push(slot);
        Ok((lease.ttl, keys))
    }

    /// L5: deadline = now + TTL, clears the checkpoint; returns the TTL. No allocation on the
    /// steady path: the heap is touched only if the deadline moves earlier (after a promote
    /// with a long extension).
    #[inline]
    pub(crate) fn renew(&mut self, id: i64, now: u64) -> Result<u64> {
        if !self.primary {
            return Err(Error::NotPrimary);
        }
        let Some(slot) = self.slot_of(id) else {
            return Err(Error::LeaseNotFound(LeaseId::new(id)));
        };
        let lease = &mut self.slab[slot as usize];
        if lease.expired || lease.deadline <= now {
            // Never brought back (etcd#14758).
            return Err(if lease.expired || !self.auto_revoke {
                Error::LeaseExpired(LeaseId::new(id))
            } else {
                Error::LeaseNotFound(LeaseId::new(id))
            });
        }
        let deadline = now.saturating_add(lease.ttl);
        lease.deadline = deadline;
        lease.remaining = NO_TIME;
        if !lease.dirty {
            lease.dirty = true;
            self.dirty_count += 1;
        }
        let ttl = lease.ttl;
        if lease.queued > deadline {
            self.queue_set(slot, deadline);
        }
        Ok(ttl)
    }

    /// L8: records a remaining TTL for the next promote or reopen; the deadline stays.
    pub(crate) fn checkpoint(&mut self, id: i64, remaining: u64) -> Result<u64> {
        let lease = self.get_mut(id)?;
        lease.remaining = remaining;
        let (was_dirty, ttl) = (std::mem::take(&mut lease.dirty), lease.ttl);
        if was_dirty {
            self.dirty_count -= 1;
        }
        Ok(ttl)
    }

    /// Takes up to `limit` leases renewed since their last checkpoint and records their
    /// remaining TTL as of `now`, appending `(id, ttl, remaining)` to `out`. Scans at most `64 × limit`
    /// slots per call, resuming where the last call stopped, so the lock is never held long.
    pub(crate) fn take_dirty(&mut self, now: u64, limit: usize, out: &mut Vec<(i64, u64, u64)>) {
        let n = self.slab.len();
        let budget = limit.saturating_mul(64).min(n);
        let (start, mut scanned) = (out.len(), 0);
        while out.len() - start < limit && self.dirty_count > 0 && scanned < budget {
            if self.dirty_cursor >= n {
                self.dirty_cursor = 0;
            }
            let lease = &mut self.slab[self.dirty_cursor];
            self.dirty_cursor += 1;
            scanned += 1;
            if lease.id == 0 || !lease.dirty {
                continue;
            }
            lease.dirty = false;
            self.dirty_count -= 1;
            if lease.deadline == NO_TIME || lease.expired {
                continue;
            }
            let remaining = lease.deadline.saturating_sub(now);
            lease.remaining = remaining;
            out.push((lease.id, lease.ttl, remaining));
        }
    }

    pub(crate) fn has_dirty(&self) -> bool {
        self.dirty_count > 0
    }

    pub(crate) fn attach(&mut self, id: i64, key: &[u8]) -> Result<()> {
        self.get_mut(id)?
            .keys
            .get_or_insert_with(Box::default)
            .insert(key.to_vec());
        Ok(())
    }

    pub(crate) fn detach(&mut self, id: i64, key: &[u8]) -> Result<()> {
        let lease = self.get_mut(id)?;
        if let Some(keys) = &mut lease.keys {
            keys.remove(key);
            if keys.is_empty() {
                lease.keys = None;
            }
        }
        Ok(())
    }

    /// L9: primary; every deadline = now + extend + (checkpointed remaining, else TTL).
    /// Leases already delivered for a manual revoke stay expired and are due at once.
    pub(crate) fn promote(&mut self, extend: u64, now: u64) {
        self.primary = true;
        self.queue_clear();
        for slot in 0..self.slab.len() {
            let lease = &mut self.slab[slot];
            if lease.id == 0 {
                continue;
            }
            lease.deadline = if lease.expired {
                now
            } else {
                let base = if lease.remaining == NO_TIME {
                    lease.ttl
                } else {
                    lease.remaining
                };
                now.saturating_add(extend).saturating_add(base)
            };
            let deadline = lease.deadline;
            self.queue_set(slot as u32, deadline);
        }
    }

    /// L9: standby; no lease has a deadline.
    pub(crate) fn demote(&mut self) {
        self.primary = false;
        self.queue_clear();
        for lease in self.slab.iter_mut() {
            lease.deadline = NO_TIME;
        }
    }

    /// The earliest heap entry (a lower bound of the earliest deadline).
    pub(crate) fn next_wake(&self) -> Option<u64> {
        if !self.primary {
            return None;
        }
        self.queue.peek().map(|(d, _)| d)
    }

    /// Pops up to `limit` due leases into `out` (L10). Stale heap entries (renewed leases) are
    /// re-registered at their real deadline; at most `limit` of them are fixed per call so the
    /// state lock is never held long.
    pub(crate) fn pop_due(&mut self, now: u64, limit: usize, out: &mut Vec<Due>) {
        let mut fixes = 0;
        while out.len() < limit && fixes < limit {
            let Some((key, slot)) = self.queue.peek() else {
                break;
            };
            if key > now {
                break;
            }
            let lease = &self.slab[slot as usize];
            if !lease.expired && lease.deadline > now {
                let deadline = lease.deadline;
                self.queue_set(slot, deadline);
                fixes += 1;
                continue;
            }
            self.queue.pop();
            let lease = &mut self.slab[slot as usize];
            lease.queued = NO_TIME;
            out.push(Due {
                id: lease.id,
                redelivery: lease.expired,
                late_ns: now.saturating_sub(lease.deadline),
            });
        }
    }

    /// Manual revoke: the lease was delivered; deliver it again at `retry_at` unless revoked.
    pub(crate) fn mark_delivered(&mut self, id: i64, retry_at: u64) {
        if let Some(slot) = self.slot_of(id) {
            let lease = &mut self.slab[slot as usize];
            lease.expired = true;
            lease.deadline = retry_at;
            self.queue_set(slot, retry_at);
        }
    }

    pub(crate) fn info(&self, lease: &Lease, now: u64) -> LeaseInfo {
        LeaseInfo {
            id: LeaseId::new(lease.id),
            ttl: Duration::from_nanos(lease.ttl),
            remaining: self.remaining_of(lease, now).map(Duration::from_nanos),
            keys: lease.keys().cloned().collect(),
        }
    }

    fn remaining_of(&self, lease: &Lease, now: u64) -> Option<u64> {
        if !self.primary || lease.deadline == NO_TIME {
            None
        } else if lease.expired {
            Some(0)
        } else {
            Some(lease.deadline.saturating_sub(now))
        }
    }

    /// L7: every live lease, in ascending order of remaining time (on a standby: of
    /// checkpointed remaining, else TTL).
    pub(crate) fn list(&self, now: u64) -> Vec<LeaseInfo> {
        let mut all: Vec<(u64, &Lease)> = self
            .slab
            .iter()
            .filter(|l| l.id != 0)
            .map(|l| {
                let order = self
                    .remaining_of(l, now)
                    .unwrap_or(if l.remaining == NO_TIME {
                        l.ttl
                    } else {
                        l.remaining
                    });
                (order, l)
            })
            .collect();
        all.sort_by_key(|&(order, l)| (order, l.id));
        all.into_iter().map(|(_, l)| self.info(l, now)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn renew_after_promote_with_extend_moves_the_heap_entry_earlier() {
        let mut l = Lessor::new(false, true, Duration::ZERO);
        l.insert(1, 10 * S, NO_TIME, 10 * S, 0);
        l.promote(100 * S, 0);
        assert_eq!(l.next_wake(), Some(110 * S));
        l.renew(1, S).unwrap();
        assert_eq!(
            l.next_wake(),
            Some(11 * S),
            "I-L1: heap key must not exceed deadline"
        );
    }

    #[test]
    fn pop_due_fixes_stale_entries_of_renewed_leases() {
        let mut l = Lessor::new(true, true, Duration::ZERO);
        l.insert(1, 10 * S, NO_TIME, 10 * S, 0);
        l.insert(2, 10 * S, NO_TIME, 10 * S, 0);
        l.renew(1, 5 * S).unwrap();
        let mut out = Vec::new();
        l.pop_due(10 * S, 100, &mut out);
        assert_eq!(
            out,
            vec![Due {
                id: 2,
                redelivery: false,
                late_ns: 0,
            }]
        );
        assert_eq!(l.next_wake(), Some(15 * S));
    }

    #[test]
    fn checkpoint_scans_find_every_dirty_lease_across_calls() {
        let mut l = Lessor::new(true, true, Duration::ZERO);
        for id in 1..=1000 {
            l.insert(id, 100 * S, NO_TIME, 100 * S, 0);
        }
        for id in (1..=1000).step_by(7) {
            l.renew(id, S).unwrap();
        }
        l.remove(8).unwrap(); // a dirty lease revoked before the checkpoint
        let mut out = Vec::new();
        while l.has_dirty() {
            l.take_dirty(2 * S, 1, &mut out);
        }
        let mut ids: Vec<i64> = out.iter().map(|&(id, _, _)| id).collect();
        ids.sort();
        let want: Vec<i64> = (1..=1000).step_by(7).filter(|&id| id != 8).collect();
        assert_eq!(ids, want);
        assert!(out.iter().all(|&(_, _, rem)| rem == 99 * S));
    }

    #[test]
    fn freed_slots_are_reused_without_confusing_the_dirty_list() {
        let mut l = Lessor::new(true, true, Duration::ZERO);
        l.insert(1, 10 * S, NO_TIME, 10 * S, 0);
        l.renew(1, S).unwrap();
        l.remove(1).unwrap();
        l.insert(2, 10 * S, NO_TIME, 10 * S, 0);
        let mut out = Vec::new();
        l.take_dirty(2 * S, 10, &mut out);
        assert!(out.is_empty(), "lease 2 was never renewed");
    }
}
