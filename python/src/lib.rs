//! Python bindings of tenure: the `tenure._tenure` extension module.
//!
//! The Python package `tenure` (python/tenure/) re-exports everything defined here together with
//! the exception classes (`tenure/_errors.py`) and the transaction helpers (`tenure/txn.py`).
//!
//! Rules every binding follows (see the module docs of each file):
//! - every engine call runs through [`errors::blocking`]: GIL released, panics caught,
//!   `tenure::Error` mapped by its C code to the one Python exception class;
//! - blocking waits are sliced (≤ 50 ms) with signal checks between slices;
//! - engine objects live in a [`runtime::ForkSafe`]: untouched and leaked in a forked child.

// The crate documents itself for its maintainers: links to private items are intended.
#![allow(rustdoc::private_intra_doc_links)]

mod aio;
mod clock;
mod convert;
mod db;
mod errors;
mod handle;
mod hooks;
mod iter;
mod keepalive;
mod lease;
mod runtime;
mod sync;
mod txn;
mod types;

use pyo3::prelude::*;

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
/// produce yet (the coordination ones).
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
            reason: "test".into(),
        },
        "AlreadyOpen" => Error::AlreadyOpen(PathBuf::from("test.tenure")),
        "Corrupt" => Error::Corrupt {
            path: PathBuf::from("test.tenure"),
            detail: "test".into(),
        },
        "Storage" => Error::Storage("test".into()),
        "Closed" => Error::Closed,
        "Timeout" => Error::Timeout,
        "Locked" => Error::Locked,
        "SessionExpired" => Error::SessionExpired,
        "NotLeader" => Error::NotLeader,
        "StaleToken" => Error::StaleToken {
            token: 1,
            highest: 2,
        },
        "Unsupported" => Error::Unsupported("test".into()),
        "Unavailable" => Error::Unavailable("test".into()),
        other => return Err(errors::invalid(format!("no variant {other:?}"))),
    };
    Err(errors::to_py(py, e))
}

/// The compiled part of tenure; import `tenure` instead.
#[pymodule]
mod _tenure {
    #[pymodule_export]
    use super::aio::{
        _campaign_async, _expired_recv_async, _lock_async, _observe_recv_async, _watch_recv_async,
        PyPending,
    };
    #[pymodule_export]
    use super::clock::PyManualClock;
    #[pymodule_export]
    use super::db::{connect, open};
    #[pymodule_export]
    use super::handle::PyTenure;
    #[pymodule_export]
    use super::hooks::{_after_fork_in_child, _close_all};
    #[pymodule_export]
    use super::iter::{PyExpiredIter, PyWatcher};
    #[pymodule_export]
    use super::keepalive::PyKeepAlive;
    #[pymodule_export]
    use super::lease::PyLease;
    #[pymodule_export]
    use super::sync::{
        PyElection, PyFenceGate, PyLeaderElector, PyLeadership, PyLockGuard, PyMutex, PyObserver,
        PyRecordLock, PySession, PyStop,
    };
    #[pymodule_export]
    use super::txn::{PyCompare, PyOp};
    #[pymodule_export]
    use super::types::{PyEvent, PyExpiredLease, PyKeyValue, PyLeaseInfo, PyTxnResponse};
    #[pymodule_export]
    use super::{_panic_for_test, _raise_for_test};

    use pyo3::prelude::*;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", tenure::VERSION)?;
        super::hooks::install(m)
    }
}
