//! The async durability wait (feature `serve`, SPEC E22): a request applied on an async task (a
//! `tenure serve` handler on a tokio worker) awaits its commit without holding a thread. The
//! committer thread commits it (or a synchronous writer leading a commit takes it along), and
//! the end of the commit that covers it completes its future directly (DESIGN, "The write
//! path"): one hand-off to the committer and one back, no blocking-pool thread.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::{quota, CommitProgress, Engine, Shared};
use crate::alarms::Cost;
use crate::error::Result;
use crate::state::LeaseKv;
use crate::types::{Durability, LeaseId};

/// A request applied in memory whose answer may be given once it is durable: await
/// [`durable`](Applied::durable). Dropping it does not undo the request (like a client that
/// hangs up after sending a write).
#[must_use = "the answer may be given only once it is durable"]
pub struct Applied<T> {
    value: Result<T>,
    wait: Option<DurableWait>,
}

impl<T> std::fmt::Debug for Applied<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applied")
            .field("waits_for", &self.wait.as_ref().map(|w| w.seq))
            .finish_non_exhaustive()
    }
}

impl<T> Applied<T> {
    /// The request's result, once every write it made or read is durable (SPEC D1, E8); the
    /// engine's failure instead if the commit failed (D6).
    pub async fn durable(self) -> Result<T> {
        if let Some(w) = self.wait {
            w.wait().await?;
        }
        self.value
    }

    /// Whether the answer must wait for a commit.
    pub fn waits(&self) -> bool {
        self.wait.is_some()
    }
}

/// An async task's wait for the commit of sequence number `seq`.
struct DurableWait {
    shared: Arc<Shared>,
    seq: u64,
}

/// One task awaiting a commit, in `CommitProgress::futures`.
pub(super) struct Waiting {
    seq: u64,
    tx: oneshot::Sender<()>,
}

impl DurableWait {
    async fn wait(self) -> Result<()> {
        let s = &*self.shared;
        loop {
            let rx = {
                let mut done = s.done.lock();
                if done.committed >= self.seq {
                    return Ok(());
                }
                if let Some(e) = &done.failed {
                    return Err(e.clone());
                }
                let (tx, rx) = oneshot::channel();
                done.futures.push(Waiting { seq: self.seq, tx });
                rx
            };
            if rx.await.is_err() {
                // Its sender went without a word: only if the engine's state went with it.
                let done = s.done.lock();
                if done.committed < self.seq && done.failed.is_none() {
                    return Err(s.closed.clone());
                }
            }
        }
    }
}

/// The end of a commit, under `done`: takes the waits it covers (all of them after a failure).
pub(super) fn covered(done: &mut CommitProgress, failed: bool) -> Vec<Waiting> {
    if done.futures.is_empty() {
        return Vec::new();
    }
    if failed {
        return std::mem::take(&mut done.futures);
    }
    let committed = done.committed;
    let mut out = Vec::new();
    let mut i = 0;
    while i < done.futures.len() {
        if done.futures[i].seq <= committed {
            out.push(done.futures.swap_remove(i));
        } else {
            i += 1;
        }
    }
    out
}

/// Completes the waits `covered` took, once `done` is released (each wakes its task; a task
/// that gave up is gone, and its send fails harmlessly).
pub(super) fn complete(woken: Vec<Waiting>) {
    for w in woken {
        let _ = w.tx.send(());
    }
}

impl Engine {
    pub(super) fn applied<T>(&self, value: Result<T>, seq: Option<u64>) -> Applied<T> {
        Applied {
            value,
            wait: seq.map(|seq| DurableWait {
                shared: self.shared.clone(),
                seq,
            }),
        }
    }

    /// The sequence number of the last applied write if it is not durable yet and an answer
    /// must wait for it (Immediate mode with a file: a reader never sees what a crash could
    /// still lose, E8), with what `f` read under the same lock.
    pub(super) fn read_unsettled<T>(
        &self,
        f: impl FnOnce(&LeaseKv) -> T,
    ) -> Result<(T, Option<u64>)> {
        let s = self.shared();
        let st = s.state.lock();
        if st.closed {
            return Err(s.closed.clone());
        }
        if !s.cfg.persist || s.cfg.durability != Durability::Immediate {
            return Ok((f(&st.lease_kv), None));
        }
        let done = s.done.lock(); // lock order: state, then done
        if let Some(e) = &done.failed {
            return Err(e.clone());
        }
        let seq = (done.committed < st.seq).then_some(st.seq);
        drop(done);
        Ok((f(&st.lease_kv), seq))
    }

    /// [`Tenure::grant_applied`](crate::Tenure::grant_applied), for this engine.
    pub(crate) fn grant_applied(
        &self,
        id: Option<LeaseId>,
        ttl: std::time::Duration,
    ) -> Applied<(LeaseId, i64)> {
        let s = self.shared();
        let (out, seq) = self.apply(
            |lease_kv, b, t| {
                quota::admit(s, lease_kv, b, Cost::GRANT)?;
                let id = lease_kv.grant(id.map(LeaseId::get), ttl, t.now(), t.wall(), b)?;
                Ok((LeaseId::new(id), lease_kv.kv.revision))
            },
            false,
        );
        self.applied(out, seq)
    }
}
