//! `tenure.LeaderElector` and `tenure.Stop` (SPEC S5).

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tenure::sync::{ElectorCallbacks, ElectorConfig, ElectorRun, LeaderElector, Stop};

use crate::convert::{opt_secs_arg, seconds, secs_arg, timeout};
use crate::errors::{blocking, invalid, to_py};
use crate::handle::PyTenure;
use crate::log::{log, Level};
use crate::repr::Repr;
use crate::runtime::{
    attach, deadline, drop_detached, interruptible, lock, on_thread, sliced, ForkSafe,
};

/// A stop flag (like `threading.Event`) shared with native threads: the `stop` argument of
/// `LeaderElector.run()`, and the second argument of `on_started_leading`, raised when that
/// leadership ends.
#[pyclass(frozen, module = "tenure", name = "Stop")]
pub(crate) struct PyStop {
    inner: ForkSafe<Stop>,
}

#[pymethods]
impl PyStop {
    #[new]
    fn new() -> PyStop {
        PyStop {
            inner: ForkSafe::new(Stop::new()),
        }
    }

    /// Raises the flag, waking every waiter.
    fn set(&self, py: Python<'_>) -> PyResult<()> {
        let f = self.inner.get()?;
        blocking(py, || {
            f.stop();
            Ok(())
        })
    }

    /// Whether the flag is raised.
    fn is_set(&self, py: Python<'_>) -> PyResult<bool> {
        let f = self.inner.get()?;
        blocking(py, || Ok(f.is_stopped()))
    }

    /// Waits until the flag is raised, at most `timeout` seconds (`None`: no limit); returns
    /// whether it is raised. The GIL is released; Ctrl-C interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn wait(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<bool> {
        let until = deadline(self::timeout(timeout)?);
        let f = self.inner.get()?;
        let r = sliced(py, until, |step| Ok(f.wait_timeout(step).then_some(())))?;
        Ok(r.is_some())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        // `None`: inherited through fork(), unusable here.
        Repr::new(py, "Stop")
            .field("is_set", self.is_set(py).ok())
            .finish()
    }
}

thread_local! {
    /// True while this thread runs a Python elector callback.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Calls a Python callback from the elector's callback thread: takes the GIL (skipped while the
/// interpreter shuts down) and reports an exception through `sys.unraisablehook` instead of
/// letting it end the elector.
fn invoke(
    cb: &Py<PyAny>,
    call: impl for<'py> FnOnce(Python<'py>, &Bound<'py, PyAny>) -> PyResult<()>,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        attach(|py| {
            IN_CALLBACK.with(|c| c.set(true));
            let cb = cb.bind(py);
            if let Err(e) = call(py, cb) {
                e.write_unraisable(py, Some(cb));
            }
            IN_CALLBACK.with(|c| c.set(false));
        })
    }));
}

fn callable_arg(obj: Option<Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Py<PyAny>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) if o.is_callable() => Ok(Some(o.unbind())),
        Some(_) => Err(PyTypeError::new_err(format!(
            "{what} must be callable or None"
        ))),
    }
}

/// A client-go style leader elector (SPEC S5).
#[pyclass(frozen, module = "tenure", name = "LeaderElector")]
pub(crate) struct PyLeaderElector {
    _db: Py<PyTenure>,
    name: String,
    identity: String,
    inner: ForkSafe<Arc<LeaderElector>>,
    /// The stop flag of the run (replaced by the one given to `run(stop)`).
    stop: Mutex<Py<PyStop>>,
    /// `run()` or `start()` was called.
    used: AtomicBool,
    /// The outcome of a run started by `start()`, until `stop()` collects it.
    background: ForkSafe<Mutex<Option<ElectorRun>>>,
}

impl Drop for PyLeaderElector {
    fn drop(&mut self) {
        // A background run ends by itself once stopped (its callbacks take the GIL, so it is
        // not waited for here).
        if self.inner.is_ours() {
            if let Ok(s) = lock(&self.stop).get().inner.get() {
                s.stop();
            }
        }
        if let Some(e) = self.inner.take_for_drop() {
            drop_detached(e);
        }
        let _ = self.background.take_for_drop();
    }
}

impl PyLeaderElector {
    fn current_stop(&self, py: Python<'_>) -> PyResult<Stop> {
        Ok(lock(&self.stop).clone_ref(py).get().inner.get()?.clone())
    }

    fn mark_used(&self) -> PyResult<()> {
        if self.used.swap(true, Ordering::AcqRel) {
            return Err(invalid("LeaderElector.run/start may be called once"));
        }
        Ok(())
    }
}

