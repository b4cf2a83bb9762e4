//! Read-write locks (SPEC S8): many readers or one writer, FIFO; etcd contrib/recipes' layout.

use std::ffi::c_char;
use std::sync::Mutex;

use tenure_core::sync::{RwLock, RwLockGuard};

use super::locked;
use super::session::tenure_session;
use crate::error::{guard, shield, tenure_result};
use crate::util::{arg, boxed, free, text, wait, Out};

/// A held read or write lock (SPEC S8), from `tenure_rwlock_read`, `_write`, `_try_read` or
/// `_try_write`. Thread-safe. Freeing it without `tenure_rwhold_release` releases it. It stays
/// valid after its session is freed.
#[derive(Debug)]
pub struct tenure_rwhold {
    /// `None` once released.
    guard: Mutex<Option<RwLockGuard>>,
    token: i64,
    write: bool,
}

fn hold_handle(g: RwLockGuard) -> *mut tenure_rwhold {
    boxed(tenure_rwhold {
        token: g.fencing_token(),
        write: g.is_write(),
        guard: Mutex::new(Some(g)),
    })
}

/// Waits until the session holds the read-write lock `name` (NUL-terminated UTF-8) for
/// reading (`write` false: shared with other readers, after every writer that came before) or
/// for writing (`write` true: alone, after everyone who came before), for up to `timeout_ms`
/// (-1: no limit). Free `*out` with `tenure_rwhold_free`. On failure the key is withdrawn.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`timeout_ms` below -1, name
/// not UTF-8), `TENURE_ERR_TIMEOUT` (also when the session is cancelled),
/// `TENURE_ERR_SESSION_EXPIRED`, `TENURE_ERR_NOT_PRIMARY`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_rwlock_lock(
    s: *const tenure_session,
    name: *const c_char,
    write: bool,
    timeout_ms: i64,
    out: *mut *mut tenure_rwhold,
) -> tenure_result {
    guard("tenure_rwlock_lock", || {
        // SAFETY: the caller promises a live session, a string and a writable pointer.
        let (s, name, out) = unsafe { (arg(s, "s")?, text(name, "name")?, Out::new(out, "out")?) };
        let l = RwLock::new(&s.s, name);
        let w = wait(timeout_ms, &s.cancel)?;
        let g = if write { l.write(w)? } else { l.read(w)? };
        out.set(hold_handle(g));
        Ok(())
    })
}

/// Takes the read-write lock `name` for reading (no writer holds or awaits it) or writing (no
/// one holds or awaits it); never blocks. Free `*out` with `tenure_rwhold_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_LOCKED`, `TENURE_ERR_INVALID_ARGUMENT` (name
/// not UTF-8), `TENURE_ERR_SESSION_EXPIRED`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_rwlock_try_lock(
    s: *const tenure_session,
    name: *const c_char,
    write: bool,
    out: *mut *mut tenure_rwhold,
) -> tenure_result {
    guard("tenure_rwlock_try_lock", || {
        // SAFETY: the caller promises a live session, a string and a writable pointer.
        let (s, name, out) = unsafe { (arg(s, "s")?, text(name, "name")?, Out::new(out, "out")?) };
        let l = RwLock::new(&s.s, name);
        let g = if write { l.try_write()? } else { l.try_read()? };
        out.set(hold_handle(g));
        Ok(())
    })
}

/// The hold's fencing token (its key's create revision); still readable after release (0 if
/// `h` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_rwhold_fencing_token(h: *const tenure_rwhold) -> i64 {
    // SAFETY: the caller promises NULL or a live hold.
    shield("tenure_rwhold_fencing_token", 0, || {
        unsafe { h.as_ref() }.map_or(0, |h| h.token)
    })
}

/// Whether this is a write hold (false for a read hold or NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_rwhold_is_write(h: *const tenure_rwhold) -> bool {
    // SAFETY: the caller promises NULL or a live hold.
    shield("tenure_rwhold_is_write", false, || {
        unsafe { h.as_ref() }.is_some_and(|h| h.write)
    })
}

/// Whether the hold is still held (false once released, once its session's lease is lost, or
/// if `h` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_rwhold_is_held(h: *const tenure_rwhold) -> bool {
    // SAFETY: the caller promises NULL or a live hold.
    shield("tenure_rwhold_is_held", false, || {
        unsafe { h.as_ref() }
            .is_some_and(|h| locked(&h.guard).as_ref().is_some_and(|g| g.is_held()))
    })
}

/// Releases the hold (deletes only its own key). Does not free `h`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_NOT_LEADER` (already released, or lost with
/// its session), `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_rwhold_release(h: *const tenure_rwhold) -> tenure_result {
    guard("tenure_rwhold_release", || {
        // SAFETY: the caller promises a live hold.
        let h = unsafe { arg(h, "h") }?;
        let g = locked(&h.guard).take();
        match g {
            Some(g) => Ok(g.release()?),
            None => Err(tenure_core::Error::NotLeader.into()),
        }
    })
}

/// Frees a hold, releasing it if still held. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_rwhold_free(h: *mut tenure_rwhold) {
    // SAFETY: from tenure_rwlock_lock/_try_lock and freed once, as the caller promises.
    shield("tenure_rwhold_free", (), || unsafe { free(h) })
}
