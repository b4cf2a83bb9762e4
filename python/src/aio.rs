//! The native half of `tenure.aio`: an engine wait started from an event loop. The wait is the
//! core's state machine (`Pollable`), served with every other pending wait by the one thread of
//! the shared wait pool (no thread per wait); when it ends, that thread converts the result
//! with the GIL and calls `wake(ok, value)`, which hands it to the loop with
//! `loop.call_soon_threadsafe`. The loop itself never blocks. Cancelling the asyncio task
//! raises the wait's `Stop` (`_Pending.cancel()`): the core then withdraws what it enqueued (a
//! lock contender's key, a candidacy) and the wait ends with `Timeout`. A value won in a race
//! with the cancellation is dropped by the Python side, which releases it (a guard unlocks, a
//! leadership resigns).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, TryRecvError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use tenure::sync::{Leadership, LockGuard, Stop, Wait};
use tenure::{Error, ExpiredLease, Interest, Next, Pollable, Source};

use crate::convert::{bytes_arg, opt_secs_arg, timeout};
use crate::errors::{err, panic_to_py, to_py};
use crate::iter::{PyExpiredIter, PyWatcher};
use crate::runtime::{attach, in_pool, lock, ForkSafe, Starter};
use crate::sync::{
    change_tuple, priority_of, PyElection, PyGroupWatch, PyLeadership, PyLockGuard, PyMutex,
    PyObserver, PyPriorityQueue, PyQueue, PySession,
};
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

/// Submits `wait` (built with a `Wait` of `timeout` and a fresh stop token) to the shared wait
/// pool; its result, converted by `convert`, goes to `wake(ok, value)` (`value` is the
/// exception when not `ok`). Without an interpreter to call back (finalization) the result is
/// just dropped (a guard unlocks, a leadership ends with its session).
pub(crate) fn start<P>(
    wake: Py<PyAny>,
    timeout: Option<Duration>,
    make: impl FnOnce(Wait) -> P,
    convert: Convert<P::Output>,
) -> PyResult<PyPending>
where
    P: Pollable + 'static,
    P::Output: Send + 'static,
{
    start_with(wake, timeout, |wait| in_pool(make(wait)), convert)
}

