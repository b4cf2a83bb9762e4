//! Elections (SPEC S4): campaigns, leaderships and observers of who leads.

use std::ffi::c_char;
use std::sync::Mutex;

use tenure_core::sync::{Election, Leadership, Observer, Stop};

use super::locked;
use super::session::tenure_session;
use crate::engine::{engine, tenure};
use crate::error::{guard, shield, tenure_result};
use crate::kv::{tenure_bytes, tenure_kv};
use crate::util::{arg, boxed, bytes, free, text, wait, Out};

/// Leadership won by `tenure_election_campaign` (SPEC S4). Thread-safe. Resigning does not free
/// it; freeing it does not resign (the candidacy ends with the session's lease or a resign).
#[derive(Debug)]
pub struct tenure_leadership {
    l: Leadership,
}

/// Campaigns in the election `name` (NUL-terminated UTF-8) with `value` and waits until leader,
/// for up to `timeout_ms` (-1: no limit). Campaigning again through the same session while its
/// candidacy is live reuses it with the new value. Free `*out` with `tenure_leadership_free`. On
/// failure the candidacy is withdrawn.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT`, `TENURE_ERR_TIMEOUT` (also
/// when the session is cancelled), `TENURE_ERR_SESSION_EXPIRED`, `TENURE_ERR_NOT_PRIMARY`,
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_election_campaign(
    s: *const tenure_session,
    name: *const c_char,
    value: *const u8,
    value_len: usize,
    timeout_ms: i64,
    out: *mut *mut tenure_leadership,
) -> tenure_result {
    guard("tenure_election_campaign", || {
        // SAFETY: the caller promises a live session, a string, readable bytes and a writable
        // pointer.
        let (s, name, value, out) = unsafe {
            (
                arg(s, "s")?,
                text(name, "name")?,
                bytes(value, value_len, "value")?,
                Out::new(out, "out")?,
            )
        };
        let l = Election::new(&s.s, name).campaign(value, wait(timeout_ms, &s.cancel)?)?;
        out.set(boxed(tenure_leadership { l }));
        Ok(())
    })
}

/// Announces a new value, only while this leadership holds.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_NOT_LEADER` (resigned or lost),
/// `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_leadership_proclaim(
    l: *const tenure_leadership,
    value: *const u8,
    value_len: usize,
) -> tenure_result {
    guard("tenure_leadership_proclaim", || {
        // SAFETY: the caller promises a live leadership and readable bytes.
        let (l, value) = unsafe { (arg(l, "l")?, bytes(value, value_len, "value")?) };
        Ok(l.l.proclaim(value)?)
    })
}

/// Gives up leadership (deletes the leader key only if it is still this leadership's; resigning
/// twice is fine). Does not free `l`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_leadership_resign(l: *const tenure_leadership) -> tenure_result {
    guard("tenure_leadership_resign", || {
        // SAFETY: the caller promises a live leadership.
        Ok(unsafe { arg(l, "l") }?.l.resign()?)
    })
}

/// The leadership's fencing token (SPEC S3): the leader key's create revision, strictly
/// increasing per election (0 if `l` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_leadership_fencing_token(l: *const tenure_leadership) -> i64 {
    // SAFETY: the caller promises NULL or a live leadership.
    shield("tenure_leadership_fencing_token", 0, || {
        unsafe { l.as_ref() }.map_or(0, |l| l.l.fencing_token())
    })
}

/// Whether this leadership still holds (false once resigned or lost, or if `l` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_leadership_is_held(l: *const tenure_leadership) -> bool {
    // SAFETY: the caller promises NULL or a live leadership.
    shield("tenure_leadership_is_held", false, || {
        unsafe { l.as_ref() }.is_some_and(|l| l.l.is_held())
    })
}

/// The leader key (`name/<lease hex>`). Borrowed from `l` (empty if `l` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_leadership_key(l: *const tenure_leadership) -> tenure_bytes {
    // SAFETY: the caller promises NULL or a live leadership.
    shield("tenure_leadership_key", tenure_bytes::NONE, || {
        unsafe { l.as_ref() }.map_or(tenure_bytes::NONE, |l| tenure_bytes::of(l.l.key()))
    })
}

