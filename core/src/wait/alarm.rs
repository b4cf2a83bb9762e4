//! A point on a [`Clock`]'s time that a [`Pollable`](super::Pollable) can wait for: on the real
//! clock a deadline, on a `ManualClock` a wake-up each time it is advanced (its time moves only
//! by hand, so there is no instant to sleep until).

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver};

use super::Interest;
use crate::clock::{Clock, Waker};

/// Due once `clock` reaches `at`.
pub(crate) struct Alarm {
    clock: Arc<dyn Clock>,
    at: Duration,
    /// A message each time the clock is advanced by hand (bounded: one pending is enough).
    moved: Receiver<()>,
    /// Subscribed to the clock (weakly): dropping the alarm unsubscribes.
    _waker: Arc<Waker>,
}

impl std::fmt::Debug for Alarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alarm").field("at", &self.at).finish()
    }
}

impl Alarm {
    /// Due `after` from the clock's now (saturating).
    pub(crate) fn after(clock: Arc<dyn Clock>, after: Duration) -> Alarm {
        let (tx, moved) = bounded(1);
        let waker: Arc<Waker> = Arc::new(move || {
            let _ = tx.try_send(());
        });
        clock.subscribe(Arc::downgrade(&waker));
        Alarm {
            at: clock.now().saturating_add(after),
            clock,
            moved,
            _waker: waker,
        }
    }

    /// The clock time it is due at.
    pub(crate) fn at(&self) -> Duration {
        self.at
    }

    /// Whether the clock has reached it (consumes the advance notices, so a wait does not spin).
    pub(crate) fn is_due(&self) -> bool {
        while self.moved.try_recv().is_ok() {}
        self.clock.now() >= self.at
    }

    /// Wakes the wait when it may be due.
    pub(crate) fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        interest.until(self.clock.instant_at(self.at));
        interest.recv(&self.moved);
    }
}
