//! Time sources. Deadlines use a monotonic clock (SPEC L14); wall time is used only to age
//! persisted remaining TTLs across a restart (SPEC L13).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::locks::Mutex;

/// A callback a clock invokes when its time jumps (see [`Clock::subscribe`]).
pub type Waker = dyn Fn() + Send + Sync;

/// A source of monotonic and wall time for an engine.
///
/// Implemented by [`SystemClock`] (the default) and [`ManualClock`] (tests).
pub trait Clock: Send + Sync + 'static {
    /// Monotonic time since this clock's origin. Never goes backwards.
    fn now(&self) -> Duration;

    /// [`now`](Clock::now) in nanoseconds (saturating), the form the engine's hot paths use.
    #[inline]
    fn now_ns(&self) -> u64 {
        u64::try_from(self.now().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Wall-clock time, milliseconds since the Unix epoch. May jump either way.
    fn wall_ms(&self) -> i64;

    /// The real instant at which monotonic time `t` is reached, for sleeping; `None` when time
    /// moves only by hand, in which case sleepers wait for a [`subscribe`](Clock::subscribe)d
    /// wake-up instead.
    fn instant_at(&self, t: Duration) -> Option<Instant>;

    /// Registers a callback to run whenever time jumps forward by hand. The clock keeps only a
    /// weak reference: dropping the `Arc` unsubscribes.
    fn subscribe(&self, _waker: Weak<Waker>) {}
}

fn system_wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The real clock: a calibrated TSC (via `quanta`; `CLOCK_MONOTONIC` where there is no
/// invariant TSC) for deadlines, `SystemTime` for wall time.
///
/// Reading it is an `rdtsc` and a multiply-shift: on virtual machines the vDSO
/// `clock_gettime` path costs several times that, and renew reads the clock every time.
#[derive(Debug, Clone)]
pub struct SystemClock {
    clock: quanta::Clock,
    origin: u64,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> SystemClock {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        SystemClock { clock, origin }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Duration {
        Duration::from_nanos(self.now_ns())
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.clock.delta_as_nanos(self.origin, self.clock.raw())
    }

    fn wall_ms(&self) -> i64 {
        system_wall_ms()
    }

    fn instant_at(&self, t: Duration) -> Option<Instant> {
        // Relative to this moment, so TSC and CLOCK_MONOTONIC drift only spans one sleep.
        let wait = t.saturating_sub(self.now());
        Some(instant_after(wait))
    }
}

pub(crate) use crate::limits::instant_after;

/// The latest monotonic time a `ManualClock` reaches: one below the engine's "no time" mark.
const MANUAL_MAX_NS: u64 = u64::MAX - 1;

/// A clock that moves only when told to. Monotonic and wall time advance together; wall time can
/// also be stepped alone to simulate a wall-clock jump.
///
/// [`advance`](ManualClock::advance) wakes every engine (and keepalive) using the clock, so that
/// time-dependent behaviour is tested deterministically, without sleeps.
pub struct ManualClock {
    now_ns: AtomicU64,
    wall_ms: AtomicI64,
    // Guarded by its mutex; only touched by subscribe/advance, never on a hot path.
    wakers: Mutex<Vec<Weak<Waker>>>,
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .field("wall_ms", &self.wall_ms())
            .finish()
    }
}

impl ManualClock {
    /// A clock at monotonic time zero and the current wall time.
    pub fn new() -> Arc<ManualClock> {
        Arc::new(ManualClock {
            now_ns: AtomicU64::new(0),
            wall_ms: AtomicI64::new(system_wall_ms()),
            wakers: Mutex::new(Vec::new()),
        })
    }

    /// Moves monotonic and wall time forward by `d` and wakes every subscriber. Both saturate
    /// (monotonic time just below `u64::MAX` ns, ~584 years): time never goes backwards.
    pub fn advance(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let _ = self
            .now_ns
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(ns).min(MANUAL_MAX_NS))
            });
        let _ = self
            .wall_ms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                Some(w.saturating_add(ms))
            });
        self.wake();
    }

    /// Steps wall time alone (either way, saturating), leaving monotonic time where it is.
    pub fn step_wall(&self, delta_ms: i64) {
        let _ = self
            .wall_ms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                Some(w.saturating_add(delta_ms))
            });
        self.wake();
    }

    fn wake(&self) {
        // Call outside the lock: a waker may take engine locks.
        let live: Vec<Arc<Waker>> = {
            let mut wakers = self.wakers.lock();
            wakers.retain(|w| w.strong_count() > 0);
            wakers.iter().filter_map(Weak::upgrade).collect()
        };
        for w in live {
            w();
        }
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Duration {
        Duration::from_nanos(self.now_ns.load(Ordering::SeqCst))
    }

    fn wall_ms(&self) -> i64 {
        self.wall_ms.load(Ordering::SeqCst)
    }

    fn instant_at(&self, _t: Duration) -> Option<Instant> {
        None
    }

    fn subscribe(&self, waker: Weak<Waker>) {
        self.wakers.lock().push(waker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_advance_moves_both_times_and_wakes_subscribers() {
        let clock = ManualClock::new();
        let wall0 = clock.wall_ms();
        let hits = Arc::new(AtomicU64::new(0));
        let h = hits.clone();
        let waker: Arc<Waker> = Arc::new(move || {
            h.fetch_add(1, Ordering::SeqCst);
        });
        clock.subscribe(Arc::downgrade(&waker));
        clock.advance(Duration::from_millis(1500));
        assert_eq!(clock.now(), Duration::from_millis(1500));
        assert_eq!(clock.wall_ms() - wall0, 1500);
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        drop(waker);
        clock.advance(Duration::from_millis(1));
        assert_eq!(
            hits.load(Ordering::SeqCst),
            1,
            "dropped waker must not be called"
        );
    }

    #[test]
    fn l14_manual_clock_saturates_instead_of_going_backwards() {
        let clock = ManualClock::new();
        clock.advance(Duration::from_secs(1));
        clock.advance(Duration::MAX);
        let at_limit = (clock.now(), clock.wall_ms());
        assert_eq!(at_limit.0, Duration::from_nanos(MANUAL_MAX_NS));
        clock.advance(Duration::from_secs(1));
        assert_eq!((clock.now(), clock.wall_ms()), at_limit);
        clock.step_wall(i64::MAX);
        assert_eq!(clock.wall_ms(), i64::MAX);
        let low = ManualClock::new();
        low.step_wall(i64::MIN);
        low.step_wall(i64::MIN);
        assert_eq!(low.wall_ms(), i64::MIN);
    }

    #[test]
    fn manual_clock_wall_step_leaves_monotonic_time_alone() {
        let clock = ManualClock::new();
        clock.step_wall(-60_000);
        assert_eq!(clock.now(), Duration::ZERO);
    }
}
