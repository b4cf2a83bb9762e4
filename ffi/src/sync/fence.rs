//! Fence gates (SPEC S3): admit fencing tokens in non-decreasing order.

use tenure_core::sync::FenceGate;

use crate::error::{guard, shield, tenure_result};
use crate::util::{arg, boxed, free, Out};

/// Admits fencing tokens in non-decreasing order (SPEC S3): put one in front of the resource a
/// lock or leadership guards. Thread-safe.
#[derive(Debug)]
pub struct tenure_fence_gate {
    g: FenceGate,
}

/// A new gate that has seen no token. Free it with `tenure_fence_gate_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_fence_gate_new(out: *mut *mut tenure_fence_gate) -> tenure_result {
    guard("tenure_fence_gate_new", || {
        // SAFETY: the caller promises a writable pointer.
        unsafe { Out::new(out, "out") }?.set(boxed(tenure_fence_gate {
            g: FenceGate::new(),
        }));
        Ok(())
    })
}

/// Admits `token` if it is at least the highest admitted so far.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_STALE_TOKEN` (lower than the highest; the
/// message names both).
#[no_mangle]
pub unsafe extern "C" fn tenure_fence_gate_admit(
    g: *const tenure_fence_gate,
    token: i64,
) -> tenure_result {
    guard("tenure_fence_gate_admit", || {
        // SAFETY: the caller promises a live gate.
        Ok(unsafe { arg(g, "g") }?.g.admit(token)?)
    })
}

/// The highest token admitted (0 before any, or if `g` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_fence_gate_highest(g: *const tenure_fence_gate) -> i64 {
    // SAFETY: the caller promises NULL or a live gate.
    shield("tenure_fence_gate_highest", 0, || {
        unsafe { g.as_ref() }.map_or(0, |g| g.g.highest())
    })
}

/// Frees a gate. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_fence_gate_free(g: *mut tenure_fence_gate) {
    // SAFETY: from tenure_fence_gate_new and freed once, as the caller promises.
    shield("tenure_fence_gate_free", (), || unsafe { free(g) })
}
