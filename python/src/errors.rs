//! Errors: `tenure::Error` → the Python exception of its C code, panics → `TenureError`.
//!
//! The mapping table is `tenure::Error::code()` (core/src/error.rs). The Python classes live in
//! `tenure/_errors.py`, each carrying its C code as `code`; `_BY_CODE` indexes them by it, so this
//! file only looks the number up.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use tenure::{Error, ErrorCode};

static BY_CODE: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Bound<'_, PyDict>> {
    BY_CODE.import(py, "tenure._errors", "_BY_CODE")
}

/// The exception for a C result code: the class whose `code` it is, else `TenureError`.
fn raise(py: Python<'_>, code: i32, message: String) -> PyErr {
    let found = classes(py).and_then(|by_code| {
        let cls = match by_code.get_item(code)? {
            Some(cls) => cls,
            None => by_code
                .get_item(ErrorCode::Panic as i32)?
                .ok_or_else(|| PyRuntimeError::new_err("tenure._errors has no TenureError"))?,
        };
        cls.call1((message.clone(),))
    });
    match found {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

static STORAGE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Converts an engine error into its Python exception. A storage error is an `OSError` with
/// the OS's `errno` and the file as `filename` when it has them (`tenure._errors._storage`
/// picks the subclass, so `except FileNotFoundError` works).
pub(crate) fn to_py(py: Python<'_>, err: Error) -> PyErr {
    if let Error::Storage {
        errno: Some(errno),
        path,
        ..
    } = &err
    {
        let made = STORAGE
            .import(py, "tenure._errors", "_storage")
            .and_then(|f| {
                let file = path.as_ref().map(|p| p.to_string_lossy().into_owned());
                f.call1((err.to_string(), *errno, file))
            });
        return match made {
            Ok(exc) => PyErr::from_value(exc),
            Err(e) => e,
        };
    }
    let exc = raise(py, err.code() as i32, err.to_string());
    // The numbers an error carries, as attributes (`Compacted.compact_revision`, etcd's).
    let attrs: &[(&str, i64)] = match &err {
        Error::Compacted {
            revision,
            compact_revision,
            ..
        } => &[
            ("revision", *revision),
            ("compact_revision", *compact_revision),
        ],
        Error::FutureRevision { requested, current } => {
            &[("revision", *requested), ("current_revision", *current)]
        }
        _ => &[],
    };
    let value = exc.value(py);
    for (name, n) in attrs {
        if let Err(e) = value.setattr(*name, *n) {
            return e;
        }
    }
    exc
}

/// `to_py` for places that have no `Python` token at hand (`map_err(err)`).
pub(crate) fn err(e: Error) -> PyErr {
    Python::attach(|py| to_py(py, e))
}

/// A caught panic: `tenure.TenureError` (the C `TENURE_ERR_PANIC`).
pub(crate) fn panic_to_py(py: Python<'_>, payload: Box<dyn Any + Send>) -> PyErr {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    raise(
        py,
        ErrorCode::Panic as i32,
        format!("internal error (panic) in tenure: {what}"),
    )
}

/// Runs an engine call with the GIL released, turning its error and any panic into Python
/// exceptions. Every call that takes an engine lock, waits or may fsync goes through here.
pub(crate) fn blocking<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> Result<T, Error> + Send,
    T: Send,
{
    match py.detach(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_py(py, e)),
        Err(payload) => Err(panic_to_py(py, payload)),
    }
}

/// The shorthand for an `InvalidArgument` raised by the binding itself.
pub(crate) fn invalid(msg: impl Into<String>) -> PyErr {
    err(Error::InvalidArgument(msg.into()))
}

/// `Closed` with a message of the binding's own, naming what is closed (an object inherited
/// across `fork`, a cancelled observer).
pub(crate) fn closed(message: String) -> PyErr {
    Python::attach(|py| raise(py, ErrorCode::Closed as i32, message))
}

/// The exception of `code` with a message of the binding's own, for refusals worded in the
/// binding's terms (a TTL as the caller wrote it).
pub(crate) fn with_message(code: ErrorCode, message: String) -> PyErr {
    Python::attach(|py| raise(py, code as i32, message))
}
