//! Argument conversions shared by every class: keys and values, seconds, lease IDs, plus the
//! fork guard that keeps inherited engine objects untouched in a child process.

use std::borrow::Cow;
use std::time::Duration;

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

use crate::errors::{invalid, with_message};

pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
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

/// An optional interval whose bounds (positive, at most a `tenure::limits` maximum) the core
/// checks: NaN or negative is refused here; a value beyond any `Duration` goes on as the longest
/// one, which the core refuses naming the argument and its bound.
pub(crate) fn opt_interval(v: Option<f64>, what: &str) -> PyResult<Option<Duration>> {
    v.map(|v| match seconds(v, what) {
        Err(_) if v > 0.0 => Ok(Duration::MAX),
        r => r,
    })
    .transpose()
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

/// A TTL (SPEC L2), checked by the core's bound: NaN or ≤ 0 → `InvalidArgument`; above etcd's
/// maximum → `LeaseTtlTooLarge`. Refusals name the TTL as the caller wrote it, in seconds.
pub(crate) fn ttl(v: f64) -> PyResult<Duration> {
    tenure::limits::check_ttl_secs(v)
        .map_err(|code| with_message(code, tenure::ttl_refused(format!("{v} s"))))
}

/// An optional timeout (`None` = wait for ever).
pub(crate) fn timeout(v: Option<f64>) -> PyResult<Option<Duration>> {
    v.map(|v| seconds(v, "timeout")).transpose()
}

/// A duration in float seconds.
pub(crate) fn secs_f64(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A non-negative count (`limit`).
pub(crate) fn limit_arg(limit: Option<i64>) -> PyResult<Option<usize>> {
    match limit {
        None => Ok(None),
        Some(n) if n < 0 => Err(invalid(format!("limit must be ≥ 0, got {n}"))),
        Some(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
    }
}

/// A read revision: `None` reads the present; a negative one is refused (0 is the current one,
/// as in etcd).
pub(crate) fn revision_arg(revision: Option<i64>) -> PyResult<Option<i64>> {
    match revision {
        Some(n) if n < 0 => Err(invalid(format!(
            "revision {n} is negative (0 or None: the current one)"
        ))),
        r => Ok(r),
    }
}
