//! `Stop`: a stop flag that threads sleeping on the engine clock can wait on (keep-alives, the
//! leader elector). A `ManualClock` wakes them through the clock's subscription.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
use crate::locks::{Condvar, Mutex};

/// A stop flag that sleepers on the engine clock can wait on. Cloning shares it.
#[derive(Clone, Default)]
pub struct Stop {
    inner: Arc<(Mutex<bool>, Condvar)>,
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop")
            .field("stopped", &self.is_stopped())
            .finish()
    }
}

impl Stop {
    /// A flag not yet raised.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Raises the flag and wakes every waiter.
    pub fn stop(&self) {
        *self.inner.0.lock() = true;
        self.inner.1.notify_all();
    }

    /// Whether the flag is raised.
    pub fn is_stopped(&self) -> bool {
        *self.inner.0.lock()
    }

    /// Blocks until the flag is raised.
    pub fn wait(&self) {
        let mut s = self.inner.0.lock();
        while !*s {
            self.inner.1.wait(&mut s);
        }
    }

    pub(crate) fn wake(&self) {
        let _g = self.inner.0.lock();
        self.inner.1.notify_all();
    }

    /// Sleeps until `clock` reaches `t` or the flag is raised; true if raised.
    pub(crate) fn sleep_until(&self, clock: &dyn Clock, t: Duration) -> bool {
        let mut s = self.inner.0.lock();
        loop {
            if *s {
                return true;
            }
            if clock.now() >= t {
                return false;
            }
            match clock.instant_at(t) {
                Some(at) => {
                    self.inner.1.wait_until(&mut s, at);
                }
                None => self.inner.1.wait(&mut s),
            }
        }
    }
}
