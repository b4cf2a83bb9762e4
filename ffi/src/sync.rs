//! Coordination recipes (SPEC S1–S6): sessions, mutexes, elections, the leader elector, fence
//! gates, record locks and keep-alives. Every function converts its arguments and calls
//! `tenure_core::sync` (or `Tenure::keep_alive`); the recipes themselves live in the core.
//!
//! Cancellation: each object with blocking calls (session, observer, elector) owns a core `Stop`
//! token that every blocking call on it waits with; `tenure_session_cancel`,
//! `tenure_observer_cancel` and `tenure_elector_stop` raise it from any thread. Closing a
//! session ends its waits through the core's lease-loss signal (`TENURE_ERR_SESSION_EXPIRED`).

use std::cell::Cell;
use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tenure_core::sync::{
    Election, ElectorCallbacks, ElectorConfig, ElectorRun, FenceGate, LeaderElector, Leadership,
    LockGuard, Mutex as SyncMutex, Observer, RecordLock, Session, SessionOptions, Stop,
};
use tenure_core::KeepAlive;

use crate::engine::{engine, tenure};
use crate::error::{guard, invalid, shield, tenure_result, Res};
use crate::kv::{tenure_bytes, tenure_kv};
use crate::util::{arg, boxed, bytes, free, ms, text, to_ms, wait, Out};

/// Locks a std mutex, ignoring poisoning (no code here panics while holding one).
fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// ---- sessions -------------------------------------------------------------------------------

/// A session (SPEC S1): a lease renewed by a background thread until closed, orphaned or lost.
/// Thread-safe: any number of threads may lock, campaign or wait through one session, and
/// another thread may cancel or close it meanwhile; only `tenure_session_free` needs that no
/// other thread is using it. It keeps its engine open until freed (unless the engine is closed
/// with `tenure_close`).
#[derive(Debug)]
pub struct tenure_session {
    s: Session,
    /// Raised by `tenure_session_cancel`: ends this session's waits.
    cancel: Stop,
}

/// Options of a session (`tenure_session_new_with`, `tenure_session_resume_with`), mirroring the
/// Rust `SessionOptions`: fill them with `tenure_session_options_init`, then change what you need.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenure_session_options {
    /// The TTL of the session's lease in ms (> 0); ignored on resume (the lease keeps its own).
    pub ttl_ms: i64,
    /// How often the lease is renewed, in ms: 0 means every third of the TTL, else at most
    /// 9 000 000 000 000 ms (9 000 000 000 s, the core's `MAX_KEEPALIVE_INTERVAL`, the bound of
    /// every interval); above it, or negative, is `TENURE_ERR_INVALID_ARGUMENT`.
    pub keepalive_interval_ms: i64,
}

impl tenure_session_options {
    /// The interval (`None`: a third of the TTL); its bounds are checked by the core.
    fn interval(&self) -> Res<Option<Duration>> {
        match self.keepalive_interval_ms {
            0 => Ok(None),
            n => Ok(Some(ms(n, "keepalive_interval_ms")?)),
        }
    }

    fn core(&self) -> Res<SessionOptions> {
        Ok(SessionOptions {
            ttl: ms(self.ttl_ms, "ttl_ms")?,
            keepalive_interval: self.interval()?,
        })
    }
}

impl Default for tenure_session_options {
    /// The core's defaults (`SessionOptions::default()`).
    fn default() -> Self {
        let d = SessionOptions::default();
        tenure_session_options {
            ttl_ms: to_ms(d.ttl),
            keepalive_interval_ms: d.keepalive_interval.map_or(0, to_ms),
        }
    }
}

/// Fills `opts` with the defaults: a 60000 ms TTL renewed every third of it.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_session_options_init(
    opts: *mut tenure_session_options,
) -> tenure_result {
    guard("tenure_session_options_init", || {
        // SAFETY: the caller promises a writable struct.
        unsafe { Out::new(opts, "opts") }?.set(tenure_session_options::default());
        Ok(())
    })
}

