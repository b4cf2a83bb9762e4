//! Leases: grant, revoke, renew, introspection, attach/detach, checkpoint, promote/demote and
//! expiry notices.

use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use tenure_core::{Error, ExpiredLease, LeaseId, LeaseInfo, Tenure};

use crate::engine::{engine, tenure};
use crate::error::{guard, shield, tenure_result, Failure, Res};
use crate::kv::tenure_bytes;
use crate::util::{boxed, bytes, free, ms, timeout, to_ms, Out};

/// A lease's TTL, remaining time and attached keys (from `tenure_lease_time_to_live`, or
/// borrowed from a `tenure_lease_list`).
#[derive(Debug)]
pub struct tenure_lease_info {
    info: LeaseInfo,
}

/// Every live lease, in ascending order of remaining time (from `tenure_leases`).
#[derive(Debug)]
pub struct tenure_lease_list {
    items: Vec<tenure_lease_info>,
}

/// One batch of expired leases (from `tenure_expired_next`), each with its ID, TTL and keys:
/// with auto revoke the keys that were deleted with it, with manual revoke the keys a revoke
/// would delete.
#[derive(Debug)]
pub struct tenure_expired {
    leases: Vec<ExpiredLease>,
}

/// Grants a lease of `ttl_ms` (> 0; raised to `min_ttl_ms`). `id` 0 allocates a fresh ID; a
/// positive `id` is used as given. `*out_id` receives the lease ID.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`ttl_ms` <= 0, `id` < 0),
/// `TENURE_ERR_LEASE_EXISTS`, `TENURE_ERR_LEASE_TTL_TOO_LARGE`, `TENURE_ERR_STORAGE`,
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_grant(
    db: *const tenure,
    ttl_ms: i64,
    id: i64,
    out_id: *mut i64,
) -> tenure_result {
    guard("tenure_lease_grant", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out_id, "out_id")?) };
        // Refusals name the TTL as the caller wrote it, in ms (the wording is the core's).
        let refused = || tenure_core::ttl_refused(format!("{ttl_ms} ms"));
        if ttl_ms <= 0 {
            return Err(crate::error::invalid(refused()));
        }
        let ttl = ms(ttl_ms, "ttl_ms")?;
        let granted = if id == 0 {
            db.grant(ttl)
        } else {
            db.grant_with_id(id, ttl)
        };
        let lease = granted.map_err(|e| match e {
            Error::LeaseTtlTooLarge(_) => Failure::new(e.code() as i32, refused()),
            e => e.into(),
        })?;
        out.set(lease.get());
        Ok(())
    })
}

/// Revokes a lease and deletes its attached keys, in one durable write.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_LEASE_NOT_FOUND`, `TENURE_ERR_STORAGE`,
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_revoke(db: *const tenure, id: i64) -> tenure_result {
    guard("tenure_lease_revoke", || {
        // SAFETY: the caller promises a live handle.
        unsafe { engine(db) }?.revoke(id)?;
        Ok(())
    })
}

/// Renews a lease (deadline = now + TTL); `*out_ttl_ms` receives its granted TTL.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_LEASE_NOT_FOUND`,
/// `TENURE_ERR_LEASE_EXPIRED` (held for a manual revoke), `TENURE_ERR_NOT_PRIMARY`,
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_renew(
    db: *const tenure,
    id: i64,
    out_ttl_ms: *mut i64,
) -> tenure_result {
    guard("tenure_lease_renew", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out_ttl_ms, "out_ttl_ms")?) };
        out.set(to_ms(db.renew(id)?));
        Ok(())
    })
}

/// The lease's TTL, remaining time and keys. `*out` is owned by the caller: free it with
/// `tenure_lease_info_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_LEASE_NOT_FOUND`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_time_to_live(
    db: *const tenure,
    id: i64,
    out: *mut *mut tenure_lease_info,
) -> tenure_result {
    guard("tenure_lease_time_to_live", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        let info = db.time_to_live(id)?;
        out.set(boxed(tenure_lease_info { info }));
        Ok(())
    })
}

