//! `tenure.Session` (SPEC S1): a kept-alive lease; it makes the mutexes and elections of its
//! session.

use crossbeam_channel::RecvTimeoutError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tenure::sync::{Election, Mutex as SyncMutex, Session, SessionOptions};

use super::election::PyElection;
use super::mutex::{PyLockGuard, PyMutex};
use super::rwlock::PyRwLock;
use super::semaphore::PySemaphore;
use crate::convert::{opt_interval, opt_secs_arg, timeout};
use crate::errors::blocking;
use crate::handle::PyTenure;
use crate::lease::lease_arg;
use crate::repr::Repr;
use crate::runtime::{deadline, drop_detached, sliced, ForkSafe};

/// A lease kept alive by a native renewing thread (SPEC S1); made by `Tenure.session()`.
///
/// A context manager whose exit closes it (revokes the lease, releasing every lock and
/// candidacy it holds). Garbage-collected without `close()`, it stops renewing and leaves the
/// lease to expire after its TTL.
#[pyclass(frozen, module = "tenure", name = "Session")]
pub(crate) struct PySession {
    db: Py<PyTenure>,
    pub(crate) inner: ForkSafe<Session>,
    id: i64,
}

impl Drop for PySession {
    fn drop(&mut self) {
        // The last clone stops (joins) the keep-alive thread: without the GIL.
        if let Some(s) = self.inner.take_for_drop() {
            drop_detached(s);
        }
    }
}

impl PySession {
    /// `Tenure.session()`: grants a lease of `ttl` seconds and starts renewing it.
    pub(crate) fn open(
        db: &Bound<'_, PyTenure>,
        ttl: f64,
        keepalive_interval: Option<f64>,
    ) -> PyResult<PySession> {
        let opts = SessionOptions {
            ttl: crate::convert::ttl(ttl)?,
            keepalive_interval: opt_interval(keepalive_interval, "keepalive_interval")?,
        };
        let e = db.get().engine()?;
        let s = blocking(db.py(), || Session::new(e, opts))?;
        Ok(PySession::wrap(db, s))
    }

    /// `Tenure.resume_session()` / `Session.resume()`: renews an existing lease again.
    pub(crate) fn resume_on(
        db: &Bound<'_, PyTenure>,
        lease: &Bound<'_, PyAny>,
        keepalive_interval: Option<f64>,
    ) -> PyResult<PySession> {
        let id = lease_arg(lease)?;
        let opts = SessionOptions {
            keepalive_interval: opt_interval(keepalive_interval, "keepalive_interval")?,
            ..SessionOptions::default()
        };
        let e = db.get().engine()?;
        let s = blocking(db.py(), || Session::resume(e, id, opts))?;
        Ok(PySession::wrap(db, s))
    }

    fn wrap(db: &Bound<'_, PyTenure>, s: Session) -> PySession {
        PySession {
            db: db.clone().unbind(),
            id: s.lease_id().get(),
            inner: ForkSafe::new(s),
        }
    }

    /// The mutex `name`, with bounded holds (SPEC S9) when `lock_delay` or `max_hold` (seconds)
    /// is given: each more than zero and at most `tenure.MAX_DURATION`, else
    /// `tenure.InvalidArgument` naming it.
    fn make_mutex(
        slf: &Bound<'_, Self>,
        name: &str,
        lock_delay: Option<f64>,
        max_hold: Option<f64>,
    ) -> PyResult<PyMutex> {
        let opts = tenure::sync::MutexOptions {
            lock_delay: opt_interval(lock_delay, "lock_delay")?,
            max_hold: opt_interval(max_hold, "max_hold")?,
        };
        let m = SyncMutex::with_options(slf.get().inner.get()?, name, opts)
            .map_err(crate::errors::err)?;
        Ok(PyMutex {
            session: slf.clone().into_any().unbind(),
            name: name.to_owned(),
            key: m.key().to_vec(),
            inner: ForkSafe::new(m),
        })
    }
}

