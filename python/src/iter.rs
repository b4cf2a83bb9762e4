//! Blocking iterators: `expired()` and `watch()`. They wait with the shared sliced wait
//! (`runtime::sliced`): GIL released and check for signals between slices, so Ctrl-C interrupts
//! them promptly and other threads keep running.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use tenure::{Error, ExpiredLease, Watcher};

use crate::convert::{opt_secs_arg, timeout};
use crate::errors::{blocking, err};
use crate::handle::PyTenure;
use crate::repr::Repr;
use crate::runtime::{deadline, drop_detached, lock, sliced, take_and_drop, ForkSafe};
use crate::types::{PyEvent, PyExpiredLease};

/// Waits with the shared sliced wait; `Ok(None)` when the stream ended, `Timeout` at the
/// deadline.
fn wait<T: Send>(
    py: Python<'_>,
    timeout: Option<Duration>,
    what: &str,
    poll: impl FnMut(Duration) -> Result<Option<Option<T>>, Error> + Send,
) -> PyResult<Option<T>> {
    sliced(py, deadline(timeout), poll)?
        .ok_or_else(|| err(Error::timeout(what, timeout.unwrap_or_default())))
}

/// Iterator over batches of expired leases (`Tenure.expired()`).
#[pyclass(frozen, module = "tenure", name = "ExpiredIterator")]
pub(crate) struct PyExpiredIter {
    // Keeps the engine open while someone iterates.
    _db: Py<PyTenure>,
    pub(crate) rx: ForkSafe<Receiver<Vec<ExpiredLease>>>,
    timeout: Option<Duration>,
}

impl PyExpiredIter {
    pub(crate) fn new(
        db: Py<PyTenure>,
        rx: Receiver<Vec<ExpiredLease>>,
        timeout: Option<Duration>,
    ) -> Self {
        PyExpiredIter {
            _db: db,
            rx: ForkSafe::new(rx),
            timeout,
        }
    }

    fn next_batch<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<Duration>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let rx = self.rx.get()?;
        let batch = wait(py, timeout, "an expired lease", |step| {
            Ok(match rx.recv_timeout(step) {
                Ok(b) => Some(Some(b)),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => Some(None),
            })
        })?;
        batch
            .map(|b| PyList::new(py, b.into_iter().map(PyExpiredLease)))
            .transpose()
    }
}

#[pymethods]
impl PyExpiredIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The default timeout of each wait in seconds (`None`: wait until a lease expires).
    #[getter]
    fn timeout(&self) -> Option<f64> {
        self.timeout.map(|t| t.as_secs_f64())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "ExpiredIterator")
            .field("timeout", self.timeout.map(|t| t.as_secs_f64()))
            .finish()
    }

    /// The next batch; waits at most the iterator's timeout, then raises `tenure.Timeout`.
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        self.next_batch(py, self.timeout)
    }

    /// The next batch, waiting at most `timeout` seconds (`None`: for ever); `tenure.Timeout`
    /// when none came, `tenure.Closed` once the engine is closed.
    #[pyo3(signature = (timeout=None))]
    fn recv<'py>(
        &self,
        py: Python<'py>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.next_batch(py, self::timeout(timeout)?)?
            .ok_or_else(|| self._db.get().closed_error())
    }
}

/// A watch on a key or prefix (`Tenure.watch()`): an iterator of `Event`s and a context
/// manager that cancels the watch on exit.
#[pyclass(frozen, module = "tenure", name = "Watcher")]
pub(crate) struct PyWatcher {
    _db: Py<PyTenure>,
    /// Shared with `tenure.aio`'s helper waits.
    pub(crate) inner: ForkSafe<Arc<Mutex<Option<Watcher>>>>,
    timeout: Option<Duration>,
}

impl PyWatcher {
    pub(crate) fn new(db: Py<PyTenure>, w: Watcher, timeout: Option<Duration>) -> Self {
        PyWatcher {
            _db: db,
            inner: ForkSafe::new(Arc::new(Mutex::new(Some(w)))),
            timeout,
        }
    }

    fn next_event(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<Option<PyEvent>> {
        let inner = self.inner.get()?;
        let ev = wait(py, timeout, "a watch event", |step| {
            let mut guard = lock(inner);
            let Some(w) = guard.as_mut() else {
                return Ok(Some(None));
            };
            match w.recv_timeout(step) {
                Ok(ev) => Ok(Some(Some(ev))),
                Err(Error::Timeout { .. }) => Ok(None),
                Err(Error::Closed(_)) => {
                    *guard = None;
                    Ok(Some(None))
                }
                Err(e) => {
                    // The watcher fell behind (Compacted): it is over.
                    *guard = None;
                    Err(e)
                }
            }
        })?;
        Ok(ev.map(PyEvent))
    }
}

impl Drop for PyWatcher {
    fn drop(&mut self) {
        if let Some(w) = self.inner.take_for_drop() {
            drop_detached(w);
        }
    }
}

#[pymethods]
impl PyWatcher {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The next event; waits at most the watch's timeout, then raises `tenure.Timeout`.
    /// Raises `tenure.Compacted` if the watcher fell too far behind (it is then cancelled).
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyEvent>> {
        self.next_event(py, self.timeout)
    }

    /// The next event, waiting at most `timeout` seconds (`None`: for ever); `tenure.Timeout`
    /// when none came, `tenure.Closed` once the watch is cancelled or the engine closed.
    #[pyo3(signature = (timeout=None))]
    fn recv(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<PyEvent> {
        self.next_event(py, self::timeout(timeout)?)?
            .ok_or_else(|| {
                let db = self._db.get();
                match db.engine().map(|e| e.is_closed()) {
                    Ok(false) => crate::errors::closed("the watch is cancelled".to_owned()),
                    _ => db.closed_error(),
                }
            })
    }

    /// Cancels the watch; iteration then stops. Idempotent.
    fn cancel(&self, py: Python<'_>) -> PyResult<()> {
        take_and_drop(py, &self.inner)
    }

    /// The default timeout of each wait in seconds (`None`: wait until an event arrives).
    #[getter]
    fn timeout(&self) -> Option<f64> {
        self.timeout.map(|t| t.as_secs_f64())
    }

    /// Whether the watch is cancelled or ended.
    #[getter]
    fn cancelled(&self, py: Python<'_>) -> PyResult<bool> {
        match self.inner.get() {
            Ok(inner) => blocking(py, || Ok(lock(inner).is_none())),
            Err(_) => Ok(true),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.cancel(py)?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Watcher")
            .field("timeout", self.timeout.map(|t| t.as_secs_f64()))
            .field("cancelled", self.cancelled(py).unwrap_or(true))
            .finish()
    }
}
