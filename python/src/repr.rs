//! The one `repr()` convention of every tenure class: the class's qualified name and its
//! identifying fields (a handle's state too) as keyword arguments, each value written as Python
//! writes it: `tenure.Lease(id=1, ttl=2.0)`, `tenure.Tenure(path=None, closed=False)`,
//! `tenure.LockGuard(name='jobs/1', fencing_token=3)`. Values built by a named constructor show
//! it: `tenure.Op.put(b'k', b'v', lease=None)`.

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

/// A `repr()` being written: `Repr::new(py, "Lease").field("id", 1).finish()`.
pub(crate) struct Repr<'py> {
    py: Python<'py>,
    out: String,
    first: bool,
}

impl<'py> Repr<'py> {
    /// `tenure.<class>(`; `class` may name a constructor (`Op.put`).
    pub(crate) fn new(py: Python<'py>, class: &str) -> Repr<'py> {
        Repr {
            py,
            out: format!("tenure.{class}("),
            first: true,
        }
    }

    fn sep(&mut self) {
        if !self.first {
            self.out.push_str(", ");
        }
        self.first = false;
    }

    /// A positional argument.
    pub(crate) fn arg<T: IntoPyObject<'py>>(mut self, value: T) -> Repr<'py> {
        self.sep();
        let v = py_repr(self.py, value);
        self.out.push_str(&v);
        self
    }

    /// A keyword argument.
    pub(crate) fn field<T: IntoPyObject<'py>>(mut self, name: &str, value: T) -> Repr<'py> {
        self.sep();
        let v = py_repr(self.py, value);
        self.out.push_str(name);
        self.out.push('=');
        self.out.push_str(&v);
        self
    }

    pub(crate) fn finish(mut self) -> String {
        self.out.push(')');
        self.out
    }
}

/// `repr(value)` as Python computes it (`'?'` if that fails).
fn py_repr<'py, T: IntoPyObject<'py>>(py: Python<'py>, value: T) -> String {
    value
        .into_bound_py_any(py)
        .and_then(|v| v.repr())
        .map_or_else(|_| "?".to_owned(), |s| s.to_string())
}
