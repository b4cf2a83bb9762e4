//! The runtime every class shares: the fork guard, the one sliced signal-aware wait, the
//! helper thread for waits the core cannot slice, and the detached drop. Nothing else in the
//! binding loops, retries or keeps a timer of its own.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, RecvTimeoutError};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tenure::Error;

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

/// The deadline of a wait of `t` (`None`: no limit); saturating.
pub(crate) fn deadline(t: Option<Duration>) -> Option<Instant> {
    t.map(|t| {
        Instant::now()
            .checked_add(t)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365 * 30))
    })
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

/// What a helper thread produced: its result, or the panic that ended it.
pub(crate) type Outcome<T> = thread::Result<Result<T, Error>>;

/// Converts what a helper thread produced into the Python result.
pub(crate) fn outcome<T>(py: Python<'_>, r: Outcome<T>) -> PyResult<T> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_py(py, e)),
        Err(payload) => Err(panic_to_py(py, payload)),
    }
}

pub(crate) fn spawn_failed(e: std::io::Error) -> PyErr {
    err(Error::storage(format!("cannot start a tenure thread: {e}")))
}

/// Runs `work` (a core wait that cannot be sliced without losing its place, e.g. a queued
/// lock) on a helper thread and waits for its result with [`sliced`]. When a signal handler
/// raises (Ctrl-C), `cancel` is run (it raises the work's `Stop`), the helper is waited for
/// again (a second signal stops that wait too), a value it still produced is handed to
/// `discard`, and the handler's exception propagates. A helper whose result nobody waits for
/// any more discards it itself, so a lock or leadership won in that race is never left behind.
pub(crate) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
    cancel: impl FnOnce(),
    discard: fn(T),
) -> PyResult<T> {
    let (done_tx, done_rx) = bounded::<Outcome<T>>(1);
    thread::Builder::new()
        .name("tenure-py-wait".into())
        .spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(work));
            if let Err(crossbeam_channel::SendError(Ok(Ok(v)))) = done_tx.send(r) {
                discard(v);
            }
        })
        .map_err(spawn_failed)?;
    let receive = |step: Duration| match done_rx.recv_timeout(step) {
        Ok(r) => Ok(Some(Some(r))),
        Err(RecvTimeoutError::Timeout) => Ok(None),
        Err(RecvTimeoutError::Disconnected) => Ok(Some(None)),
    };
    let interrupt = match sliced(py, None, receive) {
        Ok(Some(Some(r))) => return outcome(py, r),
        Ok(_) => return Err(PyRuntimeError::new_err("tenure: a helper thread vanished")),
        Err(interrupt) => interrupt,
    };
    cancel();
    if let Ok(Some(Some(Ok(Ok(v))))) = sliced(py, None, receive) {
        py.detach(|| discard(v));
    }
    Err(interrupt)
}
