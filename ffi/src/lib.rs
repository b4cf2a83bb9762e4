//! # tenure-ffi: the C ABI of tenure
//!
//! Builds `libtenure.so` and `libtenure.a`; the header `include/tenure.h` is generated from this
//! crate by cbindgen (`make header`) and checked by `tests/header.rs`.
//!
//! This crate contains no engine logic: every function converts its C arguments, calls
//! [`tenure_core::Tenure`] and converts the result back. The rules every exported function
//! follows (see the header's preamble for the C-side contract):
//!
//! - it runs behind a panic boundary ([`error::guard`]): a panic becomes `TENURE_ERR_PANIC`,
//!   never an unwind into C;
//! - pointer arguments are checked for NULL (`TENURE_ERR_NULL_POINTER`) before anything is done,
//!   and out-parameters are written only on success;
//! - the failure's message is kept per thread for `tenure_last_error_message`;
//! - result codes are the core's [`tenure_core::ErrorCode`] numbers.
//!
//! Safety contracts are written once, in the header preamble (pointers must be NULL or point to
//! live objects of the right type; buffers must hold the given length), rather than on each of
//! the ~130 functions.
#![allow(non_camel_case_types, clippy::missing_safety_doc)]
#![deny(unsafe_op_in_unsafe_fn)]
// The crate documents itself for its maintainers: links to private items are intended.
#![allow(rustdoc::private_intra_doc_links)]

pub mod engine;
pub mod error;
pub mod kv;
pub mod lease;
mod sigpipe;
pub mod sync;
/// cbindgen:ignore
#[cfg(feature = "test-hooks")]
mod test_hooks;
pub mod txn;
mod util;
pub mod watch;

pub use engine::*;
pub use error::*;
pub use kv::*;
pub use lease::*;
pub use sync::*;
pub use txn::*;
pub use watch::*;
// Last: its declarations are appended to the header.
pub mod backup;
pub use backup::*;
pub mod quota;
pub use quota::*;

/// Major version of the library this header belongs to (`tenure_version()` gives the library's).
pub const TENURE_VERSION_MAJOR: u32 = 0;
/// Minor version of the library this header belongs to.
pub const TENURE_VERSION_MINOR: u32 = 1;
/// Patch version of the library this header belongs to.
pub const TENURE_VERSION_PATCH: u32 = 0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_defines_match_the_crate_version() {
        let v = format!("{TENURE_VERSION_MAJOR}.{TENURE_VERSION_MINOR}.{TENURE_VERSION_PATCH}");
        assert_eq!(
            v,
            env!("CARGO_PKG_VERSION"),
            "update TENURE_VERSION_* and run `make header`"
        );
        assert_eq!(v, tenure_core::VERSION);
        let c = unsafe { std::ffi::CStr::from_ptr(tenure_version()) };
        assert_eq!(c.to_str().unwrap(), v);
    }
}
