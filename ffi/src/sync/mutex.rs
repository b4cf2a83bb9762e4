//! Mutexes (SPEC S2, S3): FIFO locks through a session and the fencing tokens of their holds.

use std::ffi::c_char;
use std::sync::Mutex;

use tenure_core::sync::{LockGuard, Mutex as SyncMutex};

use super::locked;
use super::session::tenure_session;
use crate::error::{guard, shield, tenure_result};
use crate::util::{arg, boxed, free, text, wait, Out};

/// A held lock (SPEC S2), from `tenure_mutex_lock` or `tenure_mutex_try_lock`. Thread-safe.
/// Freeing it without `tenure_lock_unlock` unlocks. It stays valid after its session is freed.
#[derive(Debug)]
pub struct tenure_lock {
    /// `None` once unlocked.
    guard: Mutex<Option<LockGuard>>,
    token: i64,
}

fn lock_handle(g: LockGuard) -> *mut tenure_lock {
    boxed(tenure_lock {
        token: g.fencing_token(),
        guard: Mutex::new(Some(g)),
    })
}

/// Waits until the session holds the mutex `name` (NUL-terminated UTF-8; names nest without
/// interfering), in FIFO order of arrival, for up to `timeout_ms` (-1: no limit, 0: only if it
/// is free now and no one waits). Free `*out` with `tenure_lock_free`. On failure the claim is
/// withdrawn, so it blocks no one.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`timeout_ms` below -1, name
/// not UTF-8, the session already holds or is acquiring this mutex), `TENURE_ERR_TIMEOUT` (also
/// when the session is cancelled), `TENURE_ERR_SESSION_EXPIRED` (the session's lease was lost
/// while waiting), `TENURE_ERR_NOT_PRIMARY`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_mutex_lock(
    s: *const tenure_session,
    name: *const c_char,
    timeout_ms: i64,
    out: *mut *mut tenure_lock,
) -> tenure_result {
    guard("tenure_mutex_lock", || {
        // SAFETY: the caller promises a live session, a string and a writable pointer.
        let (s, name, out) = unsafe { (arg(s, "s")?, text(name, "name")?, Out::new(out, "out")?) };
        let g = SyncMutex::new(&s.s, name).lock(wait(timeout_ms, &s.cancel)?)?;
        out.set(lock_handle(g));
        Ok(())
    })
}

/// Takes the mutex `name` if no one holds it or waits for it; never blocks. Free `*out` with
/// `tenure_lock_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_LOCKED` (held or awaited by another session),
/// `TENURE_ERR_INVALID_ARGUMENT` (as for `tenure_mutex_lock`), `TENURE_ERR_SESSION_EXPIRED`,
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_mutex_try_lock(
    s: *const tenure_session,
    name: *const c_char,
    out: *mut *mut tenure_lock,
) -> tenure_result {
    guard("tenure_mutex_try_lock", || {
        // SAFETY: the caller promises a live session, a string and a writable pointer.
        let (s, name, out) = unsafe { (arg(s, "s")?, text(name, "name")?, Out::new(out, "out")?) };
        let g = SyncMutex::new(&s.s, name).try_lock()?;
        out.set(lock_handle(g));
        Ok(())
    })
}

/// The lock's fencing token (SPEC S3): strictly increasing per mutex name; still readable after
/// unlock (0 if `l` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_lock_fencing_token(l: *const tenure_lock) -> i64 {
    // SAFETY: the caller promises NULL or a live lock.
    shield("tenure_lock_fencing_token", 0, || {
        unsafe { l.as_ref() }.map_or(0, |l| l.token)
    })
}

/// Whether this acquisition still holds the lock (false once unlocked, once its session's lease
/// is lost, or if `l` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_lock_is_held(l: *const tenure_lock) -> bool {
    // SAFETY: the caller promises NULL or a live lock.
    shield("tenure_lock_is_held", false, || {
        unsafe { l.as_ref() }
            .is_some_and(|l| locked(&l.guard).as_ref().is_some_and(|g| g.is_held()))
    })
}

/// Releases the lock (deletes only this acquisition's key). Does not free `l`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_NOT_LEADER` (already unlocked, or the lock was
/// lost with its session), `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_lock_unlock(l: *const tenure_lock) -> tenure_result {
    guard("tenure_lock_unlock", || {
        // SAFETY: the caller promises a live lock.
        let l = unsafe { arg(l, "l") }?;
        let g = locked(&l.guard).take();
        match g {
            Some(g) => Ok(g.unlock()?),
            None => Err(tenure_core::Error::NotLeader.into()),
        }
    })
}

/// Frees a lock, unlocking it if still held. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_lock_free(l: *mut tenure_lock) {
    // SAFETY: from tenure_mutex_lock/_try_lock and freed once, as the caller promises.
    shield("tenure_lock_free", (), || unsafe { free(l) })
}
