//! `tenure.Barrier` (made by `Tenure.barrier(name)`) and `tenure.DoubleBarrier` (made by
//! `Session.double_barrier(name, count)`), SPEC S11.
//!
//! A barrier's wait holds no place, so it is the binding's sliced wait. A double barrier's
//! `enter` holds its entry while it waits: it runs on a thread of its own with a `Stop` in its
//! `Wait` (`runtime::interruptible`), so Ctrl-C withdraws the entry and raises; in
//! `tenure.aio` (`_double_barrier_async`) cancelling the task raises that `Stop`.

use std::sync::Arc;

use pyo3::prelude::*;
use tenure::sync::{Barrier, DoubleBarrier, Stop, Wait};
use tenure::{Error, Tenure};

use crate::aio::{start_with, PyPending};
use crate::convert::{opt_secs_arg, timeout};
use crate::errors::{blocking, err};
use crate::repr::Repr;
use crate::runtime::{deadline, drop_detached, interruptible, on_thread, sliced, ForkSafe};

/// A barrier (SPEC S11) in etcd's `recipe.Barrier` layout (the key `name`, no lease), made by
/// `Tenure.barrier(name)`: held while its key exists; `wait()` passes once it is released.
///
/// >>> import tenure
/// >>> db = tenure.open()
/// >>> gate = db.barrier("deploy")
/// >>> gate.hold(), gate.hold()
/// (True, False)
/// >>> gate.release()
/// >>> gate.wait(timeout=5)
#[pyclass(frozen, module = "tenure", name = "Barrier")]
pub(crate) struct PyBarrier {
    name: String,
    inner: ForkSafe<Barrier>,
}

pub(crate) fn new_barrier(db: &Tenure, name: &str) -> PyBarrier {
    PyBarrier {
        name: name.to_owned(),
        inner: ForkSafe::new(Barrier::new(db, name)),
    }
}

#[pymethods]
impl PyBarrier {
    /// The barrier's name (its key).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Holds the barrier: puts its key if absent. True if this call put it, False if it was
    /// already held.
    fn hold(&self, py: Python<'_>) -> PyResult<bool> {
        let b = self.inner.get()?;
        blocking(py, || b.hold())
    }

    /// Releases the barrier (deletes its key); releasing a free barrier does nothing. Raises
    /// `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let b = self.inner.get()?;
        blocking(py, || b.release())
    }

    /// Whether the barrier is held now.
    fn is_held(&self, py: Python<'_>) -> PyResult<bool> {
        let b = self.inner.get()?;
        blocking(py, || b.is_held())
    }

    /// Waits until the barrier is released (at once if it is free), at most `timeout` seconds
    /// (`None`: no limit); then `tenure.Timeout`.
    #[pyo3(signature = (timeout=None))]
    fn wait(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<()> {
        let b = self.inner.get()?;
        let limit = self::timeout(timeout)?;
        let passed = sliced(py, deadline(limit), |step| match b.wait(step) {
            Ok(()) => Ok(Some(())),
            Err(Error::Timeout { .. }) => Ok(None),
            Err(e) => Err(e),
        })?;
        passed.ok_or_else(|| {
            err(Error::Timeout {
                what: format!("barrier {:?}", self.name),
                after: limit.unwrap_or_default(),
            })
        })
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Barrier").field("name", &self.name).finish()
    }
}

/// One participant of a double barrier (SPEC S11) in etcd's `recipe.DoubleBarrier` layout,
/// made by `Session.double_barrier(name, count)`: `enter()` waits until `count` participants
/// have entered, `leave()` until all have left. Its entry lives on the session's lease.
///
/// >>> import tenure
/// >>> db = tenure.open()
/// >>> with db.session() as s:
/// ...     b = s.double_barrier("batch", 1)
/// ...     b.enter(timeout=5); b.leave(timeout=5)
#[pyclass(frozen, module = "tenure", name = "DoubleBarrier")]
pub(crate) struct PyDoubleBarrier {
    /// The `tenure.Session` it belongs to (kept alive with it).
    session: Py<PyAny>,
    name: String,
    count: usize,
    inner: ForkSafe<Arc<DoubleBarrier>>,
}

