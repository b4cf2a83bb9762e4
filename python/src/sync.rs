//! Coordination (SPEC S1–S6, module `tenure::sync`): sessions, fair mutexes, elections and their
//! observers, the client-go style leader elector, the fence gate and record locks.
//!
//! The conventions of the rest of the binding hold here too: every engine call goes through
//! [`blocking`] (GIL released, panics caught, errors mapped by their C code), engine objects live
//! in a [`ForkSafe`] (a forked child sees them as `tenure.Closed` and never touches or drops
//! them), and every wait is sliced (≤ [`SLICE`]) with signal checks in between.
//!
//! The two unbounded waits of the core that take a cancel channel (`Mutex::lock_with_cancel`,
//! `Election::campaign_with_cancel`) and `LeaderElector::run` run on a helper thread while the
//! calling thread waits for their result in slices ([`interruptible`]): on Ctrl-C the wait is
//! cancelled (the contender withdraws, the elector stops), the helper is waited for, and the
//! `KeyboardInterrupt` propagates.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tenure::sync::{
    Election, ElectorCallbacks, ElectorConfig, FenceGate, LeaderElector, Leadership, LockGuard,
    Mutex as SyncMutex, Observer, RecordLock, Session, SessionOptions, Stop, Wait,
};
use tenure::Error;

use crate::convert::{
    bytes_arg, int_arg, lease_arg, lock, opt_secs_arg, seconds, secs_arg, timeout, ttl, ForkSafe,
    SLICE,
};
use crate::db::{drop_detached, PyTenure};
use crate::errors::{blocking, closed, err, invalid, panic_to_py, to_py};
use crate::types::{bytes_repr, PyKeyValue};

// ---- waiting --------------------------------------------------------------------------------

fn deadline(t: Option<Duration>) -> Option<Instant> {
    t.map(|t| {
        Instant::now()
            .checked_add(t)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365 * 30))
    })
}

/// Waits until `poll(step)` yields a value, in slices of at most [`SLICE`] with the GIL released
/// and pending signal handlers run between slices. `Ok(None)` once `deadline` has passed.
fn sliced<T: Send>(
    py: Python<'_>,
    deadline: Option<Instant>,
    mut poll: impl FnMut(Duration) -> Result<Option<T>, Error> + Send,
) -> PyResult<Option<T>> {
    loop {
        let step = match deadline {
            Some(d) => SLICE.min(d.saturating_duration_since(Instant::now())),
            None => SLICE,
        };
        if let Some(v) = blocking(py, || poll(step))? {
            return Ok(Some(v));
        }
        py.check_signals()?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(None);
        }
    }
}

type Outcome<T> = thread::Result<Result<T, Error>>;

/// Converts what a helper thread produced into the Python result.
fn outcome<T>(py: Python<'_>, r: Outcome<T>) -> PyResult<T> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_py(py, e)),
        Err(payload) => Err(panic_to_py(py, payload)),
    }
}

fn spawn_failed(e: std::io::Error) -> PyErr {
    err(Error::Storage(format!("cannot start a tenure thread: {e}")))
}

/// Runs `work` on a helper thread and waits for it in slices, GIL released, signals checked.
/// When a signal handler raises (Ctrl-C), `cancel` is run, the helper is waited for (a second
/// signal stops that wait too), a value it still produced is handed to `discard`, and the
/// handler's exception propagates. A helper whose result nobody waits for any more discards it
/// itself, so a lock or leadership won in that race is never left behind.
fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
    cancel: impl FnOnce(),
    discard: fn(T),
) -> PyResult<T> {
    let (done_tx, done_rx) = bounded::<Outcome<T>>(1);
    thread::Builder::new()
        .name("tenure-py-wait".into())
        .spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(work));
            if let Err(crossbeam_channel::SendError(Ok(Ok(v)))) = done_tx.send(r) {
                discard(v);
            }
        })
        .map_err(spawn_failed)?;
    loop {
        match py.detach(|| done_rx.recv_timeout(SLICE)) {
            Ok(r) => return outcome(py, r),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err("tenure: a helper thread vanished"))
            }
        }
        if let Err(interrupt) = py.check_signals() {
            cancel();
            loop {
                match py.detach(|| done_rx.recv_timeout(SLICE)) {
                    Ok(Ok(Ok(v))) => {
                        py.detach(|| discard(v));
                        return Err(interrupt);
                    }
                    Ok(_) | Err(RecvTimeoutError::Disconnected) => return Err(interrupt),
                    Err(RecvTimeoutError::Timeout) => {
                        if py.check_signals().is_err() {
                            return Err(interrupt);
                        }
                    }
                }
            }
        }
    }
}

