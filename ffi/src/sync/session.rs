//! Sessions (SPEC S1): a kept-alive lease whose waits a C caller can cancel from any thread.

use std::time::Duration;

use tenure_core::sync::{Session, SessionOptions, Stop};

use crate::engine::{engine, tenure};
use crate::error::{guard, shield, tenure_result, Res};
use crate::util::{arg, boxed, free, ms, to_ms, wait, Out};

/// A session (SPEC S1): a lease renewed by a background thread until closed, orphaned or lost.
/// Thread-safe: any number of threads may lock, campaign or wait through one session, and
/// another thread may cancel or close it meanwhile; only `tenure_session_free` needs that no
/// other thread is using it. It keeps its engine open until freed (unless the engine is closed
/// with `tenure_close`).
#[derive(Debug)]
pub struct tenure_session {
    pub(super) s: Session,
    /// Raised by `tenure_session_cancel`: ends this session's waits.
    pub(super) cancel: Stop,
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
