//! Record locks (SPEC S6): `SET key owner NX PX ttl`, refresh and release by owner.

use tenure_core::sync::RecordLock;

use crate::engine::{engine, tenure};
use crate::error::{guard, tenure_result, Res};
use crate::util::{bytes, ms, Out};

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
