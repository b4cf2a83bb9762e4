//! Test hooks (feature `test-hooks`, left out of the header and of installed builds): functions
//! that panic inside the boundary, so the C tests can check that a panic becomes
//! `TENURE_ERR_PANIC` (or an accessor's fallback) and never unwinds into C.

// Reached by their C symbols (`#[no_mangle]`), not by a Rust path.
#![allow(unreachable_pub)]

use crate::error::{guard, shield, tenure_result};

/// Panics inside a fallible function's boundary: returns `TENURE_ERR_PANIC`.
#[no_mangle]
pub extern "C" fn tenure_test_panic() -> tenure_result {
    guard("tenure_test_panic", || {
        panic!("deliberate panic from the test hook")
    })
}

/// Panics inside an accessor's boundary: returns the fallback, -1.
#[no_mangle]
pub extern "C" fn tenure_test_panic_value() -> i64 {
    shield("tenure_test_panic_value", -1, || {
        panic!("deliberate panic from the accessor test hook")
    })
}
