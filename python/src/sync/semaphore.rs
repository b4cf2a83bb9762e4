//! `tenure.Semaphore` and `tenure.SemaphoreGuard` (SPEC S7), and the native half of
//! `tenure.aio.Semaphore.acquire`.

use pyo3::prelude::*;
use tenure::sync::{Semaphore, SemaphoreGuard, Stop, Wait};

use super::guard::PyGuard;
use crate::aio::{start, PyPending};
use crate::convert::{opt_secs_arg, timeout};
use crate::errors::blocking;
use crate::repr::Repr;
use crate::runtime::{drop_detached, in_pool, interruptible, ForkSafe};

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
    /// The Python guard of permit `g` of semaphore `name` held through `session`.
    fn guard(
        py: Python<'_>,
        session: Py<PyAny>,
        name: String,
        g: SemaphoreGuard,
    ) -> PyResult<Py<PySemaphoreGuard>> {
        let (key, token) = (g.key().to_vec(), g.fencing_token());
        let base = PyGuard::new("SemaphoreGuard", session, name, key, token, Box::new(g));
        Py::new(
            py,
            PyClassInitializer::from(base).add_subclass(PySemaphoreGuard),
        )
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
    ) -> PyResult<Py<PySemaphoreGuard>> {
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
        PySemaphore::guard(py, self.session.clone_ref(py), self.name.clone(), g)
    }

    /// Takes a permit if one is free and no one waits, else raises `tenure.Locked`.
    fn try_acquire(&self, py: Python<'_>) -> PyResult<Py<PySemaphoreGuard>> {
        let s = self.inner.get()?;
        let g = blocking(py, || s.try_acquire())?;
        PySemaphore::guard(py, self.session.clone_ref(py), self.name.clone(), g)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Semaphore")
            .field("name", &self.name)
            .field("permits", self.permits as i64)
            .finish()
    }
}

/// A held permit, from `Semaphore.acquire()` or `Semaphore.try_acquire()`: a `tenure._Guard`
/// (fencing token, `is_held()`, context manager) that releases with `release()`.
#[pyclass(frozen, extends = PyGuard, module = "tenure", name = "SemaphoreGuard")]
pub(crate) struct PySemaphoreGuard;

#[pymethods]
impl PySemaphoreGuard {
    /// Releases the permit, deleting only this acquisition's key. `tenure.NotLeader` if it was
    /// no longer held (already released, or lost with the session).
    fn release(slf: &Bound<'_, Self>) -> PyResult<()> {
        slf.as_super().get().release_held(slf.py())
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
            Ok(PySemaphore::guard(py, session, name, g)?.into_any())
        }),
    )
}
