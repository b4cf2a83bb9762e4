//! Locks for the engine: `std::sync` behind a parking_lot-style API (no poisoning, waits take
//! `&mut guard`).
//!
//! Why not parking_lot: its parked-thread table is process-wide. A process that forks while
//! engine threads are parked (they always are: expiry thread, committer) leaves the child a
//! table that can hang its first contended lock (parking_lot#515), and Python programs fork.
//! `std::sync` is futex-based with no global state, and as fast uncontended.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{PoisonError, TryLockError};
use std::time::{Duration, Instant};

/// A mutex whose lock never reports poisoning (a panic under it is a bug either way). It counts
/// the threads blocked on it, so a thread that re-takes it in a loop can let them in first
/// ([`Mutex::let_waiters_in`]): std's mutex is not fair.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T> {
    inner: std::sync::Mutex<T>,
    waiters: AtomicUsize,
}

/// The guard of [`Mutex`]. Always `Some` outside of a condition-variable wait.
pub(crate) struct MutexGuard<'a, T>(Option<std::sync::MutexGuard<'a, T>>);

impl<T> Mutex<T> {
    pub(crate) const fn new(value: T) -> Mutex<T> {
        Mutex {
            inner: std::sync::Mutex::new(value),
            waiters: AtomicUsize::new(0),
        }
    }

    /// Locks; uncontended, this is a single compare-and-swap.
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        match self.inner.try_lock() {
            Ok(g) => MutexGuard(Some(g)),
            Err(TryLockError::Poisoned(p)) => MutexGuard(Some(p.into_inner())),
            Err(TryLockError::WouldBlock) => self.lock_slow(),
        }
    }

    #[cold]
    fn lock_slow(&self) -> MutexGuard<'_, T> {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        MutexGuard(Some(g))
    }

    /// Called without the lock held: waits (yielding, at most `max`) until the threads that
    /// were blocked on the lock have taken it.
    pub(crate) fn let_waiters_in(&self, max: Duration) {
        if self.waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        let until = Instant::now() + max;
        while self.waiters.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::yield_now();
        }
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        self.0.as_deref().expect("guard present outside a wait")
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        self.0.as_deref_mut().expect("guard present outside a wait")
    }
}

/// A condition variable for [`Mutex`].
#[derive(Debug, Default)]
pub(crate) struct Condvar(std::sync::Condvar);

impl Condvar {
    pub(crate) const fn new() -> Condvar {
        Condvar(std::sync::Condvar::new())
    }

    /// Waits until notified (or spuriously woken).
    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        let inner = guard.0.take().expect("guard present");
        guard.0 = Some(self.0.wait(inner).unwrap_or_else(PoisonError::into_inner));
    }

    /// Waits until notified or `deadline`.
    pub(crate) fn wait_until<T>(&self, guard: &mut MutexGuard<'_, T>, deadline: Instant) {
        let timeout = deadline.saturating_duration_since(Instant::now());
        let inner = guard.0.take().expect("guard present");
        let (inner, _) = self
            .0
            .wait_timeout(inner, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        guard.0 = Some(inner);
    }

    pub(crate) fn notify_one(&self) {
        self.0.notify_one();
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::Mutex;

    /// The thread that lets waiters in before re-taking the lock takes it after every thread
    /// that was blocked on it (what the compactor and the expiry thread rely on not to starve a
    /// writer). std's mutex alone lets the releasing thread win the re-take.
    #[test]
    fn a_thread_that_lets_waiters_in_retakes_the_lock_after_them() {
        for _ in 0..20 {
            let m = Arc::new(Mutex::new(Vec::new()));
            let held = m.lock();
            let blocked: Vec<_> = (0..3)
                .map(|i| {
                    let m = m.clone();
                    std::thread::spawn(move || m.lock().push(i))
                })
                .collect();
            let until = Instant::now() + Duration::from_secs(20);
            while m.waiters.load(std::sync::atomic::Ordering::SeqCst) < 3 {
                assert!(Instant::now() < until, "the threads never blocked");
                std::thread::yield_now();
            }
            drop(held);
            m.let_waiters_in(Duration::from_secs(20));
            m.lock().push(99);
            for t in blocked {
                t.join().unwrap();
            }
            let order = m.lock().clone();
            assert_eq!(order.len(), 4);
            assert_eq!(order[3], 99, "re-taken before a waiter: {order:?}");
        }
    }

    #[test]
    fn letting_waiters_in_returns_at_once_without_waiters_and_by_max_with_them() {
        let m = Mutex::new(());
        let t = Instant::now();
        m.let_waiters_in(Duration::from_secs(20));
        assert!(t.elapsed() < Duration::from_secs(1));
        // A waiter counted but never served (the count is what the loop reads): bounded by max.
        m.waiters.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let t = Instant::now();
        m.let_waiters_in(Duration::from_millis(50));
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(50) && took < Duration::from_secs(5),
            "{took:?}"
        );
    }
}