fn new_session(s: Session, out: Out<*mut tenure_session>) {
    out.set(boxed(tenure_session {
        s,
        cancel: Stop::new(),
    }));
}

/// Starts a session: grants a lease of `ttl_ms` (> 0) and renews it every third of its TTL
/// (`tenure_session_new_with` chooses the interval). `*out` is owned by the caller: free it with
/// `tenure_session_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (TTL <= 0),
/// `TENURE_ERR_LEASE_TTL_TOO_LARGE`, `TENURE_ERR_NOT_PRIMARY`, `TENURE_ERR_STORAGE`,
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_session_new(
    db: *const tenure,
    ttl_ms: i64,
    out: *mut *mut tenure_session,
) -> tenure_result {
    guard("tenure_session_new", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        let opts = tenure_session_options {
            ttl_ms,
            keepalive_interval_ms: 0,
        };
        new_session(Session::new(db, opts.core()?)?, out);
        Ok(())
    })
}

/// Starts a session with `opts` (NULL: the defaults of `tenure_session_options_init`): grants a
/// lease of `opts->ttl_ms` and renews it every `opts->keepalive_interval_ms`. Free `*out` with
/// `tenure_session_free`.
///
/// Errors: as `tenure_session_new`; `TENURE_ERR_INVALID_ARGUMENT` also for a negative interval
/// (a huge one saturates rather than overflowing).
#[no_mangle]
pub unsafe extern "C" fn tenure_session_new_with(
    db: *const tenure,
    opts: *const tenure_session_options,
    out: *mut *mut tenure_session,
) -> tenure_result {
    guard("tenure_session_new_with", || {
        // SAFETY: the caller promises a live handle, NULL or a readable struct, a writable pointer.
        let (db, opts, out) = unsafe { (engine(db)?, opts.as_ref(), Out::new(out, "out")?) };
        let opts = opts.copied().unwrap_or_default().core()?;
        new_session(Session::new(db, opts)?, out);
        Ok(())
    })
}

/// Resumes a session on an existing lease (e.g. after a restart: the locks and candidacies it
/// holds are taken over) and starts renewing it every third of its TTL. Free `*out` with
/// `tenure_session_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_LEASE_NOT_FOUND`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_session_resume(
    db: *const tenure,
    lease_id: i64,
    out: *mut *mut tenure_session,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe { session_resume("tenure_session_resume", db, lease_id, std::ptr::null(), out) }
}

/// Like `tenure_session_resume`, renewing every `opts->keepalive_interval_ms` (NULL `opts`: the
/// defaults; `opts->ttl_ms` is ignored: the lease keeps its TTL).
///
/// Errors: as `tenure_session_resume`; `TENURE_ERR_INVALID_ARGUMENT` for a bad interval.
#[no_mangle]
pub unsafe extern "C" fn tenure_session_resume_with(
    db: *const tenure,
    lease_id: i64,
    opts: *const tenure_session_options,
    out: *mut *mut tenure_session,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe { session_resume("tenure_session_resume_with", db, lease_id, opts, out) }
}

/// # Safety
/// As `tenure_session_resume_with`.
unsafe fn session_resume(
    name: &'static str,
    db: *const tenure,
    lease_id: i64,
    opts: *const tenure_session_options,
    out: *mut *mut tenure_session,
) -> tenure_result {
    guard(name, || {
        // SAFETY: the caller promises a live handle, NULL or a readable struct, a writable pointer.
        let (db, opts, out) = unsafe { (engine(db)?, opts.as_ref(), Out::new(out, "out")?) };
        let opts = SessionOptions {
            keepalive_interval: opts.copied().unwrap_or_default().interval()?,
            ..SessionOptions::default()
        };
        new_session(Session::resume(db, lease_id, opts)?, out);
        Ok(())
    })
}