#[pymethods]
impl PySession {
    /// Resumes a session on an existing lease (e.g. after a restart) and renews it again, every
    /// `keepalive_interval` seconds (default TTL/3; at most `tenure.MAX_KEEPALIVE_INTERVAL`, else
    /// `tenure.InvalidArgument`). Raises `tenure.LeaseNotFound` if the lease is gone,
    /// `tenure.Closed` after close.
    #[staticmethod]
    #[pyo3(signature = (db, lease, keepalive_interval=None))]
    fn resume(
        db: &Bound<'_, PyTenure>,
        lease: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = opt_secs_arg)] keepalive_interval: Option<f64>,
    ) -> PyResult<PySession> {
        PySession::resume_on(db, lease, keepalive_interval)
    }

    /// The ID of the session's lease.
    #[getter]
    fn lease_id(&self) -> i64 {
        self.id
    }

    /// The ID of the session's lease (same as `lease_id`).
    #[getter]
    fn id(&self) -> i64 {
        self.id
    }

    /// The engine the session lives in.
    #[getter]
    fn db(&self, py: Python<'_>) -> Py<PyTenure> {
        self.db.clone_ref(py)
    }

    /// Whether the lease has been lost (expired, revoked, closed, engine closed).
    #[getter]
    fn done(&self, py: Python<'_>) -> PyResult<bool> {
        let s = self.inner.get()?;
        blocking(py, || Ok(s.is_done()))
    }

    /// Waits until the lease is lost, at most `timeout` seconds (`None`: no limit). Returns
    /// whether it was lost. The GIL is released; Ctrl-C interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn wait_done(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<bool> {
        let until = deadline(self::timeout(timeout)?);
        let gone = self.inner.get()?.done();
        let r = sliced(py, until, |step| match gone.recv_timeout(step) {
            Err(RecvTimeoutError::Disconnected) => Ok(Some(())),
            Ok(()) | Err(RecvTimeoutError::Timeout) => Ok(None),
        })?;
        Ok(r.is_some())
    }

    /// Stops renewing but keeps the lease: it expires after its TTL unless resumed. A no-op in
    /// a forked child.
    fn orphan(&self, py: Python<'_>) -> PyResult<()> {
        let Ok(s) = self.inner.get() else {
            return Ok(());
        };
        blocking(py, || {
            s.orphan();
            Ok(())
        })
    }

    /// Stops renewing and revokes the lease, deleting every key it holds (its locks and
    /// candidacies). Idempotent. A no-op in a forked child (the lease is the parent's).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Ok(s) = self.inner.get() else {
            return Ok(());
        };
        blocking(py, || s.close())
    }

    /// Waits until this session holds the lock `name` and returns its guard; at most `timeout`
    /// seconds (`None`: no limit), then `tenure.Timeout`. `tenure.SessionExpired` as soon as the
    /// session's lease is lost. The GIL is released; Ctrl-C withdraws from the queue and raises
    /// `KeyboardInterrupt`. Use as `with session.lock("jobs/1", timeout=5.0) as guard: ...`.
    /// A session holds a given lock at most once: locking `name` again through the same session
    /// (from any thread) while it is held or being acquired raises `tenure.InvalidArgument`;
    /// give each concurrent holder its own session. `lock_delay` and `max_hold` bound the hold
    /// as for `Session.mutex`.
    #[pyo3(signature = (name, timeout=None, lock_delay=None, max_hold=None))]
    fn lock(
        slf: &Bound<'_, Self>,
        name: &str,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
        #[pyo3(from_py_with = opt_secs_arg)] lock_delay: Option<f64>,
        #[pyo3(from_py_with = opt_secs_arg)] max_hold: Option<f64>,
    ) -> PyResult<Py<PyLockGuard>> {
        let m = PySession::make_mutex(slf, name, lock_delay, max_hold)?;
        m.lock_inner(slf.py(), timeout)
    }

    /// The mutex `name` of this session (SPEC S2). Bounded holds (SPEC S9), in seconds:
    /// `lock_delay` — after the holder ahead of this one lost its session without unlocking
    /// (expired or revoked) or ran out of `max_hold`, take the lock only this long after seeing
    /// that end (a paused holder may still be writing); a voluntary unlock never delays.
    /// `max_hold` — a hold ends itself this long after it was taken, even while the session is
    /// kept alive: `LockGuard.is_held()` turns false first, then the key is deleted.
    #[pyo3(signature = (name, lock_delay=None, max_hold=None))]
    fn mutex(
        slf: &Bound<'_, Self>,
        name: &str,
        #[pyo3(from_py_with = opt_secs_arg)] lock_delay: Option<f64>,
        #[pyo3(from_py_with = opt_secs_arg)] max_hold: Option<f64>,
    ) -> PyResult<PyMutex> {
        PySession::make_mutex(slf, name, lock_delay, max_hold)
    }

    /// The semaphore `name` of `permits` permits (SPEC S7), through which this session takes a
    /// permit. Raises `tenure.InvalidArgument` unless 1 ≤ permits ≤ 4096.
    fn semaphore(slf: &Bound<'_, Self>, name: &str, permits: usize) -> PyResult<PySemaphore> {
        let s = tenure::sync::Semaphore::new(slf.get().inner.get()?, name, permits)
            .map_err(crate::errors::err)?;
        Ok(PySemaphore {
            session: slf.clone().into_any().unbind(),
            name: name.to_owned(),
            permits,
            inner: ForkSafe::new(s),
        })
    }

    /// The read-write lock `name` (SPEC S8), through which this session reads or writes.
    fn rwlock(slf: &Bound<'_, Self>, name: &str) -> PyResult<PyRwLock> {
        let l = tenure::sync::RwLock::new(slf.get().inner.get()?, name);
        Ok(PyRwLock {
            session: slf.clone().into_any().unbind(),
            name: name.to_owned(),
            inner: ForkSafe::new(l),
        })
    }

    /// The election `name`, in which this session can campaign (SPEC S4).
    fn election(slf: &Bound<'_, Self>, name: &str) -> PyResult<PyElection> {
        let e = Election::new(slf.get().inner.get()?, name);
        Ok(PyElection {
            session: slf.clone().into_any().unbind(),
            lease: slf.get().id,
            name: name.to_owned(),
            inner: ForkSafe::new(e),
        })
    }

    // groups (S12).
    /// This session's membership of group `name` (SPEC S12): see `tenure.Group`.
    fn group(slf: &Bound<'_, Self>, name: &str) -> PyResult<super::PyGroup> {
        Ok(super::new_group(
            slf.clone().into_any().unbind(),
            slf.get().inner.get()?,
            name,
        ))
    }

    // barriers (S11).
    /// A participant, through this session, of the double barrier `name` for `count`
    /// participants (SPEC S11): see `tenure.DoubleBarrier`.
    fn double_barrier(
        slf: &Bound<'_, Self>,
        name: &str,
        count: i64,
    ) -> PyResult<super::PyDoubleBarrier> {
        super::new_double_barrier(
            slf.clone().into_any().unbind(),
            slf.get().inner.get()?,
            name,
            count,
        )
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Session")
            .field("lease_id", self.id)
            .field("done", self.done(py).unwrap_or(true))
            .finish()
    }
}
