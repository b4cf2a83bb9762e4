//! The native half of `tenure.aio`: an engine wait started from an event loop. The wait runs
//! on a helper thread (the core's waits block); when it ends, the thread converts the result
//! with the GIL and calls `wake(ok, value)`, which hands it to the loop with
//! `loop.call_soon_threadsafe`. The loop itself never blocks. Cancelling the asyncio task
//! raises the wait's `Stop` (`_Pending.cancel()`): the core then withdraws what it enqueued (a
//! lock contender's key, a candidacy) and the wait ends with `Timeout`. A value won in a race
//! with the cancellation is dropped by the Python side, which releases it (a guard unlocks, a
//! leadership resigns).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{bounded, select, Receiver};
use pyo3::prelude::*;
use pyo3::types::PyList;
use tenure::sync::{Leadership, LockGuard, Stop, Wait};
use tenure::{Error, ExpiredLease};

use crate::convert::{bytes_arg, opt_secs_arg, timeout};
use crate::errors::{panic_to_py, to_py};
use crate::iter::{PyExpiredIter, PyWatcher};
use crate::runtime::{lock, spawn_failed, ForkSafe};
use crate::sync::{PyElection, PyLeadership, PyLockGuard, PyMutex, PyObserver};
use crate::types::{PyEvent, PyExpiredLease, PyKeyValue};

/// An engine wait in progress for `tenure.aio`.
#[pyclass(frozen, module = "tenure", name = "_Pending")]
pub(crate) struct PyPending {
    stop: Stop,
}

#[pymethods]
impl PyPending {
    /// Raises the wait's stop token: the wait ends soon with `tenure.Timeout`. Idempotent.
    fn cancel(&self) {
        self.stop.stop();
    }
}

type Convert<T> = Box<dyn FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send>;

/// Runs `work` with a `Wait` of `timeout` and a fresh stop token on a helper thread; its
/// result, converted by `convert`, goes to `wake(ok, value)` (`value` is the exception when
/// not `ok`). Without an interpreter to call back (finalization) the result is just dropped.
fn start<T: Send + 'static>(
    wake: Py<PyAny>,
    timeout: Option<Duration>,
    work: impl FnOnce(Wait) -> Result<T, Error> + Send + 'static,
    convert: Convert<T>,
) -> PyResult<PyPending> {
    let stop = Stop::new();
    let wait = Wait::from(timeout).with_stop(&stop);
    thread::Builder::new()
        .name("tenure-aio-wait".into())
        .spawn(move || {
            let mut result = Some(catch_unwind(AssertUnwindSafe(move || work(wait))));
            Python::try_attach(|py| {
                let Some(r) = result.take() else { return };
                let (ok, value) = match r {
                    Ok(Ok(v)) => match convert(py, v) {
                        Ok(v) => (true, v),
                        Err(e) => (false, e.into_value(py).into_any()),
                    },
                    Ok(Err(e)) => (false, to_py(py, e).into_value(py).into_any()),
                    Err(payload) => (false, panic_to_py(py, payload).into_value(py).into_any()),
                };
                if let Err(e) = wake.call1(py, (ok, value)) {
                    e.write_unraisable(py, None);
                }
            });
            drop(result);
        })
        .map_err(spawn_failed)?;
    Ok(PyPending { stop })
}

/// Receives from `rx` until `wait` runs out or is stopped (`Timeout`); `Closed` once the
/// sender is gone.
fn recv_until<T>(rx: &Receiver<T>, wait: &Wait) -> Result<T, Error> {
    let (tx, stopped) = bounded::<()>(0);
    let _reg = wait.stop_token().map(|s| s.on_stop(move || drop(tx)));
    let deadline = match wait.remaining() {
        Some(d) => crossbeam_channel::after(d),
        None => crossbeam_channel::never(),
    };
    select! {
        recv(rx) -> m => m.map_err(|_| Error::Closed("the database".into())),
        recv(stopped) -> _ => Err(wait.timed_out("an expired lease")),
        recv(deadline) -> _ => Err(wait.timed_out("an expired lease")),
    }
}