// ---- sessions (S1) --------------------------------------------------------------------------

/// A lease kept alive by a native renewing thread (SPEC S1); made by `Tenure.session()`.
///
/// A context manager whose exit closes it (revokes the lease, releasing every lock and
/// candidacy it holds). Garbage-collected without `close()`, it stops renewing and leaves the
/// lease to expire after its TTL.
#[pyclass(frozen, module = "tenure", name = "Session")]
pub(crate) struct PySession {
    db: Py<PyTenure>,
    inner: ForkSafe<Session>,
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

fn interval_arg(keepalive_interval: Option<f64>) -> PyResult<Option<Duration>> {
    keepalive_interval
        .map(|i| match seconds(i, "keepalive_interval")? {
            d if d.is_zero() => Err(invalid("keepalive_interval must be positive")),
            d => Ok(d),
        })
        .transpose()
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
            keepalive_interval: interval_arg(keepalive_interval)?,
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
            keepalive_interval: interval_arg(keepalive_interval)?,
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

    fn make_mutex(slf: &Bound<'_, Self>, name: &str) -> PyResult<PyMutex> {
        let m = SyncMutex::new(slf.get().inner.get()?, name);
        Ok(PyMutex {
            session: slf.clone().unbind(),
            name: name.to_owned(),
            key: m.key().to_vec(),
            inner: ForkSafe::new(m),
        })
    }
}

#[pymethods]
impl PySession {
    /// Resumes a session on an existing lease (e.g. after a restart) and renews it again.
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
    /// give each concurrent holder its own session.
    #[pyo3(signature = (name, timeout=None))]
    fn lock(
        slf: &Bound<'_, Self>,
        name: &str,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<PyLockGuard> {
        let m = PySession::make_mutex(slf, name)?;
        m.lock_inner(slf.py(), timeout)
    }

    /// The mutex `name` of this session (SPEC S2).
    fn mutex(slf: &Bound<'_, Self>, name: &str) -> PyResult<PyMutex> {
        PySession::make_mutex(slf, name)
    }

    /// The election `name`, in which this session can campaign (SPEC S4).
    fn election(slf: &Bound<'_, Self>, name: &str) -> PyResult<PyElection> {
        let e = Election::new(slf.get().inner.get()?, name);
        Ok(PyElection {
            session: slf.clone().unbind(),
            name: name.to_owned(),
            inner: ForkSafe::new(e),
        })
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
        let state = match self.done(py) {
            Ok(false) => "alive",
            _ => "done",
        };
        format!("<tenure.Session lease={} {state}>", self.id)
    }
}

// ---- mutex (S2, S3) -------------------------------------------------------------------------

/// A fair mutex (SPEC S2) for one session, made by `Session.mutex(name)`: FIFO by arrival, each
/// waiter waiting only on its predecessor. It excludes other sessions; within one session the
/// lock is already held (the key is per session, as in etcd).
#[pyclass(frozen, module = "tenure", name = "Mutex")]
pub(crate) struct PyMutex {
    session: Py<PySession>,
    name: String,
    key: Vec<u8>,
    inner: ForkSafe<SyncMutex>,
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

