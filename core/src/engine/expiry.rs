//! The expiry thread: sleeps until the earliest deadline or checkpoint, then expires and
//! checkpoints leases in bounded batches.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::commit::enqueued;
use super::wakeups::notify_gone;
use super::{Shared, AWAKE};
use crate::lease::lessor::{Due, NO_TIME};

/// Most leases expired (or checkpointed) per state-lock hold, and per write.
const EXPIRY_BATCH: usize = 256;
/// Between expiry batches: how long the expiry thread lets blocked callers go first.
const LET_IN: Duration = Duration::from_micros(200);
/// The expiry thread (SPEC L8, L10–L12): sleeps until the earliest deadline or checkpoint,
/// then expires due leases in bounded batches, releasing the lock between batches.
pub(super) fn run(s: &Shared) {
    let mut due: Vec<Due> = Vec::with_capacity(EXPIRY_BATCH);
    let mut st = s.state.lock();
    loop {
        if st.closed {
            return;
        }
        let now = s.clock.now_ns();
        let mut worked = false;
        if st.poisoned.is_none() && st.lease_kv.lessor.is_primary() {
            due.clear();
            st.lease_kv.lessor.pop_due(now, EXPIRY_BATCH, &mut due);
            let more = st.lease_kv.lessor.next_wake().is_some_and(|w| w <= now);
            if !due.is_empty() {
                for d in due.iter().filter(|d| !d.redelivery) {
                    s.recorders.expiry_lateness.record(d.late_ns);
                }
                let st_ref = &mut *st;
                st_ref.pending.record_events = s.record_events.load(Ordering::Relaxed);
                st_ref.lease_kv.expire(&due, now, &mut st_ref.pending);
                notify_gone(s, &mut st_ref.pending);
                enqueued(s, st_ref, false);
            }
            if now >= st.next_checkpoint {
                let st_ref = &mut *st;
                let n = st_ref.lease_kv.checkpoint_dirty(
                    now,
                    s.clock.wall_ms(),
                    EXPIRY_BATCH,
                    &mut st_ref.pending,
                );
                if n > 0 {
                    enqueued(s, st_ref, false);
                }
                if !st.lease_kv.lessor.has_dirty() {
                    st.next_checkpoint = now.saturating_add(s.cfg.checkpoint_interval);
                } else {
                    worked = true;
                }
            }
            worked |= more || !due.is_empty();
        }
        if worked {
            // Let renewers and writers in between batches: std's mutex is not fair, so wait
            // until the threads blocked on it have had their turn.
            drop(st);
            s.state.let_waiters_in(LET_IN);
            st = s.state.lock();
            continue;
        }
        let wake = st.lease_kv.lessor.next_wake().unwrap_or(NO_TIME).min(
            if st.lease_kv.lessor.is_primary() {
                st.next_checkpoint
            } else {
                NO_TIME
            },
        );
        st.sleep_until = wake;
        match (wake != NO_TIME)
            .then(|| s.clock.instant_at(Duration::from_nanos(wake)))
            .flatten()
        {
            Some(at) => {
                s.expiry_cv.wait_until(&mut st, at);
            }
            None => s.expiry_cv.wait(&mut st),
        }
        st.sleep_until = AWAKE;
    }
}