/// Frees a leadership handle (without resigning). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_leadership_free(l: *mut tenure_leadership) {
    // SAFETY: from tenure_election_campaign and freed once, as the caller promises.
    shield("tenure_leadership_free", (), || unsafe { free(l) })
}

/// The current leader of election `name`: `*out` receives its key-value (key, value, create
/// revision = its token), owned by the caller (`tenure_kv_free`), or NULL when there is none.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_election_leader(
    db: *const tenure,
    name: *const c_char,
    out: *mut *mut tenure_kv,
) -> tenure_result {
    guard("tenure_election_leader", || {
        // SAFETY: the caller promises a live handle, a string and a writable pointer.
        let (db, name, out) = unsafe { (engine(db)?, text(name, "name")?, Out::new(out, "out")?) };
        let kv = Election::leader(db, name)?;
        out.set(kv.map_or(std::ptr::null_mut(), |kv| boxed(tenure_kv::new(kv))));
        Ok(())
    })
}

/// Follows the leadership of one election (from `tenure_election_observe`). Thread-safe:
/// concurrent `tenure_observer_next` calls take turns; `tenure_observer_cancel` may come from
/// any thread.
#[derive(Debug)]
pub struct tenure_observer {
    o: Mutex<Observer>,
    cancel: Stop,
}

/// Starts observing election `name`. The first `tenure_observer_next` gives the current state,
/// then one per change (new leader, new value, no leader); the latest state is never lost. Free
/// `*out` with `tenure_observer_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_election_observe(
    db: *const tenure,
    name: *const c_char,
    out: *mut *mut tenure_observer,
) -> tenure_result {
    guard("tenure_election_observe", || {
        // SAFETY: the caller promises a live handle, a string and a writable pointer.
        let (db, name, out) = unsafe { (engine(db)?, text(name, "name")?, Out::new(out, "out")?) };
        let o = Election::observe(db, name)?;
        out.set(boxed(tenure_observer {
            o: Mutex::new(o),
            cancel: Stop::new(),
        }));
        Ok(())
    })
}

/// Waits up to `timeout_ms` (-1: no limit, 0: only checks) for the next leadership state:
/// `*out` receives the leader's key-value (owned by the caller, `tenure_kv_free`) or NULL for
/// "no leader".
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`timeout_ms` below -1),
/// `TENURE_ERR_TIMEOUT` (no change in time, or the observer was cancelled),
/// `TENURE_ERR_CLOSED` (the engine closed).
#[no_mangle]
pub unsafe extern "C" fn tenure_observer_next(
    o: *const tenure_observer,
    timeout_ms: i64,
    out: *mut *mut tenure_kv,
) -> tenure_result {
    guard("tenure_observer_next", || {
        // SAFETY: the caller promises a live observer and a writable pointer.
        let (o, out) = unsafe { (arg(o, "o")?, Out::new(out, "out")?) };
        let wait = wait(timeout_ms, &o.cancel)?;
        let kv = locked(&o.o).recv_timeout(wait)?;
        out.set(kv.map_or(std::ptr::null_mut(), |kv| boxed(tenure_kv::new(kv))));
        Ok(())
    })
}

/// Interrupts, from any thread, every `tenure_observer_next` waiting on `o` (they return
/// `TENURE_ERR_TIMEOUT`). Sticky: later calls return `TENURE_ERR_TIMEOUT` unless a state is
/// already waiting to be read.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_observer_cancel(o: *const tenure_observer) -> tenure_result {
    guard("tenure_observer_cancel", || {
        // SAFETY: the caller promises a live observer.
        unsafe { arg(o, "o") }?.cancel.stop();
        Ok(())
    })
}

/// Frees an observer. NULL is a no-op. No other thread may be inside `tenure_observer_next` on
/// it (cancel it and join that thread first).
#[no_mangle]
pub unsafe extern "C" fn tenure_observer_free(o: *mut tenure_observer) {
    // SAFETY: from tenure_election_observe and freed once, as the caller promises.
    shield("tenure_observer_free", (), || unsafe { free(o) })
}
