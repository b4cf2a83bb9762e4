//! Argument conversions shared by every class: keys and values, seconds, lease IDs, plus the
//! fork guard that keeps inherited engine objects untouched in a child process.

use std::borrow::Cow;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyInt, PyString};
use tenure::Error;

use crate::errors::{closed, err, invalid};
use crate::lease::PyLease;

/// Longest single wait with the GIL released before signals are checked again.
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// The largest TTL etcd (and tenure) accepts, in seconds.
const MAX_TTL_SECS: f64 = 9_000_000_000.0;

/// Something owned by this process's engine. In a child created by `fork()` the value is never
/// touched again, not even dropped: the engine's threads do not exist there and its locks may
/// be held for ever, so the object is leaked instead (it is the parent's, not the child's).
pub(crate) struct ForkSafe<T> {
    value: Option<T>,
    pid: u32,
}

impl<T> ForkSafe<T> {
    pub(crate) fn new(value: T) -> ForkSafe<T> {
        ForkSafe {
            value: Some(value),
            pid: std::process::id(),
        }
    }

    /// Whether this process created the value (false in a forked child).
    pub(crate) fn is_ours(&self) -> bool {
        std::process::id() == self.pid
    }

    /// The value, or `tenure.Closed` in a forked child (or after `take_for_drop`).
    pub(crate) fn get(&self) -> PyResult<&T> {
        match &self.value {
            Some(v) if self.is_ours() => Ok(v),
            _ => Err(closed()),
        }
    }

    /// Takes the value out to drop it somewhere else (without the GIL); `None` in a forked
    /// child, where it stays leaked.
    pub(crate) fn take_for_drop(&mut self) -> Option<T> {
        if self.is_ours() {
            self.value.take()
        } else {
            None
        }
    }
}

impl<T> Drop for ForkSafe<T> {
    fn drop(&mut self) {
        if !self.is_ours() {
            if let Some(v) = self.value.take() {
                std::mem::forget(v);
            }
        }
    }
}

/// Locks a binding-side mutex. These are `std` mutexes (futex words inside the object, no
/// process-global state), so objects created in a forked child never meet the parent's locks.
/// A panic while one was held cannot leave its data half-updated (each critical section is a
/// single take or read), so poisoning is ignored.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A key, value or prefix: `str` (encoded as UTF-8), `bytes` or `bytearray`.
pub(crate) fn bytes_arg<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        Ok(Cow::Borrowed(b.as_bytes()))
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(Cow::Borrowed(s.to_str()?.as_bytes()))
    } else if let Ok(b) = obj.cast::<PyByteArray>() {
        Ok(Cow::Owned(b.to_vec()))
    } else {
        Err(PyTypeError::new_err(format!(
            "{what} must be str or bytes, not {}",
            type_name(obj)
        )))
    }
}

/// One key, or an iterable of keys (`attach`, `detach`).
pub(crate) fn keys_arg(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    if obj.is_instance_of::<PyBytes>()
        || obj.is_instance_of::<PyString>()
        || obj.is_instance_of::<PyByteArray>()
    {
        return Ok(vec![bytes_arg(obj, "key")?.into_owned()]);
    }
    let iter = obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "keys must be a key or an iterable of keys, not {}",
            type_name(obj)
        ))
    })?;
    iter.map(|k| k.and_then(|k| Ok(bytes_arg(&k, "key")?.into_owned())))
        .collect()
}

/// A number of seconds ≥ 0 (NaN and negatives → `InvalidArgument`).
pub(crate) fn seconds(v: f64, what: &str) -> PyResult<Duration> {
    if v.is_nan() || v < 0.0 {
        return Err(invalid(format!(
            "{what} must be a non-negative number of seconds, got {v}"
        )));
    }
    Duration::try_from_secs_f64(v).map_err(|_| invalid(format!("{what} is too large: {v} seconds")))
}

/// An integer argument (`from_py_with`): not an integer → `TypeError`; outside the 64-bit range
/// → `tenure.InvalidArgument` (a `ValueError`), never `OverflowError`.
pub(crate) fn int_arg(obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    obj.extract::<i64>().map_err(|e| {
        if e.is_instance_of::<PyOverflowError>(obj.py()) {
            invalid(format!("{obj} is out of range (64-bit signed)"))
        } else {
            e
        }
    })
}

/// An optional integer argument (`None` passes through).
pub(crate) fn opt_int_arg(obj: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
    if obj.is_none() {
        return Ok(None);
    }
    int_arg(obj).map(Some)
}

/// A number of seconds (`from_py_with`): an int too large for a float becomes ±infinity, which
/// [`seconds`] and [`ttl`] then refuse with their documented errors, never `OverflowError`.
pub(crate) fn secs_arg(obj: &Bound<'_, PyAny>) -> PyResult<f64> {
    obj.extract::<f64>().or_else(|e| {
        if e.is_instance_of::<PyOverflowError>(obj.py()) {
            Ok(if obj.lt(0)? {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        } else {
            Err(e)
        }
    })
}

/// An optional number of seconds (`None` passes through).
pub(crate) fn opt_secs_arg(obj: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    if obj.is_none() {
        return Ok(None);
    }
    secs_arg(obj).map(Some)
}

/// A TTL (SPEC L2): NaN or ≤ 0 → `InvalidArgument`; above etcd's maximum → `LeaseTtlTooLarge`.
pub(crate) fn ttl(v: f64) -> PyResult<Duration> {
    if v.is_nan() || v <= 0.0 {
        return Err(invalid(format!(
            "ttl must be a positive number of seconds, got {v}"
        )));
    }
    if v > MAX_TTL_SECS {
        let d = Duration::try_from_secs_f64(v).unwrap_or(Duration::MAX);
        return Err(err(Error::LeaseTtlTooLarge(d)));
    }
    seconds(v, "ttl")
}

/// An optional timeout (`None` = wait for ever).
pub(crate) fn timeout(v: Option<f64>) -> PyResult<Option<Duration>> {
    v.map(|v| seconds(v, "timeout")).transpose()
}

/// A duration in float seconds.
pub(crate) fn secs_f64(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A lease argument: a `tenure.Lease` or an `int` ID (`bool` is refused).
pub(crate) fn lease_arg(obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    if let Ok(lease) = obj.cast::<PyLease>() {
        return Ok(lease.get().id);
    }
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "a lease must be a tenure.Lease or an int ID, not {}",
            type_name(obj)
        )));
    }
    obj.extract::<i64>()
        .map_err(|_| invalid(format!("lease ID {obj} is out of range")))
}

/// An optional lease (`None` or 0 = no lease).
pub(crate) fn opt_lease_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<tenure::LeaseId>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => {
            let id = lease_arg(o)?;
            Ok((id != 0).then_some(tenure::LeaseId::new(id)))
        }
    }
}

/// A non-negative count (`limit`).
pub(crate) fn limit_arg(limit: Option<i64>) -> PyResult<Option<usize>> {
    match limit {
        None => Ok(None),
        Some(n) if n < 0 => Err(invalid(format!("limit must be ≥ 0, got {n}"))),
        Some(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
    }
}