/// The session's lease ID (0 if `s` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_session_lease(s: *const tenure_session) -> i64 {
    // SAFETY: the caller promises NULL or a live session.
    shield("tenure_session_lease", 0, || {
        unsafe { s.as_ref() }.map_or(0, |s| s.s.lease_id().get())
    })
}

/// Whether the session's lease is lost (expired, revoked, closed, or the engine closed);
/// false if `s` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tenure_session_done(s: *const tenure_session) -> bool {
    // SAFETY: the caller promises NULL or a live session.
    shield("tenure_session_done", false, || {
        unsafe { s.as_ref() }.is_some_and(|s| s.s.is_done())
    })
}

/// Blocks until the session's lease is lost (`TENURE_OK`) or `timeout_ms` passes (-1: no
/// limit, 0: only checks) or the session is cancelled (`TENURE_ERR_TIMEOUT` for both).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`timeout_ms` below -1),
/// `TENURE_ERR_TIMEOUT`.
#[no_mangle]
pub unsafe extern "C" fn tenure_session_wait_done(
    s: *const tenure_session,
    timeout_ms: i64,
) -> tenure_result {
    guard("tenure_session_wait_done", || {
        // SAFETY: the caller promises a live session.
        let s = unsafe { arg(s, "s") }?;
        let w = wait(timeout_ms, &s.cancel)?;
        if s.s.wait_done(w.clone()) {
            Ok(())
        } else {
            Err(w.timed_out("the end of the session").into())
        }
    })
}

/// Interrupts, from any thread, every blocking call waiting through this session
/// (`tenure_mutex_lock`, `tenure_election_campaign`, `tenure_session_wait_done`): they return
/// `TENURE_ERR_TIMEOUT` and withdraw their claim. Sticky: later blocking calls through the
/// session return `TENURE_ERR_TIMEOUT` at once (non-blocking ones keep working). The lease is
/// left as it is.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_session_cancel(s: *const tenure_session) -> tenure_result {
    guard("tenure_session_cancel", || {
        // SAFETY: the caller promises a live session.
        unsafe { arg(s, "s") }?.cancel.stop();
        Ok(())
    })
}

/// Stops renewing but keeps the lease: it expires after its TTL unless resumed
/// (`tenure_session_resume`).
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_session_orphan(s: *const tenure_session) -> tenure_result {
    guard("tenure_session_orphan", || {
        // SAFETY: the caller promises a live session.
        unsafe { arg(s, "s") }?.s.orphan();
        Ok(())
    })
}

/// Stops renewing and revokes the lease, deleting every key it holds (locks, candidacies).
/// May be called while other threads wait through the session: their calls return
/// `TENURE_ERR_SESSION_EXPIRED`. Does not free `s`. Closing twice is fine.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED` (the engine
/// closed; the lease is gone with it).
#[no_mangle]
pub unsafe extern "C" fn tenure_session_close(s: *const tenure_session) -> tenure_result {
    guard("tenure_session_close", || {
        // SAFETY: the caller promises a live session.
        Ok(unsafe { arg(s, "s") }?.s.close()?)
    })
}

/// Frees a session. If it was not closed, its lease is orphaned (left to expire). NULL is a
/// no-op. No other thread may be using it.
#[no_mangle]
pub unsafe extern "C" fn tenure_session_free(s: *mut tenure_session) {
    // SAFETY: from tenure_session_new/_resume and freed once, as the caller promises.
    shield("tenure_session_free", (), || unsafe { free(s) })
}

// ---- mutexes --------------------------------------------------------------------------------

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

// ---- elections ------------------------------------------------------------------------------

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

// ---- leader elector -------------------------------------------------------------------------

