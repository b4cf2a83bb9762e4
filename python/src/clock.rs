//! `tenure.ManualClock`: time that moves only when told to (tests).

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use tenure::{Clock, ManualClock};

use crate::convert::{seconds, secs_arg, secs_f64};
use crate::errors::blocking;
use crate::repr::Repr;

/// A clock that moves only when told to; pass it to `tenure.open(clock=...)`.
///
/// `advance(seconds)` moves it forward and wakes every engine using it, so expiry, checkpoints
/// and keep-alives are driven deterministically, without sleeping.
#[pyclass(frozen, module = "tenure", name = "ManualClock")]
pub(crate) struct PyManualClock {
    pub(crate) inner: Arc<ManualClock>,
}

#[pymethods]
impl PyManualClock {
    #[new]
    fn new() -> Self {
        PyManualClock {
            inner: ManualClock::new(),
        }
    }

    /// Moves monotonic and wall time forward by `seconds` (saturating at the clock's limit) and
    /// wakes the engines using the clock.
    fn advance(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = secs_arg)] seconds: f64,
    ) -> PyResult<()> {
        // Saturates like `ManualClock::advance`: a huge (or infinite) step is the clock's limit.
        let d = if seconds.is_nan() || seconds < 0.0 {
            self::seconds(seconds, "seconds")? // InvalidArgument
        } else {
            Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
        };
        let clock = self.inner.clone();
        // Waking an engine takes its lock: never while holding the GIL.
        blocking(py, move || {
            clock.advance(d);
            Ok(())
        })
    }

    /// Steps wall time alone (either way), leaving monotonic time where it is.
    fn step_wall(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = secs_arg)] seconds: f64,
    ) -> PyResult<()> {
        if !seconds.is_finite() {
            return Err(crate::errors::invalid(format!(
                "seconds must be finite, got {seconds}"
            )));
        }
        let ms = (seconds * 1000.0).round() as i64;
        let clock = self.inner.clone();
        blocking(py, move || {
            clock.step_wall(ms);
            Ok(())
        })
    }

    /// Monotonic time since the clock was made, in seconds.
    #[getter]
    fn now(&self) -> f64 {
        secs_f64(self.inner.now())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "ManualClock")
            .field("now", secs_f64(self.inner.now()))
            .finish()
    }
}
