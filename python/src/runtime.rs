//! The runtime every class shares: the fork guard, the one sliced signal-aware wait, the one
//! wait-pool thread serving every wait the core cannot slice (a queued lock, a campaign,
//! `tenure.aio`'s waits), the guarded entry of engine threads into the interpreter, and the
//! detached drop. Nothing else in the binding loops, retries or keeps a timer of its own.

use std::borrow::Borrow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, RecvTimeoutError};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tenure::{Error, Pollable, WaitPool, WaitResult};

use crate::errors::{blocking, closed, err, panic_to_py, to_py};

/// Longest single wait with the GIL released before signals are checked again.
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// Something owned by this process's engine. In a child created by `fork()` the value is never
/// touched again, not even dropped: the engine's threads do not exist there and its locks may
/// be held for ever, so the object is leaked instead (it is the parent's, not the child's).
pub(crate) struct ForkSafe<T> {
    value: Option<T>,
    pid: u32,
}

impl<T> ForkSafe<T> {
    pub(crate) fn new(value: T) -> ForkSafe<T> {
        ForkSafe {
            value: Some(value),
            pid: std::process::id(),
        }
    }

    /// Whether this process created the value (false in a forked child).
    pub(crate) fn is_ours(&self) -> bool {
        std::process::id() == self.pid
    }

    /// The value, or `tenure.Closed` in a forked child (or after `take_for_drop`).
    pub(crate) fn get(&self) -> PyResult<&T> {
        match &self.value {
            Some(v) if self.is_ours() => Ok(v),
            _ => Err(closed(format!(
                "this tenure object belongs to process {} (inherited through fork()): it is \
                 closed in this one",
                self.pid
            ))),
        }
    }

    /// Takes the value out to drop it somewhere else (without the GIL); `None` in a forked
    /// child, where it stays leaked.
    pub(crate) fn take_for_drop(&mut self) -> Option<T> {
        if self.is_ours() {
            self.value.take()
        } else {
            None
        }
    }
}

impl<T> Drop for ForkSafe<T> {
    fn drop(&mut self) {
        if !self.is_ours() {
            if let Some(v) = self.value.take() {
                std::mem::forget(v);
            }
        }
    }
}

/// Locks a binding-side mutex. These are `std` mutexes (futex words inside the object, no
/// process-global state), so objects created in a forked child never meet the parent's locks.
/// A panic while one was held cannot leave its data half-updated (each critical section is a
/// single take or read), so poisoning is ignored.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Drops `v` with the GIL released (a drop may close an engine: join threads, fsync). Falls back
/// to a plain drop when the interpreter cannot be re-entered (finalization).
pub(crate) fn drop_detached<T: Send>(v: T) {
    let mut slot = Some(v);
    Python::try_attach(|py| py.detach(|| drop(slot.take())));
    drop(slot);
}

/// Ends what `slot` holds (a watch, an observer, a keep-alive): takes it out and drops it with
/// the GIL released. Idempotent; in a forked child it does nothing (the parent's object).
pub(crate) fn take_and_drop<T, M>(py: Python<'_>, slot: &ForkSafe<M>) -> PyResult<()>
where
    T: Send,
    M: Borrow<Mutex<Option<T>>> + Sync,
{
    let Ok(inner) = slot.get() else {
        return Ok(());
    };
    let v = blocking(py, || Ok(lock(inner.borrow()).take()))?;
    drop_detached(v);
    Ok(())
}

/// Set by the `atexit` hook: from then on no engine thread enters the interpreter (results
/// and log records are dropped), so nothing native runs Python code while it finalizes.
static EXITING: AtomicBool = AtomicBool::new(false);
/// How many engine threads are inside [`attach`] now.
static ATTACHED: AtomicUsize = AtomicUsize::new(0);

/// Runs `f` with the GIL on an engine thread (a wait's delivery, a log record, an elector
/// callback); `None` once the interpreter is exiting or gone.
pub(crate) fn attach<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    // Counted before the flag is read: `stop_attaching` waits for whoever read it unset.
    ATTACHED.fetch_add(1, Ordering::SeqCst);
    let r = if EXITING.load(Ordering::SeqCst) {
        None
    } else {
        Python::try_attach(f)
    };
    ATTACHED.fetch_sub(1, Ordering::SeqCst);
    r
}

/// At interpreter exit, before the engines close: engine threads stop entering the
/// interpreter. [`wait_detached`] then waits for those already inside.
pub(crate) fn stop_attaching() {
    EXITING.store(true, Ordering::SeqCst);
}

/// Waits (GIL released, at most `limit`) until no engine thread is inside [`attach`].
pub(crate) fn wait_detached(py: Python<'_>, limit: Duration) {
    let until = Instant::now() + limit;
    py.detach(|| {
        while ATTACHED.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            thread::sleep(Duration::from_millis(1));
        }
    });
}

/// In a child made by `fork()`: the threads counted in [`attach`] are the parent's.
pub(crate) fn reset_attached_after_fork() {
    ATTACHED.store(0, Ordering::SeqCst);
}

