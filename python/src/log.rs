//! Reports of background threads on Python's `logging`, logger `tenure`: what happens on an
//! engine thread with no caller to raise to (elector transitions, keep-alive failures and lost
//! leases).
//!
//! The core reports on the `log` facade; [`install`] makes this module its logger, forwarding
//! records of the `tenure` targets. The core logs only from its own threads with no lock held,
//! so taking the GIL there cannot deadlock with a Python thread (which releases the GIL around
//! every call that waits for an engine thread). The bridge keeps no state: nothing to reset in
//! a child created by `fork()`; while the interpreter shuts down records are dropped.

use pyo3::prelude::*;

use crate::runtime::attach;

/// The `logging` levels used.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Level {
    Debug,
    Info,
    Warning,
    Error,
}

/// Logs `message` on the `tenure` logger from any thread (takes the GIL; nothing while the
/// interpreter shuts down). A failing handler is reported through `sys.unraisablehook`.
pub(crate) fn log(level: Level, message: impl FnOnce() -> String) {
    attach(|py| {
        let method = match level {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
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

/// The core's `log` records, forwarded to the `tenure` logger.
struct Bridge;

impl ::log::Log for Bridge {
    fn enabled(&self, metadata: &::log::Metadata<'_>) -> bool {
        metadata.target().starts_with("tenure")
    }

    fn log(&self, record: &::log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            ::log::Level::Error => Level::Error,
            ::log::Level::Warn => Level::Warning,
            ::log::Level::Info => Level::Info,
            ::log::Level::Debug | ::log::Level::Trace => Level::Debug,
        };
        log(level, || record.args().to_string());
    }

    fn flush(&self) {}
}

/// Makes [`Bridge`] the logger of this extension's copy of the `log` facade (once; a second
/// import is a no-op).
pub(crate) fn install() {
    static BRIDGE: Bridge = Bridge;
    if ::log::set_logger(&BRIDGE).is_ok() {
        ::log::set_max_level(::log::LevelFilter::Debug);
    }
}