    fn lock_inner(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyLockGuard> {
        let timeout = self::timeout(timeout)?;
        let m = self.inner.get()?.clone();
        let cancel = Stop::new();
        let wait = Wait::from(timeout).with_stop(&cancel);
        let g = interruptible(
            py,
            move || m.lock(wait),
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
    fn session(&self, py: Python<'_>) -> Py<PySession> {
        self.session.clone_ref(py)
    }

    /// Waits until held, at most `timeout` seconds (`None`: no limit); see `Session.lock`.
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

    fn __repr__(&self) -> String {
        format!(
            "<tenure.Mutex {:?} key={}>",
            self.name,
            bytes_repr(&self.key)
        )
    }
}

/// A held lock, from `Session.lock()`, `Mutex.lock()` or `Mutex.try_lock()`. A context manager:
/// entering checks that the lock is still held (else `tenure.NotLeader`), exit unlocks.
/// Garbage-collected while held, it unlocks too.
#[pyclass(frozen, module = "tenure", name = "LockGuard")]
pub(crate) struct PyLockGuard {
    // Keeps the session (and so its renewal) alive while the lock is held.
    session: Py<PySession>,
    name: String,
    key: Vec<u8>,
    token: i64,
    inner: ForkSafe<Mutex<Option<LockGuard>>>,
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
    fn session(&self, py: Python<'_>) -> Py<PySession> {
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
                Err(Error::NotLeader | Error::Closed) => Ok(()),
                other => other,
            })?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<tenure.LockGuard {:?} fencing_token={}>",
            self.name, self.token
        )
    }
}

// ---- elections (S4) -------------------------------------------------------------------------

/// An election (SPEC S4) in which a session campaigns, made by `Session.election(name)`.
#[pyclass(frozen, module = "tenure", name = "Election")]
pub(crate) struct PyElection {
    session: Py<PySession>,
    name: String,
    inner: ForkSafe<Election>,
}

impl Drop for PyElection {
    fn drop(&mut self) {
        if let Some(e) = self.inner.take_for_drop() {
            drop_detached(e);
        }
    }
}

/// `Election.leader()` / `Tenure.election_leader()`.
pub(crate) fn election_leader(
    db: &Bound<'_, PyTenure>,
    name: &str,
) -> PyResult<Option<PyKeyValue>> {
    let e = db.get().engine()?;
    Ok(blocking(db.py(), || Election::leader(e, name))?.map(PyKeyValue))
}

/// `Election.observe()` / `Tenure.observe_election()`.
pub(crate) fn observe_election(
    db: &Bound<'_, PyTenure>,
    name: &str,
    timeout: Option<f64>,
) -> PyResult<PyObserver> {
    let timeout = self::timeout(timeout)?;
    let e = db.get().engine()?;
    let o = blocking(db.py(), || Election::observe(e, name))?;
    Ok(PyObserver {
        _db: db.clone().unbind(),
        inner: ForkSafe::new(Mutex::new(Some(o))),
        timeout,
    })
}

#[pymethods]
impl PyElection {
    /// The election's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The campaigning session.
    #[getter]
    fn session(&self, py: Python<'_>) -> Py<PySession> {
        self.session.clone_ref(py)
    }

