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
mod alarms;
#[cfg(feature = "cli")]
mod cli;
mod clock;
mod convert;
mod db;
mod errors;
mod handle;
mod hooks;
mod iter;
mod keepalive;
mod lease;
mod log;
mod repr;
mod runtime;
mod sync;
// Always compiled (so always checked); added to the module only with the feature.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
mod test_hooks;
mod txn;
mod types;

use pyo3::prelude::*;

/// The compiled part of tenure; import `tenure` instead.
#[pymodule]
mod _tenure {
    #[pymodule_export]
    use super::aio::{
        _campaign_async, _expired_recv_async, _lock_async, _observe_recv_async,
        _session_done_async, _watch_recv_async, PyPending,
    };
    #[cfg(feature = "cli")]
    #[pymodule_export]
    use super::cli::_cli_main;
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
        PyElection, PyFenceGate, PyGuard, PyLeaderElector, PyLeadership, PyLockGuard, PyMutex,
        PyObserver, PyRecordLock, PySession, PyStop,
    };
    // The semaphore and the read-write lock (S7–S9).
    #[pymodule_export]
    use super::sync::{
        _rwlock_async, _semaphore_acquire_async, PyRwLock, PyRwLockGuard, PySemaphore,
        PySemaphoreGuard,
    };
    // queues (S10), groups (S12).
    #[pymodule_export]
    use super::aio::{_dequeue_async, _group_watch_recv_async};
    #[pymodule_export]
    use super::alarms::PyAlarm;
    #[pymodule_export]
    use super::sync::{
        _double_barrier_async, PyBarrier, PyDoubleBarrier, PyGroup, PyGroupWatch, PyPartitioner,
        PyPriorityQueue, PyQueue,
    };
    #[pymodule_export]
    use super::txn::{PyCompare, PyOp};
    #[pymodule_export]
    use super::types::{
        PyEvent, PyExpiredLease, PyKeyValue, PyLeaseInfo, PySnapshotInfo, PyStorageSize,
        PyTxnResponse,
    };

    use pyo3::prelude::*;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", tenure::VERSION)?;
        // The defaults of `open()` (its signature shows them as `...`) and the bounds of
        // arguments, published by the core.
        for (name, d) in [
            (
                "DEFAULT_FLUSH_INTERVAL",
                tenure::Builder::DEFAULT_FLUSH_INTERVAL,
            ),
            (
                "DEFAULT_CHECKPOINT_INTERVAL",
                tenure::Builder::DEFAULT_CHECKPOINT_INTERVAL,
            ),
            (
                "DEFAULT_EXPIRED_RETRY_INTERVAL",
                tenure::Builder::DEFAULT_EXPIRED_RETRY_INTERVAL,
            ),
            // The bounds of a TTL, of every other duration and of a keep-alive interval
            // (`tenure::limits`).
            ("MAX_TTL", tenure::limits::MAX_TTL),
            ("MAX_DURATION", tenure::limits::MAX_DURATION),
            (
                "MAX_KEEPALIVE_INTERVAL",
                tenure::limits::MAX_KEEPALIVE_INTERVAL,
            ),
        ] {
            m.add(name, d.as_secs_f64())?;
        }
        super::log::install();
        #[cfg(feature = "test-hooks")]
        super::test_hooks::add(m)?;
        super::hooks::install(m)
    }
}
