//! TTL keys: put, get, delete, range (now or as at a past revision), revision, compact, and the
//! key-value objects they return.

use tenure_core::etcd::errors::refused_at;
use tenure_core::{KeyValue, LeaseId};

use crate::engine::{engine, tenure};
use crate::error::{guard, invalid, shield, tenure_result};
use crate::util::{boxed, bytes, free, Out};

/// A borrowed byte string returned by accessors: `len` bytes at `data`, valid while the object
/// it came from lives. Not NUL-terminated. `{NULL, 0}` stands for "none".
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenure_bytes {
    /// The first byte (NULL for "none"; may be any non-NULL value when `len` is 0).
    pub data: *const u8,
    /// Number of bytes.
    pub len: usize,
}

impl tenure_bytes {
    pub(crate) const NONE: tenure_bytes = tenure_bytes {
        data: std::ptr::null(),
        len: 0,
    };

    pub(crate) fn of(v: &[u8]) -> tenure_bytes {
        tenure_bytes {
            data: v.as_ptr(),
            len: v.len(),
        }
    }
}

/// A key with its value and revisions (from `tenure_get`, or borrowed from a list or event).
#[derive(Debug)]
pub struct tenure_kv {
    kv: KeyValue,
}

impl tenure_kv {
    pub(crate) fn new(kv: KeyValue) -> tenure_kv {
        tenure_kv { kv }
    }
}

/// Key-values in key order (from `tenure_range`, or borrowed from a transaction response).
#[derive(Debug)]
pub struct tenure_kv_list {
    items: Vec<tenure_kv>,
}

impl tenure_kv_list {
    pub(crate) fn new(kvs: impl IntoIterator<Item = KeyValue>) -> tenure_kv_list {
        tenure_kv_list {
            items: kvs.into_iter().map(tenure_kv::new).collect(),
        }
    }
}

/// Puts `key` (non-empty) = `value`, attached to `lease` (0 = no lease, which detaches the key).
/// `*out_revision` receives the new store revision.
///
/// Errors: `TENURE_ERR_NULL_POINTER` (also a NULL buffer with a non-zero length),
/// `TENURE_ERR_INVALID_ARGUMENT` (empty key), `TENURE_ERR_LEASE_NOT_FOUND`, `TENURE_ERR_STORAGE`,
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_put(
    db: *const tenure,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    lease: i64,
    out_revision: *mut i64,
) -> tenure_result {
    guard("tenure_put", || {
        // SAFETY: the caller promises a live handle and readable buffers.
        let (db, key, value, out) = unsafe {
            (
                engine(db)?,
                bytes(key, key_len, "key")?,
                bytes(value, value_len, "value")?,
                Out::new(out_revision, "out_revision")?,
            )
        };
        let lease = (lease != 0).then_some(LeaseId::new(lease));
        out.set(db.put(key, value, lease)?);
        Ok(())
    })
}

/// Reads a key: `*out` receives a new key-value owned by the caller (free it with
/// `tenure_kv_free`), or NULL when the key does not exist (an empty key never exists).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_get(
    db: *const tenure,
    key: *const u8,
    key_len: usize,
    out: *mut *mut tenure_kv,
) -> tenure_result {
    guard("tenure_get", || {
        // SAFETY: the caller promises a live handle, readable bytes and a writable pointer.
        let (db, key, out) = unsafe {
            (
                engine(db)?,
                bytes(key, key_len, "key")?,
                Out::new(out, "out")?,
            )
        };
        let kv = db.get(key)?;
        out.set(kv.map_or(std::ptr::null_mut(), |kv| boxed(tenure_kv::new(kv))));
        Ok(())
    })
}

/// Reads a key as it was at `revision` (0: the current one), as etcd answers a read at a
/// revision: `*out` receives a new key-value with its value, revisions, version and lease of
/// then, owned by the caller (free it with `tenure_kv_free`), or NULL when the key did not exist
/// then.
///
/// Errors: `TENURE_ERR_COMPACTED` (`revision` is below the compaction point: etcd's "required
/// revision has been compacted"; `tenure_last_error_compact_revision` tells the point),
/// `TENURE_ERR_FUTURE_REVISION` (above the current one: etcd's "required revision is a future
/// revision"), `TENURE_ERR_INVALID_ARGUMENT` (a negative revision), `TENURE_ERR_NULL_POINTER`,
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_get_at(
    db: *const tenure,
    key: *const u8,
    key_len: usize,
    revision: i64,
    out: *mut *mut tenure_kv,
) -> tenure_result {
    guard("tenure_get_at", || {
        // SAFETY: the caller promises a live handle, readable bytes and a writable pointer.
        let (db, key, out) = unsafe {
            (
                engine(db)?,
                bytes(key, key_len, "key")?,
                Out::new(out, "out")?,
            )
        };
        if revision < 0 {
            return Err(invalid(format!(
                "revision {revision} is negative (0: the current one)"
            )));
        }
        let kv = db.get_at(key, revision)?;
        out.set(kv.map_or(std::ptr::null_mut(), |kv| boxed(tenure_kv::new(kv))));
        Ok(())
    })
}