/// Attaches a key (non-empty) to a lease; a key attached to another lease moves. The key need
/// not exist yet.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (empty key),
/// `TENURE_ERR_LEASE_NOT_FOUND`, `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_attach(
    db: *const tenure,
    id: i64,
    key: *const u8,
    key_len: usize,
) -> tenure_result {
    guard("tenure_lease_attach", || {
        // SAFETY: the caller promises a live handle and `key_len` readable bytes.
        let (db, key) = unsafe { (engine(db)?, bytes(key, key_len, "key")?) };
        db.attach(id, &[key])?;
        Ok(())
    })
}

/// Detaches a key from a lease (a key attached elsewhere is left alone).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_LEASE_NOT_FOUND`, `TENURE_ERR_STORAGE`,
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_detach(
    db: *const tenure,
    id: i64,
    key: *const u8,
    key_len: usize,
) -> tenure_result {
    guard("tenure_lease_detach", || {
        // SAFETY: the caller promises a live handle and `key_len` readable bytes.
        let (db, key) = unsafe { (engine(db)?, bytes(key, key_len, "key")?) };
        db.detach(id, &[key])?;
        Ok(())
    })
}

/// The lease a key is attached to: `*out_id` receives its ID, or 0 when none.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_of(
    db: *const tenure,
    key: *const u8,
    key_len: usize,
    out_id: *mut i64,
) -> tenure_result {
    guard("tenure_lease_of", || {
        // SAFETY: the caller promises a live handle, readable bytes and a writable pointer.
        let (db, key, out) = unsafe {
            (
                engine(db)?,
                bytes(key, key_len, "key")?,
                Out::new(out_id, "out_id")?,
            )
        };
        let lease = db.lease_of(key)?;
        out.set(lease.map_or(0, LeaseId::get));
        Ok(())
    })
}

/// Records a remaining TTL (>= 0 ms) used by the next promote or reopen, durably. Does not move
/// the current deadline.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (negative),
/// `TENURE_ERR_LEASE_NOT_FOUND`, `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_checkpoint(
    db: *const tenure,
    id: i64,
    remaining_ms: i64,
) -> tenure_result {
    guard("tenure_lease_checkpoint", || {
        // SAFETY: the caller promises a live handle.
        let db = unsafe { engine(db) }?;
        db.checkpoint(id, ms(remaining_ms, "remaining_ms")?)?;
        Ok(())
    })
}

/// Every live lease, in ascending order of remaining time. `*out` is owned by the caller: free
/// it with `tenure_lease_list_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_leases(
    db: *const tenure,
    out: *mut *mut tenure_lease_list,
) -> tenure_result {
    guard("tenure_leases", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        let items = db
            .leases()?
            .into_iter()
            .map(|info| tenure_lease_info { info })
            .collect();
        out.set(boxed(tenure_lease_list { items }));
        Ok(())
    })
}

/// Makes the engine primary: every deadline = now + `extend_ms` + (checkpointed remaining, else
/// TTL).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (negative),
/// `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_promote(db: *const tenure, extend_ms: i64) -> tenure_result {
    guard("tenure_promote", || {
        // SAFETY: the caller promises a live handle.
        let db = unsafe { engine(db) }?;
        db.promote(ms(extend_ms, "extend_ms")?)?;
        Ok(())
    })
}

/// Makes the engine a standby: no lease expires and renew fails with `TENURE_ERR_NOT_PRIMARY`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_demote(db: *const tenure) -> tenure_result {
    guard("tenure_demote", || {
        // SAFETY: the caller promises a live handle.
        unsafe { engine(db) }?.demote()?;
        Ok(())
    })
}

/// Whether the engine is the primary.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_is_primary(db: *const tenure, out: *mut bool) -> tenure_result {
    guard("tenure_is_primary", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        out.set(db.is_primary()?);
        Ok(())
    })
}

