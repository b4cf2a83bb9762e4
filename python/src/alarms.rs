//! `tenure.Alarm`: a raised alarm (SPEC E20, E25), made by the caller to raise or disarm one
//! and returned by `Tenure.alarms()`.

use pyo3::prelude::*;
use tenure::{Alarm, AlarmKind};

use crate::errors::invalid;
use crate::repr::Repr;

/// An alarm: which member raised it and what about, `"NOSPACE"` (the file reached its space
/// quota: writes that need room are refused) or `"CORRUPT"` (every write is refused).
/// Compared and hashed by value.
#[pyclass(frozen, eq, hash, module = "tenure", name = "Alarm")]
#[derive(PartialEq, Eq, Hash, Clone, Copy)]
pub(crate) struct PyAlarm(pub(crate) Alarm);

fn kind_arg(kind: &str) -> PyResult<AlarmKind> {
    [AlarmKind::NoSpace, AlarmKind::Corrupt]
        .into_iter()
        .find(|k| k.name() == kind)
        .ok_or_else(|| {
            invalid(format!(
                "alarm kind must be \"NOSPACE\" or \"CORRUPT\", not {kind:?}"
            ))
        })
}

#[pymethods]
impl PyAlarm {
    /// `Alarm(member, kind)`: `member` an unsigned 64-bit member ID (`Tenure.member_id` for the
    /// engine's own alarms), `kind` `"NOSPACE"` or `"CORRUPT"` (else `InvalidArgument`).
    #[new]
    fn new(member: u64, kind: &str) -> PyResult<PyAlarm> {
        Ok(PyAlarm(Alarm {
            member,
            kind: kind_arg(kind)?,
        }))
    }

    /// The member that raised it.
    #[getter]
    fn member(&self) -> u64 {
        self.0.member
    }

    /// `"NOSPACE"` or `"CORRUPT"`, as `etcdctl alarm list` prints it.
    #[getter]
    fn kind(&self) -> &'static str {
        self.0.kind.name()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Alarm")
            .field("member", self.0.member)
            .field("kind", self.0.kind.name())
            .finish()
    }
}