/// As [`start`], for a wait run as `make` says: in the pool, or on a thread of its own for a
/// core wait that is no state machine (a double barrier's), which ends when the stop token is
/// raised.
pub(crate) fn start_with<T: Send + 'static>(
    wake: Py<PyAny>,
    timeout: Option<Duration>,
    make: impl FnOnce(Wait) -> Starter<T>,
    convert: Convert<T>,
) -> PyResult<PyPending> {
    let stop = Stop::new();
    let starter = make(Wait::from(timeout).with_stop(&stop));
    starter(Box::new(move |r| {
        let mut result = Some(r);
        attach(|py| {
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
    }))?;
    Ok(PyPending { stop })
}

/// A stream shared with its Python object, read by a pooled wait: the object may read it too,
/// or cancel it (`None`) meanwhile. A stream that closed or fell behind is over (`None`).
struct Shared<S: Source> {
    inner: Arc<Mutex<Option<S>>>,
    /// A clone of the stream's wakeup, renewed after each read.
    wakeup: Receiver<S::Wakeup>,
    /// What a cancelled stream reports.
    cancelled: Error,
}

impl<S: Source> Shared<S> {
    fn new(inner: &Arc<Mutex<Option<S>>>, cancelled: Error) -> Result<Shared<S>, Error> {
        let wakeup = match lock(inner).as_ref() {
            Some(s) => s.wakeup().clone(),
            None => return Err(cancelled),
        };
        Ok(Shared {
            inner: Arc::clone(inner),
            wakeup,
            cancelled,
        })
    }
}

impl<S: Source> Source for Shared<S>
where
    S::Wakeup: Send,
{
    type Item = S::Item;
    type Wakeup = S::Wakeup;

    fn try_next(&mut self) -> Result<Option<S::Item>, Error> {
        let mut guard = lock(&self.inner);
        let Some(s) = guard.as_mut() else {
            return Err(self.cancelled.clone());
        };
        let r = s.try_next();
        match &r {
            Ok(_) => self.wakeup = s.wakeup().clone(),
            Err(Error::Closed(_) | Error::Compacted { .. }) => *guard = None,
            Err(_) => {}
        }
        r
    }

    fn wakeup(&self) -> &Receiver<S::Wakeup> {
        &self.wakeup
    }
}

/// The expired-lease channel of an engine: `Closed` naming the engine once it is closed.
struct Expired {
    rx: Receiver<Vec<ExpiredLease>>,
    closed: Error,
}

impl Source for Expired {
    type Item = Vec<ExpiredLease>;
    type Wakeup = Vec<ExpiredLease>;

    fn try_next(&mut self) -> Result<Option<Vec<ExpiredLease>>, Error> {
        self.rx.try_next().map_err(|_| self.closed.clone())
    }

    fn wakeup(&self) -> &Receiver<Vec<ExpiredLease>> {
        &self.rx
    }
}

/// The end of a session: true once its lease is lost, false when the wait runs out first.
struct Done {
    done: Receiver<()>,
    wait: Wait,
    stopped: Option<Receiver<()>>,
}

impl Pollable for Done {
    type Output = bool;

    fn poll(&mut self) -> Result<Option<bool>, Error> {
        if let Err(TryRecvError::Disconnected) = self.done.try_recv() {
            return Ok(Some(true));
        }
        Ok(self.wait.is_over().then_some(false))
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        interest.recv(&self.done);
        interest.wait(&self.wait, &self.stopped);
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
        move |wait| m.lock_wait(wait),
        Box::new(move |py, g: LockGuard| {
            Ok(PyLockGuard::wrap(py, session, name, key, g)?.into_any())
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
        move |wait| e.campaign_wait(value, wait),
        Box::new(move |py, l: Leadership| {
            let leadership = PyLeadership {
                name,
                key: l.key().to_vec(),
                token: l.fencing_token(),
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
    let source = Shared::new(
        watcher.get().inner.get()?,
        Error::Closed("the watch".into()),
    )
    .map_err(err)?;
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| Next::new(source, wait, "a watch event"),
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
    let source = Expired {
        rx: expired.get().rx.get()?.clone(),
        closed: Error::Closed("the database".into()),
    };
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| Next::new(source, wait, "an expired lease"),
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
    let source = Shared::new(
        observer.get().inner.get()?,
        Error::Closed("the observer".into()),
    )
    .map_err(err)?;
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| Next::new(source, wait, "a leadership change"),
        Box::new(|py, state| match state {
            Some(kv) => Ok(Py::new(py, PyKeyValue(kv))?.into_any()),
            None => Ok(py.None()),
        }),
    )
}

/// `Session.wait_done()` for `tenure.aio`: true once the session's lease is lost, false when
/// `timeout` ran out first.
#[pyfunction]
#[pyo3(signature = (session, timeout, wake))]
pub(crate) fn _session_done_async(
    session: &Bound<'_, PySession>,
    #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    wake: Py<PyAny>,
) -> PyResult<PyPending> {
    let done = session.get().inner.get()?.done();
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| Done {
            done,
            stopped: wait.stop_channel(),
            wait,
        },
        Box::new(|py, gone: bool| Ok(gone.into_pyobject(py)?.to_owned().into_any().unbind())),
    )
}

// queues (S10).
/// `Queue.dequeue()` / `PriorityQueue.dequeue()` for `tenure.aio`: `(value, priority)` of the
/// item taken (`priority` is `None` for a FIFO queue), so that an item taken in a race with the
/// cancellation can be put back.
#[pyfunction]
#[pyo3(signature = (queue, timeout, wake))]
pub(crate) fn _dequeue_async(
    queue: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    wake: Py<PyAny>,
) -> PyResult<PyPending> {
    let (kind, name) = if let Ok(q) = queue.cast::<PyQueue>() {
        (q.get().inner.get()?.clone(), None)
    } else {
        let q = queue.cast::<PyPriorityQueue>()?;
        (q.get().inner.get()?.clone(), Some(q.get().name.clone()))
    };
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| kind.dequeue_wait(wait),
        Box::new(move |py, kv: tenure::KeyValue| {
            let priority = name.as_deref().and_then(|n| priority_of(n, &kv.key));
            let value = pyo3::types::PyBytes::new(py, &kv.value);
            Ok((value, priority).into_pyobject(py)?.into_any().unbind())
        }),
    )
}

// groups (S12).
/// `GroupWatch.recv()` for `tenure.aio`: `(kind, id, capabilities)`; `Closed` once the watch is
/// cancelled.
#[pyfunction]
#[pyo3(signature = (watch, timeout, wake))]
pub(crate) fn _group_watch_recv_async(
    watch: &Bound<'_, PyGroupWatch>,
    #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    wake: Py<PyAny>,
) -> PyResult<PyPending> {
    let source = Shared::new(
        watch.get().inner.get()?,
        Error::Closed("the group watch".into()),
    )
    .map_err(err)?;
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| Next::new(source, wait, "a group change"),
        Box::new(|py, change| {
            Ok(change_tuple(py, change)
                .into_pyobject(py)?
                .into_any()
                .unbind())
        }),
    )
}
