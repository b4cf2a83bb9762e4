//! Result objects: immutable snapshots, compared by value.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use tenure::{EventKind, OpResponse};

use crate::convert::secs_f64;
use crate::repr::Repr;

fn bytes_list<'py>(py: Python<'py>, keys: &[Vec<u8>]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, keys.iter().map(|k| PyBytes::new(py, k)))
}

/// Keys as a list of `bytes` (for a `repr()`).
fn key_slices(keys: &[Vec<u8>]) -> Vec<&[u8]> {
    keys.iter().map(Vec::as_slice).collect()
}

/// A lease's TTL, remaining time and keys (`time_to_live`, `leases`).
#[pyclass(frozen, eq, module = "tenure", name = "LeaseInfo")]
#[derive(PartialEq)]
pub(crate) struct PyLeaseInfo(pub(crate) tenure::LeaseInfo);

#[pymethods]
impl PyLeaseInfo {
    /// The lease ID.
    #[getter]
    fn id(&self) -> i64 {
        self.0.id.get()
    }

    /// The granted TTL in seconds (after `min_ttl`).
    #[getter]
    fn ttl(&self) -> f64 {
        secs_f64(self.0.ttl)
    }

    /// Seconds until the deadline; `None` on a standby, where leases have no deadline.
    #[getter]
    fn remaining(&self) -> Option<f64> {
        self.0.remaining.map(secs_f64)
    }

    /// The attached keys, in key order.
    #[getter]
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        bytes_list(py, &self.0.keys)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "LeaseInfo")
            .field("id", self.0.id.get())
            .field("ttl", secs_f64(self.0.ttl))
            .field("remaining", self.0.remaining.map(secs_f64))
            .field("keys", key_slices(&self.0.keys))
            .finish()
    }
}

/// What `Tenure.snapshot` wrote: the revision the copy holds, its size in bytes, its keys and
/// leases.
#[pyclass(frozen, eq, module = "tenure", name = "SnapshotInfo")]
#[derive(PartialEq)]
pub(crate) struct PySnapshotInfo(pub(crate) tenure::SnapshotInfo);

#[pymethods]
impl PySnapshotInfo {
    /// The store revision the copy holds: every write up to it, none after.
    #[getter]
    fn revision(&self) -> i64 {
        self.0.revision
    }

    /// The copy's size in bytes (named as in Rust and C).
    #[getter]
    fn bytes(&self) -> u64 {
        self.0.bytes
    }

    /// Keys in the copy.
    #[getter]
    fn keys(&self) -> u64 {
        self.0.keys
    }

    /// Leases in the copy.
    #[getter]
    fn leases(&self) -> u64 {
        self.0.leases
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "SnapshotInfo")
            .field("revision", self.0.revision)
            .field("bytes", self.0.bytes)
            .field("keys", self.0.keys)
            .field("leases", self.0.leases)
            .finish()
    }
}

/// A lease whose deadline passed, as delivered by `expired()`.
#[pyclass(frozen, eq, module = "tenure", name = "ExpiredLease")]
#[derive(PartialEq)]
pub(crate) struct PyExpiredLease(pub(crate) tenure::ExpiredLease);

#[pymethods]
impl PyExpiredLease {
    /// The lease ID.
    #[getter]
    fn id(&self) -> i64 {
        self.0.id.get()
    }

    /// Its granted TTL in seconds.
    #[getter]
    fn ttl(&self) -> f64 {
        secs_f64(self.0.ttl)
    }

    /// With auto revoke, the keys deleted with it; with manual revoke, the keys a revoke
    /// would delete.
    #[getter]
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        bytes_list(py, &self.0.keys)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "ExpiredLease")
            .field("id", self.0.id.get())
            .field("ttl", secs_f64(self.0.ttl))
            .field("keys", key_slices(&self.0.keys))
            .finish()
    }
}

/// A key with its value and revisions.
#[pyclass(frozen, eq, module = "tenure", name = "KeyValue")]
#[derive(PartialEq)]
pub(crate) struct PyKeyValue(pub(crate) tenure::KeyValue);

#[pymethods]
impl PyKeyValue {
    /// The key.
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.key)
    }

    /// The value.
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.value)
    }

    /// The revision that created the key.
    #[getter]
    fn create_revision(&self) -> i64 {
        self.0.create_revision
    }

    /// The revision of the last write to the key.
    #[getter]
    fn mod_revision(&self) -> i64 {
        self.0.mod_revision
    }

    /// Number of puts since creation (1 after the first).
    #[getter]
    fn version(&self) -> i64 {
        self.0.version
    }

    /// The lease ID the key is attached to, or `None`.
    #[getter]
    fn lease(&self) -> Option<i64> {
        self.0.lease.map(|l| l.get())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "KeyValue")
            .field("key", self.0.key.as_slice())
            .field("value", self.0.value.as_slice())
            .field("create_revision", self.0.create_revision)
            .field("mod_revision", self.0.mod_revision)
            .field("version", self.0.version)
            .field("lease", self.lease())
            .finish()
    }
}

