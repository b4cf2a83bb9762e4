//! The commit pipeline: writes hand their effects to the committer thread, which commits them
//! in one redb transaction (group commit), then delivers their events and notices and wakes
//! the writers waiting for durability (SPEC D1–D3).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::TrySendError;

use super::{Shared, State};
use crate::batch::Batch;
use crate::clock::instant_after;
use crate::error::{Error, Result};
use crate::record::StoreOp;
use crate::types::Durability;

/// Immediate mode: how long a commit waits for the writers of the previous commit to come back.
const GATHER: Duration = Duration::from_micros(50);
/// Buffered mode: flush early once this many ops are pending.
pub(super) const FLUSH_OPS: usize = 1 << 16;
/// Hands what a write added to `pending` on: to the committer (returning the sequence number to
/// wait for in Immediate mode), or straight to the hub in memory.
pub(super) fn enqueued(s: &Shared, st: &mut State) -> Option<u64> {
    if !s.cfg.persist {
        let batch = st.pending.take();
        deliver(s, batch);
        return None;
    }
    if st.pending.ops.is_empty() && st.pending.events.is_empty() {
        // Only notices (manual-revoke deliveries) and nothing pending before them: no commit
        // is needed to deliver them.
        let batch = st.pending.take();
        deliver(s, batch);
        return None;
    }
    st.seq += 1;
    match s.cfg.durability {
        Durability::Immediate => {
            s.commit_cv.notify_one();
            Some(st.seq)
        }
        Durability::Buffered(_) => {
            // Buffered acknowledges on apply, and so delivers expired notices on apply too;
            // watch events still wait for their commit (K6).
            if !st.pending.expired.is_empty() {
                let expired = std::mem::take(&mut st.pending.expired);
                deliver(
                    s,
                    Batch {
                        expired,
                        ..Batch::default()
                    },
                );
            }
            if st.pending.ops.len() >= FLUSH_OPS {
                s.commit_cv.notify_one();
            }
            None
        }
    }
}

/// Delivers committed events to watchers and expired notices to `expired()`.
fn deliver(s: &Shared, batch: Batch) {
    if !batch.events.is_empty() {
        let mut hub = s.hub.lock();
        hub.dispatch(batch.events);
        s.record_events.store(hub.wants_events(), Ordering::Relaxed);
    }
    if !batch.expired.is_empty() {
        if let Some((tx, _)) = &*s.expired.lock() {
            for notices in batch.expired {
                if notices.is_empty() {
                    continue;
                }
                if let Err(TrySendError::Full(_)) = tx.try_send(notices) {
                    s.expired_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

pub(super) fn wait_durable(s: &Shared, seq: u64) -> Result<()> {
    let mut done = s.done.lock();
    loop {
        if done.committed >= seq {
            return Ok(());
        }
        if let Some(e) = &done.failed {
            return Err(e.clone());
        }
        s.done_cv.wait(&mut done);
    }
}

/// The committer thread: takes everything pending, commits it in one redb transaction, then delivers
/// its events and wakes the writers waiting for it (group commit, SPEC D1–D3).
pub(super) fn run(s: &Shared) {
    let interval = match s.cfg.durability {
        Durability::Immediate => None,
        Durability::Buffered(d) => Some(d),
    };
    let mut next_flush = interval.map(instant_after);
    // The previous batch's ops buffer, cleared, handed back to `pending` so a steady stream of
    // writes never regrows it.
    let mut spare: Vec<StoreOp> = Vec::new();
    // Writes the previous commit carried: with that many writers about, a commit that starts
    // with fewer waits briefly for the rest to enqueue (they were woken by the last commit).
    let mut last_writes: u64 = 0;
    let mut taken_seq: u64 = 0;
    loop {
        let (mut batch, seq, revision, next_id, last) = {
            let mut st = s.state.lock();
            loop {
                let due = match next_flush {
                    None => true,
                    Some(t) => Instant::now() >= t || st.pending.ops.len() >= FLUSH_OPS,
                };
                if !st.pending.is_empty() && (due || st.closed) {
                    if interval.is_none() && !st.closed && st.seq - taken_seq < last_writes {
                        let until = Instant::now() + GATHER;
                        while st.seq - taken_seq < last_writes && Instant::now() < until {
                            s.commit_cv.wait_until(&mut st, until);
                        }
                    }
                    break;
                }
                if st.closed {
                    return;
                }
                match next_flush {
                    None => s.commit_cv.wait(&mut st),
                    Some(t) => {
                        if Instant::now() >= t {
                            next_flush = interval.map(instant_after);
                        }
                        let t = next_flush.expect("buffered");
                        s.commit_cv.wait_until(&mut st, t);
                    }
                }
            }
            if let Some(d) = interval {
                next_flush = Some(instant_after(d));
            }
            let batch = st.pending.take();
            std::mem::swap(&mut st.pending.ops, &mut spare);
            last_writes = st.seq - taken_seq;
            taken_seq = st.seq;
            (
                batch,
                st.seq,
                st.m.kv.revision,
                st.m.lessor.next_id(),
                st.closed,
            )
        };
        let failed = s.state.lock().poisoned.is_some();
        let result = if failed {
            Err(Error::storage(
                "an earlier commit failed; reopen the database",
            ))
        } else {
            match &*s.store.lock() {
                Some(store) => store.commit(&batch.ops, revision, next_id),
                None => Ok(()),
            }
        };
        spare = std::mem::take(&mut batch.ops);
        spare.clear();
        if spare.capacity() > 4 * FLUSH_OPS {
            spare.shrink_to(FLUSH_OPS);
        }
        match result {
            Ok(()) => {
                s.commits.fetch_add(1, Ordering::Relaxed);
                deliver(s, batch);
                let mut done = s.done.lock();
                done.committed = seq;
                done.revision = revision;
                s.done_cv.notify_all();
            }
            Err(e) => {
                let e = match e {
                    Error::Storage {
                        message,
                        errno,
                        path,
                    } => Error::Storage {
                        message: format!("commit failed: {message}"),
                        errno,
                        path,
                    },
                    other => other,
                };
                s.state.lock().poisoned.get_or_insert(e.clone());
                let mut done = s.done.lock();
                done.failed.get_or_insert(e);
                s.done_cv.notify_all();
            }
        }
        if last && s.state.lock().pending.is_empty() {
            return;
        }
    }
}
