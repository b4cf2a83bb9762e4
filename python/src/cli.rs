//! `tenure._tenure._cli_main`: the `tenure` command of the standalone binary (`tenure serve` and
//! the offline commands), the same Rust code, run inside the interpreter for the wheel's
//! `tenure` script and `python -m tenure` (python/tenure/__main__.py).

use std::ffi::OsString;

use pyo3::prelude::*;

use crate::errors;

/// Runs the command line `argv` (program name first) and returns its exit code. The GIL is
/// released for the whole run, which for `tenure serve` lasts until SIGTERM or SIGINT: the
/// server's own handlers stop it cleanly, as in the binary. A panic becomes a Python
/// exception.
#[pyfunction]
pub(crate) fn _cli_main(py: Python<'_>, argv: Vec<OsString>) -> PyResult<u8> {
    errors::blocking(py, move || Ok(tenure_server::main_with_args(argv)))
}
