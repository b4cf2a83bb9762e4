//! `tenure.Semaphore` and `tenure.SemaphoreGuard` (SPEC S7), and the native half of
//! `tenure.aio.Semaphore.acquire`.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tenure::sync::{Semaphore, SemaphoreGuard, Stop, Wait};
use tenure::Error;

use crate::aio::{start, PyPending};
use crate::convert::{opt_secs_arg, timeout};
use crate::errors::{blocking, err};
use crate::repr::Repr;
use crate::runtime::{drop_detached, in_pool, interruptible, lock, ForkSafe};

/// A counting semaphore (SPEC S7) for one session, made by `Session.semaphore(name, permits)`:
/// at most `permits` sessions hold it at once, admitted in arrival order. Every holder must name
/// the same number of permits (else `tenure.InvalidArgument` naming both); a holder whose
/// session ends frees its permit. Within one session it is held at most once at a time.
///
/// >>> import tenure
/// >>> db = tenure.open()
/// >>> a, b, c = db.session(), db.session(), db.session()
/// >>> with a.semaphore("pool/gpu", 2).acquire(timeout=5) as permit:
/// ...     b.semaphore("pool/gpu", 2).try_acquire().release()
/// ...     permit.fencing_token > 0
/// True
#[pyclass(frozen, module = "tenure", name = "Semaphore")]
pub(crate) struct PySemaphore {
    /// The `tenure.Session` it belongs to.
    pub(crate) session: Py<PyAny>,
    pub(crate) name: String,
    pub(crate) permits: usize,
    pub(crate) inner: ForkSafe<Semaphore>,
}

impl Drop for PySemaphore {
    fn drop(&mut self) {
        if let Some(s) = self.inner.take_for_drop() {
            drop_detached(s);
        }
    }
}

impl PySemaphore {
    fn guard(session: Py<PyAny>, name: String, g: SemaphoreGuard) -> PySemaphoreGuard {
        PySemaphoreGuard {
            session,
            name,
            key: g.key().to_vec(),
            token: g.fencing_token(),
            inner: ForkSafe::new(Mutex::new(Some(g))),
        }
    }
}

#[pymethods]
impl PySemaphore {
    /// The semaphore's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Its number of permits.
    #[getter]
    fn permits(&self) -> usize {
        self.permits
    }

    /// The session the semaphore belongs to.
    #[getter]
    fn session(&self, py: Python<'_>) -> Py<PyAny> {
        self.session.clone_ref(py)
    }

    /// Waits until this session holds a permit, at most `timeout` seconds (`None`: no limit).
    /// Raises `tenure.Timeout` when the time runs out, `tenure.SessionExpired` as soon as the
    /// session's lease is lost, `tenure.InvalidArgument` if the permit count is not the
    /// holders' or this session already holds it. Ctrl-C withdraws the waiter.
    #[pyo3(signature = (timeout=None))]
    fn acquire(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<PySemaphoreGuard> {
        let timeout = self::timeout(timeout)?;
        let s = self.inner.get()?.clone();
        let cancel = Stop::new();
        let wait = Wait::from(timeout).with_stop(&cancel);
        let g = interruptible(
            py,
            in_pool(s.acquire_wait(wait)),
            move || cancel.stop(),
            drop::<SemaphoreGuard>,
        )?;
        Ok(PySemaphore::guard(
            self.session.clone_ref(py),
            self.name.clone(),
            g,
        ))
    }

    /// Takes a permit if one is free and no one waits, else raises `tenure.Locked`.
    fn try_acquire(&self, py: Python<'_>) -> PyResult<PySemaphoreGuard> {
        let s = self.inner.get()?;
        let g = blocking(py, || s.try_acquire())?;
        Ok(PySemaphore::guard(
            self.session.clone_ref(py),
            self.name.clone(),
            g,
        ))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Semaphore")
            .field("name", &self.name)
            .field("permits", self.permits as i64)
            .finish()
    }
}

/// A held permit, from `Semaphore.acquire()` or `Semaphore.try_acquire()`. A context manager:
/// entering checks that the permit is still held (else `tenure.NotLeader`), exit releases it.
/// Garbage-collected while held, it releases too.
#[pyclass(frozen, module = "tenure", name = "SemaphoreGuard")]
pub(crate) struct PySemaphoreGuard {
    // Keeps the session (and so its renewal) alive while the permit is held.
    session: Py<PyAny>,
    name: String,
    key: Vec<u8>,
    token: i64,
    inner: ForkSafe<Mutex<Option<SemaphoreGuard>>>,
}

impl Drop for PySemaphoreGuard {
    fn drop(&mut self) {
        if let Some(g) = self.inner.take_for_drop() {
            drop_detached(g);
        }
    }
}

#[pymethods]
impl PySemaphoreGuard {
    /// The fencing token: the create revision of this permit's key.
    #[getter]
    fn fencing_token(&self) -> i64 {
        self.token
    }

    /// The semaphore's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// This permit's key (`name/<lease ID in hex>`).
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, &self.key)
    }

    /// The session holding the permit.
    #[getter]
    fn session(&self, py: Python<'_>) -> Py<PyAny> {
        self.session.clone_ref(py)
    }

    /// Whether the permit is still held (false after `release()` or once the session's lease
    /// is lost).
    fn is_held(&self, py: Python<'_>) -> PyResult<bool> {
        let inner = self.inner.get()?;
        blocking(py, || Ok(lock(inner).as_ref().is_some_and(|g| g.is_held())))
    }

    /// Releases the permit, deleting only this acquisition's key. `tenure.NotLeader` if it was
    /// no longer held (already released, or lost with the session).
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let inner = self.inner.get()?;
        match blocking(py, || Ok(lock(inner).take()))? {
            Some(g) => blocking(py, || g.release()),
            None => Err(err(Error::NotLeader)),
        }
    }

    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        if !slf.get().is_held(py)? {
            return Err(err(Error::NotLeader));
        }
        Ok(slf)
    }

    /// Releases. A permit already released or lost is not an error here.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let Ok(inner) = self.inner.get() else {
            return Ok(false);
        };
        let g = blocking(py, || Ok(lock(inner).take()))?;
        if let Some(g) = g {
            blocking(py, || match g.release() {
                Err(Error::NotLeader | Error::Closed(_)) => Ok(()),
                other => other,
            })?;
        }
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "SemaphoreGuard")
            .field("name", &self.name)
            .field("key", self.key.as_slice())
            .field("fencing_token", self.token)
            .finish()
    }
}

/// `Semaphore.acquire()` for `tenure.aio`: a `SemaphoreGuard` when held.
#[pyfunction]
#[pyo3(signature = (semaphore, timeout, wake))]
pub(crate) fn _semaphore_acquire_async(
    py: Python<'_>,
    semaphore: &Bound<'_, PySemaphore>,
    #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    wake: Py<PyAny>,
) -> PyResult<PyPending> {
    let me = semaphore.get();
    let s = me.inner.get()?.clone();
    let (session, name) = (me.session.clone_ref(py), me.name.clone());
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| s.acquire_wait(wait),
        Box::new(move |py, g: SemaphoreGuard| {
            Ok(Py::new(py, PySemaphore::guard(session, name, g))?.into_any())
        }),
    )
}
