//! Barriers (SPEC S11): a barrier held by a key, and a double barrier whose participants enter
//! and leave together (etcd's `contrib/recipes` layouts).

use std::ffi::c_char;

use tenure_core::sync::{Barrier, DoubleBarrier, Stop};

use super::session::tenure_session;
use crate::engine::{engine, tenure};
use crate::error::{guard, invalid, shield, tenure_result};
use crate::util::{arg, boxed, free, text, wait, Out};

/// A barrier (SPEC S11), from `tenure_barrier_new`. Thread-safe; another thread may cancel its
/// waits. It keeps its engine open until freed.
#[derive(Debug)]
pub struct tenure_barrier {
    b: Barrier,
    /// Raised by `tenure_barrier_cancel`: ends this handle's waits.
    cancel: Stop,
}

/// The barrier `name` (NUL-terminated UTF-8; its key) on `db`. Free `*out` with
/// `tenure_barrier_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (name not UTF-8).
#[no_mangle]
pub unsafe extern "C" fn tenure_barrier_new(
    db: *const tenure,
    name: *const c_char,
    out: *mut *mut tenure_barrier,
) -> tenure_result {
    guard("tenure_barrier_new", || {
        // SAFETY: the caller promises a live handle, a string and a writable pointer.
        let (db, name, out) = unsafe { (engine(db)?, text(name, "name")?, Out::new(out, "out")?) };
        out.set(boxed(tenure_barrier {
            b: Barrier::new(db, name),
            cancel: Stop::new(),
        }));
        Ok(())
    })
}

/// Holds the barrier (puts its key if absent). `*out_put` (may be NULL) is true if this call
/// put it, false if it was already held.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_barrier_hold(
    b: *const tenure_barrier,
    out_put: *mut bool,
) -> tenure_result {
    guard("tenure_barrier_hold", || {
        // SAFETY: the caller promises a live barrier.
        let b = unsafe { arg(b, "b") }?;
        let put = b.b.hold()?;
        if !out_put.is_null() {
            // SAFETY: non-NULL; the caller promises a writable bool.
            unsafe { *out_put = put };
        }
        Ok(())
    })
}

/// Releases the barrier (deletes its key; a free barrier stays free).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_barrier_release(b: *const tenure_barrier) -> tenure_result {
    guard("tenure_barrier_release", || {
        // SAFETY: the caller promises a live barrier.
        Ok(unsafe { arg(b, "b") }?.b.release()?)
    })
}

/// Waits until the barrier is released (at once if it is free), up to `timeout_ms` (-1: no
/// limit).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`timeout_ms` below -1),
/// `TENURE_ERR_TIMEOUT` (also when cancelled), `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_barrier_wait(
    b: *const tenure_barrier,
    timeout_ms: i64,
) -> tenure_result {
    guard("tenure_barrier_wait", || {
        // SAFETY: the caller promises a live barrier.
        let b = unsafe { arg(b, "b") }?;
        Ok(b.b.wait(wait(timeout_ms, &b.cancel)?)?)
    })
}

/// Ends every wait through `b`, now and later, with `TENURE_ERR_TIMEOUT`; any thread.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_barrier_cancel(b: *const tenure_barrier) -> tenure_result {
    guard("tenure_barrier_cancel", || {
        // SAFETY: the caller promises a live barrier.
        unsafe { arg(b, "b") }?.cancel.stop();
        Ok(())
    })
}

/// Frees a barrier handle (the barrier's key stays). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_barrier_free(b: *mut tenure_barrier) {
    // SAFETY: from tenure_barrier_new and freed once.
    shield("tenure_barrier_free", (), || unsafe { free(b) })
}

/// One participant of a double barrier (SPEC S11), from `tenure_double_barrier_new`. Its waits
/// end with `tenure_session_cancel` of its session. Thread-safe.
#[derive(Debug)]
pub struct tenure_double_barrier {
    b: DoubleBarrier,
    /// The session's cancel token.
    cancel: Stop,
}

/// A participant, through session `s`, of the double barrier `name` (NUL-terminated UTF-8)
/// for `count` participants. Free `*out` with `tenure_double_barrier_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (name not UTF-8, `count`
/// 0 or negative).
#[no_mangle]
pub unsafe extern "C" fn tenure_double_barrier_new(
    s: *const tenure_session,
    name: *const c_char,
    count: i64,
    out: *mut *mut tenure_double_barrier,
) -> tenure_result {
    guard("tenure_double_barrier_new", || {
        // SAFETY: the caller promises a live session, a string and a writable pointer.
        let (s, name, out) = unsafe { (arg(s, "s")?, text(name, "name")?, Out::new(out, "out")?) };
        let count = usize::try_from(count)
            .ok()
            .filter(|&c| c > 0)
            .ok_or_else(|| invalid(format!("`count` {count} must be at least 1")))?;
        out.set(boxed(tenure_double_barrier {
            b: DoubleBarrier::new(&s.s, name, count),
            cancel: s.cancel.clone(),
        }));
        Ok(())
    })
}

/// Enters and waits until `count` participants have, up to `timeout_ms` (-1: no limit). On
/// failure this participant's entry is withdrawn.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (already entered; the
/// barrier already has `count` participants; `timeout_ms` below -1), `TENURE_ERR_TIMEOUT`
/// (also when the session is cancelled), `TENURE_ERR_SESSION_EXPIRED`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_double_barrier_enter(
    b: *const tenure_double_barrier,
    timeout_ms: i64,
) -> tenure_result {
    guard("tenure_double_barrier_enter", || {
        // SAFETY: the caller promises a live double barrier.
        let b = unsafe { arg(b, "b") }?;
        Ok(b.b.enter(wait(timeout_ms, &b.cancel)?)?)
    })
}

/// Leaves and waits until every participant has left, up to `timeout_ms` (-1: no limit).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (not entered; `timeout_ms`
/// below -1), `TENURE_ERR_TIMEOUT` (also when the session is cancelled; leave may be called
/// again), `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_double_barrier_leave(
    b: *const tenure_double_barrier,
    timeout_ms: i64,
) -> tenure_result {
    guard("tenure_double_barrier_leave", || {
        // SAFETY: the caller promises a live double barrier.
        let b = unsafe { arg(b, "b") }?;
        Ok(b.b.leave(wait(timeout_ms, &b.cancel)?)?)
    })
}

/// Frees a participant (an entry it still has goes with its session's lease). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_double_barrier_free(b: *mut tenure_double_barrier) {
    // SAFETY: from tenure_double_barrier_new and freed once.
    shield("tenure_double_barrier_free", (), || unsafe { free(b) })
}
