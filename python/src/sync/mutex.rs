//! `tenure.Mutex` and `tenure.LockGuard` (SPEC S2, S3).

use pyo3::prelude::*;
use tenure::sync::{LockGuard, Mutex as SyncMutex, Stop, Wait};

use super::guard::PyGuard;
use crate::convert::{opt_secs_arg, timeout};
use crate::errors::blocking;
use crate::repr::Repr;
use crate::runtime::{drop_detached, in_pool, interruptible, ForkSafe};

/// A fair mutex (SPEC S2) for one session, made by `Session.mutex(name)`: FIFO by arrival, each
/// waiter waiting only on its predecessor. It excludes other sessions; within one session it is
/// held at most once at a time (a second acquisition raises `tenure.InvalidArgument`).
#[pyclass(frozen, module = "tenure", name = "Mutex")]
pub(crate) struct PyMutex {
    /// The `tenure.Session` it belongs to.
    pub(crate) session: Py<PyAny>,
    pub(crate) name: String,
    pub(crate) key: Vec<u8>,
    pub(crate) inner: ForkSafe<SyncMutex>,
}

impl Drop for PyMutex {
    fn drop(&mut self) {
        if let Some(m) = self.inner.take_for_drop() {
            drop_detached(m);
        }
    }
}

impl PyMutex {
    fn guard(&self, py: Python<'_>, g: LockGuard) -> PyResult<Py<PyLockGuard>> {
        PyLockGuard::wrap(
            py,
            self.session.clone_ref(py),
            self.name.clone(),
            self.key.clone(),
            g,
        )
    }

    pub(crate) fn lock_inner(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyLockGuard>> {
        let timeout = self::timeout(timeout)?;
        let m = self.inner.get()?.clone();
        let cancel = Stop::new();
        let wait = Wait::from(timeout).with_stop(&cancel);
        let g = interruptible(
            py,
            in_pool(m.lock_wait(wait)),
            move || cancel.stop(),
            drop::<LockGuard>,
        )?;
        self.guard(py, g)
    }
}

#[pymethods]
impl PyMutex {
    /// The mutex's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// This contender's key (`name/<lease ID in hex>`).
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, &self.key)
    }

    /// The session the mutex belongs to.
    #[getter]
    fn session(&self, py: Python<'_>) -> Py<PyAny> {
        self.session.clone_ref(py)
    }

    /// Waits until held, at most `timeout` seconds (`None`: no limit); see `Session.lock`.
    /// Raises `tenure.Timeout` when the time runs out, `tenure.SessionExpired` as soon as the
    /// session's lease is lost, `tenure.InvalidArgument` if this session already holds it.
    #[pyo3(signature = (timeout=None))]
    fn lock(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<Py<PyLockGuard>> {
        self.lock_inner(py, timeout)
    }

    /// Takes the lock if no one holds it or waits for it, else raises `tenure.Locked`.
    fn try_lock(&self, py: Python<'_>) -> PyResult<Py<PyLockGuard>> {
        let m = self.inner.get()?;
        let g = blocking(py, || m.try_lock())?;
        self.guard(py, g)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Mutex")
            .field("name", &self.name)
            .field("key", self.key.as_slice())
            .finish()
    }
}

/// A held lock, from `Session.lock()`, `Mutex.lock()` or `Mutex.try_lock()`: a `tenure._Guard`
/// (fencing token, `is_held()`, context manager) that releases with `unlock()`.
#[pyclass(frozen, extends = PyGuard, module = "tenure", name = "LockGuard")]
pub(crate) struct PyLockGuard;

impl PyLockGuard {
    /// The Python guard of `g`, a hold of `key` of mutex `name` through `session`.
    pub(crate) fn wrap(
        py: Python<'_>,
        session: Py<PyAny>,
        name: String,
        key: Vec<u8>,
        g: LockGuard,
    ) -> PyResult<Py<PyLockGuard>> {
        let token = g.fencing_token();
        let base = PyGuard::new("LockGuard", session, name, key, token, Box::new(g));
        Py::new(py, PyClassInitializer::from(base).add_subclass(PyLockGuard))
    }
}

#[pymethods]
impl PyLockGuard {
    /// Releases the lock, deleting only this acquisition's key. `tenure.NotLeader` if it was
    /// no longer held (already unlocked, or lost with the session).
    fn unlock(slf: &Bound<'_, Self>) -> PyResult<()> {
        slf.as_super().get().release_held(slf.py())
    }
}