/// Configuration of a leader elector (SPEC S5). Start from `tenure_elector_config_init`, then
/// set `name` and `identity`. Checked by `tenure_elector_start`: `lease_duration_ms >
/// renew_deadline_ms > retry_period_ms × 1.2`, `renew_deadline_ms + retry_period_ms <
/// lease_duration_ms`, all > 0, name and identity non-empty.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenure_elector_config {
    /// The record key (NUL-terminated UTF-8). Copied by `tenure_elector_start`.
    pub name: *const c_char,
    /// This candidate's identity (NUL-terminated UTF-8, non-empty). Copied.
    pub identity: *const c_char,
    /// TTL of the leader's lease: how long others wait after the leader stops renewing, ms.
    /// Default 15000.
    pub lease_duration_ms: i64,
    /// The leader steps down if it could not renew for this long, ms. Default 10000.
    pub renew_deadline_ms: i64,
    /// How often to try to acquire or renew, ms (with jitter up to 2.2×). Default 2000.
    pub retry_period_ms: i64,
    /// On `tenure_elector_stop`, revoke the leader's lease so another candidate can lead at
    /// once. Default false.
    pub release_on_cancel: bool,
}

/// The callbacks of a leader elector; any may be NULL. They are called one at a time, in order,
/// on one thread the library starts for the elector (never the caller's thread), each with the
/// `user` pointer given to `tenure_elector_start`. They should return promptly: the next
/// callback waits for the previous one. They must not call `tenure_elector_stop` or
/// `tenure_elector_free` on their own elector.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenure_elector_callbacks {
    /// This candidate became leader with `fencing_token` (strictly increasing per record key).
    pub on_started_leading: Option<unsafe extern "C" fn(user: *mut c_void, fencing_token: i64)>,
    /// This candidate stopped leading (lease lost, record taken, or the elector stopped).
    /// Called only after `on_started_leading`, and after it has returned.
    pub on_stopped_leading: Option<unsafe extern "C" fn(user: *mut c_void)>,
    /// The observed leader changed (this candidate included): its identity, NUL-terminated,
    /// valid during the call.
    pub on_new_leader: Option<unsafe extern "C" fn(user: *mut c_void, identity: *const c_char)>,
}

/// A running leader elector (from `tenure_elector_start`). Thread-safe.
#[derive(Debug)]
pub struct tenure_elector {
    id: u64,
    elector: Arc<LeaderElector>,
    /// The campaign loop on its own thread.
    run: ElectorRun,
}

/// The C caller's `user` pointer, handed to the callbacks' thread.
#[derive(Clone, Copy)]
struct User(*mut c_void);
// SAFETY: the header tells the caller that callbacks run on another thread with `user`.
unsafe impl Send for User {}

