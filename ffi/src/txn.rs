//! Transactions: a builder (compares, then a success and a failure list of operations), a
//! commit, and the response.

use tenure_core::{Compare, CompareOp, LeaseId, Op, OpResponse, Txn};

use crate::engine::{engine, tenure};
use crate::error::{guard, invalid, shield, tenure_result, Res};
use crate::kv::tenure_kv_list;
use crate::util::{arg, arg_mut, boxed, bytes, free, Out};

/// How a compare relates the key's current field to the given one.
pub type tenure_compare_op = i32;
/// current == given
pub const TENURE_COMPARE_EQUAL: tenure_compare_op = 0;
/// current > given
pub const TENURE_COMPARE_GREATER: tenure_compare_op = 1;
/// current < given
pub const TENURE_COMPARE_LESS: tenure_compare_op = 2;
/// current != given
pub const TENURE_COMPARE_NOT_EQUAL: tenure_compare_op = 3;

/// The kind of an operation in a transaction response (`tenure_txn_response_op_type`).
pub type tenure_op_type = i32;
/// A put.
pub const TENURE_OP_PUT: tenure_op_type = 0;
/// A get.
pub const TENURE_OP_GET: tenure_op_type = 1;
/// A delete of one key.
pub const TENURE_OP_DELETE: tenure_op_type = 2;
/// A delete of every key with a prefix.
pub const TENURE_OP_DELETE_PREFIX: tenure_op_type = 3;
/// A read of every key with a prefix.
pub const TENURE_OP_RANGE: tenure_op_type = 4;

/// A transaction being built (from `tenure_txn_new`): if every compare holds, the success
/// operations run, else the failure ones; atomically, at one revision. Not thread-safe while
/// being built; committing does not consume it (it can be committed again). Free it with
/// `tenure_txn_free`.
#[derive(Debug)]
pub struct tenure_txn {
    txn: Txn,
}

/// What a committed transaction did (from `tenure_txn_commit`).
#[derive(Debug)]
pub struct tenure_txn_response {
    succeeded: bool,
    revision: i64,
    ops: Vec<OpResult>,
}

#[derive(Debug)]
struct OpResult {
    kind: tenure_op_type,
    revision: i64,
    deleted: u64,
    kvs: Option<tenure_kv_list>,
}

/// A new, empty transaction (no compare: the success branch runs). `*out` is owned by the
/// caller.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_new(out: *mut *mut tenure_txn) -> tenure_result {
    guard("tenure_txn_new", || {
        // SAFETY: the caller promises a writable pointer.
        unsafe { Out::new(out, "out") }?.set(boxed(tenure_txn { txn: Txn::new() }));
        Ok(())
    })
}

/// Frees a transaction. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_free(txn: *mut tenure_txn) {
    // SAFETY: from tenure_txn_new and freed once, as the caller promises.
    shield("tenure_txn_free", (), || unsafe { free(txn) })
}

fn compare_op(op: tenure_compare_op) -> Res<CompareOp> {
    Ok(match op {
        TENURE_COMPARE_EQUAL => CompareOp::Equal,
        TENURE_COMPARE_GREATER => CompareOp::Greater,
        TENURE_COMPARE_LESS => CompareOp::Less,
        TENURE_COMPARE_NOT_EQUAL => CompareOp::NotEqual,
        other => return Err(invalid(format!("unknown compare op {other}"))),
    })
}

/// Adds a compare of a key's field; shared by the `tenure_txn_compare_*` functions.
///
/// # Safety
/// `txn` NULL or live and not used elsewhere; `key` readable for `key_len` bytes.
unsafe fn add_compare(
    func: &str,
    txn: *mut tenure_txn,
    key: *const u8,
    key_len: usize,
    op: tenure_compare_op,
    make: impl FnOnce(&[u8], CompareOp) -> Res<Compare>,
) -> tenure_result {
    guard(func, || {
        // SAFETY: forwarded from the caller.
        let (txn, key) = unsafe { (arg_mut(txn, "txn")?, bytes(key, key_len, "key")?) };
        let c = make(key, compare_op(op)?)?;
        txn.txn.compares.push(c);
        Ok(())
    })
}

/// Adds a compare of the key's value (byte-wise order; a missing key never matches).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (unknown `op`).
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_compare_value(
    txn: *mut tenure_txn,
    key: *const u8,
    key_len: usize,
    op: tenure_compare_op,
    value: *const u8,
    value_len: usize,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        add_compare(
            "tenure_txn_compare_value",
            txn,
            key,
            key_len,
            op,
            |k, op| Ok(Compare::value(k, op, bytes(value, value_len, "value")?)),
        )
    }
}

/// Adds a compare of the key's version (0 for a missing key: `EQUAL 0` = "does not exist").
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (unknown `op`).
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_compare_version(
    txn: *mut tenure_txn,
    key: *const u8,
    key_len: usize,
    op: tenure_compare_op,
    version: i64,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        add_compare(
            "tenure_txn_compare_version",
            txn,
            key,
            key_len,
            op,
            |k, op| Ok(Compare::version(k, op, version)),
        )
    }
}

