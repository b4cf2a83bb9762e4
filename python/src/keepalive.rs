//! `Lease.keep_alive()`: a native thread renewing a lease, as a context manager.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tenure::KeepAlive;

use crate::convert::opt_interval;
use crate::errors::{blocking, to_py};
use crate::handle::PyTenure;
use crate::repr::Repr;
use crate::runtime::{drop_detached, lock, take_and_drop, ForkSafe};

/// Renews a lease on a native thread (every `interval`, default TTL/3) until `stop()`, the end
/// of its `with` block, the engine's close, or a failed renew (`error` then says why).
#[pyclass(frozen, module = "tenure", name = "KeepAlive")]
pub(crate) struct PyKeepAlive {
    lease_id: i64,
    _db: Py<PyTenure>,
    inner: ForkSafe<Mutex<Option<KeepAlive>>>,
}

impl PyKeepAlive {
    pub(crate) fn start(
        py: Python<'_>,
        db: Py<PyTenure>,
        id: i64,
        interval: Option<f64>,
    ) -> PyResult<PyKeepAlive> {
        let interval = opt_interval(interval, "interval")?;
        let ka = {
            let e = db.get().engine()?;
            blocking(py, || e.keep_alive(id, interval))?
        };
        Ok(PyKeepAlive {
            lease_id: id,
            _db: db,
            inner: ForkSafe::new(Mutex::new(Some(ka))),
        })
    }
}

impl Drop for PyKeepAlive {
    fn drop(&mut self) {
        // Stops (joins) the renewing thread, without the GIL; leaked in a forked child.
        if let Some(ka) = self.inner.take_for_drop() {
            drop_detached(ka);
        }
    }
}

#[pymethods]
impl PyKeepAlive {
    /// The lease being renewed.
    #[getter]
    fn lease_id(&self) -> i64 {
        self.lease_id
    }

    /// Whether it is still renewing.
    #[getter]
    fn is_alive(&self, py: Python<'_>) -> PyResult<bool> {
        let Ok(inner) = self.inner.get() else {
            return Ok(false);
        };
        blocking(py, || {
            Ok(lock(inner).as_ref().is_some_and(|k| k.is_alive()))
        })
    }

    /// The exception of the renew that ended it (e.g. `tenure.LeaseNotFound`), or `None`.
    #[getter]
    fn error(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let Ok(inner) = self.inner.get() else {
            return Ok(None);
        };
        let e = blocking(py, || Ok(lock(inner).as_ref().and_then(|k| k.error())))?;
        Ok(e.map(|e| to_py(py, e).into_value(py).into_any()))
    }

    /// Stops renewing and waits for the thread to end; the lease is left as it is. Idempotent;
    /// never raises (a failed renew is in `error`).
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        take_and_drop(py, &self.inner)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.stop(py)?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "KeepAlive")
            .field("lease_id", self.lease_id)
            .field("is_alive", self.is_alive(py).unwrap_or(false))
            .finish()
    }
}
