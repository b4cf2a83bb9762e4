//! Mutexes (SPEC S2, S3): FIFO locks through a session and the fencing tokens of their holds.

use std::ffi::c_char;
use std::sync::Mutex;

use tenure_core::sync::{LockGuard, Mutex as SyncMutex, MutexOptions, Session};

use super::locked;
use super::session::tenure_session;
use crate::error::{guard, shield, tenure_result, Res};
use crate::util::{arg, boxed, free, ms, text, to_ms, wait, Out};

/// Options of a mutex (SPEC S9, bounded holds) for `tenure_mutex_lock_with` and
/// `tenure_mutex_try_lock_with`, mirroring the Rust `MutexOptions`: fill them with
/// `tenure_mutex_options_init`, then change what you need. Fields are only ever appended.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tenure_mutex_options {
    /// 0: none. Else, in ms: after the hold ahead of this waiter ended involuntarily (its
    /// session's lease expired or was revoked without an unlock, or its `max_hold` ran out),
    /// take the lock only this long after seeing that end. A voluntary unlock never delays.
    /// At most 9 000 000 000 000 ms; negative or above is `TENURE_ERR_INVALID_ARGUMENT`.
    pub lock_delay_ms: i64,
    /// 0: none. Else, in ms: a hold ends itself this long after it was acquired, even while
    /// its session lives (`tenure_lock_is_held` turns false first, then the key is deleted).
    /// Bounded as `lock_delay_ms`.
    pub max_hold_ms: i64,
}

impl tenure_mutex_options {
    fn core(&self) -> Res<MutexOptions> {
        let opt = |v: i64, name: &str| -> Res<Option<std::time::Duration>> {
            match v {
                0 => Ok(None),
                v => Ok(Some(ms(v, name)?)),
            }
        };
        Ok(MutexOptions {
            lock_delay: opt(self.lock_delay_ms, "lock_delay_ms")?,
            max_hold: opt(self.max_hold_ms, "max_hold_ms")?,
        })
    }
}

/// Fills `opts` with the defaults: no lock delay, no bound on a hold (etcd's mutex).
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_mutex_options_init(
    opts: *mut tenure_mutex_options,
) -> tenure_result {
    guard("tenure_mutex_options_init", || {
        let d = MutexOptions::default();
        // SAFETY: the caller promises a writable struct.
        unsafe { Out::new(opts, "opts") }?.set(tenure_mutex_options {
            lock_delay_ms: d.lock_delay.map_or(0, to_ms),
            max_hold_ms: d.max_hold.map_or(0, to_ms),
        });
        Ok(())
    })
}

/// The mutex `name` of `s` with `opts` (NULL: the defaults).
///
/// # Safety
/// A non-NULL `opts` must point to a readable struct.
unsafe fn mutex(s: &Session, name: &str, opts: *const tenure_mutex_options) -> Res<SyncMutex> {
    // SAFETY: NULL or readable, as the caller promises.
    match unsafe { opts.as_ref() } {
        None => Ok(SyncMutex::new(s, name)),
        Some(o) => Ok(SyncMutex::with_options(s, name, o.core()?)?),
    }
}

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

/// `tenure_mutex_lock` with bounded holds (SPEC S9): `opts` (NULL: the defaults) sets the lock
/// delay and the longest hold of this acquisition.
///
/// Errors: those of `tenure_mutex_lock`; `TENURE_ERR_INVALID_ARGUMENT` also for an option
/// negative or above its bound.
#[no_mangle]
pub unsafe extern "C" fn tenure_mutex_lock_with(
    s: *const tenure_session,
    name: *const c_char,
    timeout_ms: i64,
    opts: *const tenure_mutex_options,
    out: *mut *mut tenure_lock,
) -> tenure_result {
    guard("tenure_mutex_lock_with", || {
        // SAFETY: the caller promises a live session, a string, NULL or readable options and a
        // writable pointer.
        let (s, name, out) = unsafe { (arg(s, "s")?, text(name, "name")?, Out::new(out, "out")?) };
        // SAFETY: `opts` is NULL or readable, as the caller promises.
        let m = unsafe { mutex(&s.s, name, opts) }?;
        let g = m.lock(wait(timeout_ms, &s.cancel)?)?;
        out.set(lock_handle(g));
        Ok(())
    })
}

/// `tenure_mutex_try_lock` with bounded holds (SPEC S9; a try never waits, so only `max_hold`
/// and the marked unlock of `lock_delay` apply).
///
/// Errors: those of `tenure_mutex_try_lock`; `TENURE_ERR_INVALID_ARGUMENT` also for an option
/// negative or above its bound.
#[no_mangle]
pub unsafe extern "C" fn tenure_mutex_try_lock_with(
    s: *const tenure_session,
    name: *const c_char,
    opts: *const tenure_mutex_options,
    out: *mut *mut tenure_lock,
) -> tenure_result {
    guard("tenure_mutex_try_lock_with", || {
        // SAFETY: as for `tenure_mutex_lock_with`.
        let (s, name, out) = unsafe { (arg(s, "s")?, text(name, "name")?, Out::new(out, "out")?) };
        // SAFETY: `opts` is NULL or readable, as the caller promises.
        let m = unsafe { mutex(&s.s, name, opts) }?;
        let g = m.try_lock()?;
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