/// Waits up to `timeout_ms` for the next batch of expired leases: 0 only checks, -1 waits
/// without limit. `*out` is owned by the caller: free it with
/// `tenure_expired_free`. Every handle of an engine shares one queue: each batch is returned
/// once.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`timeout_ms` below -1),
/// `TENURE_ERR_TIMEOUT` (nothing expired in time), `TENURE_ERR_CLOSED` (also when the engine
/// is closed while waiting).
#[no_mangle]
pub unsafe extern "C" fn tenure_expired_next(
    db: *const tenure,
    timeout_ms: i64,
    out: *mut *mut tenure_expired,
) -> tenure_result {
    guard("tenure_expired_next", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        // Unsupported over connect (SPEC R1); disconnected once closed: `recv` reports Closed.
        let rx = db.expired()?;
        let leases = recv(&rx, timeout_ms, "an expired lease", db)?;
        out.set(boxed(tenure_expired { leases }));
        Ok(())
    })
}

/// Waits on a channel for `timeout_ms` (see [`timeout`]) for `what`; a disconnected channel
/// means `db` closed.
pub(crate) fn recv<T>(rx: &Receiver<T>, timeout_ms: i64, what: &str, db: &Tenure) -> Res<T> {
    let closed = || Error::closed(db.path());
    let r = match timeout(timeout_ms)? {
        None => rx.recv().map_err(|_| closed()),
        Some(Duration::ZERO) => rx.try_recv().map_err(|e| match e {
            TryRecvError::Empty => Error::timeout(what, Duration::ZERO),
            TryRecvError::Disconnected => closed(),
        }),
        Some(d) => rx.recv_timeout(d).map_err(|e| match e {
            RecvTimeoutError::Timeout => Error::timeout(what, d),
            RecvTimeoutError::Disconnected => closed(),
        }),
    };
    Ok(r?)
}

// ---- accessors ------------------------------------------------------------------------------

/// The lease's ID (0 if `info` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_info_id(info: *const tenure_lease_info) -> i64 {
    // SAFETY: the caller promises NULL or a live object.
    shield("tenure_lease_info_id", 0, || {
        unsafe { info.as_ref() }.map_or(0, |i| i.info.id.get())
    })
}

/// The granted TTL in ms (0 if `info` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_info_ttl_ms(info: *const tenure_lease_info) -> i64 {
    // SAFETY: the caller promises NULL or a live object.
    shield("tenure_lease_info_ttl_ms", 0, || {
        unsafe { info.as_ref() }.map_or(0, |i| to_ms(i.info.ttl))
    })
}

/// The time left until the deadline in ms, or -1 when the lease has no deadline (a standby)
/// or `info` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_info_remaining_ms(info: *const tenure_lease_info) -> i64 {
    // SAFETY: the caller promises NULL or a live object.
    shield("tenure_lease_info_remaining_ms", -1, || {
        unsafe { info.as_ref() }
            .and_then(|i| i.info.remaining)
            .map_or(-1, to_ms)
    })
}

/// How many keys are attached (0 if `info` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_info_key_count(info: *const tenure_lease_info) -> usize {
    // SAFETY: the caller promises NULL or a live object.
    shield("tenure_lease_info_key_count", 0, || {
        unsafe { info.as_ref() }.map_or(0, |i| i.info.keys.len())
    })
}

/// The `index`-th attached key, in key order; `{NULL, 0}` if out of range or `info` is NULL.
/// Borrowed: valid while `info` lives.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_info_key(
    info: *const tenure_lease_info,
    index: usize,
) -> tenure_bytes {
    // SAFETY: the caller promises NULL or a live object.
    shield("tenure_lease_info_key", tenure_bytes::NONE, || {
        unsafe { info.as_ref() }
            .and_then(|i| i.info.keys.get(index))
            .map_or(tenure_bytes::NONE, |k| tenure_bytes::of(k))
    })
}