impl Drop for PyDoubleBarrier {
    fn drop(&mut self) {
        if let Some(b) = self.inner.take_for_drop() {
            drop_detached(b);
        }
    }
}

pub(crate) fn new_double_barrier(
    session: Py<PyAny>,
    s: &tenure::sync::Session,
    name: &str,
    count: i64,
) -> PyResult<PyDoubleBarrier> {
    let count = usize::try_from(count)
        .ok()
        .filter(|&c| c > 0)
        .ok_or_else(|| {
            err(Error::InvalidArgument(format!(
                "count {count} must be at least 1"
            )))
        })?;
    Ok(PyDoubleBarrier {
        session,
        name: name.to_owned(),
        count,
        inner: ForkSafe::new(Arc::new(DoubleBarrier::new(s, name, count))),
    })
}

/// A double barrier's step: `enter` or `leave`.
type Step = fn(&DoubleBarrier, Wait) -> tenure::Result<()>;

fn step(leave: bool) -> Step {
    if leave {
        |b, w| b.leave(w)
    } else {
        |b, w| b.enter(w)
    }
}

impl PyDoubleBarrier {
    /// Runs `step` (enter or leave) on a thread of its own, interruptible by Ctrl-C.
    fn run(&self, py: Python<'_>, timeout: Option<f64>, step: Step) -> PyResult<()> {
        let b = self.inner.get()?.clone();
        let cancel = Stop::new();
        let wait = Wait::from(self::timeout(timeout)?).with_stop(&cancel);
        interruptible(
            py,
            on_thread(move || step(&b, wait)),
            move || cancel.stop(),
            drop::<()>,
        )
    }
}

#[pymethods]
impl PyDoubleBarrier {
    /// The barrier's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// How many participants it waits for.
    #[getter]
    fn count(&self) -> usize {
        self.count
    }

    /// The session the participant belongs to.
    #[getter]
    fn session(&self, py: Python<'_>) -> Py<PyAny> {
        self.session.clone_ref(py)
    }

    /// Enters and waits until `count` participants have, at most `timeout` seconds (`None`:
    /// no limit); then `tenure.Timeout`, and the entry is withdrawn. `tenure.InvalidArgument`
    /// if it already entered or the barrier already has `count` participants.
    #[pyo3(signature = (timeout=None))]
    fn enter(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<()> {
        self.run(py, timeout, step(false))
    }

    /// Leaves and waits until every participant has left, at most `timeout` seconds; then
    /// `tenure.Timeout` (call it again to keep waiting). `tenure.InvalidArgument` before
    /// `enter()`.
    #[pyo3(signature = (timeout=None))]
    fn leave(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<()> {
        self.run(py, timeout, step(true))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "DoubleBarrier")
            .field("name", &self.name)
            .field("count", self.count)
            .finish()
    }
}

/// `DoubleBarrier.enter()` / `.leave()` for `tenure.aio`: the step on a thread of its own;
/// cancelling the task raises its stop token, which ends the wait at once (an entry is
/// withdrawn) instead of at its timeout.
#[pyfunction]
#[pyo3(signature = (barrier, leave, timeout, wake))]
pub(crate) fn _double_barrier_async(
    barrier: &Bound<'_, PyDoubleBarrier>,
    leave: bool,
    #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    wake: Py<PyAny>,
) -> PyResult<PyPending> {
    let b = barrier.get().inner.get()?.clone();
    let step = step(leave);
    start_with(
        wake,
        self::timeout(timeout)?,
        move |wait| on_thread(move || step(&b, wait)),
        Box::new(|py, ()| Ok(py.None())),
    )
}
