//! Result codes, the thread-local error message and the panic boundary every exported function
//! runs its body in.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tenure_core::{Error, ErrorCode};

/// What every fallible function returns: `TENURE_OK` (0) or one of the `TENURE_ERR_*` codes.
///
/// The numbers are the stable codes of the Rust core (`tenure::ErrorCode`); they are never
/// renumbered and new codes are only appended. A plain integer, so any value can be passed back
/// to `tenure_result_str` safely.
pub type tenure_result = i32;

/// Success.
pub const TENURE_OK: tenure_result = 0;
/// An argument is out of its domain: zero or negative TTL, lease ID <= 0, empty key, unknown
/// flag or enum value, a path that is not UTF-8, a length above `PTRDIFF_MAX`...
pub const TENURE_ERR_INVALID_ARGUMENT: tenure_result = 1;
/// A required pointer argument was NULL (or a NULL buffer with a non-zero length).
pub const TENURE_ERR_NULL_POINTER: tenure_result = 2;
/// No live lease has this ID.
pub const TENURE_ERR_LEASE_NOT_FOUND: tenure_result = 3;
/// A lease with this ID already exists.
pub const TENURE_ERR_LEASE_EXISTS: tenure_result = 4;
/// The lease's deadline has passed; it is held for a manual revoke (`auto_revoke = false`).
pub const TENURE_ERR_LEASE_EXPIRED: tenure_result = 5;
/// The TTL is above 9 000 000 000 s (etcd's MaxLeaseTTL).
pub const TENURE_ERR_LEASE_TTL_TOO_LARGE: tenure_result = 6;
/// The engine is a standby: renewing needs a primary.
pub const TENURE_ERR_NOT_PRIMARY: tenure_result = 7;
/// A read or a watch start below the compaction point (`tenure_last_error_compact_revision`
/// tells it), or a watcher fell too far behind and was cancelled.
pub const TENURE_ERR_COMPACTED: tenure_result = 8;
/// The database file is already open, in this process or another one.
pub const TENURE_ERR_ALREADY_OPEN: tenure_result = 9;
/// The file is not a tenure database or is damaged; it was left untouched.
pub const TENURE_ERR_CORRUPT: tenure_result = 10;
/// A read or a commit failed in the storage layer (writes keep failing until reopen).
pub const TENURE_ERR_STORAGE: tenure_result = 11;
/// The engine has been closed.
pub const TENURE_ERR_CLOSED: tenure_result = 12;
/// A blocking call reached its timeout without a result.
pub const TENURE_ERR_TIMEOUT: tenure_result = 13;
/// A lock is held by someone else (`tenure_mutex_try_lock`, `tenure_record_lock_try_acquire`).
pub const TENURE_ERR_LOCKED: tenure_result = 14;
/// A session's lease is gone (a lock or campaign wait whose session died).
pub const TENURE_ERR_SESSION_EXPIRED: tenure_result = 15;
/// The caller is not (or no longer) the holder: proclaim after resign, unlock of a lock no
/// longer held, refresh or release of a record lock by a non-owner.
pub const TENURE_ERR_NOT_LEADER: tenure_result = 16;
/// A fencing token lower than the highest admitted (`tenure_fence_gate_admit`).
pub const TENURE_ERR_STALE_TOKEN: tenure_result = 17;
/// A Rust panic was caught at the boundary; the message says where. The engine may be in an
/// unexpected state: close it.
pub const TENURE_ERR_PANIC: tenure_result = 18;
/// The call needs the embedded engine (checkpoint, promote, demote…) and the handle is
/// connected to an etcd v3 server (`tenure_connect`).
pub const TENURE_ERR_UNSUPPORTED: tenure_result = 19;
/// The etcd v3 server could not be reached within the call's deadline, after bounded retries;
/// the call may succeed once it is back.
pub const TENURE_ERR_UNAVAILABLE: tenure_result = 20;
/// The etcd v3 server refused the call: the user's roles grant no permission on the key.
pub const TENURE_ERR_PERMISSION_DENIED: tenure_result = 21;
/// The connection could not be authenticated (server certificate not trusted, client
/// certificate missing, expired or refused, wrong user name or password); the message names
/// the endpoint and the cause.
pub const TENURE_ERR_UNAUTHENTICATED: tenure_result = 22;
/// A read (or a compaction) at a revision above the current one: etcd's "required revision is
/// a future revision".
pub const TENURE_ERR_FUTURE_REVISION: tenure_result = 23;
/// The database file reached its space quota, or a NOSPACE alarm is raised: the write (put,
/// txn that puts, grant) was refused and nothing changed; deletes, reads, revokes and
/// compaction still work. Compact, defragment and disarm the alarm to write again.
pub const TENURE_ERR_QUOTA_EXCEEDED: tenure_result = 24;

