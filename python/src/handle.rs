//! `PyTenure`, the engine handle every class keeps: its state and the engine accessors. Its
//! Python methods are in `db.rs`, which sits above every other class.

use std::path::PathBuf;

use pyo3::prelude::*;
use tenure::Tenure;

use crate::convert::secs_f64;
use crate::errors::blocking;
use crate::runtime::{drop_detached, ForkSafe};
use crate::types::PyLeaseInfo;

/// An open tenure database (made by `tenure.open()`); also a context manager that closes it.
///
/// One handle may be shared by any number of threads. Every call that can block releases the
/// GIL. After `os.fork()` the child sees the handle as closed (`tenure.Closed`): it must open
/// its own.
#[pyclass(frozen, weakref, module = "tenure", name = "Tenure")]
pub(crate) struct PyTenure {
    pub(crate) engine: ForkSafe<Tenure>,
    pub(crate) path: Option<PathBuf>,
    /// The database file's canonical path, to release its descriptors in a forked child.
    pub(crate) file: Option<PathBuf>,
}

impl Drop for PyTenure {
    fn drop(&mut self) {
        // Garbage-collected without close(): close cleanly, without holding the GIL. In a
        // forked child the inherited engine is leaked, never closed (see ForkSafe).
        if let Some(engine) = self.engine.take_for_drop() {
            drop_detached(engine);
        }
    }
}

impl PyTenure {
    /// `Closed`, naming this database.
    pub(crate) fn closed_error(&self) -> PyErr {
        crate::errors::err(tenure::Error::closed(self.path.as_deref()))
    }

    /// The engine, or `Closed` in a forked child.
    pub(crate) fn engine(&self) -> PyResult<&Tenure> {
        self.engine.get()
    }

    /// The engine, refusing with `Closed` once it is closed: for `expired()`, whose Rust
    /// counterpart hands out a disconnected receiver rather than an error.
    pub(crate) fn open_engine(&self, py: Python<'_>) -> PyResult<&Tenure> {
        let e = self.engine()?;
        if blocking(py, || Ok(e.is_closed()))? {
            return Err(self.closed_error());
        }
        Ok(e)
    }

    pub(crate) fn renew_id(&self, py: Python<'_>, id: i64) -> PyResult<f64> {
        let e = self.engine()?;
        blocking(py, || e.renew(id)).map(secs_f64)
    }

    pub(crate) fn revoke_id(&self, py: Python<'_>, id: i64) -> PyResult<()> {
        let e = self.engine()?;
        blocking(py, || e.revoke(id))
    }

    pub(crate) fn time_to_live_id(&self, py: Python<'_>, id: i64) -> PyResult<PyLeaseInfo> {
        let e = self.engine()?;
        blocking(py, || e.time_to_live(id)).map(PyLeaseInfo)
    }
}
