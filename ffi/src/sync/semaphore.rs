//! Semaphores (SPEC S7): at most `permits` sessions hold one at once, admitted FIFO.

use std::ffi::c_char;
use std::sync::Mutex;

use tenure_core::sync::{Semaphore, SemaphoreGuard};

use super::locked;
use super::session::tenure_session;
use crate::error::{guard, shield, tenure_result, Res};
use crate::util::{arg, boxed, free, text, wait, Out};

/// A held permit of a semaphore (SPEC S7), from `tenure_semaphore_acquire` or
/// `tenure_semaphore_try_acquire`. Thread-safe. Freeing it without `tenure_permit_release`
/// releases it. It stays valid after its session is freed.
#[derive(Debug)]
pub struct tenure_permit {
    /// `None` once released.
    guard: Mutex<Option<SemaphoreGuard>>,
    token: i64,
}

fn permit_handle(g: SemaphoreGuard) -> *mut tenure_permit {
    boxed(tenure_permit {
        token: g.fencing_token(),
        guard: Mutex::new(Some(g)),
    })
}

fn semaphore(s: &tenure_session, name: &str, permits: u32) -> Res<Semaphore> {
    let permits = usize::try_from(permits).unwrap_or(usize::MAX);
    Ok(Semaphore::new(&s.s, name, permits)?)
}

/// Waits until the session holds a permit of the semaphore `name` (NUL-terminated UTF-8) of
/// `permits` permits, in FIFO order of arrival, for up to `timeout_ms` (-1: no limit). Every
/// holder must name the same `permits`. Free `*out` with `tenure_permit_free`. On failure the
/// claim is withdrawn, so it blocks no one.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`timeout_ms` below -1, name
/// not UTF-8, `permits` 0 or above 4096, `permits` not the holders', the session already holds
/// or is acquiring this semaphore), `TENURE_ERR_TIMEOUT` (also when the session is cancelled),
/// `TENURE_ERR_SESSION_EXPIRED`, `TENURE_ERR_NOT_PRIMARY`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_semaphore_acquire(
    s: *const tenure_session,
    name: *const c_char,
    permits: u32,
    timeout_ms: i64,
    out: *mut *mut tenure_permit,
) -> tenure_result {
    guard("tenure_semaphore_acquire", || {
        // SAFETY: the caller promises a live session, a string and a writable pointer.
        let (s, name, out) = unsafe { (arg(s, "s")?, text(name, "name")?, Out::new(out, "out")?) };
        let g = semaphore(s, name, permits)?.acquire(wait(timeout_ms, &s.cancel)?)?;
        out.set(permit_handle(g));
        Ok(())
    })
}

/// Takes a permit of the semaphore `name` if one is free and no one waits; never blocks. Free
/// `*out` with `tenure_permit_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_LOCKED` (every permit taken, or others wait),
/// `TENURE_ERR_INVALID_ARGUMENT` (as for `tenure_semaphore_acquire`),
/// `TENURE_ERR_SESSION_EXPIRED`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_semaphore_try_acquire(
    s: *const tenure_session,
    name: *const c_char,
    permits: u32,
    out: *mut *mut tenure_permit,
) -> tenure_result {
    guard("tenure_semaphore_try_acquire", || {
        // SAFETY: the caller promises a live session, a string and a writable pointer.
        let (s, name, out) = unsafe { (arg(s, "s")?, text(name, "name")?, Out::new(out, "out")?) };
        let g = semaphore(s, name, permits)?.try_acquire()?;
        out.set(permit_handle(g));
        Ok(())
    })
}

/// The permit's fencing token (its key's create revision); still readable after release (0 if
/// `p` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_permit_fencing_token(p: *const tenure_permit) -> i64 {
    // SAFETY: the caller promises NULL or a live permit.
    shield("tenure_permit_fencing_token", 0, || {
        unsafe { p.as_ref() }.map_or(0, |p| p.token)
    })
}

/// Whether the permit is still held (false once released, once its session's lease is lost,
/// or if `p` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_permit_is_held(p: *const tenure_permit) -> bool {
    // SAFETY: the caller promises NULL or a live permit.
    shield("tenure_permit_is_held", false, || {
        unsafe { p.as_ref() }
            .is_some_and(|p| locked(&p.guard).as_ref().is_some_and(|g| g.is_held()))
    })
}

/// Releases the permit (deletes only this acquisition's key). Does not free `p`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_NOT_LEADER` (already released, or lost with
/// its session), `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_permit_release(p: *const tenure_permit) -> tenure_result {
    guard("tenure_permit_release", || {
        // SAFETY: the caller promises a live permit.
        let p = unsafe { arg(p, "p") }?;
        let g = locked(&p.guard).take();
        match g {
            Some(g) => Ok(g.release()?),
            None => Err(tenure_core::Error::NotLeader.into()),
        }
    })
}

/// Frees a permit, releasing it if still held. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_permit_free(p: *mut tenure_permit) {
    // SAFETY: from tenure_semaphore_acquire/_try_acquire and freed once, as the caller promises.
    shield("tenure_permit_free", (), || unsafe { free(p) })
}
