//! `tenure.Group` (made by `Session.group(name)`), `Tenure.group_members(name)`,
//! `tenure.GroupWatch` (made by `Tenure.watch_group(name)`) and `tenure.Partitioner` (made by
//! `Tenure.partitioner(group, replicas)`), SPEC S12.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use tenure::sync::{Group, GroupChange, GroupWatch, Partitioner};
use tenure::{Error, Tenure};

use crate::convert::{bytes_arg, opt_secs_arg, timeout};
use crate::errors::{blocking, closed, err};
use crate::repr::Repr;
use crate::runtime::{deadline, drop_detached, lock, sliced, take_and_drop, ForkSafe};

/// A session's membership of a group (SPEC S12), made by `Session.group(name)`: `join(member,
/// capabilities)` puts `name/members/<member>` on the session's lease, so a member whose
/// session ends leaves.
///
/// >>> import tenure
/// >>> db = tenure.open()
/// >>> with db.session() as s:
/// ...     g = s.group("workers")
/// ...     g.join("w1", "gpu")
/// ...     db.group_members("workers")
/// {'w1': b'gpu'}
#[pyclass(frozen, module = "tenure", name = "Group")]
pub(crate) struct PyGroup {
    session: Py<PyAny>,
    name: String,
    inner: ForkSafe<Group>,
}

impl Drop for PyGroup {
    fn drop(&mut self) {
        if let Some(g) = self.inner.take_for_drop() {
            drop_detached(g);
        }
    }
}

pub(crate) fn new_group(session: Py<PyAny>, s: &tenure::sync::Session, name: &str) -> PyGroup {
    PyGroup {
        session,
        name: name.to_owned(),
        inner: ForkSafe::new(Group::new(s, name)),
    }
}

#[pymethods]
impl PyGroup {
    /// The group's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The session the membership lives on.
    #[getter]
    fn session(&self, py: Python<'_>) -> Py<PyAny> {
        self.session.clone_ref(py)
    }

    /// Joins as `member` with `capabilities` (`bytes` or `str`); again through the same
    /// session, updates them. `tenure.Locked` if another session is that member,
    /// `tenure.InvalidArgument` for an ID empty, over 256 bytes or with '/'.
    #[pyo3(signature = (member, capabilities=None))]
    fn join(
        &self,
        py: Python<'_>,
        member: &str,
        capabilities: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let caps = match capabilities {
            Some(c) => bytes_arg(c, "capabilities")?.into_owned(),
            None => Vec::new(),
        };
        let g = self.inner.get()?;
        blocking(py, || g.join(member, &caps))
    }

    /// Leaves the group (only this membership; nothing if not joined).
    fn leave(&self, py: Python<'_>) -> PyResult<()> {
        let g = self.inner.get()?;
        blocking(py, || g.leave())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Group").field("name", &self.name).finish()
    }
}

/// `Tenure.group_members(name)`: `{id: capabilities}`, inserted in ID order.
pub(crate) fn group_members<'py>(
    py: Python<'py>,
    db: &Tenure,
    name: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let members = blocking(py, || Group::members(db, name))?;
    let dict = PyDict::new(py);
    for m in members {
        dict.set_item(m.id, PyBytes::new(py, &m.capabilities))?;
    }
    Ok(dict)
}