/// Frees a lease info from `tenure_lease_time_to_live` (never one borrowed from a list). NULL
/// is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_info_free(info: *mut tenure_lease_info) {
    // SAFETY: from tenure_lease_time_to_live and freed once, as the caller promises.
    shield("tenure_lease_info_free", (), || unsafe { free(info) })
}

/// Number of leases in the list (0 if `list` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_list_len(list: *const tenure_lease_list) -> usize {
    // SAFETY: the caller promises NULL or a live object.
    shield("tenure_lease_list_len", 0, || {
        unsafe { list.as_ref() }.map_or(0, |l| l.items.len())
    })
}

/// The `index`-th lease, or NULL if out of range or `list` is NULL. Borrowed: valid while
/// `list` lives; do not free it.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_list_get(
    list: *const tenure_lease_list,
    index: usize,
) -> *const tenure_lease_info {
    // SAFETY: the caller promises NULL or a live object.
    shield("tenure_lease_list_get", std::ptr::null(), || {
        unsafe { list.as_ref() }
            .and_then(|l| l.items.get(index))
            .map_or(std::ptr::null(), |i| i as *const tenure_lease_info)
    })
}

/// Frees a lease list and every info in it. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_lease_list_free(list: *mut tenure_lease_list) {
    // SAFETY: from tenure_leases and freed once, as the caller promises.
    shield("tenure_lease_list_free", (), || unsafe { free(list) })
}

/// # Safety
/// `e` must be NULL or a live batch, which outlives the returned reference.
unsafe fn expired_at<'a>(e: *const tenure_expired, index: usize) -> Option<&'a ExpiredLease> {
    // SAFETY: forwarded from the caller.
    unsafe { e.as_ref() }.and_then(|e| e.leases.get(index))
}

/// Number of leases in the batch (0 if `e` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_expired_len(e: *const tenure_expired) -> usize {
    // SAFETY: the caller promises NULL or a live object.
    shield("tenure_expired_len", 0, || {
        unsafe { e.as_ref() }.map_or(0, |e| e.leases.len())
    })
}

/// The ID of the `index`-th expired lease (0 if out of range or `e` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_expired_id(e: *const tenure_expired, index: usize) -> i64 {
    shield("tenure_expired_id", 0, || {
        unsafe { expired_at(e, index) }.map_or(0, |l| l.id.get())
    })
}

/// The granted TTL in ms of the `index`-th expired lease (0 if out of range or `e` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_expired_ttl_ms(e: *const tenure_expired, index: usize) -> i64 {
    shield("tenure_expired_ttl_ms", 0, || {
        unsafe { expired_at(e, index) }.map_or(0, |l| to_ms(l.ttl))
    })
}

/// How many keys the `index`-th expired lease had (0 if out of range or `e` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_expired_key_count(e: *const tenure_expired, index: usize) -> usize {
    shield("tenure_expired_key_count", 0, || {
        unsafe { expired_at(e, index) }.map_or(0, |l| l.keys.len())
    })
}

/// The `key_index`-th key of the `index`-th expired lease, in key order; `{NULL, 0}` if out of
/// range or `e` is NULL. Borrowed: valid while `e` lives.
#[no_mangle]
pub unsafe extern "C" fn tenure_expired_key(
    e: *const tenure_expired,
    index: usize,
    key_index: usize,
) -> tenure_bytes {
    shield("tenure_expired_key", tenure_bytes::NONE, || {
        unsafe { expired_at(e, index) }
            .and_then(|l| l.keys.get(key_index))
            .map_or(tenure_bytes::NONE, |k| tenure_bytes::of(k))
    })
}

/// Frees a batch from `tenure_expired_next`. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_expired_free(e: *mut tenure_expired) {
    // SAFETY: from tenure_expired_next and freed once, as the caller promises.
    shield("tenure_expired_free", (), || unsafe { free(e) })
}