#[pymethods]
impl PyLeaderElector {
    /// Validates the configuration (`tenure.InvalidArgument` unless `lease_duration >
    /// renew_deadline > retry_period × 1.2`, `renew_deadline + retry_period < lease_duration`,
    /// all positive, `name` and `identity` non-empty). Times are float seconds. The callbacks
    /// run one at a time on the elector's own thread (holding the GIL while they run); an
    /// exception they raise goes to `sys.unraisablehook`.
    #[new]
    #[pyo3(signature = (
        db, name, identity, lease_duration, renew_deadline, retry_period,
        on_started_leading=None, on_stopped_leading=None, on_new_leader=None,
        release_on_cancel=true
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        db: &Bound<'_, PyTenure>,
        name: String,
        identity: String,
        #[pyo3(from_py_with = secs_arg)] lease_duration: f64,
        #[pyo3(from_py_with = secs_arg)] renew_deadline: f64,
        #[pyo3(from_py_with = secs_arg)] retry_period: f64,
        on_started_leading: Option<Bound<'_, PyAny>>,
        on_stopped_leading: Option<Bound<'_, PyAny>>,
        on_new_leader: Option<Bound<'_, PyAny>>,
        release_on_cancel: bool,
    ) -> PyResult<PyLeaderElector> {
        let py = db.py();
        let cfg = ElectorConfig {
            name: name.clone(),
            identity: identity.clone(),
            lease_duration: seconds(lease_duration, "lease_duration")?,
            renew_deadline: seconds(renew_deadline, "renew_deadline")?,
            retry_period: seconds(retry_period, "retry_period")?,
            release_on_cancel,
        };
        let started = callable_arg(on_started_leading, "on_started_leading")?;
        let stopped = callable_arg(on_stopped_leading, "on_stopped_leading")?;
        let new_leader = callable_arg(on_new_leader, "on_new_leader")?;
        let who_am_i = format!("elector {name:?} ({identity})");
        let (me_started, me_stopped, me_new) = (who_am_i.clone(), who_am_i.clone(), who_am_i);
        let callbacks = ElectorCallbacks {
            on_started_leading: Box::new(move |token, stop| {
                log(Level::Info, || {
                    format!("{me_started}: started leading (fencing token {token})")
                });
                if let Some(cb) = &started {
                    invoke(cb, |py, cb| {
                        let stop = Py::new(
                            py,
                            PyStop {
                                inner: ForkSafe::new(stop.clone()),
                            },
                        )?;
                        cb.call1((token, stop)).map(drop)
                    });
                }
            }),
            on_stopped_leading: Box::new(move || {
                log(Level::Info, || format!("{me_stopped}: stopped leading"));
                if let Some(cb) = &stopped {
                    invoke(cb, |_, cb| cb.call0().map(drop));
                }
            }),
            on_new_leader: Box::new(move |who| {
                log(Level::Info, || format!("{me_new}: new leader {who:?}"));
                if let Some(cb) = &new_leader {
                    invoke(cb, |_, cb| cb.call1((who,)).map(drop));
                }
            }),
        };
        let e = db.get().engine()?;
        let elector = blocking(py, || LeaderElector::new(e, cfg, callbacks))?;
        Ok(PyLeaderElector {
            _db: db.clone().unbind(),
            name,
            identity,
            inner: ForkSafe::new(Arc::new(elector)),
            stop: Mutex::new(Py::new(py, PyStop::new())?),
            used: AtomicBool::new(false),
            background: ForkSafe::new(Mutex::new(None)),
        })
    }

    /// The record key.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// This candidate's identity.
    #[getter]
    fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether this candidate leads now.
    #[getter]
    fn is_leader(&self, py: Python<'_>) -> PyResult<bool> {
        let e = self.inner.get()?;
        blocking(py, || Ok(e.is_leader()))
    }

    /// The identity of the last observed leader, or `None` before any.
    #[getter]
    fn leader(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let e = self.inner.get()?;
        blocking(py, || Ok(e.leader()))
    }

    /// Campaigns, leads and renews in the calling thread until `stop` (a `tenure.Stop`; default:
    /// the one `stop()` raises) is raised, then returns once every callback has run. The GIL is
    /// released; Ctrl-C stops the elector (releasing leadership if `release_on_cancel`) and
    /// raises `KeyboardInterrupt`. May be called once (with `start()`, once in all). Raises the
    /// error that ended the run (e.g. `tenure.Closed` when the engine closes).
    #[pyo3(signature = (stop=None))]
    fn run(&self, py: Python<'_>, stop: Option<Py<PyStop>>) -> PyResult<()> {
        let e = self.inner.get()?.clone();
        self.mark_used()?;
        if let Some(s) = stop {
            s.get().inner.get()?;
            *lock(&self.stop) = s;
        }
        let flag = self.current_stop(py)?;
        let cancel = flag.clone();
        interruptible(
            py,
            on_thread(move || e.run(&flag)),
            move || cancel.stop(),
            drop,
        )
    }

    /// Runs the elector on a background thread; `stop()` ends it. May be called once.
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        let e = self.inner.get()?.clone();
        let background = self.background.get()?;
        self.mark_used()?;
        let flag = self.current_stop(py)?;
        let run = blocking(py, || e.spawn(Some(&flag)))?;
        *lock(background) = Some(run);
        Ok(())
    }

    /// Stops the elector (with `release_on_cancel`, releasing leadership once
    /// `on_started_leading` has returned, so leaders never overlap). After `start()`,
    /// also waits (GIL released, Ctrl-C interrupts) until the run and its callbacks are over and
    /// raises the error that ended it, if any — except when called from inside an elector
    /// callback, where it only signals (waiting there would wait for itself). Raises e.g.
    /// `tenure.Closed` if the engine closed under the run.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let flag = self.current_stop(py)?;
        blocking(py, || {
            flag.stop();
            Ok(())
        })?;
        if IN_CALLBACK.with(|c| c.get()) {
            return Ok(());
        }
        let background = self.background.get()?;
        let Some(run) = lock(background).take() else {
            return Ok(());
        };
        match sliced(py, None, |step| Ok(run.join(step))) {
            Ok(Some(r)) => r.map_err(|e| to_py(py, e)),
            Ok(None) => Ok(()),
            Err(e) => {
                // Interrupted: the run still ends by itself; keep it for a later stop().
                *lock(background) = Some(run);
                Err(e)
            }
        }
    }

    /// `start()`; exit runs `stop()`.
    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        slf.get().start(py)?;
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if self.inner.is_ours() {
            self.stop(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "LeaderElector")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("is_leader", self.is_leader(py).unwrap_or(false))
            .finish()
    }
}