    /// Becomes a candidate with `value` and waits until leader, at most `timeout` seconds
    /// (`None`: no limit; then `tenure.Timeout`). On failure the candidacy is withdrawn. The
    /// GIL is released; Ctrl-C withdraws and raises `KeyboardInterrupt`.
    #[pyo3(signature = (value, timeout=None))]
    fn campaign(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<PyLeadership> {
        let value = bytes_arg(value, "value")?.into_owned();
        let timeout = self::timeout(timeout)?;
        let e = self.inner.get()?.clone();
        let cancel = Stop::new();
        let wait = Wait::from(timeout).with_stop(&cancel);
        let l = interruptible(
            py,
            move || e.campaign(&value, wait),
            move || cancel.stop(),
            |l: Leadership| {
                let _ = l.resign();
            },
        )?;
        Ok(PyLeadership {
            name: self.name.clone(),
            key: l.key().to_vec(),
            token: l.token(),
            inner: ForkSafe::new(l),
        })
    }

    /// The current leader's key-value of election `name` (`.value` is what it proclaimed), or
    /// `None` when there is no leader.
    #[staticmethod]
    fn leader(db: &Bound<'_, PyTenure>, name: &str) -> PyResult<Option<PyKeyValue>> {
        election_leader(db, name)
    }

    /// Follows the leadership of election `name`: an iterator whose first item is the current
    /// leader (a `KeyValue`, or `None`), then one item per change, `None` meaning "no leader".
    /// `next()` waits at most `timeout` seconds (then `tenure.Timeout`).
    #[staticmethod]
    #[pyo3(signature = (db, name, timeout=None))]
    fn observe(
        db: &Bound<'_, PyTenure>,
        name: &str,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<PyObserver> {
        observe_election(db, name, timeout)
    }

    fn __repr__(&self) -> String {
        format!(
            "<tenure.Election {:?} lease={}>",
            self.name,
            self.session.get().id
        )
    }
}

/// Leadership won by `Election.campaign()`. A context manager: entering checks that it is still
/// held (else `tenure.NotLeader`); exit resigns.
#[pyclass(frozen, module = "tenure", name = "Leadership")]
pub(crate) struct PyLeadership {
    name: String,
    key: Vec<u8>,
    token: i64,
    inner: ForkSafe<Leadership>,
}

impl Drop for PyLeadership {
    fn drop(&mut self) {
        if let Some(l) = self.inner.take_for_drop() {
            drop_detached(l);
        }
    }
}

#[pymethods]
impl PyLeadership {
    /// The fencing token (SPEC S3): the leader key's create revision, strictly increasing per
    /// election.
    #[getter]
    fn token(&self) -> i64 {
        self.token
    }

    /// The leader key.
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, &self.key)
    }

    /// The election's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Whether this leadership still holds (its key exists with the same create revision).
    fn is_leader(&self, py: Python<'_>) -> PyResult<bool> {
        let l = self.inner.get()?;
        blocking(py, || Ok(l.is_held()))
    }

    /// Announces a new value, only while still this leadership; else `tenure.NotLeader`.
    fn proclaim(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let value = bytes_arg(value, "value")?;
        let l = self.inner.get()?;
        blocking(py, || l.proclaim(&value))
    }

    /// Gives up leadership (deletes the key only if it is still this leadership's). Idempotent.
    fn resign(&self, py: Python<'_>) -> PyResult<()> {
        let l = self.inner.get()?;
        blocking(py, || l.resign())
    }

    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        if !slf.get().is_leader(py)? {
            return Err(err(Error::NotLeader));
        }
        Ok(slf)
    }

    /// Resigns (quietly if the engine is closed); a forked child leaves it alone.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let Ok(l) = self.inner.get() else {
            return Ok(false);
        };
        blocking(py, || match l.resign() {
            Err(Error::Closed) => Ok(()),
            other => other,
        })?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<tenure.Leadership {:?} token={}>", self.name, self.token)
    }
}

/// Leadership changes of one election (`Tenure.observe_election()`): an iterator of
/// `KeyValue | None` and a context manager that cancels it on exit. It never loses the latest
/// state; iteration stops when the engine closes.
#[pyclass(frozen, module = "tenure", name = "Observer")]
pub(crate) struct PyObserver {
    _db: Py<PyTenure>,
    inner: ForkSafe<Mutex<Option<Observer>>>,
    timeout: Option<Duration>,
}

impl Drop for PyObserver {
    fn drop(&mut self) {
        if let Some(o) = self.inner.take_for_drop() {
            drop_detached(o);
        }
    }
}

/// One observed state: `Some(state)`, or `None` when the observer ended.
type Observed = Option<Option<tenure::KeyValue>>;

