//! `tenure.Group` (made by `Session.group(name)`), `Tenure.group_members(name)`,
//! `tenure.GroupWatch` (made by `Tenure.watch_group(name)`) and `tenure.Partitioner` (made by
//! `Tenure.partitioner(group, replicas)`), SPEC S12.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tenure::sync::{Group, GroupChange, GroupWatch, Member, Partitioner};
use tenure::{Error, Tenure};

use crate::convert::{bytes_arg, opt_secs_arg, timeout};
use crate::errors::{blocking, err};
use crate::repr::Repr;
use crate::runtime::{deadline, drop_detached, lock, sliced, ForkSafe};

/// A member as Python sees it: `(id, capabilities)`.
fn member_tuple(py: Python<'_>, m: &Member) -> (String, Py<PyBytes>) {
    (m.id.clone(), PyBytes::new(py, &m.capabilities).unbind())
}

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
/// [('w1', b'gpu')]
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

pub(crate) fn group_members(
    py: Python<'_>,
    db: &Tenure,
    name: &str,
) -> PyResult<Vec<(String, Py<PyBytes>)>> {
    let members = blocking(py, || Group::members(db, name))?;
    Ok(members.iter().map(|m| member_tuple(py, m)).collect())
}

/// The joins and leaves of a group (SPEC S12), made by `Tenure.watch_group(name)`: an
/// iterator of `("joined", id, capabilities)` and `("left", id, b"")`; `next(timeout)` waits at
/// most `timeout` seconds (then `tenure.Timeout`).
#[pyclass(frozen, module = "tenure", name = "GroupWatch")]
pub(crate) struct PyGroupWatch {
    name: String,
    inner: ForkSafe<Mutex<GroupWatch>>,
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
        inner: ForkSafe::new(Mutex::new(w)),
    })
}

type Change = (&'static str, String, Py<PyBytes>);

#[pymethods]
impl PyGroupWatch {
    /// The group watched.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The next join or leave, waiting at most `timeout` seconds (`None`: no limit).
    #[pyo3(signature = (timeout=None))]
    fn next(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<Change> {
        let w = self.inner.get()?;
        let limit = self::timeout(timeout)?;
        let got = sliced(py, deadline(limit), |step| match lock(w).next(step) {
            Ok(c) => Ok(Some(c)),
            Err(Error::Timeout { .. }) => Ok(None),
            Err(e) => Err(e),
        })?;
        match got {
            Some(GroupChange::Joined(m)) => {
                Ok(("joined", m.id, PyBytes::new(py, &m.capabilities).unbind()))
            }
            Some(GroupChange::Left(id)) => Ok(("left", id, PyBytes::new(py, b"").unbind())),
            None => Err(err(Error::Timeout {
                what: format!("a change of group {:?}", self.name),
                after: limit.unwrap_or_default(),
            })),
        }
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Change> {
        self.next(py, None)
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
/// ...     db.partitioner("shards", 1).members_for("invoice-42")
/// ['m1']
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

    /// The members owning `key` (`bytes` or `str`) now, primary first: `replicas` of them,
    /// fewer if the group has fewer members.
    fn members_for(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let key = bytes_arg(key, "key")?;
        let p = self.inner.get()?;
        blocking(py, || p.members_for(&key))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Partitioner")
            .field("group", &self.group)
            .field("replicas", self.replicas)
            .finish()
    }
}