/// Adds a compare of the key's create revision (0 for a missing key).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (unknown `op`).
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_compare_create_revision(
    txn: *mut tenure_txn,
    key: *const u8,
    key_len: usize,
    op: tenure_compare_op,
    revision: i64,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        add_compare(
            "tenure_txn_compare_create_revision",
            txn,
            key,
            key_len,
            op,
            |k, op| Ok(Compare::create_revision(k, op, revision)),
        )
    }
}

/// Adds a compare of the key's mod revision (0 for a missing key).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (unknown `op`).
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_compare_mod_revision(
    txn: *mut tenure_txn,
    key: *const u8,
    key_len: usize,
    op: tenure_compare_op,
    revision: i64,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        add_compare(
            "tenure_txn_compare_mod_revision",
            txn,
            key,
            key_len,
            op,
            |k, op| Ok(Compare::mod_revision(k, op, revision)),
        )
    }
}

/// Adds a compare of the key's lease (0 for none or a missing key).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (unknown `op`).
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_compare_lease(
    txn: *mut tenure_txn,
    key: *const u8,
    key_len: usize,
    op: tenure_compare_op,
    lease: i64,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        add_compare(
            "tenure_txn_compare_lease",
            txn,
            key,
            key_len,
            op,
            |k, op| {
                Ok(Compare::lease(
                    k,
                    op,
                    (lease != 0).then_some(LeaseId::new(lease)),
                ))
            },
        )
    }
}

/// Appends an operation to the success (`on_success`) or the failure branch.
///
/// # Safety
/// `txn` NULL or live and not used elsewhere.
unsafe fn add_op(
    func: &str,
    txn: *mut tenure_txn,
    on_success: bool,
    make: impl FnOnce() -> Res<Op>,
) -> tenure_result {
    guard(func, || {
        // SAFETY: forwarded from the caller.
        let txn = unsafe { arg_mut(txn, "txn") }?;
        let op = make()?;
        if on_success {
            txn.txn.success.push(op);
        } else {
            txn.txn.failure.push(op);
        }
        Ok(())
    })
}

/// Adds a put of `key` = `value` attached to `lease` (0 = none) to the success
/// (`on_success`) or the failure branch. Keys and leases are checked at commit.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_put(
    txn: *mut tenure_txn,
    on_success: bool,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    lease: i64,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        add_op("tenure_txn_put", txn, on_success, || {
            let (key, value) = (
                bytes(key, key_len, "key")?,
                bytes(value, value_len, "value")?,
            );
            Ok(Op::put(
                key,
                value,
                (lease != 0).then_some(LeaseId::new(lease)),
            ))
        })
    }
}

/// Adds a get of `key` to the success (`on_success`) or the failure branch.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_get(
    txn: *mut tenure_txn,
    on_success: bool,
    key: *const u8,
    key_len: usize,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        add_op("tenure_txn_get", txn, on_success, || {
            Ok(Op::get(bytes(key, key_len, "key")?))
        })
    }
}

/// Adds a delete of `key` to the success (`on_success`) or the failure branch.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_delete(
    txn: *mut tenure_txn,
    on_success: bool,
    key: *const u8,
    key_len: usize,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        add_op("tenure_txn_delete", txn, on_success, || {
            Ok(Op::delete(bytes(key, key_len, "key")?))
        })
    }
}

/// Adds a delete of every key starting with `prefix` to the success (`on_success`) or the
/// failure branch.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_delete_prefix(
    txn: *mut tenure_txn,
    on_success: bool,
    prefix: *const u8,
    prefix_len: usize,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        add_op("tenure_txn_delete_prefix", txn, on_success, || {
            Ok(Op::delete_prefix(bytes(prefix, prefix_len, "prefix")?))
        })
    }
}

/// Adds a read of every key starting with `prefix`, at most `limit` (0 = no limit), to the
/// success (`on_success`) or the failure branch.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_range(
    txn: *mut tenure_txn,
    on_success: bool,
    prefix: *const u8,
    prefix_len: usize,
    limit: usize,
) -> tenure_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        add_op("tenure_txn_range", txn, on_success, || {
            Ok(Op::range(
                bytes(prefix, prefix_len, "prefix")?,
                (limit != 0).then_some(limit),
            ))
        })
    }
}