impl PyObserver {
    fn next_state(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<Observed> {
        let inner = self.inner.get()?;
        let got = sliced(py, deadline(timeout), |step| {
            let mut guard = lock(inner);
            let Some(o) = guard.as_mut() else {
                return Ok(Some(None));
            };
            match o.recv_timeout(Some(step)) {
                Ok(state) => Ok(Some(Some(state))),
                Err(Error::Timeout) => Ok(None),
                Err(Error::Closed) => {
                    *guard = None;
                    Ok(Some(None))
                }
                Err(e) => Err(e),
            }
        })?;
        match got {
            Some(state) => Ok(state),
            None => Err(err(Error::Timeout)),
        }
    }
}

fn kv_or_none(py: Python<'_>, kv: Option<tenure::KeyValue>) -> PyResult<Py<PyAny>> {
    match kv {
        Some(kv) => Ok(Py::new(py, PyKeyValue(kv))?.into_any()),
        None => Ok(py.None()),
    }
}

#[pymethods]
impl PyObserver {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The next leadership state (a `KeyValue`, or `None` for "no leader"); waits at most the
    /// observer's timeout, then raises `tenure.Timeout`.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match self.next_state(py, self.timeout)? {
            Some(state) => Ok(Some(kv_or_none(py, state)?)),
            None => Ok(None),
        }
    }

    /// The next leadership state, waiting at most `timeout` seconds (`None`: for ever);
    /// `tenure.Timeout` when none came, `tenure.Closed` once cancelled or the engine closed.
    #[pyo3(signature = (timeout=None))]
    fn recv(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<Option<PyKeyValue>> {
        match self.next_state(py, self::timeout(timeout)?)? {
            Some(state) => Ok(state.map(PyKeyValue)),
            None => Err(closed()),
        }
    }

    /// Stops observing; iteration then ends. Idempotent.
    fn cancel(&self, py: Python<'_>) -> PyResult<()> {
        let Ok(inner) = self.inner.get() else {
            return Ok(());
        };
        let o = blocking(py, || Ok(lock(inner).take()))?;
        drop_detached(o);
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.cancel(py)?;
        Ok(false)
    }
}

// ---- leader elector (S5) --------------------------------------------------------------------

/// A stop flag (like `threading.Event`) shared with native threads: the `stop` argument of
/// `LeaderElector.run()`, and the second argument of `on_started_leading`, raised when that
/// leadership ends.
#[pyclass(frozen, module = "tenure", name = "Stop")]
pub(crate) struct PyStop {
    inner: ForkSafe<Stop>,
}

#[pymethods]
impl PyStop {
    #[new]
    fn new() -> PyStop {
        PyStop {
            inner: ForkSafe::new(Stop::new()),
        }
    }

    /// Raises the flag, waking every waiter.
    fn set(&self, py: Python<'_>) -> PyResult<()> {
        let f = self.inner.get()?;
        blocking(py, || {
            f.stop();
            Ok(())
        })
    }

    /// Whether the flag is raised.
    fn is_set(&self, py: Python<'_>) -> PyResult<bool> {
        let f = self.inner.get()?;
        blocking(py, || Ok(f.is_stopped()))
    }

    /// Waits until the flag is raised, at most `timeout` seconds (`None`: no limit); returns
    /// whether it is raised. The GIL is released; Ctrl-C interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn wait(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<bool> {
        let until = deadline(self::timeout(timeout)?);
        let f = self.inner.get()?;
        let r = sliced(py, until, |step| Ok(f.wait_timeout(step).then_some(())))?;
        Ok(r.is_some())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match self.is_set(py) {
            Ok(true) => "<tenure.Stop set>".into(),
            Ok(false) => "<tenure.Stop unset>".into(),
            Err(_) => "<tenure.Stop (forked)>".into(),
        }
    }
}

