//! Queues (SPEC S10): a FIFO queue and a priority queue in etcd's `contrib/recipes` layouts,
//! each item to exactly one consumer.

use std::ffi::c_char;

use tenure_core::sync::{PriorityQueue, Queue, Stop};

use crate::engine::{engine, tenure};
use crate::error::{guard, invalid, shield, tenure_result, Res};
use crate::kv::tenure_bytes;
use crate::util::{arg, boxed, bytes, free, text, wait, Out};

/// Which queue a handle drives.
#[derive(Debug)]
enum Kind {
    Fifo(Queue),
    Priority(PriorityQueue),
}

/// A queue (SPEC S10), from `tenure_queue_new` (FIFO) or `tenure_priority_queue_new`.
/// Thread-safe: any number of threads may enqueue and dequeue through one handle, and another
/// may cancel its waits meanwhile. It keeps its engine open until freed.
#[derive(Debug)]
pub struct tenure_queue {
    kind: Kind,
    /// Raised by `tenure_queue_cancel`: ends this handle's dequeue waits.
    cancel: Stop,
}

/// An item taken from a queue: its value, owned until `tenure_item_free`.
#[derive(Debug)]
pub struct tenure_item {
    value: Vec<u8>,
}

fn new_queue(kind: Kind, out: Out<*mut tenure_queue>) {
    out.set(boxed(tenure_queue {
        kind,
        cancel: Stop::new(),
    }));
}

/// The FIFO queue `name` (NUL-terminated UTF-8) on `db`: items are `name/<unix ns>` keys, as
/// etcd's `recipe.Queue`. Free `*out` with `tenure_queue_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (name not UTF-8).
#[no_mangle]
pub unsafe extern "C" fn tenure_queue_new(
    db: *const tenure,
    name: *const c_char,
    out: *mut *mut tenure_queue,
) -> tenure_result {
    guard("tenure_queue_new", || {
        // SAFETY: the caller promises a live handle, a string and a writable pointer.
        let (db, name, out) = unsafe { (engine(db)?, text(name, "name")?, Out::new(out, "out")?) };
        new_queue(Kind::Fifo(Queue::new(db, name)), out);
        Ok(())
    })
}

/// The priority queue `name` (NUL-terminated UTF-8) on `db`: items are
/// `name/<priority %05d>/<sequence %016d>` keys, as etcd's `recipe.PriorityQueue`. Free `*out`
/// with `tenure_queue_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (name not UTF-8).
#[no_mangle]
pub unsafe extern "C" fn tenure_priority_queue_new(
    db: *const tenure,
    name: *const c_char,
    out: *mut *mut tenure_queue,
) -> tenure_result {
    guard("tenure_priority_queue_new", || {
        // SAFETY: the caller promises a live handle, a string and a writable pointer.
        let (db, name, out) = unsafe { (engine(db)?, text(name, "name")?, Out::new(out, "out")?) };
        new_queue(Kind::Priority(PriorityQueue::new(db, name)), out);
        Ok(())
    })
}

/// Appends `value` (`value_len` bytes) to a FIFO queue.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (a priority queue: use
/// `tenure_queue_enqueue_priority`; a value over the engine's bound), `TENURE_ERR_STORAGE`,
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_queue_enqueue(
    q: *const tenure_queue,
    value: *const u8,
    value_len: usize,
) -> tenure_result {
    guard("tenure_queue_enqueue", || {
        // SAFETY: the caller promises a live queue and readable bytes.
        let (q, value) = unsafe { (arg(q, "q")?, bytes(value, value_len, "value")?) };
        match &q.kind {
            Kind::Fifo(f) => f.enqueue(value).map(drop).map_err(Into::into),
            Kind::Priority(p) => Err(invalid(format!(
                "queue {:?} is a priority queue: enqueue with tenure_queue_enqueue_priority",
                p.name()
            ))),
        }
    })
}