/// A change as Python sees it: `("joined", id, capabilities)` or `("left", id, b"")`.
pub(crate) type Change = (&'static str, String, Py<PyBytes>);

pub(crate) fn change_tuple(py: Python<'_>, change: GroupChange) -> Change {
    match change {
        GroupChange::Joined(m) => ("joined", m.id, PyBytes::new(py, &m.capabilities).unbind()),
        GroupChange::Left(id) => ("left", id, PyBytes::new(py, b"").unbind()),
    }
}

/// The joins and leaves of a group (SPEC S12), made by `Tenure.watch_group(name)`: an
/// iterator of `("joined", id, capabilities)` and `("left", id, b"")`, and a context manager
/// that cancels the watch on exit; `recv(timeout)` waits at most `timeout` seconds (then
/// `tenure.Timeout`).
#[pyclass(frozen, module = "tenure", name = "GroupWatch")]
pub(crate) struct PyGroupWatch {
    name: String,
    /// `None` once cancelled or fallen behind; shared with `tenure.aio`'s pooled waits.
    pub(crate) inner: ForkSafe<Arc<Mutex<Option<GroupWatch>>>>,
}

impl Drop for PyGroupWatch {
    fn drop(&mut self) {
        if let Some(w) = self.inner.take_for_drop() {
            drop_detached(w);
        }
    }
}

pub(crate) fn watch_group(py: Python<'_>, db: &Tenure, name: &str) -> PyResult<PyGroupWatch> {
    let w = blocking(py, || Group::watch(db, name))?;
    Ok(PyGroupWatch {
        name: name.to_owned(),
        inner: ForkSafe::new(Arc::new(Mutex::new(Some(w)))),
    })
}

impl PyGroupWatch {
    /// The next change within `timeout`; `None` once the watch is cancelled or ended.
    fn next_change(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Change>> {
        let inner = self.inner.get()?;
        let limit = self::timeout(timeout)?;
        let got = sliced(py, deadline(limit), |step| {
            let mut guard = lock(inner);
            let Some(w) = guard.as_mut() else {
                return Ok(Some(None));
            };
            match w.next(step) {
                Ok(c) => Ok(Some(Some(c))),
                Err(Error::Timeout { .. }) => Ok(None),
                Err(e) => {
                    // Closed, or fell behind (Compacted): the watch is over.
                    *guard = None;
                    Err(e)
                }
            }
        })?;
        match got {
            Some(change) => Ok(change.map(|c| change_tuple(py, c))),
            None => Err(err(Error::Timeout {
                what: format!("a change of group {:?}", self.name),
                after: limit.unwrap_or_default(),
            })),
        }
    }
}

#[pymethods]
impl PyGroupWatch {
    /// The group watched.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The next join or leave, waiting at most `timeout` seconds (`None`: no limit), then
    /// `tenure.Timeout`; `tenure.Closed` once the watch is cancelled or the engine closed,
    /// `tenure.Compacted` if it fell behind (read `group_members` and watch again).
    #[pyo3(signature = (timeout=None))]
    fn recv(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<Change> {
        self.next_change(py, timeout)?
            .ok_or_else(|| closed(format!("the watch of group {:?} is cancelled", self.name)))
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The next join or leave, however long it takes; iteration stops once the watch is
    /// cancelled.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Change>> {
        self.next_change(py, None)
    }

    /// Cancels the watch; iteration then stops. Idempotent.
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
        Repr::new(py, "GroupWatch")
            .field("name", &self.name)
            .finish()
    }
}

/// Which live members of a group own a key (SPEC S12), made by `Tenure.partitioner(group,
/// replicas)`: consistent hashing, stable while membership is, balanced, and moving only the
/// keys it must when a member joins or leaves.
///
/// >>> import tenure
/// >>> db = tenure.open()
/// >>> with db.session() as s:
/// ...     s.group("shards").join("m1")
/// ...     p = db.partitioner("shards", 1)
/// ...     p.members_for("invoice-42"), p.primary_for("invoice-42")
/// ({'m1'}, 'm1')
#[pyclass(frozen, module = "tenure", name = "Partitioner")]
pub(crate) struct PyPartitioner {
    group: String,
    replicas: usize,
    inner: ForkSafe<Partitioner>,
}

pub(crate) fn new_partitioner(db: &Tenure, group: &str, replicas: i64) -> PyResult<PyPartitioner> {
    let n = usize::try_from(replicas).map_err(|_| {
        err(Error::InvalidArgument(format!(
            "replicas {replicas}: must be 1 to 64"
        )))
    })?;
    let p = Partitioner::new(db, group, n).map_err(err)?;
    Ok(PyPartitioner {
        group: group.to_owned(),
        replicas: n,
        inner: ForkSafe::new(p),
    })
}

#[pymethods]
impl PyPartitioner {
    /// The group partitioned.
    #[getter]
    fn group(&self) -> &str {
        &self.group
    }

    /// How many members own each key.
    #[getter]
    fn replicas(&self) -> usize {
        self.replicas
    }

    /// The members owning `key` (`bytes` or `str`) now: `replicas` of them, fewer if the
    /// group has fewer members (see `primary_for` for the first of them).
    fn members_for(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<HashSet<String>> {
        let key = bytes_arg(key, "key")?;
        let p = self.inner.get()?;
        blocking(py, || Ok(p.members_for(&key)?.into_iter().collect()))
    }

    /// The primary owner of `key` (`bytes` or `str`) now: the first member clockwise from
    /// the key on the ring, whatever `replicas` is; `None` if the group has no member.
    fn primary_for(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        let key = bytes_arg(key, "key")?;
        let p = self.inner.get()?;
        blocking(py, || p.primary_for(&key))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Partitioner")
            .field("group", &self.group)
            .field("replicas", self.replicas)
            .finish()
    }
}