thread_local! {
    /// True while this thread runs a Python elector callback.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Calls a Python callback from the elector's callback thread: takes the GIL (skipped while the
/// interpreter shuts down) and reports an exception through `sys.unraisablehook` instead of
/// letting it end the elector.
fn invoke(
    cb: &Py<PyAny>,
    call: impl for<'py> FnOnce(Python<'py>, &Bound<'py, PyAny>) -> PyResult<()>,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        Python::try_attach(|py| {
            IN_CALLBACK.with(|c| c.set(true));
            let cb = cb.bind(py);
            if let Err(e) = call(py, cb) {
                e.write_unraisable(py, Some(cb));
            }
            IN_CALLBACK.with(|c| c.set(false));
        })
    }));
}

fn callable_arg(obj: Option<Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Py<PyAny>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) if o.is_callable() => Ok(Some(o.unbind())),
        Some(_) => Err(PyTypeError::new_err(format!(
            "{what} must be callable or None"
        ))),
    }
}

/// A client-go style leader elector (SPEC S5).
#[pyclass(frozen, module = "tenure", name = "LeaderElector")]
pub(crate) struct PyLeaderElector {
    _db: Py<PyTenure>,
    name: String,
    identity: String,
    inner: ForkSafe<Arc<LeaderElector>>,
    /// The stop flag of the run (replaced by the one given to `run(stop)`).
    stop: Mutex<Py<PyStop>>,
    /// `run()` or `start()` was called.
    used: AtomicBool,
    /// The outcome of a run started by `start()`, until `stop()` collects it.
    background: ForkSafe<Mutex<Option<Receiver<Outcome<()>>>>>,
}

impl Drop for PyLeaderElector {
    fn drop(&mut self) {
        // A background run ends by itself once stopped (its callbacks take the GIL, so it is
        // not waited for here).
        if self.inner.is_ours() {
            if let Ok(s) = lock(&self.stop).get().inner.get() {
                s.stop();
            }
        }
        if let Some(e) = self.inner.take_for_drop() {
            drop_detached(e);
        }
        let _ = self.background.take_for_drop();
    }
}

impl PyLeaderElector {
    fn current_stop(&self, py: Python<'_>) -> PyResult<Stop> {
        Ok(lock(&self.stop).clone_ref(py).get().inner.get()?.clone())
    }

    fn mark_used(&self) -> PyResult<()> {
        if self.used.swap(true, Ordering::AcqRel) {
            return Err(invalid("LeaderElector.run/start may be called once"));
        }
        Ok(())
    }
}

