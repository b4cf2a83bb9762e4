//! The leader elector (SPEC S5), client-go style: its callbacks run on a library thread.

use std::cell::Cell;
use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tenure_core::sync::{ElectorCallbacks, ElectorConfig, ElectorRun, LeaderElector};

use crate::engine::{engine, tenure};
use crate::error::{guard, invalid, shield, tenure_result, Res};
use crate::util::{arg, boxed, free, ms, text, to_ms, Out};

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
    /// once, after `on_started_leading` has returned (at most `lease_duration_ms`): two
    /// leaders' callbacks never overlap. Default false.
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
