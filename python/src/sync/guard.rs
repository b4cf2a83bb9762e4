//! `tenure._Guard`: what a held lock, permit or read/write hold share (SPEC S2, S3, S7, S8).
//! `LockGuard`, `SemaphoreGuard` and `RwLockGuard` extend it and add only the name of their
//! release (`unlock()` or `release()`) and what is theirs alone (`is_write`).

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use tenure::sync::{LockGuard, RwLockGuard, SemaphoreGuard};
use tenure::Error;

use crate::errors::{blocking, err};
use crate::repr::Repr;
use crate::runtime::{drop_detached, lock, ForkSafe};

/// A core guard: still held?, and its release (deleting only its own key).
pub(crate) trait Held: Send + 'static {
    fn is_held(&self) -> bool;
    fn release(self: Box<Self>) -> tenure::Result<()>;
}

impl Held for LockGuard {
    fn is_held(&self) -> bool {
        LockGuard::is_held(self)
    }
    fn release(self: Box<Self>) -> tenure::Result<()> {
        self.unlock()
    }
}

impl Held for SemaphoreGuard {
    fn is_held(&self) -> bool {
        SemaphoreGuard::is_held(self)
    }
    fn release(self: Box<Self>) -> tenure::Result<()> {
        SemaphoreGuard::release(*self)
    }
}

impl Held for RwLockGuard {
    fn is_held(&self) -> bool {
        RwLockGuard::is_held(self)
    }
    fn release(self: Box<Self>) -> tenure::Result<()> {
        RwLockGuard::release(*self)
    }
}

/// A held lock, permit or hold. A context manager: entering checks that it is still held (else
/// `tenure.NotLeader`), exit releases it. Garbage-collected while held, it releases too.
#[pyclass(frozen, subclass, module = "tenure", name = "_Guard")]
pub(crate) struct PyGuard {
    /// The class name its repr shows (`LockGuard`...).
    class: &'static str,
    // Keeps the session (and so its renewal) alive while held.
    session: Py<PyAny>,
    name: String,
    key: Vec<u8>,
    token: i64,
    /// `None` once released; taken out under its lock, released outside it.
    inner: ForkSafe<Mutex<Option<Box<dyn Held>>>>,
}

impl PyGuard {
    pub(crate) fn new(
        class: &'static str,
        session: Py<PyAny>,
        name: String,
        key: Vec<u8>,
        token: i64,
        held: Box<dyn Held>,
    ) -> PyGuard {
        PyGuard {
            class,
            session,
            name,
            key,
            token,
            inner: ForkSafe::new(Mutex::new(Some(held))),
        }
    }

    /// Releases, deleting only this acquisition's key. `tenure.NotLeader` if it was no longer
    /// held (already released, or lost with the session).
    pub(crate) fn release_held(&self, py: Python<'_>) -> PyResult<()> {
        let inner = self.inner.get()?;
        match blocking(py, || Ok(lock(inner).take()))? {
            Some(g) => blocking(py, || g.release()),
            None => Err(err(Error::NotLeader)),
        }
    }
}

impl Drop for PyGuard {
    fn drop(&mut self) {
        // An unreleased guard releases on drop (an engine write): without the GIL. A forked
        // child leaks it instead, leaving the parent's hold alone.
        if let Some(g) = self.inner.take_for_drop() {
            drop_detached(g);
        }
    }
}

#[pymethods]
impl PyGuard {
    /// The fencing token (SPEC S3): the create revision of this acquisition's key, strictly
    /// increasing per name. Pass it to the guarded resource (see `tenure.FenceGate`).
    #[getter]
    fn fencing_token(&self) -> i64 {
        self.token
    }

    /// The lock's or semaphore's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The key of this acquisition.
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.key)
    }

    /// The session holding it.
    #[getter]
    fn session(&self, py: Python<'_>) -> Py<PyAny> {
        self.session.clone_ref(py)
    }

    /// Whether this acquisition is still held (false once released or once the session's
    /// lease is lost).
    fn is_held(&self, py: Python<'_>) -> PyResult<bool> {
        let inner = self.inner.get()?;
        blocking(py, || Ok(lock(inner).as_ref().is_some_and(|g| g.is_held())))
    }

    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        if !slf.get().is_held(py)? {
            return Err(err(Error::NotLeader));
        }
        Ok(slf)
    }

    /// Releases. One already released or lost is not an error here; a forked child leaves
    /// the parent's hold alone.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let Ok(inner) = self.inner.get() else {
            return Ok(false);
        };
        if let Some(g) = blocking(py, || Ok(lock(inner).take()))? {
            blocking(py, || match g.release() {
                Err(Error::NotLeader | Error::Closed(_)) => Ok(()),
                other => other,
            })?;
        }
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, self.class)
            .field("name", &self.name)
            .field("key", self.key.as_slice())
            .field("fencing_token", self.token)
            .finish()
    }
}
