//! `tenure.Lease`: a granted lease bound to its engine, usable wherever an `int` ID is.

use std::time::Duration;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

use crate::convert::{opt_secs_arg, secs_f64, type_name};
use crate::errors::invalid;
use crate::handle::PyTenure;
use crate::keepalive::PyKeepAlive;
use crate::repr::Repr;
use crate::types::PyLeaseInfo;

/// A lease returned by `Tenure.grant()`. It is also accepted wherever a lease ID (`int`) is,
/// converts with `int(lease)` and compares equal to its ID.
#[pyclass(frozen, module = "tenure", name = "Lease")]
pub(crate) struct PyLease {
    pub(crate) id: i64,
    pub(crate) ttl: Duration,
    pub(crate) db: Py<PyTenure>,
}

#[pymethods]
impl PyLease {
    /// The lease ID (a positive int).
    #[getter]
    fn id(&self) -> i64 {
        self.id
    }

    /// The granted TTL in seconds (after `min_ttl`).
    #[getter]
    fn ttl(&self) -> f64 {
        secs_f64(self.ttl)
    }

    /// The engine the lease belongs to.
    #[getter]
    fn db(&self, py: Python<'_>) -> Py<PyTenure> {
        self.db.clone_ref(py)
    }

    /// Renews the lease (deadline = now + TTL); returns the TTL in seconds. Raises
    /// `tenure.LeaseNotFound` once the lease is gone, `tenure.NotPrimary` on a standby,
    /// `tenure.Closed` after close.
    fn renew(&self, py: Python<'_>) -> PyResult<f64> {
        self.db.get().renew_id(py, self.id)
    }

    /// Revokes the lease, deleting its keys. Raises `tenure.LeaseNotFound` if it is gone.
    /// Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    fn revoke(&self, py: Python<'_>) -> PyResult<()> {
        self.db.get().revoke_id(py, self.id)
    }

    /// The lease's TTL, remaining time (seconds) and keys. Raises `tenure.LeaseNotFound` once
    /// the lease is gone, `tenure.Closed` after close.
    fn time_to_live(&self, py: Python<'_>) -> PyResult<PyLeaseInfo> {
        self.db.get().time_to_live_id(py, self.id)
    }

    /// A context manager whose native thread renews the lease every `interval` seconds
    /// (default TTL/3) until the block exits, the engine closes or the lease is lost. Raises
    /// `tenure.LeaseNotFound` if the lease is already gone, `tenure.InvalidArgument` for an
    /// interval that is not positive or above `tenure.MAX_KEEPALIVE_INTERVAL` seconds.
    #[pyo3(signature = (interval=None))]
    fn keep_alive(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] interval: Option<f64>,
    ) -> PyResult<PyKeepAlive> {
        PyKeepAlive::start(py, self.db.clone_ref(py), self.id, interval)
    }

    fn __int__(&self) -> i64 {
        self.id
    }

    fn __index__(&self) -> i64 {
        self.id
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> Py<PyAny> {
        if let Ok(o) = other.cast::<PyLease>() {
            let o = o.get();
            return PyBool::new(py, o.id == self.id && o.db.is(&self.db))
                .to_owned()
                .into_any()
                .unbind();
        }
        if other.is_instance_of::<PyInt>() && !other.is_instance_of::<PyBool>() {
            let same = other.extract::<i64>().is_ok_and(|v| v == self.id);
            return PyBool::new(py, same).to_owned().into_any().unbind();
        }
        py.NotImplemented()
    }

    fn __hash__(&self) -> isize {
        // Equal to hash(self.id) for every valid (positive) ID, as __eq__ requires.
        self.id as isize
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Lease")
            .field("id", self.id)
            .field("ttl", secs_f64(self.ttl))
            .finish()
    }
}

/// A lease argument: a `tenure.Lease` or an `int` ID (`bool` is refused).
pub(crate) fn lease_arg(obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    if let Ok(lease) = obj.cast::<PyLease>() {
        return Ok(lease.get().id);
    }
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "a lease must be a tenure.Lease or an int ID, not {}",
            type_name(obj)
        )));
    }
    obj.extract::<i64>()
        .map_err(|_| invalid(format!("lease ID {obj} is out of range")))
}

/// An optional lease (`None` or 0 = no lease).
pub(crate) fn opt_lease_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<tenure::LeaseId>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => {
            let id = lease_arg(o)?;
            Ok((id != 0).then_some(tenure::LeaseId::new(id)))
        }
    }
}
