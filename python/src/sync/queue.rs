//! `tenure.Queue` and `tenure.PriorityQueue` (SPEC S10), made by `Tenure.queue(name)` and
//! `Tenure.priority_queue(name)`.
//!
//! A dequeue holds no place while it waits (a consumer owns nothing until its claim, one
//! delete, succeeds), so the blocking form is the binding's sliced wait: each slice is a core
//! dequeue of at most `runtime::SLICE` with the GIL released, signals are checked in between,
//! and an interrupted dequeue has taken nothing. `tenure.aio` runs `DequeueWait` in the shared
//! pool instead (`aio.rs`).

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tenure::sync::{PriorityQueue, Queue};
use tenure::{Error, KeyValue, Tenure, Wait};

use crate::convert::{bytes_arg, opt_secs_arg, timeout};
use crate::errors::{blocking, err};
use crate::repr::Repr;
use crate::runtime::{deadline, sliced, ForkSafe};

/// The queue a Python object drives.
#[derive(Clone)]
pub(crate) enum Kind {
    Fifo(Queue),
    Priority(PriorityQueue),
}

impl Kind {
    pub(crate) fn dequeue_wait(&self, wait: Wait) -> tenure::sync::DequeueWait {
        match self {
            Kind::Fifo(q) => q.dequeue_wait(wait),
            Kind::Priority(q) => q.dequeue_wait(wait),
        }
    }

    fn try_dequeue(&self) -> tenure::Result<Option<Vec<u8>>> {
        match self {
            Kind::Fifo(q) => q.try_dequeue(),
            Kind::Priority(q) => q.try_dequeue(),
        }
    }

    fn name(&self) -> &str {
        match self {
            Kind::Fifo(q) => q.name(),
            Kind::Priority(q) => q.name(),
        }
    }
}

/// Dequeues within `timeout` seconds (`None`: no limit) in signal-checked slices.
fn dequeue(py: Python<'_>, kind: &Kind, timeout: Option<f64>) -> PyResult<Py<PyBytes>> {
    let limit = self::timeout(timeout)?;
    let got: Option<KeyValue> = sliced(py, deadline(limit), |step| {
        match tenure::block_on(kind.dequeue_wait(Wait::timeout(step))) {
            Ok(kv) => Ok(Some(kv)),
            Err(Error::Timeout { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    })?;
    match got {
        Some(kv) => Ok(PyBytes::new(py, &kv.value).unbind()),
        None => Err(err(Error::Timeout {
            what: format!("an item of queue {:?}", kind.name()),
            after: limit.unwrap_or_default(),
        })),
    }
}

fn try_dequeue(py: Python<'_>, kind: &Kind) -> PyResult<Option<Py<PyBytes>>> {
    let v = blocking(py, || kind.try_dequeue())?;
    Ok(v.map(|v| PyBytes::new(py, &v).unbind()))
}

/// A FIFO queue (SPEC S10) in etcd's `recipe.Queue` layout (`name/<unix ns>`), made by
/// `Tenure.queue(name)`: many producers and consumers, each item to exactly one consumer.
///
/// >>> import tenure
/// >>> db = tenure.open()
/// >>> jobs = db.queue("jobs")
/// >>> jobs.enqueue("resize a"); jobs.enqueue(b"resize b")
/// >>> jobs.dequeue(timeout=5)
/// b'resize a'
/// >>> jobs.try_dequeue(), jobs.try_dequeue()
/// (b'resize b', None)
#[pyclass(frozen, module = "tenure", name = "Queue")]
pub(crate) struct PyQueue {
    pub(crate) name: String,
    pub(crate) inner: ForkSafe<Kind>,
}

/// A priority queue (SPEC S10) in etcd's `recipe.PriorityQueue` layout
/// (`name/<priority %05d>/<sequence %016d>`), made by `Tenure.priority_queue(name)`: lower
/// priorities leave first, FIFO within one; each item to exactly one consumer.
///
/// >>> import tenure
/// >>> db = tenure.open()
/// >>> q = db.priority_queue("work")
/// >>> q.enqueue("later", 5); q.enqueue("urgent", 0)
/// >>> q.dequeue(timeout=5), q.dequeue(timeout=5)
/// (b'urgent', b'later')
#[pyclass(frozen, module = "tenure", name = "PriorityQueue")]
pub(crate) struct PyPriorityQueue {
    pub(crate) name: String,
    pub(crate) inner: ForkSafe<Kind>,
}

pub(crate) fn new_queue(db: &Tenure, name: &str) -> PyQueue {
    PyQueue {
        name: name.to_owned(),
        inner: ForkSafe::new(Kind::Fifo(Queue::new(db, name))),
    }
}

pub(crate) fn new_priority_queue(db: &Tenure, name: &str) -> PyPriorityQueue {
    PyPriorityQueue {
        name: name.to_owned(),
        inner: ForkSafe::new(Kind::Priority(PriorityQueue::new(db, name))),
    }
}

#[pymethods]
impl PyQueue {
    /// The queue's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Appends `value` (`bytes` or `str`).
    fn enqueue(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let value = bytes_arg(value, "value")?;
        let Kind::Fifo(q) = self.inner.get()? else {
            unreachable!("a Queue is FIFO")
        };
        blocking(py, || q.enqueue(&value).map(drop))
    }

    /// Takes the oldest item, waiting at most `timeout` seconds (`None`: no limit) for one;
    /// `tenure.Timeout` when none came. Waiting (or being interrupted) takes nothing.
    #[pyo3(signature = (timeout=None))]
    fn dequeue(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<Py<PyBytes>> {
        dequeue(py, self.inner.get()?, timeout)
    }

    /// Takes the oldest item if there is one (else `None`); never waits.
    fn try_dequeue(&self, py: Python<'_>) -> PyResult<Option<Py<PyBytes>>> {
        try_dequeue(py, self.inner.get()?)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Queue").field("name", &self.name).finish()
    }
}

#[pymethods]
impl PyPriorityQueue {
    /// The queue's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Appends `value` (`bytes` or `str`) with `priority` (0–65535, lower leaves first).
    fn enqueue(&self, py: Python<'_>, value: &Bound<'_, PyAny>, priority: i64) -> PyResult<()> {
        let value = bytes_arg(value, "value")?;
        let priority = u16::try_from(priority).map_err(|_| {
            err(Error::InvalidArgument(format!(
                "priority {priority} is outside 0..=65535"
            )))
        })?;
        let Kind::Priority(q) = self.inner.get()? else {
            unreachable!("a PriorityQueue has priorities")
        };
        blocking(py, || q.enqueue(&value, priority).map(drop))
    }

    /// Takes the first item (lowest priority, then oldest), waiting at most `timeout` seconds
    /// (`None`: no limit); `tenure.Timeout` when none came. Waiting takes nothing.
    #[pyo3(signature = (timeout=None))]
    fn dequeue(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<Py<PyBytes>> {
        dequeue(py, self.inner.get()?, timeout)
    }

    /// Takes the first item if there is one (else `None`); never waits.
    fn try_dequeue(&self, py: Python<'_>) -> PyResult<Option<Py<PyBytes>>> {
        try_dequeue(py, self.inner.get()?)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "PriorityQueue")
            .field("name", &self.name)
            .finish()
    }
}

/// The priority encoded in a priority queue item's key (`name/<priority %05d>/...`).
pub(crate) fn priority_of(name: &str, key: &[u8]) -> Option<u16> {
    let digits = key.get(name.len() + 1..name.len() + 6)?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}
