//! Signals the recipes wait on besides watches: a lease being gone, a demotion, and the clock
//! waking the expiry thread. Each is a channel whose senders are dropped to disconnect every
//! receiver at once.

use std::sync::Arc;

use crossbeam_channel::{bounded, Receiver};

use super::{Engine, Shared};
use crate::batch::Batch;
use crate::clock::Waker;
use crate::error::{Error, Result};
use crate::types::LeaseId;
use crate::wait::Stop;

impl Engine {
    /// Raises `lost` when lease `id` is gone: revoked, expired, or the engine closed.
    /// `LeaseNotFound` if it is already gone.
    pub(crate) fn lease_gone(&self, id: LeaseId, lost: &Stop) -> Result<()> {
        let s = self.shared();
        let mut st = s.state.lock();
        if st.closed {
            return Err(s.closed.clone());
        }
        if !st.lease_kv.lessor.contains(id.get()) {
            return Err(Error::LeaseNotFound(id));
        }
        let mut waiters = s.lease_waiters.lock();
        let list = waiters.entry(id.get()).or_default();
        // Tokens raised elsewhere, or that nobody else holds any more, are pruned here.
        list.retain(|t| !t.is_stopped() && t.is_shared());
        list.push(lost.clone());
        // Under the state lock, like every write, so no removal can be missed.
        st.pending.track_gone = true;
        Ok(())
    }

    /// A receiver that disconnects at the next demote.
    pub(crate) fn demotion(&self) -> Receiver<()> {
        self.shared().demotion.lock().1.clone()
    }
}

/// Wakes the waiters of leases that writes just removed (at apply time, so a waiter whose
/// session died stops at once).
pub(super) fn notify_gone(s: &Shared, b: &mut Batch) {
    if b.gone.is_empty() {
        return;
    }
    let mut raised = Vec::new();
    {
        let mut waiters = s.lease_waiters.lock();
        for id in b.gone.drain(..) {
            raised.extend(waiters.remove(&id).unwrap_or_default());
        }
        b.track_gone = !waiters.is_empty();
    }
    for t in raised {
        t.stop();
    }
}

/// On close: every lease waiter learns its lease is gone.
pub(super) fn raise_all(s: &Shared) {
    let all: Vec<Stop> = s
        .lease_waiters
        .lock()
        .drain()
        .flat_map(|(_, v)| v)
        .collect();
    for t in all {
        t.stop();
    }
}

/// Disconnects every receiver handed out by `demotion` (L9).
pub(super) fn demoted(s: &Shared) {
    drop(std::mem::replace(&mut *s.demotion.lock(), bounded(0)));
}

/// Subscribes the expiry thread to the clock (a `ManualClock` advance wakes it).
pub(super) fn subscribe_clock(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    let waker: Arc<Waker> = Arc::new(move || {
        if let Some(s) = weak.upgrade() {
            let _guard = s.state.lock();
            s.expiry_cv.notify_all();
        }
    });
    shared.clock.subscribe(Arc::downgrade(&waker));
    *shared.waker.lock() = Some(waker);
}
