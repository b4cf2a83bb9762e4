//! `tenure.Mutex` and `tenure.LockGuard` (SPEC S2, S3).

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tenure::sync::{LockGuard, Mutex as SyncMutex, Stop, Wait};
use tenure::Error;

use crate::convert::{opt_secs_arg, timeout};
use crate::errors::{blocking, err};
use crate::repr::Repr;
use crate::runtime::{drop_detached, in_pool, interruptible, lock, ForkSafe};

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
    fn guard(&self, py: Python<'_>, g: LockGuard) -> PyLockGuard {
        PyLockGuard {
            session: self.session.clone_ref(py),
            name: self.name.clone(),
            key: self.key.clone(),
            token: g.fencing_token(),
            inner: ForkSafe::new(Mutex::new(Some(g))),
        }
    }

    pub(crate) fn lock_inner(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyLockGuard> {
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
        Ok(self.guard(py, g))
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
    ) -> PyResult<PyLockGuard> {
        self.lock_inner(py, timeout)
    }

    /// Takes the lock if no one holds it or waits for it, else raises `tenure.Locked`.
    fn try_lock(&self, py: Python<'_>) -> PyResult<PyLockGuard> {
        let m = self.inner.get()?;
        let g = blocking(py, || m.try_lock())?;
        Ok(self.guard(py, g))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Mutex")
            .field("name", &self.name)
            .field("key", self.key.as_slice())
            .finish()
    }
}

/// A held lock, from `Session.lock()`, `Mutex.lock()` or `Mutex.try_lock()`. A context manager:
/// entering checks that the lock is still held (else `tenure.NotLeader`), exit unlocks.
/// Garbage-collected while held, it unlocks too.
#[pyclass(frozen, module = "tenure", name = "LockGuard")]
pub(crate) struct PyLockGuard {
    // Keeps the session (and so its renewal) alive while the lock is held.
    pub(crate) session: Py<PyAny>,
    pub(crate) name: String,
    pub(crate) key: Vec<u8>,
    pub(crate) token: i64,
    pub(crate) inner: ForkSafe<Mutex<Option<LockGuard>>>,
}

impl Drop for PyLockGuard {
    fn drop(&mut self) {
        // An unreleased guard unlocks on drop (an engine write): without the GIL. A forked
        // child leaks it instead, leaving the parent's lock alone.
        if let Some(g) = self.inner.take_for_drop() {
            drop_detached(g);
        }
    }
}

impl PyLockGuard {
    fn take(&self, py: Python<'_>) -> PyResult<Option<LockGuard>> {
        let inner = self.inner.get()?;
        blocking(py, || Ok(lock(inner).take()))
    }
}

#[pymethods]
impl PyLockGuard {
    /// The fencing token (SPEC S3): the create revision of the lock key, strictly increasing
    /// per lock name. Pass it to the guarded resource (see `tenure.FenceGate`).
    #[getter]
    fn fencing_token(&self) -> i64 {
        self.token
    }

    /// The lock's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The lock key of this acquisition.
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, &self.key)
    }

    /// The session holding the lock.
    #[getter]
    fn session(&self, py: Python<'_>) -> Py<PyAny> {
        self.session.clone_ref(py)
    }

    /// Whether this acquisition still holds the lock (false after `unlock()` or once the
    /// session's lease is lost).
    fn is_held(&self, py: Python<'_>) -> PyResult<bool> {
        let inner = self.inner.get()?;
        blocking(py, || Ok(lock(inner).as_ref().is_some_and(|g| g.is_held())))
    }

    /// Releases the lock, deleting only this acquisition's key. `tenure.NotLeader` if it was
    /// no longer held (already unlocked, or lost with the session).
    fn unlock(&self, py: Python<'_>) -> PyResult<()> {
        match self.take(py)? {
            Some(g) => blocking(py, || g.unlock()),
            None => Err(err(Error::NotLeader)),
        }
    }

    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        if !slf.get().is_held(py)? {
            return Err(err(Error::NotLeader));
        }
        Ok(slf)
    }

    /// Unlocks. A lock already released or lost is not an error here; a forked child leaves
    /// the parent's lock alone.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let Ok(inner) = self.inner.get() else {
            return Ok(false);
        };
        let g = blocking(py, || Ok(lock(inner).take()))?;
        if let Some(g) = g {
            blocking(py, || match g.unlock() {
                Err(Error::NotLeader | Error::Closed(_)) => Ok(()),
                other => other,
            })?;
        }
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "LockGuard")
            .field("name", &self.name)
            .field("key", self.key.as_slice())
            .field("fencing_token", self.token)
            .finish()
    }
}
