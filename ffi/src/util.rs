//! Checked conversions of C arguments: pointers, `(ptr, len)` buffers, millisecond times.

use std::ffi::{c_char, CStr};
use std::time::Duration;

use tenure_core::sync::{Stop, Wait};

use crate::error::{invalid, null, Res};

/// A `(ptr, len)` buffer as a slice. `len == 0` is the empty slice whatever `ptr` is; a NULL
/// `ptr` with `len > 0` is `TENURE_ERR_NULL_POINTER`; `len > PTRDIFF_MAX` (no real buffer is that
/// large) is `TENURE_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// A non-NULL `ptr` must point to `len` readable bytes that outlive the returned slice.
pub(crate) unsafe fn bytes<'a>(ptr: *const u8, len: usize, arg: &str) -> Res<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(null(arg));
    }
    if len > isize::MAX as usize {
        return Err(invalid(format!(
            "`{arg}` length {len} is larger than PTRDIFF_MAX"
        )));
    }
    // SAFETY: non-NULL, length bounded; the caller promises `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A shared reference from a pointer argument, or `TENURE_ERR_NULL_POINTER`.
///
/// # Safety
/// A non-NULL `ptr` must point to a live `T` for `'a`.
pub(crate) unsafe fn arg<'a, T>(ptr: *const T, name: &str) -> Res<&'a T> {
    // SAFETY: the caller promises a live object.
    unsafe { ptr.as_ref() }.ok_or_else(|| null(name))
}

/// An exclusive reference from a pointer argument, or `TENURE_ERR_NULL_POINTER`.
///
/// # Safety
/// A non-NULL `ptr` must point to a live `T`, not used elsewhere for `'a`.
pub(crate) unsafe fn arg_mut<'a, T>(ptr: *mut T, name: &str) -> Res<&'a mut T> {
    // SAFETY: the caller promises a live object used by this call only.
    unsafe { ptr.as_mut() }.ok_or_else(|| null(name))
}

/// An out-parameter: checked for NULL before the call does anything, written only on success.
pub(crate) struct Out<T>(*mut T);

impl<T> Out<T> {
    /// # Safety
    /// A non-NULL `ptr` must be valid for writing a `T`.
    pub(crate) unsafe fn new(ptr: *mut T, name: &str) -> Res<Out<T>> {
        if ptr.is_null() {
            Err(null(name))
        } else {
            Ok(Out(ptr))
        }
    }

    /// Writes the result (without reading or dropping the old contents).
    pub(crate) fn set(self, value: T) {
        // SAFETY: checked non-NULL in `new`; the caller promised it is writable.
        unsafe { self.0.write(value) }
    }
}

/// A non-negative millisecond count as a `Duration`.
pub(crate) fn ms(value: i64, name: &str) -> Res<Duration> {
    u64::try_from(value)
        .map(Duration::from_millis)
        .map_err(|_| invalid(format!("`{name}` must not be negative, got {value} ms")))
}

/// A blocking call's `timeout_ms`: -1 waits without limit (`None`), 0 only checks, a positive
/// value waits that long (saturating: a wait too long for the clock has no deadline). Any other
/// negative value is `TENURE_ERR_INVALID_ARGUMENT`. The one conversion every blocking call uses.
pub(crate) fn timeout(value: i64) -> Res<Option<Duration>> {
    match value {
        -1 => Ok(None),
        v if v < 0 => Err(invalid(format!(
            "`timeout_ms` must be -1 (no limit) or >= 0, got {v}"
        ))),
        v => Ok(Some(Duration::from_millis(v.unsigned_abs()))),
    }
}

/// A [`Wait`] of `timeout_ms` (see [`timeout`]) that also ends when `cancel` is raised.
pub(crate) fn wait(timeout_ms: i64, cancel: &Stop) -> Res<Wait> {
    Ok(Wait::from(timeout(timeout_ms)?).with_stop(cancel))
}

/// A NUL-terminated UTF-8 string argument (a recipe's name or identity).
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string that outlives the returned `&str`.
pub(crate) unsafe fn text<'a>(ptr: *const c_char, name: &str) -> Res<&'a str> {
    if ptr.is_null() {
        return Err(null(name));
    }
    // SAFETY: non-NULL; the caller promises a NUL-terminated string.
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|e| invalid(format!("`{name}` is not valid UTF-8: {e}")))
}

/// A duration as whole milliseconds, saturating at `INT64_MAX`.
pub(crate) fn to_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Moves a value to the heap and hands the pointer to C (freed by the matching `_free`).
pub(crate) fn boxed<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Drops a value handed out by [`boxed`]; NULL is a no-op.
///
/// # Safety
/// `ptr` must be NULL or come from [`boxed`] and not have been freed.
pub(crate) unsafe fn free<T>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: it came from Box::into_raw and is freed once.
        drop(unsafe { Box::from_raw(ptr) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{TENURE_ERR_INVALID_ARGUMENT, TENURE_ERR_NULL_POINTER};

    #[test]
    fn bytes_accepts_null_with_zero_length_and_refuses_null_or_huge_lengths() {
        assert_eq!(unsafe { bytes(std::ptr::null(), 0, "value") }.unwrap(), b"");
        let e = unsafe { bytes(std::ptr::null(), 3, "key") }.unwrap_err();
        assert_eq!(e.code, TENURE_ERR_NULL_POINTER);
        assert!(e.message.contains("`key`"));
        let buf = [1u8, 2, 3];
        let e = unsafe { bytes(buf.as_ptr(), usize::MAX, "key") }.unwrap_err();
        assert_eq!(e.code, TENURE_ERR_INVALID_ARGUMENT);
        assert_eq!(unsafe { bytes(buf.as_ptr(), 2, "key") }.unwrap(), &[1, 2]);
    }

    #[test]
    fn ms_refuses_negative_values_and_to_ms_saturates() {
        assert_eq!(ms(1500, "ttl_ms").unwrap(), Duration::from_millis(1500));
        assert_eq!(
            ms(-1, "ttl_ms").unwrap_err().code,
            TENURE_ERR_INVALID_ARGUMENT
        );
        assert_eq!(to_ms(Duration::MAX), i64::MAX);
        assert_eq!(to_ms(Duration::from_micros(2999)), 2);
    }

    #[test]
    fn timeout_takes_minus_one_as_forever_and_refuses_other_negatives() {
        assert_eq!(timeout(-1).unwrap(), None);
        assert_eq!(timeout(0).unwrap(), Some(Duration::ZERO));
        assert_eq!(
            timeout(i64::MAX).unwrap(),
            Some(Duration::from_millis(i64::MAX as u64))
        );
        for bad in [-2, i64::MIN] {
            assert_eq!(timeout(bad).unwrap_err().code, TENURE_ERR_INVALID_ARGUMENT);
        }
        // The largest timeout neither overflows nor panics (the core saturates it).
        assert!(!wait(i64::MAX, &Stop::new()).unwrap().is_over());
    }
}
