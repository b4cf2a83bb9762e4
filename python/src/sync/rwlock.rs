//! `tenure.RwLock` and `tenure.RwLockGuard` (SPEC S8), and the native half of
//! `tenure.aio.RwLock.read` / `.write`.

use pyo3::prelude::*;
use tenure::sync::{RwLock, RwLockGuard, Stop, Wait};

use super::guard::PyGuard;
use crate::aio::{start, PyPending};
use crate::convert::{opt_secs_arg, timeout};
use crate::errors::blocking;
use crate::repr::Repr;
use crate::runtime::{drop_detached, in_pool, interruptible, ForkSafe};

/// A read-write lock (SPEC S8) for one session, made by `Session.rwlock(name)`: many readers at
/// once or one writer alone, in arrival order (a stream of readers never starves a writer).
/// etcd's `contrib/recipes` key layout, so Go programs using its `RWMutex` take part.
///
/// >>> import tenure
/// >>> db = tenure.open()
/// >>> a, b = db.session(), db.session()
/// >>> with a.rwlock("config").read(timeout=5), b.rwlock("config").read(timeout=5):
/// ...     pass  # two readers at once
/// >>> with a.rwlock("config").write(timeout=5) as w:
/// ...     w.is_write
/// True
#[pyclass(frozen, module = "tenure", name = "RwLock")]
pub(crate) struct PyRwLock {
    /// The `tenure.Session` it belongs to.
    pub(crate) session: Py<PyAny>,
    pub(crate) name: String,
    pub(crate) inner: ForkSafe<RwLock>,
}

impl Drop for PyRwLock {
    fn drop(&mut self) {
        if let Some(l) = self.inner.take_for_drop() {
            drop_detached(l);
        }
    }
}

impl PyRwLock {
    /// The Python guard of hold `g` of lock `name` through `session`.
    fn guard(
        py: Python<'_>,
        session: Py<PyAny>,
        name: String,
        g: RwLockGuard,
    ) -> PyResult<Py<PyRwLockGuard>> {
        let (key, token, write) = (g.key().to_vec(), g.fencing_token(), g.is_write());
        let base = PyGuard::new("RwLockGuard", session, name, key, token, Box::new(g));
        Py::new(
            py,
            PyClassInitializer::from(base).add_subclass(PyRwLockGuard { write }),
        )
    }

    fn wait_for(
        &self,
        py: Python<'_>,
        write: bool,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyRwLockGuard>> {
        let timeout = self::timeout(timeout)?;
        let l = self.inner.get()?.clone();
        let cancel = Stop::new();
        let wait = Wait::from(timeout).with_stop(&cancel);
        let w = if write {
            l.write_wait(wait)
        } else {
            l.read_wait(wait)
        };
        let g = interruptible(py, in_pool(w), move || cancel.stop(), drop::<RwLockGuard>)?;
        PyRwLock::guard(py, self.session.clone_ref(py), self.name.clone(), g)
    }

    fn try_take(&self, py: Python<'_>, write: bool) -> PyResult<Py<PyRwLockGuard>> {
        let l = self.inner.get()?;
        let g = blocking(py, || if write { l.try_write() } else { l.try_read() })?;
        PyRwLock::guard(py, self.session.clone_ref(py), self.name.clone(), g)
    }
}

#[pymethods]
impl PyRwLock {
    /// The lock's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The session the lock belongs to.
    #[getter]
    fn session(&self, py: Python<'_>) -> Py<PyAny> {
        self.session.clone_ref(py)
    }

    /// Waits until this session holds the lock for reading (after every writer that came
    /// before), at most `timeout` seconds. Raises `tenure.Timeout`, or `tenure.SessionExpired`
    /// as soon as the session's lease is lost. Ctrl-C withdraws the waiter.
    #[pyo3(signature = (timeout=None))]
    fn read(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<Py<PyRwLockGuard>> {
        self.wait_for(py, false, timeout)
    }

    /// Waits until this session holds the lock for writing (alone, after everyone who came
    /// before), at most `timeout` seconds; raises as `read`.
    #[pyo3(signature = (timeout=None))]
    fn write(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<Py<PyRwLockGuard>> {
        self.wait_for(py, true, timeout)
    }

    /// Takes the lock for reading if no writer holds or awaits it, else `tenure.Locked`.
    fn try_read(&self, py: Python<'_>) -> PyResult<Py<PyRwLockGuard>> {
        self.try_take(py, false)
    }

    /// Takes the lock for writing if no one holds or awaits it, else `tenure.Locked`.
    fn try_write(&self, py: Python<'_>) -> PyResult<Py<PyRwLockGuard>> {
        self.try_take(py, true)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "RwLock").field("name", &self.name).finish()
    }
}

/// A held read or write lock, from `RwLock.read()`, `.write()`, `.try_read()` or
/// `.try_write()`: a `tenure._Guard` (fencing token, `is_held()`, context manager) that releases
/// with `unlock()`, as the mutex's `LockGuard`.
#[pyclass(frozen, extends = PyGuard, module = "tenure", name = "RwLockGuard")]
pub(crate) struct PyRwLockGuard {
    write: bool,
}

#[pymethods]
impl PyRwLockGuard {
    /// Whether this is a write hold (else a read hold).
    #[getter]
    fn is_write(&self) -> bool {
        self.write
    }

    /// Releases the hold, deleting only its own key (`name/read/<nanos>` or
    /// `name/write/<nanos>`). `tenure.NotLeader` if it was no longer held (already unlocked,
    /// or lost with the session).
    fn unlock(slf: &Bound<'_, Self>) -> PyResult<()> {
        slf.as_super().get().release_held(slf.py())
    }
}

/// `RwLock.read()` / `.write()` for `tenure.aio`: an `RwLockGuard` when held.
#[pyfunction]
#[pyo3(signature = (rwlock, write, timeout, wake))]
pub(crate) fn _rwlock_async(
    py: Python<'_>,
    rwlock: &Bound<'_, PyRwLock>,
    write: bool,
    #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    wake: Py<PyAny>,
) -> PyResult<PyPending> {
    let me = rwlock.get();
    let l = me.inner.get()?.clone();
    let (session, name) = (me.session.clone_ref(py), me.name.clone());
    start(
        wake,
        self::timeout(timeout)?,
        move |wait| {
            if write {
                l.write_wait(wait)
            } else {
                l.read_wait(wait)
            }
        },
        Box::new(move |py, g: RwLockGuard| Ok(PyRwLock::guard(py, session, name, g)?.into_any())),
    )
}