#[pymethods]
impl PyLeaderElector {
    /// Validates the configuration (`tenure.InvalidArgument` unless `lease_duration >
    /// renew_deadline > retry_period × 1.2`, `renew_deadline + retry_period < lease_duration`,
    /// all positive, `name` and `identity` non-empty). Times are float seconds. The callbacks
    /// run one at a time on the elector's own thread (holding the GIL while they run); an
    /// exception they raise goes to `sys.unraisablehook`.
    #[new]
    #[pyo3(signature = (
        db, name, identity, lease_duration, renew_deadline, retry_period,
        on_started_leading=None, on_stopped_leading=None, on_new_leader=None,
        release_on_cancel=true
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        db: &Bound<'_, PyTenure>,
        name: String,
        identity: String,
        #[pyo3(from_py_with = secs_arg)] lease_duration: f64,
        #[pyo3(from_py_with = secs_arg)] renew_deadline: f64,
        #[pyo3(from_py_with = secs_arg)] retry_period: f64,
        on_started_leading: Option<Bound<'_, PyAny>>,
        on_stopped_leading: Option<Bound<'_, PyAny>>,
        on_new_leader: Option<Bound<'_, PyAny>>,
        release_on_cancel: bool,
    ) -> PyResult<PyLeaderElector> {
        let py = db.py();
        let cfg = ElectorConfig {
            name: name.clone(),
            identity: identity.clone(),
            lease_duration: seconds(lease_duration, "lease_duration")?,
            renew_deadline: seconds(renew_deadline, "renew_deadline")?,
            retry_period: seconds(retry_period, "retry_period")?,
            release_on_cancel,
        };
        let started = callable_arg(on_started_leading, "on_started_leading")?;
        let stopped = callable_arg(on_stopped_leading, "on_stopped_leading")?;
        let new_leader = callable_arg(on_new_leader, "on_new_leader")?;
        let callbacks = ElectorCallbacks {
            on_started_leading: Box::new(move |token, stop| {
                if let Some(cb) = &started {
                    invoke(cb, |py, cb| {
                        let stop = Py::new(
                            py,
                            PyStop {
                                inner: ForkSafe::new(stop.clone()),
                            },
                        )?;
                        cb.call1((token, stop)).map(drop)
                    });
                }
            }),
            on_stopped_leading: Box::new(move || {
                if let Some(cb) = &stopped {
                    invoke(cb, |_, cb| cb.call0().map(drop));
                }
            }),
            on_new_leader: Box::new(move |who| {
                if let Some(cb) = &new_leader {
                    invoke(cb, |_, cb| cb.call1((who,)).map(drop));
                }
            }),
        };
        let e = db.get().engine()?;
        let elector = blocking(py, || LeaderElector::new(e, cfg, callbacks))?;
        Ok(PyLeaderElector {
            _db: db.clone().unbind(),
            name,
            identity,
            inner: ForkSafe::new(Arc::new(elector)),
            stop: Mutex::new(Py::new(py, PyStop::new())?),
            used: AtomicBool::new(false),
            background: ForkSafe::new(Mutex::new(None)),
        })
    }

    /// The record key.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// This candidate's identity.
    #[getter]
    fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether this candidate leads now.
    #[getter]
    fn is_leader(&self, py: Python<'_>) -> PyResult<bool> {
        let e = self.inner.get()?;
        blocking(py, || Ok(e.is_leader()))
    }

    /// The identity of the last observed leader, or `None` before any.
    #[getter]
    fn leader(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let e = self.inner.get()?;
        blocking(py, || Ok(e.leader()))
    }

    /// Campaigns, leads and renews in the calling thread until `stop` (a `tenure.Stop`; default:
    /// the one `stop()` raises) is raised, then returns once every callback has run. The GIL is
    /// released; Ctrl-C stops the elector (releasing leadership if `release_on_cancel`) and
    /// raises `KeyboardInterrupt`. May be called once (with `start()`, once in all).
    #[pyo3(signature = (stop=None))]
    fn run(&self, py: Python<'_>, stop: Option<Py<PyStop>>) -> PyResult<()> {
        let e = self.inner.get()?.clone();
        self.mark_used()?;
        if let Some(s) = stop {
            s.get().inner.get()?;
            *lock(&self.stop) = s;
        }
        let flag = self.current_stop(py)?;
        let cancel = flag.clone();
        interruptible(py, move || e.run(&flag), move || cancel.stop(), drop)
    }

    /// Runs the elector on a background thread; `stop()` ends it. May be called once.
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        let e = self.inner.get()?.clone();
        let background = self.background.get()?;
        self.mark_used()?;
        let flag = self.current_stop(py)?;
        let (tx, rx) = bounded::<Outcome<()>>(1);
        thread::Builder::new()
            .name("tenure-py-elect".into())
            .spawn(move || {
                let r = catch_unwind(AssertUnwindSafe(|| e.run(&flag)));
                let _ = tx.send(r);
            })
            .map_err(spawn_failed)?;
        *lock(background) = Some(rx);
        Ok(())
    }

    /// Stops the elector (releasing leadership at once if `release_on_cancel`). After `start()`,
    /// also waits (GIL released, Ctrl-C interrupts) until the run and its callbacks are over and
    /// raises the error that ended it, if any — except when called from inside an elector
    /// callback, where it only signals (waiting there would wait for itself).
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let flag = self.current_stop(py)?;
        blocking(py, || {
            flag.stop();
            Ok(())
        })?;
        if IN_CALLBACK.with(|c| c.get()) {
            return Ok(());
        }
        let background = self.background.get()?;
        let Some(rx) = lock(background).take() else {
            return Ok(());
        };
        let got = sliced(py, None, |step| match rx.recv_timeout(step) {
            Ok(r) => Ok(Some(Some(r))),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Ok(Some(None)),
        });
        match got {
            Ok(Some(Some(r))) => outcome(py, r),
            Ok(_) => Ok(()),
            Err(e) => {
                // Interrupted: the run still ends by itself; keep its outcome for a later stop().
                *lock(background) = Some(rx);
                Err(e)
            }
        }
    }

    /// `start()`; exit runs `stop()`.
    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        slf.get().start(py)?;
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if self.inner.is_ours() {
            self.stop(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let leading = if self.is_leader(py).unwrap_or(false) {
            " leading"
        } else {
            ""
        };
        format!(
            "<tenure.LeaderElector {:?} identity={:?}{leading}>",
            self.name, self.identity
        )
    }
}