/// Deletes a key (non-empty); `*out_deleted` receives whether it existed.
///
/// Errors: `TENURE_ERR_NULL_POINTER` (also a NULL key with a non-zero length),
/// `TENURE_ERR_INVALID_ARGUMENT` (empty key), `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_delete(
    db: *const tenure,
    key: *const u8,
    key_len: usize,
    out_deleted: *mut bool,
) -> tenure_result {
    guard("tenure_delete", || {
        // SAFETY: the caller promises a live handle and readable bytes.
        let (db, key, out) = unsafe {
            (
                engine(db)?,
                bytes(key, key_len, "key")?,
                Out::new(out_deleted, "out_deleted")?,
            )
        };
        out.set(db.delete(key)?);
        Ok(())
    })
}

/// Deletes every key starting with `prefix` (empty: every key) at one revision;
/// `*out_count` receives how many.
///
/// Errors: `TENURE_ERR_NULL_POINTER` (also a NULL prefix with a non-zero length),
/// `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_delete_prefix(
    db: *const tenure,
    prefix: *const u8,
    prefix_len: usize,
    out_count: *mut u64,
) -> tenure_result {
    guard("tenure_delete_prefix", || {
        // SAFETY: the caller promises a live handle and readable bytes.
        let (db, prefix, out) = unsafe {
            (
                engine(db)?,
                bytes(prefix, prefix_len, "prefix")?,
                Out::new(out_count, "out_count")?,
            )
        };
        out.set(db.delete_prefix(prefix)?);
        Ok(())
    })
}

/// Every key starting with `prefix` (empty: every key), in key order, at most `limit`
/// (0 = no limit). `*out` is owned by the caller: free it with `tenure_kv_list_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_range(
    db: *const tenure,
    prefix: *const u8,
    prefix_len: usize,
    limit: usize,
    out: *mut *mut tenure_kv_list,
) -> tenure_result {
    guard("tenure_range", || {
        // SAFETY: the caller promises a live handle, readable bytes and a writable pointer.
        let (db, prefix, out) = unsafe {
            (
                engine(db)?,
                bytes(prefix, prefix_len, "prefix")?,
                Out::new(out, "out")?,
            )
        };
        let kvs = db.range(prefix, (limit != 0).then_some(limit))?;
        out.set(boxed(tenure_kv_list::new(kvs)));
        Ok(())
    })
}

/// Options of `tenure_range_with`. Zero-initialise (`tenure_range_options o = {0};`); a field
/// left 0 takes its default; a NULL options pointer means every default. Fields are only ever
/// appended, so an initialiser keeps its meaning.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tenure_range_options {
    /// At most this many keys (0 = no limit).
    pub limit: usize,
    /// Read the keys as they were at this revision (0 = the latest), as etcd answers a read at
    /// a revision: values, revisions, versions and leases of then (SPEC K9).
    pub revision: i64,
}

/// [`tenure_range`] with options: every key starting with `prefix` (empty: every key), in key
/// order, at most `opts->limit` (0 = no limit), as it was at `opts->revision` (0 = the latest).
/// `opts` NULL means every default. `*out` is owned by the caller: free it with
/// `tenure_kv_list_free`.
///
/// Errors: as `tenure_get_at`.
#[no_mangle]
pub unsafe extern "C" fn tenure_range_with(
    db: *const tenure,
    prefix: *const u8,
    prefix_len: usize,
    opts: *const tenure_range_options,
    out: *mut *mut tenure_kv_list,
) -> tenure_result {
    guard("tenure_range_with", || {
        // SAFETY: the caller promises a live handle, readable bytes, NULL or live options and a
        // writable pointer.
        let (db, prefix, opts, out) = unsafe {
            (
                engine(db)?,
                bytes(prefix, prefix_len, "prefix")?,
                opts.as_ref().copied().unwrap_or_default(),
                Out::new(out, "out")?,
            )
        };
        if opts.revision < 0 {
            return Err(invalid(format!(
                "revision {} is negative (0: the latest)",
                opts.revision
            )));
        }
        let limit = (opts.limit != 0).then_some(opts.limit);
        let kvs = match opts.revision {
            0 => db.range(prefix, limit)?,
            rev => db.range_at(prefix, limit, rev)?,
        };
        out.set(boxed(tenure_kv_list::new(kvs)));
        Ok(())
    })
}

/// The current store revision (0 for a new database).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_revision(db: *const tenure, out: *mut i64) -> tenure_result {
    guard("tenure_revision", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        out.set(db.revision()?);
        Ok(())
    })
}

