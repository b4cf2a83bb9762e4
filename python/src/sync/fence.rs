//! `tenure.FenceGate` (SPEC S3).

use pyo3::prelude::*;
use tenure::sync::FenceGate;

use crate::convert::int_arg;
use crate::errors::to_py;
use crate::repr::Repr;

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

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "FenceGate")
            .field("highest", self.0.highest())
            .finish()
    }
}