thread_local! {
    /// The elector whose callback this thread is running, if any (its stop would deadlock).
    static IN_CALLBACK: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Numbers electors, so a callback may stop any elector but its own.
static NEXT_ELECTOR: AtomicU64 = AtomicU64::new(0);

fn callbacks(id: u64, cb: tenure_elector_callbacks, user: User) -> ElectorCallbacks {
    let in_callback = move |f: &mut dyn FnMut()| {
        IN_CALLBACK.with(|c| c.set(Some(id)));
        f();
        IN_CALLBACK.with(|c| c.set(None));
    };
    ElectorCallbacks {
        on_started_leading: Box::new(move |token, _stop| {
            let u = user;
            if let Some(f) = cb.on_started_leading {
                // SAFETY: the caller's function and pointer, as documented.
                in_callback(&mut || unsafe { f(u.0, token) });
            }
        }),
        on_stopped_leading: Box::new(move || {
            let u = user;
            if let Some(f) = cb.on_stopped_leading {
                // SAFETY: as above.
                in_callback(&mut || unsafe { f(u.0) });
            }
        }),
        on_new_leader: Box::new(move |who| {
            let u = user;
            if let Some(f) = cb.on_new_leader {
                let who = c_identity(who);
                // SAFETY: as above; `who` lives through the call.
                in_callback(&mut || unsafe { f(u.0, who.as_ptr()) });
            }
        }),
    }
}

/// Fills `cfg` with client-go's defaults: lease 15000 ms, renew deadline 10000 ms, retry period
/// 2000 ms, no release on cancel, `name` and `identity` NULL (to be set).
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_elector_config_init(
    cfg: *mut tenure_elector_config,
) -> tenure_result {
    guard("tenure_elector_config_init", || {
        // SAFETY: the caller promises a writable struct.
        unsafe { Out::new(cfg, "cfg") }?.set(tenure_elector_config {
            name: std::ptr::null(),
            identity: std::ptr::null(),
            lease_duration_ms: to_ms(ElectorConfig::DEFAULT_LEASE_DURATION),
            renew_deadline_ms: to_ms(ElectorConfig::DEFAULT_RENEW_DEADLINE),
            retry_period_ms: to_ms(ElectorConfig::DEFAULT_RETRY_PERIOD),
            release_on_cancel: false,
        });
        Ok(())
    })
}

/// Checks `cfg` (see `tenure_elector_config`) and starts campaigning on a library thread: it
/// acquires the record when free, renews while leading and calls `cb` (copied) with `user` as it
/// goes, until `tenure_elector_stop`. Free `*out` with `tenure_elector_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER` (`db`, `cfg`, `cfg->name`, `cfg->identity`, `cb`, `out`),
/// `TENURE_ERR_INVALID_ARGUMENT` (inconsistent durations, empty name or identity),
/// `TENURE_ERR_STORAGE` (no thread could be started).
#[no_mangle]
pub unsafe extern "C" fn tenure_elector_start(
    db: *const tenure,
    cfg: *const tenure_elector_config,
    cb: *const tenure_elector_callbacks,
    user: *mut c_void,
    out: *mut *mut tenure_elector,
) -> tenure_result {
    guard("tenure_elector_start", || {
        // SAFETY: the caller promises live structs, strings and a writable pointer.
        let (db, cfg, cb, out) = unsafe {
            (
                engine(db)?,
                arg(cfg, "cfg")?,
                arg(cb, "cb")?,
                Out::new(out, "out")?,
            )
        };
        let config = ElectorConfig {
            // SAFETY: the caller promises NUL-terminated strings.
            name: unsafe { text(cfg.name, "cfg->name") }?.to_string(),
            identity: unsafe { text(cfg.identity, "cfg->identity") }?.to_string(),
            lease_duration: ms(cfg.lease_duration_ms, "lease_duration_ms")?,
            renew_deadline: ms(cfg.renew_deadline_ms, "renew_deadline_ms")?,
            retry_period: ms(cfg.retry_period_ms, "retry_period_ms")?,
            release_on_cancel: cfg.release_on_cancel,
        };
        let id = NEXT_ELECTOR.fetch_add(1, Ordering::Relaxed);
        let elector = Arc::new(LeaderElector::new(
            db,
            config,
            callbacks(id, *cb, User(user)),
        )?);
        let run = elector.spawn(None)?;
        out.set(boxed(tenure_elector { id, elector, run }));
        Ok(())
    })
}

/// Whether this candidate leads now (false if `e` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_elector_is_leader(e: *const tenure_elector) -> bool {
    // SAFETY: the caller promises NULL or a live elector.
    shield("tenure_elector_is_leader", false, || {
        unsafe { e.as_ref() }.is_some_and(|e| e.elector.is_leader())
    })
}

/// An identity as a C string (a NUL inside, possible from another language, shows as `\0`).
fn c_identity(who: &str) -> CString {
    CString::new(who.replace('\0', "\\0")).unwrap_or_default()
}

/// The identity of the leader this elector observed last: `*out` receives it as a
/// NUL-terminated string owned by the caller (free it with `tenure_string_free`), or NULL
/// before any leader was observed. Callable from any thread, its callbacks included.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_elector_leader(
    e: *const tenure_elector,
    out: *mut *mut c_char,
) -> tenure_result {
    guard("tenure_elector_leader", || {
        // SAFETY: the caller promises a live elector and a writable pointer.
        let (e, out) = unsafe { (arg(e, "e")?, Out::new(out, "out")?) };
        out.set(
            e.elector
                .leader()
                .map_or(std::ptr::null_mut(), |who| c_identity(&who).into_raw()),
        );
        Ok(())
    })
}