/// Runs the transaction: atomic, one revision, durable when it returns. `txn` is not consumed
/// (free it with `tenure_txn_free`). `*out` is owned by the caller: free it with
/// `tenure_txn_response_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (an empty key in the branch
/// that runs), `TENURE_ERR_LEASE_NOT_FOUND` (a put's lease), `TENURE_ERR_STORAGE`,
/// `TENURE_ERR_CLOSED`. On an error nothing was written.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_commit(
    db: *const tenure,
    txn: *const tenure_txn,
    out: *mut *mut tenure_txn_response,
) -> tenure_result {
    guard("tenure_txn_commit", || {
        // SAFETY: the caller promises live objects and a writable pointer.
        let (db, txn, out) = unsafe { (engine(db)?, arg(txn, "txn")?, Out::new(out, "out")?) };
        let r = db.txn(txn.txn.clone())?;
        let ops = r
            .responses
            .into_iter()
            .map(|op| {
                let mut o = OpResult {
                    kind: TENURE_OP_PUT,
                    revision: 0,
                    deleted: 0,
                    kvs: None,
                };
                match op {
                    OpResponse::Put { revision } => o.revision = revision,
                    OpResponse::Get(kv) => {
                        o.kind = TENURE_OP_GET;
                        o.kvs = Some(tenure_kv_list::new(kv));
                    }
                    OpResponse::Delete(existed) => {
                        o.kind = TENURE_OP_DELETE;
                        o.deleted = u64::from(existed);
                    }
                    OpResponse::DeletePrefix(n) => {
                        o.kind = TENURE_OP_DELETE_PREFIX;
                        o.deleted = n;
                    }
                    OpResponse::Range(kvs) => {
                        o.kind = TENURE_OP_RANGE;
                        o.kvs = Some(tenure_kv_list::new(kvs));
                    }
                }
                o
            })
            .collect();
        out.set(boxed(tenure_txn_response {
            succeeded: r.succeeded,
            revision: r.revision,
            ops,
        }));
        Ok(())
    })
}

/// # Safety
/// `r` must be NULL or a live response, which outlives the returned reference.
unsafe fn op_at<'a>(r: *const tenure_txn_response, index: usize) -> Option<&'a OpResult> {
    // SAFETY: forwarded from the caller.
    unsafe { r.as_ref() }.and_then(|r| r.ops.get(index))
}

/// Whether every compare held, i.e. the success branch ran (false if `r` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_response_succeeded(r: *const tenure_txn_response) -> bool {
    // SAFETY: the caller promises NULL or a live response.
    shield("tenure_txn_response_succeeded", false, || {
        unsafe { r.as_ref() }.is_some_and(|r| r.succeeded)
    })
}

/// The store revision after the transaction; unchanged when it wrote nothing (0 if `r` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_response_revision(r: *const tenure_txn_response) -> i64 {
    // SAFETY: the caller promises NULL or a live response.
    shield("tenure_txn_response_revision", 0, || {
        unsafe { r.as_ref() }.map_or(0, |r| r.revision)
    })
}

/// Number of operation results: one per operation of the branch that ran (0 if `r` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_response_len(r: *const tenure_txn_response) -> usize {
    // SAFETY: the caller promises NULL or a live response.
    shield("tenure_txn_response_len", 0, || {
        unsafe { r.as_ref() }.map_or(0, |r| r.ops.len())
    })
}

/// The kind of the `index`-th result, a `TENURE_OP_*` (-1 if out of range or `r` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_response_op_type(
    r: *const tenure_txn_response,
    index: usize,
) -> tenure_op_type {
    shield("tenure_txn_response_op_type", -1, || {
        unsafe { op_at(r, index) }.map_or(-1, |o| o.kind)
    })
}

/// `TENURE_OP_PUT`: the revision of the write; 0 for other kinds or out of range.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_response_op_revision(
    r: *const tenure_txn_response,
    index: usize,
) -> i64 {
    shield("tenure_txn_response_op_revision", 0, || {
        unsafe { op_at(r, index) }.map_or(0, |o| o.revision)
    })
}

/// `TENURE_OP_DELETE`: 1 if the key existed, else 0; `TENURE_OP_DELETE_PREFIX`: how many keys
/// were deleted; 0 for other kinds or out of range.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_response_op_deleted(
    r: *const tenure_txn_response,
    index: usize,
) -> u64 {
    shield("tenure_txn_response_op_deleted", 0, || {
        unsafe { op_at(r, index) }.map_or(0, |o| o.deleted)
    })
}

/// `TENURE_OP_GET` (zero or one key-value) and `TENURE_OP_RANGE`: the key-values read; NULL for
/// other kinds or out of range. Borrowed: valid while `r` lives; do not free it.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_response_op_kvs(
    r: *const tenure_txn_response,
    index: usize,
) -> *const tenure_kv_list {
    shield("tenure_txn_response_op_kvs", std::ptr::null(), || {
        unsafe { op_at(r, index) }
            .and_then(|o| o.kvs.as_ref())
            .map_or(std::ptr::null(), |l| l as *const tenure_kv_list)
    })
}

/// Frees a transaction response and everything borrowed from it. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_txn_response_free(r: *mut tenure_txn_response) {
    // SAFETY: from tenure_txn_commit and freed once, as the caller promises.
    shield("tenure_txn_response_free", (), || unsafe { free(r) })
}
