//! The compactor thread (SPEC K10, K12): applies the automatic compaction policy and carries
//! out the compactions the file holds in bounded steps, each one short write transaction
//! taken between commits, so writers never wait for a whole compaction.

use std::collections::VecDeque;
use std::time::Duration;

use crossbeam_channel::RecvTimeoutError;

use super::commit::enqueued;
use super::Shared;
use crate::types::AutoCompaction;

/// How often the `Revisions` policy is checked.
const REVISION_TICK: Duration = Duration::from_secs(1);
/// The most a step waits for the threads blocked on the store to take it first.
const LET_IN: Duration = Duration::from_millis(100);

/// Woken by `Shared::compact_tx` (a compaction reached the file, the engine opened, or it is
/// closing) or by the policy's tick; steps until the file's compaction is done.
pub(super) fn run(s: &Shared) {
    let policy = s.cfg.auto_compaction;
    let tick = match policy {
        AutoCompaction::Off => None,
        AutoCompaction::Revisions(_) => Some(REVISION_TICK),
        AutoCompaction::Periodic(d) => {
            Some((d / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600)))
        }
    };
    // Periodic: (monotonic ns, revision) sampled every tick, oldest first.
    let mut samples: VecDeque<(u64, i64)> = VecDeque::new();
    loop {
        let woke = match tick {
            None => s.compact_rx.recv().is_ok(),
            Some(t) => !matches!(
                s.compact_rx.recv_timeout(t),
                Err(RecvTimeoutError::Disconnected)
            ),
        };
        if !woke {
            return;
        }
        {
            let mut st = s.state.lock();
            if st.closed {
                return;
            }
            let (current, now) = (st.lease_kv.kv.revision, s.clock.now_ns());
            let target = match policy {
                AutoCompaction::Off => None,
                AutoCompaction::Revisions(n) => {
                    Some(current.saturating_sub(i64::try_from(n).unwrap_or(i64::MAX)))
                }
                AutoCompaction::Periodic(d) => {
                    samples.push_back((now, current));
                    let cutoff = now.saturating_sub(d.as_nanos().min(u64::MAX as u128) as u64);
                    let mut target = None;
                    while samples.front().is_some_and(|&(t, _)| t <= cutoff) {
                        target = samples.pop_front().map(|(_, r)| r);
                    }
                    target
                }
            };
            if let Some(rev) =
                target.filter(|&r| r > st.lease_kv.kv.compacted && st.poisoned.is_none())
            {
                let st = &mut *st;
                if st.lease_kv.compact(rev, &mut st.pending).is_ok() {
                    enqueued(s, st, false);
                    // Lock order: state, then hub.
                    s.hub.lock().compact(rev - 1);
                }
            }
        }
        loop {
            if s.state.lock().closed {
                return;
            }
            let more = match &*s.store.lock() {
                Some(store) => store.compact_step(),
                None => return,
            };
            // A failed step leaves the rows for the next round; reads are unaffected.
            if !matches!(more, Ok(true)) {
                break;
            }
            // std's mutex is not fair: without this the next step would re-take the store
            // ahead of a checkpoint (or a past read) that waits for it, for the whole pass.
            s.store.let_waiters_in(LET_IN);
        }
    }
}