/// Frees a string the library handed out (`tenure_elector_leader`). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_string_free(s: *mut c_char) {
    shield("tenure_string_free", (), || {
        if !s.is_null() {
            // SAFETY: from `CString::into_raw` in this library, freed once, as the caller promises.
            drop(unsafe { CString::from_raw(s) });
        }
    })
}

/// Stops the elector from any thread but its callbacks': steps down (revoking the lease with
/// `release_on_cancel`), waits until every callback has run (`on_stopped_leading` included, if
/// it was leading) and returns what ended it. Calling it again returns the same result. Does not
/// free `e`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (called from one of its
/// callbacks), `TENURE_ERR_CLOSED` (the engine closed while it ran), `TENURE_ERR_STORAGE`.
#[no_mangle]
pub unsafe extern "C" fn tenure_elector_stop(e: *const tenure_elector) -> tenure_result {
    guard("tenure_elector_stop", || {
        // SAFETY: the caller promises a live elector.
        let e = unsafe { arg(e, "e") }?;
        stop_elector(e)
    })
}

fn stop_elector(e: &tenure_elector) -> Res {
    if IN_CALLBACK.with(Cell::get) == Some(e.id) {
        return Err(invalid(
            "an elector cannot be stopped from its own callbacks (it waits for them)",
        ));
    }
    e.run.stop();
    match e.run.join(None) {
        Some(Err(err)) => Err(err.into()),
        _ => Ok(()),
    }
}

/// Frees an elector, stopping it first if needed (see `tenure_elector_stop`). NULL is a no-op.
/// Not from its own callbacks.
#[no_mangle]
pub unsafe extern "C" fn tenure_elector_free(e: *mut tenure_elector) {
    shield("tenure_elector_free", (), || {
        // SAFETY: from tenure_elector_start and freed once, as the caller promises.
        if let Some(el) = unsafe { e.as_ref() } {
            let _ = stop_elector(el);
        }
        unsafe { free(e) }
    })
}

// ---- fence gate -----------------------------------------------------------------------------

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

// ---- record locks ---------------------------------------------------------------------------

/// Takes the record lock `key` (non-empty) for `owner` for `ttl_ms` (> 0) if it is free (SPEC
/// S6: `SET key owner NX PX ttl`); `*out_fencing_token` receives the fencing token (the key's create
/// revision).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (empty key, TTL <= 0),
/// `TENURE_ERR_LOCKED` (anyone holds it, `owner` included), `TENURE_ERR_NOT_PRIMARY`,
/// `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_record_lock_try_acquire(
    db: *const tenure,
    key: *const u8,
    key_len: usize,
    owner: *const u8,
    owner_len: usize,
    ttl_ms: i64,
    out_fencing_token: *mut i64,
) -> tenure_result {
    guard("tenure_record_lock_try_acquire", || {
        // SAFETY: the caller promises a live handle, readable bytes and a writable pointer.
        let (db, key, owner) = unsafe { record_args(db, key, key_len, owner, owner_len) }?;
        // SAFETY: the caller promises a writable pointer.
        let out = unsafe { Out::new(out_fencing_token, "out_fencing_token") }?;
        out.set(RecordLock::try_acquire(
            db,
            key,
            owner,
            ms(ttl_ms, "ttl_ms")?,
        )?);
        Ok(())
    })
}

/// Extends `owner`'s hold on `key` by a full TTL.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_NOT_LEADER` (`owner` does not hold it),
/// `TENURE_ERR_NOT_PRIMARY`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_record_lock_refresh(
    db: *const tenure,
    key: *const u8,
    key_len: usize,
    owner: *const u8,
    owner_len: usize,
) -> tenure_result {
    guard("tenure_record_lock_refresh", || {
        // SAFETY: the caller promises a live handle and readable bytes.
        let (db, key, owner) = unsafe { record_args(db, key, key_len, owner, owner_len) }?;
        Ok(RecordLock::refresh(db, key, owner)?)
    })
}

