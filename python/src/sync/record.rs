//! `tenure.RecordLock` (SPEC S6).

use pyo3::prelude::*;
use tenure::sync::RecordLock;
use tenure::Tenure;

use crate::convert::{bytes_arg, secs_arg, ttl};
use crate::errors::blocking;
use crate::handle::PyTenure;

/// `op` on the record `key` for `owner` (both `str` or `bytes`), with the GIL released.
fn on_record<T: Send>(
    db: &Bound<'_, PyTenure>,
    key: &Bound<'_, PyAny>,
    owner: &Bound<'_, PyAny>,
    op: impl FnOnce(&Tenure, &[u8], &[u8]) -> tenure::Result<T> + Send,
) -> PyResult<T> {
    let key = bytes_arg(key, "key")?;
    let owner = bytes_arg(owner, "owner")?;
    let e = db.get().engine()?;
    blocking(db.py(), || op(e, &key, &owner))
}

/// Owner-checked record locks (SPEC S6), Redis's `SET key owner NX PX ttl` embedded: a key
/// holding the owner's name, bound to a lease of `ttl` seconds. Static methods only.
#[pyclass(frozen, module = "tenure", name = "RecordLock")]
pub(crate) struct PyRecordLock;

#[pymethods]
impl PyRecordLock {
    /// Takes `key` for `owner` for `ttl` seconds if it is free; returns the fencing token (the
    /// key's create revision). `tenure.Locked` if anyone (including `owner`) holds it.
    #[staticmethod]
    fn try_acquire(
        db: &Bound<'_, PyTenure>,
        key: &Bound<'_, PyAny>,
        owner: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = secs_arg)] ttl: f64,
    ) -> PyResult<i64> {
        let ttl = self::ttl(ttl)?;
        on_record(db, key, owner, |e, k, o| {
            RecordLock::try_acquire(e, k, o, ttl)
        })
    }

    /// Extends the hold by a full TTL; `tenure.NotLeader` unless `owner` holds `key`.
    #[staticmethod]
    fn refresh(
        db: &Bound<'_, PyTenure>,
        key: &Bound<'_, PyAny>,
        owner: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        on_record(db, key, owner, |e, k, o| RecordLock::refresh(e, k, o))
    }

    /// Releases `key` (and revokes its lease) if `owner` holds it; `tenure.NotLeader` otherwise.
    #[staticmethod]
    fn release(
        db: &Bound<'_, PyTenure>,
        key: &Bound<'_, PyAny>,
        owner: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        on_record(db, key, owner, |e, k, o| RecordLock::release(e, k, o))
    }
}
