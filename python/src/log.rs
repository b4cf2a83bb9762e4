//! Reports of background threads on Python's `logging`, logger `tenure`: what happens on an
//! engine thread with no caller to raise to (elector transitions).

use pyo3::prelude::*;

/// The `logging` levels used.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Level {
    Info,
}

/// Logs `message` on the `tenure` logger from any thread (takes the GIL; nothing while the
/// interpreter shuts down). A failing handler is reported through `sys.unraisablehook`.
pub(crate) fn log(level: Level, message: impl FnOnce() -> String) {
    Python::try_attach(|py| {
        let method = match level {
            Level::Info => "info",
        };
        let r = py
            .import("logging")
            .and_then(|m| m.call_method1("getLogger", ("tenure",)))
            .and_then(|l| l.call_method1(method, (message(),)));
        if let Err(e) = r {
            e.write_unraisable(py, None);
        }
    });
}