/// One change seen by a watcher.
#[pyclass(frozen, eq, module = "tenure", name = "Event")]
#[derive(PartialEq)]
pub(crate) struct PyEvent(pub(crate) tenure::Event);

#[pymethods]
impl PyEvent {
    /// `"put"` or `"delete"`.
    #[getter]
    fn r#type(&self) -> &'static str {
        match self.0.kind {
            EventKind::Put => "put",
            EventKind::Delete => "delete",
        }
    }

    /// The key-value after the change (for a delete: the key, the deleting revision in
    /// `mod_revision`, an empty value).
    #[getter]
    fn kv(&self) -> PyKeyValue {
        PyKeyValue(self.0.kv.clone())
    }

    /// The key-value before the change, when the watch asked for it and the key existed.
    #[getter]
    fn prev_kv(&self) -> Option<PyKeyValue> {
        self.0.prev_kv.clone().map(PyKeyValue)
    }

    /// The revision of the write that made this event.
    #[getter]
    fn revision(&self) -> i64 {
        self.0.revision()
    }

    /// The key changed (`kv.key`).
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.kv.key)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Event")
            .field("type", self.r#type())
            .field("key", self.0.kv.key.as_slice())
            .field("revision", self.0.revision())
            .finish()
    }
}

/// What a transaction did: `succeeded`, the store `revision` after it, and one response per
/// operation of the branch that ran. True when it succeeded.
#[pyclass(frozen, module = "tenure", name = "TxnResponse")]
pub(crate) struct PyTxnResponse {
    succeeded: bool,
    revision: i64,
    responses: Py<PyList>,
}

impl PyTxnResponse {
    pub(crate) fn new(py: Python<'_>, r: tenure::TxnResponse) -> PyResult<PyTxnResponse> {
        let list = PyList::empty(py);
        for resp in r.responses {
            let item: Bound<'_, PyAny> = match resp {
                OpResponse::Put { revision } => revision.into_pyobject(py)?.into_any(),
                OpResponse::Get(kv) => match kv {
                    Some(kv) => Bound::new(py, PyKeyValue(kv))?.into_any(),
                    None => py.None().into_bound(py),
                },
                OpResponse::Delete(existed) => existed.into_pyobject(py)?.to_owned().into_any(),
                OpResponse::DeletePrefix(n) => n.into_pyobject(py)?.into_any(),
                OpResponse::Range(kvs) => {
                    let l = PyList::empty(py);
                    for kv in kvs {
                        l.append(PyKeyValue(kv))?;
                    }
                    l.into_any()
                }
            };
            list.append(item)?;
        }
        Ok(PyTxnResponse {
            succeeded: r.succeeded,
            revision: r.revision,
            responses: list.unbind(),
        })
    }
}

#[pymethods]
impl PyTxnResponse {
    /// Whether every compare held (the success branch ran).
    #[getter]
    fn succeeded(&self) -> bool {
        self.succeeded
    }

    /// The store revision after the transaction.
    #[getter]
    fn revision(&self) -> i64 {
        self.revision
    }

    /// One result per operation of the branch that ran: put → revision (int), get →
    /// KeyValue or None, delete → bool, delete_prefix → int, range → `list[KeyValue]`.
    #[getter]
    fn responses<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        // A copy: the response itself stays immutable.
        PyList::new(py, self.responses.bind(py).iter())
    }

    fn __bool__(&self) -> bool {
        self.succeeded
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "TxnResponse")
            .field("succeeded", self.succeeded)
            .field("revision", self.revision)
            .field("responses", self.responses.bind(py))
            .finish()
    }
}

/// The database file's size (`Tenure.storage_size()`, `Tenure.defragment()`).
#[pyclass(frozen, eq, module = "tenure", name = "StorageSize")]
#[derive(PartialEq)]
pub(crate) struct PyStorageSize(pub(crate) tenure::StorageSize);

#[pymethods]
impl PyStorageSize {
    /// The file's length in bytes: what the space quota judges.
    #[getter]
    fn file_bytes(&self) -> u64 {
        self.0.file_bytes
    }

    /// Bytes in pages the database uses; the rest is free space `defragment()` gives back.
    #[getter]
    fn in_use_bytes(&self) -> u64 {
        self.0.in_use_bytes
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "StorageSize")
            .field("file_bytes", self.0.file_bytes)
            .field("in_use_bytes", self.0.in_use_bytes)
            .finish()
    }
}