/// etcd's Compact: drops the history below `revision`; `revision` itself stays readable
/// (`tenure_get_at`, `tenure_range_with` and watches from it on are answered). The rows it
/// frees are removed in the background; `physical`: the call returns once they are (etcd's
/// physical compaction), so `tenure_defragment` then returns their space.
///
/// Errors: `TENURE_ERR_COMPACTED` (`revision` is at or below an earlier compaction),
/// `TENURE_ERR_FUTURE_REVISION` (above the current one), `TENURE_ERR_INVALID_ARGUMENT` (a
/// revision below 1), `TENURE_ERR_STORAGE`, `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_compact(
    db: *const tenure,
    revision: i64,
    physical: bool,
) -> tenure_result {
    guard("tenure_compact", || {
        // SAFETY: the caller promises a live handle.
        let db = unsafe { engine(db)? };
        if revision < 1 {
            return Err(invalid(format!(
                "compaction revision {revision} is below 1"
            )));
        }
        let done = match physical {
            true => db.compact_physical(revision)?,
            false => db.compact(revision)?,
        };
        match done {
            Ok(_) => Ok(()),
            Err(refusal) => {
                let current = db.revision().unwrap_or(0);
                let compacted = db.compacted_revision().unwrap_or(0);
                Err(refused_at(refusal, revision, current, compacted).into())
            }
        }
    })
}

// ---- accessors ------------------------------------------------------------------------------

/// # Safety
/// `kv` must be NULL or a live key-value, which outlives the returned reference.
unsafe fn kv_ref<'a>(kv: *const tenure_kv) -> Option<&'a KeyValue> {
    // SAFETY: forwarded from the caller.
    unsafe { kv.as_ref() }.map(|k| &k.kv)
}

/// The key (`{NULL, 0}` if `kv` is NULL). Borrowed: valid while `kv` lives.
#[no_mangle]
pub unsafe extern "C" fn tenure_kv_key(kv: *const tenure_kv) -> tenure_bytes {
    shield("tenure_kv_key", tenure_bytes::NONE, || {
        unsafe { kv_ref(kv) }.map_or(tenure_bytes::NONE, |k| tenure_bytes::of(&k.key))
    })
}

/// The value (`{NULL, 0}` if `kv` is NULL; empty for a delete event). Borrowed: valid while `kv`
/// lives.
#[no_mangle]
pub unsafe extern "C" fn tenure_kv_value(kv: *const tenure_kv) -> tenure_bytes {
    shield("tenure_kv_value", tenure_bytes::NONE, || {
        unsafe { kv_ref(kv) }.map_or(tenure_bytes::NONE, |k| tenure_bytes::of(&k.value))
    })
}

/// The revision of the put that created the key (0 if `kv` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_kv_create_revision(kv: *const tenure_kv) -> i64 {
    shield("tenure_kv_create_revision", 0, || {
        unsafe { kv_ref(kv) }.map_or(0, |k| k.create_revision)
    })
}

/// The revision of the last write to the key (0 if `kv` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_kv_mod_revision(kv: *const tenure_kv) -> i64 {
    shield("tenure_kv_mod_revision", 0, || {
        unsafe { kv_ref(kv) }.map_or(0, |k| k.mod_revision)
    })
}

/// Number of puts since creation, 1 after the first (0 if `kv` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_kv_version(kv: *const tenure_kv) -> i64 {
    shield("tenure_kv_version", 0, || {
        unsafe { kv_ref(kv) }.map_or(0, |k| k.version)
    })
}

/// The lease the key is attached to, 0 for none (or if `kv` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_kv_lease(kv: *const tenure_kv) -> i64 {
    shield("tenure_kv_lease", 0, || {
        unsafe { kv_ref(kv) }
            .and_then(|k| k.lease)
            .map_or(0, LeaseId::get)
    })
}

/// Frees a key-value from `tenure_get` (never one borrowed from a list, event or response).
/// NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_kv_free(kv: *mut tenure_kv) {
    // SAFETY: from tenure_get and freed once, as the caller promises.
    shield("tenure_kv_free", (), || unsafe { free(kv) })
}

/// Number of key-values in the list (0 if `list` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_kv_list_len(list: *const tenure_kv_list) -> usize {
    // SAFETY: the caller promises NULL or a live object.
    shield("tenure_kv_list_len", 0, || {
        unsafe { list.as_ref() }.map_or(0, |l| l.items.len())
    })
}

/// The `index`-th key-value, or NULL if out of range or `list` is NULL. Borrowed: valid while
/// `list` lives; do not free it.
#[no_mangle]
pub unsafe extern "C" fn tenure_kv_list_get(
    list: *const tenure_kv_list,
    index: usize,
) -> *const tenure_kv {
    // SAFETY: the caller promises NULL or a live object.
    shield("tenure_kv_list_get", std::ptr::null(), || {
        unsafe { list.as_ref() }
            .and_then(|l| l.items.get(index))
            .map_or(std::ptr::null(), |kv| kv as *const tenure_kv)
    })
}

/// Frees a list from `tenure_range` and every key-value in it (never one borrowed from a
/// transaction response). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_kv_list_free(list: *mut tenure_kv_list) {
    // SAFETY: from tenure_range and freed once, as the caller promises.
    shield("tenure_kv_list_free", (), || unsafe { free(list) })
}