/// Appends `value` (`value_len` bytes) to a priority queue with `priority` (0 leaves first;
/// FIFO within a priority).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (a FIFO queue; a value
/// over the engine's bound), `TENURE_ERR_UNAVAILABLE` (lost the race for a sequence number too
/// many times), `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_queue_enqueue_priority(
    q: *const tenure_queue,
    value: *const u8,
    value_len: usize,
    priority: u16,
) -> tenure_result {
    guard("tenure_queue_enqueue_priority", || {
        // SAFETY: the caller promises a live queue and readable bytes.
        let (q, value) = unsafe { (arg(q, "q")?, bytes(value, value_len, "value")?) };
        match &q.kind {
            Kind::Priority(p) => p.enqueue(value, priority).map(drop).map_err(Into::into),
            Kind::Fifo(f) => Err(invalid(format!(
                "queue {:?} is a FIFO queue: enqueue with tenure_queue_enqueue",
                f.name()
            ))),
        }
    })
}

fn item(value: Vec<u8>) -> *mut tenure_item {
    boxed(tenure_item { value })
}

/// Takes the first item (FIFO; a priority queue: lowest priority, then oldest), waiting up to
/// `timeout_ms` for one (-1: no limit, 0: only if one is there now). Free `*out` with
/// `tenure_item_free`. Waiting removes nothing: on failure no item was taken.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`timeout_ms` below -1),
/// `TENURE_ERR_TIMEOUT` (also when the queue is cancelled), `TENURE_ERR_STORAGE`,
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_queue_dequeue(
    q: *const tenure_queue,
    timeout_ms: i64,
    out: *mut *mut tenure_item,
) -> tenure_result {
    guard("tenure_queue_dequeue", || {
        // SAFETY: the caller promises a live queue and a writable pointer.
        let (q, out) = unsafe { (arg(q, "q")?, Out::new(out, "out")?) };
        let w = wait(timeout_ms, &q.cancel)?;
        let v = match &q.kind {
            Kind::Fifo(f) => f.dequeue(w)?,
            Kind::Priority(p) => p.dequeue(w)?,
        };
        out.set(item(v));
        Ok(())
    })
}

/// Takes the first item if there is one, never waiting: `*out` is NULL when the queue is empty.
/// Free a non-NULL `*out` with `tenure_item_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_STORAGE`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_queue_try_dequeue(
    q: *const tenure_queue,
    out: *mut *mut tenure_item,
) -> tenure_result {
    guard("tenure_queue_try_dequeue", || {
        // SAFETY: the caller promises a live queue and a writable pointer.
        let (q, out) = unsafe { (arg(q, "q")?, Out::new(out, "out")?) };
        let v: Res<_> = match &q.kind {
            Kind::Fifo(f) => f.try_dequeue().map_err(Into::into),
            Kind::Priority(p) => p.try_dequeue().map_err(Into::into),
        };
        out.set(v?.map_or(std::ptr::null_mut(), item));
        Ok(())
    })
}

/// Ends every dequeue waiting through `q`, now and later, with `TENURE_ERR_TIMEOUT`; callable
/// from any thread. Enqueue and `tenure_queue_try_dequeue` keep working.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_queue_cancel(q: *const tenure_queue) -> tenure_result {
    guard("tenure_queue_cancel", || {
        // SAFETY: the caller promises a live queue.
        unsafe { arg(q, "q") }?.cancel.stop();
        Ok(())
    })
}

/// Frees a queue handle (the queue's items stay). NULL is a no-op. No other thread may be
/// using it.
#[no_mangle]
pub unsafe extern "C" fn tenure_queue_free(q: *mut tenure_queue) {
    // SAFETY: from tenure_queue_new/tenure_priority_queue_new and freed once.
    shield("tenure_queue_free", (), || unsafe { free(q) })
}

/// The item's value (`{NULL, 0}` if `item` is NULL). Borrowed: valid while `item` lives.
#[no_mangle]
pub unsafe extern "C" fn tenure_item_value(item: *const tenure_item) -> tenure_bytes {
    // SAFETY: the caller promises NULL or a live item.
    shield("tenure_item_value", tenure_bytes::NONE, || {
        unsafe { item.as_ref() }.map_or(tenure_bytes::NONE, |i| tenure_bytes::of(&i.value))
    })
}

/// Frees an item. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_item_free(item: *mut tenure_item) {
    // SAFETY: from tenure_queue_dequeue/_try_dequeue and freed once.
    shield("tenure_item_free", (), || unsafe { free(item) })
}