/// The deadline of a wait of `t` (`None`: no limit); saturating at the core's far future.
pub(crate) fn deadline(t: Option<Duration>) -> Option<Instant> {
    t.map(tenure::limits::instant_after)
}

/// The one wait of the binding: until `poll(step)` yields a value, in slices of at most
/// [`SLICE`] with the GIL released and pending signal handlers run between slices (Ctrl-C
/// surfaces here). `Ok(None)` once `deadline` has passed.
pub(crate) fn sliced<T: Send>(
    py: Python<'_>,
    deadline: Option<Instant>,
    mut poll: impl FnMut(Duration) -> Result<Option<T>, Error> + Send,
) -> PyResult<Option<T>> {
    loop {
        let step = match deadline {
            Some(d) => SLICE.min(d.saturating_duration_since(Instant::now())),
            None => SLICE,
        };
        if let Some(v) = blocking(py, || poll(step))? {
            return Ok(Some(v));
        }
        py.check_signals()?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(None);
        }
    }
}

/// Converts what a wait produced (its result, or the panic that ended it) into the Python result.
pub(crate) fn wait_result_to_py<T>(py: Python<'_>, r: WaitResult<T>) -> PyResult<T> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_py(py, e)),
        Err(payload) => Err(panic_to_py(py, payload)),
    }
}

pub(crate) fn spawn_failed(e: std::io::Error) -> PyErr {
    err(Error::storage(format!("cannot start a tenure thread: {e}")))
}

/// The one thread serving every pending engine wait of this process (`tenure.aio`'s waits and
/// the blocking lock and campaign): started at the first wait. A child created by `fork()`
/// starts its own; the parent's (whose thread does not exist there) is leaked untouched.
pub(crate) fn pool() -> PyResult<&'static WaitPool> {
    static POOL: Mutex<Option<(u32, &'static WaitPool)>> = Mutex::new(None);
    let mut current = lock(&POOL);
    let pid = std::process::id();
    if let Some((owner, pool)) = *current {
        if owner == pid {
            return Ok(pool);
        }
    }
    let pool: &'static WaitPool = Box::leak(Box::new(
        WaitPool::new("tenure-wait").map_err(spawn_failed)?,
    ));
    *current = Some((pid, pool));
    Ok(pool)
}

/// Where a wait's end goes (called once, wherever the wait ends).
pub(crate) type Deliver<T> = Box<dyn FnOnce(WaitResult<T>) + Send>;

/// Starts a wait that hands its end to `deliver` and never fails to: on a helper thread of its
/// own (a long run such as the elector's) or in the shared [`pool`].
pub(crate) type Starter<T> = Box<dyn FnOnce(Deliver<T>) -> PyResult<()> + Send>;

/// Runs `work` on a thread of its own.
pub(crate) fn on_thread<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Starter<T> {
    Box::new(move |deliver: Deliver<T>| {
        thread::Builder::new()
            .name("tenure-py-run".into())
            .spawn(move || deliver(catch_unwind(AssertUnwindSafe(work))))
            .map(drop)
            .map_err(spawn_failed)
    })
}

/// Runs a [`Pollable`] wait in the shared [`pool`].
pub(crate) fn in_pool<P>(wait: P) -> Starter<P::Output>
where
    P: Pollable + 'static,
    P::Output: Send + 'static,
{
    Box::new(move |deliver: Deliver<P::Output>| {
        pool()?.submit(wait, deliver);
        Ok(())
    })
}

/// Runs a core wait that cannot be sliced without losing its place (a queued lock) as started
/// by `start`, and waits for its result with [`sliced`]. When a signal handler raises (Ctrl-C),
/// `cancel` is run (it raises the work's `Stop`), the wait's end is waited for again (a second
/// signal stops that wait too), a value it still produced is handed to `discard`, and the
/// handler's exception propagates. A value nobody waits for any more is discarded where the
/// wait ends, so a lock or leadership won in that race is never left behind.
pub(crate) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    start: Starter<T>,
    cancel: impl FnOnce(),
    discard: fn(T),
) -> PyResult<T> {
    let (done_tx, done_rx) = bounded::<WaitResult<T>>(1);
    start(Box::new(move |r| {
        if let Err(crossbeam_channel::SendError(Ok(Ok(v)))) = done_tx.send(r) {
            discard(v);
        }
    }))?;
    let receive = |step: Duration| match done_rx.recv_timeout(step) {
        Ok(r) => Ok(Some(Some(r))),
        Err(RecvTimeoutError::Timeout) => Ok(None),
        Err(RecvTimeoutError::Disconnected) => Ok(Some(None)),
    };
    let interrupt = match sliced(py, None, receive) {
        Ok(Some(Some(r))) => return wait_result_to_py(py, r),
        Ok(_) => return Err(PyRuntimeError::new_err("tenure: a wait vanished")),
        Err(interrupt) => interrupt,
    };
    cancel();
    if let Ok(Some(Some(Ok(Ok(v))))) = sliced(py, None, receive) {
        py.detach(|| discard(v));
    }
    Err(interrupt)
}