/// `Mutex.lock()` for `tenure.aio`: a `LockGuard` when held.
#[pyfunction]
#[pyo3(signature = (mutex, timeout, wake))]
pub(crate) fn _lock_async(
    py: Python<'_>,
    mutex: &Bound<'_, PyMutex>,
    #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    wake: Py<PyAny>,
) -> PyResult<PyPending> {
    let me = mutex.get();
    let m = me.inner.get()?.clone();
    let (session, name, key) = (me.session.clone_ref(py), me.name.clone(), me.key.clone());
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| m.lock(wait),
        Box::new(move |py, g: LockGuard| {
            let guard = PyLockGuard {
                session,
                name,
                key,
                token: g.fencing_token(),
                inner: ForkSafe::new(Mutex::new(Some(g))),
            };
            Ok(Py::new(py, guard)?.into_any())
        }),
    )
}

/// `Election.campaign()` for `tenure.aio`: a `Leadership` when elected.
#[pyfunction]
#[pyo3(signature = (election, value, timeout, wake))]
pub(crate) fn _campaign_async(
    election: &Bound<'_, PyElection>,
    value: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    wake: Py<PyAny>,
) -> PyResult<PyPending> {
    let value = bytes_arg(value, "value")?.into_owned();
    let me = election.get();
    let e = me.inner.get()?.clone();
    let name = me.name.clone();
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| e.campaign(&value, wait),
        Box::new(move |py, l: Leadership| {
            let leadership = PyLeadership {
                name,
                key: l.key().to_vec(),
                token: l.token(),
                inner: ForkSafe::new(l),
            };
            Ok(Py::new(py, leadership)?.into_any())
        }),
    )
}

/// `Watcher.recv()` for `tenure.aio`: an `Event`; `Closed` once the watch is cancelled.
#[pyfunction]
#[pyo3(signature = (watcher, timeout, wake))]
pub(crate) fn _watch_recv_async(
    watcher: &Bound<'_, PyWatcher>,
    #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    wake: Py<PyAny>,
) -> PyResult<PyPending> {
    let inner = Arc::clone(watcher.get().inner.get()?);
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| {
            let mut guard = lock(&inner);
            let Some(w) = guard.as_mut() else {
                return Err(Error::Closed("the watch".into()));
            };
            let r = w.recv_timeout(wait);
            if matches!(r, Err(ref e) if !matches!(e, Error::Timeout { .. })) {
                *guard = None; // closed, or fell behind (Compacted): the watch is over
            }
            r
        },
        Box::new(|py, ev| Ok(Py::new(py, PyEvent(ev))?.into_any())),
    )
}

/// `ExpiredIterator.recv()` for `tenure.aio`: a list of `ExpiredLease`.
#[pyfunction]
#[pyo3(signature = (expired, timeout, wake))]
pub(crate) fn _expired_recv_async(
    expired: &Bound<'_, PyExpiredIter>,
    #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    wake: Py<PyAny>,
) -> PyResult<PyPending> {
    let rx = expired.get().rx.get()?.clone();
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| recv_until(&rx, &wait),
        Box::new(|py, batch: Vec<ExpiredLease>| {
            Ok(PyList::new(py, batch.into_iter().map(PyExpiredLease))?
                .into_any()
                .unbind())
        }),
    )
}

/// `Observer.recv()` for `tenure.aio`: a `KeyValue`, or `None` for "no leader".
#[pyfunction]
#[pyo3(signature = (observer, timeout, wake))]
pub(crate) fn _observe_recv_async(
    observer: &Bound<'_, PyObserver>,
    #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    wake: Py<PyAny>,
) -> PyResult<PyPending> {
    let inner = Arc::clone(observer.get().inner.get()?);
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| {
            let mut guard = lock(&inner);
            let Some(o) = guard.as_mut() else {
                return Err(Error::Closed("the observer".into()));
            };
            let r = o.recv_timeout(wait);
            if matches!(r, Err(Error::Closed(_))) {
                *guard = None;
            }
            r
        },
        Box::new(|py, state| match state {
            Some(kv) => Ok(Py::new(py, PyKeyValue(kv))?.into_any()),
            None => Ok(py.None()),
        }),
    )
}