// ---- fence gate (S3) and record locks (S6) --------------------------------------------------

/// Admits fencing tokens in non-decreasing order (SPEC S3): the guarded resource rejects a
/// writer whose token is lower than the highest it has seen. Plain process memory: it also
/// works in a forked child.
#[pyclass(frozen, module = "tenure", name = "FenceGate")]
pub(crate) struct PyFenceGate(FenceGate);

#[pymethods]
impl PyFenceGate {
    #[new]
    fn new() -> PyFenceGate {
        PyFenceGate(FenceGate::new())
    }

    /// Admits `token` if it is at least the highest seen so far, else `tenure.StaleToken`.
    fn admit(&self, py: Python<'_>, #[pyo3(from_py_with = int_arg)] token: i64) -> PyResult<()> {
        self.0.admit(token).map_err(|e| to_py(py, e))
    }

    /// The highest token admitted (0 before any).
    #[getter]
    fn highest(&self) -> i64 {
        self.0.highest()
    }

    fn __repr__(&self) -> String {
        format!("<tenure.FenceGate highest={}>", self.0.highest())
    }
}

/// Owner-checked record locks (SPEC S6), Redis's `SET key owner NX PX ttl` embedded: a key
/// holding the owner's name, bound to a lease of `ttl` seconds. Static methods only.
#[pyclass(frozen, module = "tenure", name = "RecordLock")]
pub(crate) struct PyRecordLock;

#[pymethods]
impl PyRecordLock {
    /// Takes `key` for `owner` for `ttl` seconds if it is free; returns the fencing token (the
    /// key's create revision). `tenure.Locked` if anyone (including `owner`) holds it.
    #[staticmethod]
    fn try_acquire(
        db: &Bound<'_, PyTenure>,
        key: &Bound<'_, PyAny>,
        owner: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = secs_arg)] ttl: f64,
    ) -> PyResult<i64> {
        let key = bytes_arg(key, "key")?;
        let owner = bytes_arg(owner, "owner")?;
        let ttl = self::ttl(ttl)?;
        let e = db.get().engine()?;
        blocking(db.py(), || RecordLock::try_acquire(e, &key, &owner, ttl))
    }

    /// Extends the hold by a full TTL; `tenure.NotLeader` unless `owner` holds `key`.
    #[staticmethod]
    fn refresh(
        db: &Bound<'_, PyTenure>,
        key: &Bound<'_, PyAny>,
        owner: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        let owner = bytes_arg(owner, "owner")?;
        let e = db.get().engine()?;
        blocking(db.py(), || RecordLock::refresh(e, &key, &owner))
    }

    /// Releases `key` (and revokes its lease) if `owner` holds it; `tenure.NotLeader` otherwise.
    #[staticmethod]
    fn release(
        db: &Bound<'_, PyTenure>,
        key: &Bound<'_, PyAny>,
        owner: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        let owner = bytes_arg(owner, "owner")?;
        let e = db.get().engine()?;
        blocking(db.py(), || RecordLock::release(e, &key, &owner))
    }
}
