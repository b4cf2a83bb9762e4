//! Transaction building blocks. Users build them with `tenure.txn` (txn.py):
//! `tenure.txn.version(k) == 0`, `tenure.txn.put(k, v)`, …

use pyo3::prelude::*;
use tenure::{CompareOp, CompareTarget};

use crate::convert::{bytes_arg, int_arg, limit_arg, opt_int_arg};
use crate::errors::invalid;
use crate::lease::{lease_arg, opt_lease_arg};
use crate::repr::Repr;

/// One condition of a transaction, e.g. `tenure.txn.version(b"k") == 0`.
#[pyclass(frozen, eq, module = "tenure.txn", name = "Compare")]
#[derive(PartialEq)]
pub(crate) struct PyCompare(pub(crate) tenure::Compare);

#[pymethods]
impl PyCompare {
    /// `Compare(key, target, op, value)`: `target` is one of "value", "version",
    /// "create_revision", "mod_revision", "lease"; `op` one of "==", "!=", "<", ">".
    #[new]
    fn new(
        key: &Bound<'_, PyAny>,
        target: &str,
        op: &str,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let key = bytes_arg(key, "key")?.into_owned();
        let op = match op {
            "==" => CompareOp::Equal,
            "!=" => CompareOp::NotEqual,
            "<" => CompareOp::Less,
            ">" => CompareOp::Greater,
            other => return Err(invalid(format!("unknown compare operator {other:?}"))),
        };
        let target = match target {
            "value" => CompareTarget::Value(bytes_arg(value, "value")?.into_owned()),
            "version" => CompareTarget::Version(int_arg(value)?),
            "create_revision" => CompareTarget::CreateRevision(int_arg(value)?),
            "mod_revision" => CompareTarget::ModRevision(int_arg(value)?),
            "lease" => CompareTarget::Lease(if value.is_none() {
                0
            } else {
                lease_arg(value)?
            }),
            other => return Err(invalid(format!("unknown compare target {other:?}"))),
        };
        Ok(PyCompare(tenure::Compare { key, op, target }))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let op = match self.0.op {
            CompareOp::Equal => "==",
            CompareOp::NotEqual => "!=",
            CompareOp::Less => "<",
            CompareOp::Greater => ">",
        };
        let r = Repr::new(py, "txn.Compare").arg(self.0.key.as_slice());
        match &self.0.target {
            CompareTarget::Value(v) => r.arg("value").arg(op).arg(v.as_slice()),
            CompareTarget::Version(v) => r.arg("version").arg(op).arg(*v),
            CompareTarget::CreateRevision(v) => r.arg("create_revision").arg(op).arg(*v),
            CompareTarget::ModRevision(v) => r.arg("mod_revision").arg(op).arg(*v),
            CompareTarget::Lease(v) => r.arg("lease").arg(op).arg(*v),
        }
        .finish()
    }
}

/// One operation of a transaction branch; built by `tenure.txn.put/get/delete/...`.
#[pyclass(frozen, eq, module = "tenure.txn", name = "Op")]
#[derive(PartialEq)]
pub(crate) struct PyOp(pub(crate) tenure::Op);

#[pymethods]
impl PyOp {
    /// Put `key = value`, attached to `lease` (None: detached). Raises `tenure.InvalidArgument`
    /// for a key or value that is not `str` or `bytes`.
    #[staticmethod]
    #[pyo3(signature = (key, value, lease=None))]
    fn put(
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        lease: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(PyOp(tenure::Op::put(
            bytes_arg(key, "key")?,
            bytes_arg(value, "value")?,
            opt_lease_arg(lease)?,
        )))
    }

    /// Read one key.
    #[staticmethod]
    fn get(key: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyOp(tenure::Op::get(bytes_arg(key, "key")?)))
    }

    /// Delete one key. Raises `tenure.InvalidArgument` for a key that is not `str` or `bytes`.
    #[staticmethod]
    fn delete(key: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyOp(tenure::Op::delete(bytes_arg(key, "key")?)))
    }

    /// Delete every key starting with `prefix`. Raises `tenure.InvalidArgument` for a prefix
    /// that is not `str` or `bytes`.
    #[staticmethod]
    fn delete_prefix(prefix: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyOp(tenure::Op::delete_prefix(bytes_arg(
            prefix, "prefix",
        )?)))
    }

    /// Read every key starting with `prefix`, at most `limit`.
    #[staticmethod]
    #[pyo3(signature = (prefix, limit=None))]
    fn range(
        prefix: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = opt_int_arg)] limit: Option<i64>,
    ) -> PyResult<Self> {
        Ok(PyOp(tenure::Op::range(
            bytes_arg(prefix, "prefix")?,
            limit_arg(limit)?,
        )))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match &self.0 {
            tenure::Op::Put { key, value, lease } => Repr::new(py, "txn.Op.put")
                .arg(key.as_slice())
                .arg(value.as_slice())
                .field("lease", lease.map(|l| l.get())),
            tenure::Op::Get { key } => Repr::new(py, "txn.Op.get").arg(key.as_slice()),
            tenure::Op::Delete { key } => Repr::new(py, "txn.Op.delete").arg(key.as_slice()),
            tenure::Op::DeletePrefix { prefix } => {
                Repr::new(py, "txn.Op.delete_prefix").arg(prefix.as_slice())
            }
            tenure::Op::Range { prefix, limit } => Repr::new(py, "txn.Op.range")
                .arg(prefix.as_slice())
                .field("limit", *limit),
        }
        .finish()
    }
}
