//! `tenure.Election`, `tenure.Leadership` and `tenure.Observer` (SPEC S4).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tenure::sync::{Election, Leadership, Observer, Stop, Wait};
use tenure::Error;

use crate::convert::{bytes_arg, opt_secs_arg, timeout};
use crate::errors::{blocking, closed, err};
use crate::handle::PyTenure;
use crate::repr::Repr;
use crate::runtime::{
    deadline, drop_detached, in_pool, interruptible, lock, sliced, take_and_drop, ForkSafe,
};
use crate::types::PyKeyValue;

/// An election (SPEC S4) in which a session campaigns, made by `Session.election(name)`.
#[pyclass(frozen, module = "tenure", name = "Election")]
pub(crate) struct PyElection {
    /// The `tenure.Session` that campaigns.
    pub(crate) session: Py<PyAny>,
    pub(crate) lease: i64,
    pub(crate) name: String,
    pub(crate) inner: ForkSafe<Election>,
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
        name: name.to_owned(),
        _db: db.clone().unbind(),
        inner: ForkSafe::new(Arc::new(Mutex::new(Some(o)))),
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
    fn session(&self, py: Python<'_>) -> Py<PyAny> {
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
            in_pool(e.campaign_wait(&value, wait)),
            move || cancel.stop(),
            |l: Leadership| {
                let _ = l.resign();
            },
        )?;
        Ok(PyLeadership {
            name: self.name.clone(),
            key: l.key().to_vec(),
            token: l.fencing_token(),
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

    /// The ID of the campaigning session's lease.
    #[getter]
    fn lease_id(&self) -> i64 {
        self.lease
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Election")
            .field("name", &self.name)
            .field("lease_id", self.lease)
            .finish()
    }
}

/// Leadership won by `Election.campaign()`. A context manager: entering checks that it is still
/// held (else `tenure.NotLeader`); exit resigns.
#[pyclass(frozen, module = "tenure", name = "Leadership")]
pub(crate) struct PyLeadership {
    pub(crate) name: String,
    pub(crate) key: Vec<u8>,
    pub(crate) token: i64,
    pub(crate) inner: ForkSafe<Leadership>,
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
    fn fencing_token(&self) -> i64 {
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
            Err(Error::Closed(_)) => Ok(()),
            other => other,
        })?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Leadership")
            .field("name", &self.name)
            .field("key", self.key.as_slice())
            .field("fencing_token", self.token)
            .finish()
    }
}

/// Leadership changes of one election (`Tenure.observe_election()`): an iterator of
/// `KeyValue | None` and a context manager that cancels it on exit. It never loses the latest
/// state; iteration stops when the engine closes.
#[pyclass(frozen, module = "tenure", name = "Observer")]
pub(crate) struct PyObserver {
    _db: Py<PyTenure>,
    name: String,
    /// Shared with `tenure.aio`'s helper waits.
    pub(crate) inner: ForkSafe<Arc<Mutex<Option<Observer>>>>,
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
                Err(Error::Timeout { .. }) => Ok(None),
                Err(Error::Closed(_)) => {
                    *guard = None;
                    Ok(Some(None))
                }
                Err(e) => Err(e),
            }
        })?;
        match got {
            Some(state) => Ok(state),
            None => Err(err(Error::timeout(
                "a change of leader",
                timeout.unwrap_or_default(),
            ))),
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

    /// The observed election's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The default timeout of each wait in seconds (`None`: wait for the next change).
    #[getter]
    fn timeout(&self) -> Option<f64> {
        self.timeout.map(|t| t.as_secs_f64())
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
            None => Err(closed(format!(
                "the observer of election {:?} is closed",
                self.name
            ))),
        }
    }

    /// Stops observing; iteration then ends. Idempotent.
    fn cancel(&self, py: Python<'_>) -> PyResult<()> {
        take_and_drop(py, &self.inner)
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
        Repr::new(py, "Observer")
            .field("name", &self.name)
            .field("timeout", self.timeout.map(|t| t.as_secs_f64()))
            .finish()
    }
}
