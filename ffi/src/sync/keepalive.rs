//! Keep-alives: a lease renewed on a library thread until freed or a renew fails.

use tenure_core::KeepAlive;

use crate::engine::{engine, tenure};
use crate::error::{guard, shield, tenure_result};
use crate::util::{arg, boxed, free, Out};

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