/// Every code, in order; `ErrorCode` is non-exhaustive, so this list is what maps numbers back.
pub(crate) const CODES: [ErrorCode; 25] = ErrorCode::ALL;

/// The static, NUL-terminated name of a code (`ErrorCode::name`, e.g.
/// `"TENURE_ERR_LEASE_NOT_FOUND"`), or `"TENURE_ERR_UNKNOWN"` for a number that is not a code.
pub(crate) fn c_name_of(code: tenure_result) -> *const c_char {
    use std::sync::OnceLock;
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    static UNKNOWN: &[u8] = b"TENURE_ERR_UNKNOWN\0";
    let names = NAMES.get_or_init(|| {
        CODES
            .iter()
            .map(|c| CString::new(c.name()).expect("names have no NUL"))
            .collect()
    });
    match CODES.iter().position(|c| *c as i32 == code) {
        Some(i) => names[i].as_ptr(),
        None => UNKNOWN.as_ptr().cast(),
    }
}

/// Why a call failed: a code, the message `tenure_last_error_message` will show and the
/// compaction revision `tenure_last_error_compact_revision` will (0: none).
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: tenure_result,
    pub(crate) message: String,
    pub(crate) compact_revision: i64,
}

impl Failure {
    /// A failure with `code` and `message` and no compaction revision.
    pub(crate) fn new(code: tenure_result, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            compact_revision: 0,
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let compact_revision = match &e {
            Error::Compacted {
                compact_revision, ..
            } => *compact_revision,
            _ => 0,
        };
        Failure {
            code: e.code() as i32,
            message: e.to_string(),
            compact_revision,
        }
    }
}

/// `TENURE_ERR_NULL_POINTER` naming the argument.
pub(crate) fn null(arg: &str) -> Failure {
    Failure::new(TENURE_ERR_NULL_POINTER, format!("argument `{arg}` is NULL"))
}

/// `TENURE_ERR_INVALID_ARGUMENT` with a message.
pub(crate) fn invalid(message: impl Into<String>) -> Failure {
    Failure::new(TENURE_ERR_INVALID_ARGUMENT, message)
}

pub(crate) type Res<T = ()> = Result<T, Failure>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    static LAST_COMPACT_REVISION: Cell<i64> = const { Cell::new(0) };
}

/// Stores the calling thread's last error message (interior NULs are shown as `\0`); its
/// compaction revision is 0.
pub(crate) fn set_last_error(message: &str) {
    set_last_failure(message, 0);
}

/// Stores the calling thread's last error message and compaction revision.
fn set_last_failure(message: &str, compact_revision: i64) {
    let c = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // Ignore a thread that is being torn down.
    let _ = LAST_ERROR.try_with(|slot| *slot.borrow_mut() = c);
    let _ = LAST_COMPACT_REVISION.try_with(|slot| slot.set(compact_revision));
}

/// The compaction revision of the calling thread's last failure (0: none).
pub(crate) fn last_compact_revision() -> i64 {
    LAST_COMPACT_REVISION.try_with(Cell::get).unwrap_or(0)
}

/// The calling thread's last error message; valid until its next failing call.
pub(crate) fn last_error_ptr() -> *const c_char {
    static EMPTY: &[u8] = b"\0";
    LAST_ERROR
        .try_with(|slot| slot.borrow().as_ptr())
        .unwrap_or(EMPTY.as_ptr().cast())
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Runs a fallible body behind the panic boundary: `TENURE_OK`, the failure's code (its message
/// becomes the thread's last error, prefixed by `func`), or `TENURE_ERR_PANIC`.
pub(crate) fn guard(func: &str, body: impl FnOnce() -> Res) -> tenure_result {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => TENURE_OK,
        Ok(Err(f)) => {
            set_last_failure(&format!("{func}: {}", f.message), f.compact_revision);
            f.code
        }
        Err(payload) => {
            set_last_error(&format!("{func}: panic: {}", panic_message(&*payload)));
            TENURE_ERR_PANIC
        }
    }
}

