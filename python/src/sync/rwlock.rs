//! `tenure.RwLock` and `tenure.RwLockGuard` (SPEC S8), and the native half of
//! `tenure.aio.RwLock.read` / `.write`.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tenure::sync::{RwLock, RwLockGuard, Stop, Wait};
use tenure::Error;

use crate::aio::{start, PyPending};
use crate::convert::{opt_secs_arg, timeout};
use crate::errors::{blocking, err};
use crate::repr::Repr;
use crate::runtime::{drop_detached, in_pool, interruptible, lock, ForkSafe};

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
    fn guard(session: Py<PyAny>, name: String, g: RwLockGuard) -> PyRwLockGuard {
        PyRwLockGuard {
            session,
            name,
            key: g.key().to_vec(),
            token: g.fencing_token(),
            write: g.is_write(),
            inner: ForkSafe::new(Mutex::new(Some(g))),
        }
    }

    fn wait_for(
        &self,
        py: Python<'_>,
        write: bool,
        timeout: Option<f64>,
    ) -> PyResult<PyRwLockGuard> {
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
        Ok(PyRwLock::guard(
            self.session.clone_ref(py),
            self.name.clone(),
            g,
        ))
    }

    fn try_take(&self, py: Python<'_>, write: bool) -> PyResult<PyRwLockGuard> {
        let l = self.inner.get()?;
        let g = blocking(py, || if write { l.try_write() } else { l.try_read() })?;
        Ok(PyRwLock::guard(
            self.session.clone_ref(py),
            self.name.clone(),
            g,
        ))
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
    ) -> PyResult<PyRwLockGuard> {
        self.wait_for(py, false, timeout)
    }

    /// Waits until this session holds the lock for writing (alone, after everyone who came
    /// before), at most `timeout` seconds; raises as `read`.
    #[pyo3(signature = (timeout=None))]
    fn write(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<PyRwLockGuard> {
        self.wait_for(py, true, timeout)
    }

    /// Takes the lock for reading if no writer holds or awaits it, else `tenure.Locked`.
    fn try_read(&self, py: Python<'_>) -> PyResult<PyRwLockGuard> {
        self.try_take(py, false)
    }

    /// Takes the lock for writing if no one holds or awaits it, else `tenure.Locked`.
    fn try_write(&self, py: Python<'_>) -> PyResult<PyRwLockGuard> {
        self.try_take(py, true)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "RwLock").field("name", &self.name).finish()
    }
}

/// A held read or write lock, from `RwLock.read()`, `.write()`, `.try_read()` or
/// `.try_write()`. A context manager: entering checks that it is still held (else
/// `tenure.NotLeader`), exit releases it. Garbage-collected while held, it releases too.
#[pyclass(frozen, module = "tenure", name = "RwLockGuard")]
pub(crate) struct PyRwLockGuard {
    // Keeps the session (and so its renewal) alive while the lock is held.
    session: Py<PyAny>,
    name: String,
    key: Vec<u8>,
    token: i64,
    write: bool,
    inner: ForkSafe<Mutex<Option<RwLockGuard>>>,
}

impl Drop for PyRwLockGuard {
    fn drop(&mut self) {
        if let Some(g) = self.inner.take_for_drop() {
            drop_detached(g);
        }
    }
}

#[pymethods]
impl PyRwLockGuard {
    /// The fencing token: the create revision of this hold's key.
    #[getter]
    fn fencing_token(&self) -> i64 {
        self.token
    }

    /// Whether this is a write hold (else a read hold).
    #[getter]
    fn is_write(&self) -> bool {
        self.write
    }

    /// The lock's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// This hold's key (`name/read/<nanos>` or `name/write/<nanos>`).
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, &self.key)
    }

    /// The session holding the lock.
    #[getter]
    fn session(&self, py: Python<'_>) -> Py<PyAny> {
        self.session.clone_ref(py)
    }

    /// Whether the hold is still held (false after `release()` or once the session's lease is
    /// lost).
    fn is_held(&self, py: Python<'_>) -> PyResult<bool> {
        let inner = self.inner.get()?;
        blocking(py, || Ok(lock(inner).as_ref().is_some_and(|g| g.is_held())))
    }

    /// Releases the hold, deleting only its own key. `tenure.NotLeader` if it was no longer
    /// held (already released, or lost with the session).
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

    /// Releases. A hold already released or lost is not an error here.
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
        Repr::new(py, "RwLockGuard")
            .field("name", &self.name)
            .field("key", self.key.as_slice())
            .field("fencing_token", self.token)
            .finish()
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
        Box::new(move |py, g: RwLockGuard| {
            Ok(Py::new(py, PyRwLock::guard(session, name, g))?.into_any())
        }),
    )
}