/// Releases `key` if `owner` holds it.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_NOT_LEADER` (`owner` does not hold it),
/// `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_record_lock_release(
    db: *const tenure,
    key: *const u8,
    key_len: usize,
    owner: *const u8,
    owner_len: usize,
) -> tenure_result {
    guard("tenure_record_lock_release", || {
        // SAFETY: the caller promises a live handle and readable bytes.
        let (db, key, owner) = unsafe { record_args(db, key, key_len, owner, owner_len) }?;
        Ok(RecordLock::release(db, key, owner)?)
    })
}

/// The engine, key and owner of a record-lock call.
///
/// # Safety
/// As for the calls: a live handle (or NULL) and readable bytes.
unsafe fn record_args<'a>(
    db: *const tenure,
    key: *const u8,
    key_len: usize,
    owner: *const u8,
    owner_len: usize,
) -> Res<(&'a tenure_core::Tenure, &'a [u8], &'a [u8])> {
    // SAFETY: forwarded from the caller.
    unsafe {
        Ok((
            engine(db)?,
            bytes(key, key_len, "key")?,
            bytes(owner, owner_len, "owner")?,
        ))
    }
}

// ---- keep-alive -----------------------------------------------------------------------------

/// A background renewal of one lease (from `tenure_keep_alive_start`), on a library thread, every
/// third of the lease's TTL on the engine's clock. Thread-safe. It ends when freed, when a renew
/// fails (the lease is gone, the engine closed) — never silently: see
/// `tenure_keep_alive_error`.
#[derive(Debug)]
pub struct tenure_keep_alive {
    ka: KeepAlive,
}

/// Starts renewing lease `lease_id`. Free `*out` with `tenure_keep_alive_free`, which stops it
/// (the lease is left as it is).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_LEASE_NOT_FOUND`, `TENURE_ERR_CLOSED`,
/// `TENURE_ERR_STORAGE` (no thread could be started).
#[no_mangle]
pub unsafe extern "C" fn tenure_keep_alive_start(
    db: *const tenure,
    lease_id: i64,
    out: *mut *mut tenure_keep_alive,
) -> tenure_result {
    guard("tenure_keep_alive_start", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        let ka = db.keep_alive(lease_id, None)?;
        out.set(boxed(tenure_keep_alive { ka }));
        Ok(())
    })
}

/// Whether it is still renewing (false after a failed renew, or if `ka` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_keep_alive_is_alive(ka: *const tenure_keep_alive) -> bool {
    // SAFETY: the caller promises NULL or a live keep-alive.
    shield("tenure_keep_alive_is_alive", false, || {
        unsafe { ka.as_ref() }.is_some_and(|k| k.ka.is_alive())
    })
}

/// `TENURE_OK` while renewing; once a renew failed, that failure's code (e.g.
/// `TENURE_ERR_LEASE_NOT_FOUND`, `TENURE_ERR_CLOSED`) with its message in
/// `tenure_last_error_message()`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, or the renew's error as above.
#[no_mangle]
pub unsafe extern "C" fn tenure_keep_alive_error(ka: *const tenure_keep_alive) -> tenure_result {
    guard("tenure_keep_alive_error", || {
        // SAFETY: the caller promises a live keep-alive.
        match unsafe { arg(ka, "ka") }?.ka.error() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    })
}

/// Stops renewing (waiting for the renewal thread to finish) and frees `ka`. The lease is left as
/// it is. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_keep_alive_free(ka: *mut tenure_keep_alive) {
    // SAFETY: from tenure_keep_alive_start and freed once, as the caller promises.
    shield("tenure_keep_alive_free", (), || unsafe { free(ka) })
}