/// Runs an infallible body (accessors, `_free`) behind the panic boundary; a panic yields
/// `fallback` and sets the thread's last error.
pub(crate) fn shield<T>(func: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            set_last_error(&format!("{func}: panic: {}", panic_message(&*payload)));
            fallback
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last() -> String {
        unsafe { CStr::from_ptr(last_error_ptr()) }
            .to_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn result_constants_equal_the_core_error_codes() {
        let consts = [
            TENURE_OK,
            TENURE_ERR_INVALID_ARGUMENT,
            TENURE_ERR_NULL_POINTER,
            TENURE_ERR_LEASE_NOT_FOUND,
            TENURE_ERR_LEASE_EXISTS,
            TENURE_ERR_LEASE_EXPIRED,
            TENURE_ERR_LEASE_TTL_TOO_LARGE,
            TENURE_ERR_NOT_PRIMARY,
            TENURE_ERR_COMPACTED,
            TENURE_ERR_ALREADY_OPEN,
            TENURE_ERR_CORRUPT,
            TENURE_ERR_STORAGE,
            TENURE_ERR_CLOSED,
            TENURE_ERR_TIMEOUT,
            TENURE_ERR_LOCKED,
            TENURE_ERR_SESSION_EXPIRED,
            TENURE_ERR_NOT_LEADER,
            TENURE_ERR_STALE_TOKEN,
            TENURE_ERR_PANIC,
            TENURE_ERR_UNSUPPORTED,
            TENURE_ERR_UNAVAILABLE,
            TENURE_ERR_PERMISSION_DENIED,
            TENURE_ERR_UNAUTHENTICATED,
            TENURE_ERR_FUTURE_REVISION,
            TENURE_ERR_QUOTA_EXCEEDED,
        ];
        for (c, code) in consts.iter().zip(CODES) {
            assert_eq!(*c, code as i32, "{}", code.name());
        }
    }

    #[test]
    fn c_names_are_the_core_names() {
        for code in CODES {
            let s = unsafe { CStr::from_ptr(c_name_of(code as i32)) };
            assert_eq!(s.to_str().unwrap(), code.name());
        }
        for bad in [25, -1, i32::MAX, i32::MIN] {
            let s = unsafe { CStr::from_ptr(c_name_of(bad)) };
            assert_eq!(s.to_str().unwrap(), "TENURE_ERR_UNKNOWN");
        }
    }

    #[test]
    fn guard_maps_engine_errors_and_keeps_their_message() {
        let rc = guard("tenure_test", || {
            Err(Error::LeaseNotFound(tenure_core::LeaseId::new(42)).into())
        });
        assert_eq!(rc, TENURE_ERR_LEASE_NOT_FOUND);
        assert_eq!(last(), "tenure_test: lease 42 not found");
    }

    #[test]
    fn guard_turns_a_panic_into_tenure_err_panic_without_unwinding() {
        let rc = guard("tenure_boom", || panic!("kaboom {}", 7));
        assert_eq!(rc, TENURE_ERR_PANIC);
        assert_eq!(last(), "tenure_boom: panic: kaboom 7");
        let v = shield("tenure_boom_accessor", -1i64, || panic!("static"));
        assert_eq!(v, -1);
        assert_eq!(last(), "tenure_boom_accessor: panic: static");
    }

    #[test]
    fn last_error_is_per_thread() {
        let _ = guard("tenure_here", || Err(invalid("mine")));
        std::thread::spawn(|| {
            assert_eq!(last(), "", "a new thread starts with an empty message");
            let _ = guard("tenure_there", || Err(null("db")));
            assert_eq!(last(), "tenure_there: argument `db` is NULL");
        })
        .join()
        .unwrap();
        assert_eq!(last(), "tenure_here: mine");
    }

    #[test]
    fn a_compacted_failure_leaves_its_compaction_revision_until_the_next_failure() {
        let compacted = Error::Compacted {
            revision: 2,
            compact_revision: 4,
            reason: "test".into(),
        };
        let rc = guard("tenure_test", || Err(compacted.into()));
        assert_eq!(rc, TENURE_ERR_COMPACTED);
        assert_eq!(last_compact_revision(), 4);
        let _ = guard("tenure_test", || Err(invalid("other")));
        assert_eq!(last_compact_revision(), 0);
    }

    #[test]
    fn interior_nul_in_a_message_does_not_lose_it() {
        set_last_error("key a\0b");
        assert_eq!(last(), "key a\\0b");
    }
}
