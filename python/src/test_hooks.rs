//! Functions only the test suite calls, compiled in with the `test-hooks` cargo feature (as the
//! C library's): the wheel users install has none of them.

use pyo3::prelude::*;

use crate::errors;

/// Runs a panicking engine-style call through the same guard as every engine call, so tests can
/// check that a panic surfaces as `tenure.TenureError` and leaves the interpreter usable.
#[pyfunction]
fn _panic_for_test(py: Python<'_>, message: String) -> PyResult<()> {
    errors::blocking(py, move || -> Result<(), tenure::Error> {
        panic!("{message}");
    })
}

/// Raises the Python exception of an engine error, built from the name of its `tenure::Error`
/// variant, so tests can check the whole mapping table, including errors the Python API cannot
/// produce yet.
#[pyfunction]
fn _raise_for_test(py: Python<'_>, variant: &str) -> PyResult<()> {
    use std::path::PathBuf;
    use tenure::{Error, LeaseId};
    let e = match variant {
        "InvalidArgument" => Error::InvalidArgument("test".into()),
        "LeaseNotFound" => Error::LeaseNotFound(LeaseId::new(7)),
        "LeaseExists" => Error::LeaseExists(LeaseId::new(7)),
        "LeaseExpired" => Error::LeaseExpired(LeaseId::new(7)),
        "LeaseTtlTooLarge" => Error::LeaseTtlTooLarge(std::time::Duration::MAX),
        "NotPrimary" => Error::NotPrimary,
        "Compacted" => Error::Compacted {
            revision: 1,
            compact_revision: 2,
            reason: "test".into(),
        },
        "FutureRevision" => Error::FutureRevision {
            requested: 9,
            current: 4,
        },
        "AlreadyOpen" => Error::AlreadyOpen(PathBuf::from("test.tenure")),
        "Corrupt" => Error::Corrupt {
            path: PathBuf::from("test.tenure"),
            detail: "test".into(),
        },
        "Storage" => Error::storage("test"),
        "Closed" => Error::Closed("test.tenure".into()),
        "Timeout" => Error::timeout("a test", std::time::Duration::from_secs(1)),
        "Locked" => Error::Locked {
            name: "test".into(),
            holder: LeaseId::new(7),
        },
        "SessionExpired" => Error::SessionExpired(LeaseId::new(7)),
        "NotLeader" => Error::NotLeader,
        "StaleToken" => Error::StaleToken {
            token: 1,
            highest: 2,
        },
        "Unsupported" => Error::Unsupported("test".into()),
        "Unavailable" => Error::Unavailable("test".into()),
        "PermissionDenied" => Error::PermissionDenied("test".into()),
        "Unauthenticated" => Error::Unauthenticated("test".into()),
        "QuotaExceeded" => Error::QuotaExceeded("test".into()),
        other => return Err(errors::invalid(format!("no variant {other:?}"))),
    };
    Err(errors::to_py(py, e))
}

/// Sets the hooks on the module, outside `__all__` (they are not part of the API).
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.setattr("_panic_for_test", wrap_pyfunction!(_panic_for_test, m)?)?;
    m.setattr("_raise_for_test", wrap_pyfunction!(_raise_for_test, m)?)
}
