//! The stop (cancel) token: raised once, from any thread; it wakes condvar sleepers, `select!`
//! waits and registered callbacks (I-W2).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

use super::{min_instant, Wait};
use crate::clock::Clock;
use crate::locks::{Condvar, Mutex};

type Callback = Box<dyn FnOnce() + Send>;

struct Inner {
    raised: AtomicBool,
    /// Guards the flag's transitions for condvar sleepers, the callbacks and the sender.
    lock: Mutex<Callbacks>,
    cv: Condvar,
    /// Disconnects (every clone) when raised: the `select!` form of the flag.
    rx: Receiver<()>,
    next_id: AtomicU64,
}

struct Callbacks {
    /// Dropped when raised.
    tx: Option<Sender<()>>,
    pending: Vec<(u64, Callback)>,
}

/// A stop (cancel) token: raised once, from any thread; cloning shares it. Waits holding it
/// end with `Timeout` when it is raised; long-running loops (keep-alives, the leader elector)
/// return.
///
/// ```
/// use tenure::sync::Stop;
///
/// let stop = Stop::new();
/// let worker = {
///     let stop = stop.clone();
///     std::thread::spawn(move || stop.wait(None)) // e.g. a leader's work, until told to stop
/// };
/// stop.stop();
/// worker.join().unwrap();
/// assert!(stop.is_stopped());
/// ```
#[derive(Clone)]
pub struct Stop {
    inner: Arc<Inner>,
}

impl Default for Stop {
    fn default() -> Stop {
        let (tx, rx) = bounded(0);
        Stop {
            inner: Arc::new(Inner {
                raised: AtomicBool::new(false),
                lock: Mutex::new(Callbacks {
                    tx: Some(tx),
                    pending: Vec::new(),
                }),
                cv: Condvar::new(),
                rx,
                next_id: AtomicU64::new(0),
            }),
        }
    }
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop")
            .field("stopped", &self.is_stopped())
            .finish()
    }
}

/// Keeps a callback registered with [`Stop::on_stop`]; dropping it unregisters the callback.
#[must_use = "dropping the registration unregisters the callback"]
pub struct StopCallback {
    stop: Stop,
    id: u64,
}

impl std::fmt::Debug for StopCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopCallback")
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for StopCallback {
    fn drop(&mut self) {
        let mut c = self.stop.inner.lock.lock();
        c.pending.retain(|(id, _)| *id != self.id);
    }
}

impl Stop {
    /// A token not yet raised.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Raises the token and wakes everything waiting on it. Idempotent.
    pub fn stop(&self) {
        let callbacks = {
            let mut c = self.inner.lock.lock();
            if self.inner.raised.swap(true, Ordering::SeqCst) {
                return;
            }
            c.tx = None; // disconnects every receiver
            self.inner.cv.notify_all();
            std::mem::take(&mut c.pending)
        };
        for (_, f) in callbacks {
            f();
        }
    }

    /// Whether the token is raised.
    pub fn is_stopped(&self) -> bool {
        self.inner.raised.load(Ordering::SeqCst)
    }

    /// Runs `f` once when the token is raised (at once, on this thread, if it already is).
    /// For waking an event loop or a foreign caller; `f` must not block.
    pub fn on_stop(&self, f: impl FnOnce() + Send + 'static) -> StopCallback {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let reg = StopCallback {
            stop: self.clone(),
            id,
        };
        let mut c = self.inner.lock.lock();
        if self.is_stopped() {
            drop(c);
            f();
        } else {
            c.pending.push((id, Box::new(f)));
        }
        reg
    }

    /// Blocks until the token is raised or `wait` runs out; true if raised.
    pub fn wait(&self, wait: impl Into<Wait>) -> bool {
        let wait = wait.into();
        let mut c = self.inner.lock.lock();
        loop {
            if self.is_stopped() {
                return true;
            }
            if wait.is_stopped() || wait.is_expired() {
                return false;
            }
            // A Stop in `wait` is another token: poll it at a bounded period rather than
            // linking the two (linking would need callbacks in both directions).
            let slice = wait.stop_token().map(|_| Instant::now() + POLL);
            match min_instant(wait.deadline(), slice) {
                Some(at) => {
                    self.inner.cv.wait_until(&mut c, at);
                }
                None => self.inner.cv.wait(&mut c),
            }
        }
    }

    /// Blocks until the token is raised or `timeout` passes; true if raised.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.wait(timeout)
    }

    /// The receiver that disconnects when the token is raised.
    pub(crate) fn channel(&self) -> &Receiver<()> {
        &self.inner.rx
    }

    /// Whether a clone of this token exists besides this one.
    pub(crate) fn is_shared(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
    }

    /// Wakes condvar sleepers so they re-read the clock (a `ManualClock` moved).
    pub(crate) fn wake(&self) {
        let _g = self.inner.lock.lock();
        self.inner.cv.notify_all();
    }

    /// Sleeps until `clock` reaches `t` or the token is raised; true if raised. Reaching
    /// `deadline` (real time) raises the token.
    pub(crate) fn sleep_until(
        &self,
        clock: &dyn Clock,
        t: Duration,
        deadline: Option<Instant>,
    ) -> bool {
        let mut c = self.inner.lock.lock();
        loop {
            if self.is_stopped() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                drop(c);
                self.stop();
                return true;
            }
            if clock.now() >= t {
                return false;
            }
            match min_instant(clock.instant_at(t), deadline) {
                Some(at) => {
                    self.inner.cv.wait_until(&mut c, at);
                }
                None => self.inner.cv.wait(&mut c),
            }
        }
    }
}

/// How often [`Stop::wait`] re-checks a second token.
const POLL: Duration = Duration::from_millis(20);

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn stop_wakes_channel_and_callbacks_once_and_is_sticky() {
        let s = Stop::new();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        let _reg = s.on_stop(move || {
            h.fetch_add(1, Ordering::SeqCst);
        });
        let h = hits.clone();
        let dropped = s.on_stop(move || {
            h.fetch_add(100, Ordering::SeqCst);
        });
        drop(dropped);
        let w = Wait::from(&s);
        assert!(!w.is_over());
        s.stop();
        s.stop();
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        assert!(w.stopped().recv().is_err());
        assert!(w.is_stopped());
        let h = hits.clone();
        let _late = s.on_stop(move || {
            h.fetch_add(10, Ordering::SeqCst);
        });
        assert_eq!(hits.load(Ordering::SeqCst), 11);
    }

    #[test]
    fn stop_wait_returns_when_raised_from_another_thread() {
        let s = Stop::new();
        let s2 = s.clone();
        let t = std::thread::spawn(move || s2.wait(Duration::from_secs(30)));
        s.stop();
        assert!(t.join().unwrap());
        assert!(!Stop::new().wait_timeout(Duration::from_millis(1)));
    }

    #[test]
    fn stop_wait_ends_when_the_waits_own_token_is_raised() {
        let (s, other) = (Stop::new(), Stop::new());
        let o = other.clone();
        let t = std::thread::spawn(move || s.wait(Wait::forever().with_stop(&o)));
        other.stop();
        assert!(!t.join().unwrap());
    }
}
