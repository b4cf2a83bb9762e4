//! Watches: a stream of put and delete events for a key or a prefix.

use std::sync::Mutex;

use tenure_core::{Error, Event, EventKind, WatchOptions, Watcher};

use crate::engine::{engine, tenure};
use crate::error::{guard, invalid, shield, tenure_result};
use crate::kv::tenure_kv;
use crate::util::{arg, boxed, bytes, free, timeout, Out};

/// Watch every key starting with the given key, not just the key itself (`tenure_watch` flag).
pub const TENURE_WATCH_PREFIX: u32 = 1;
/// Include the previous key-value in each event, when there was one (`tenure_watch` flag).
pub const TENURE_WATCH_PREV_KV: u32 = 2;

/// What happened to a key (returned by `tenure_event_type`).
pub type tenure_event_kind = i32;
/// The key was created or overwritten.
pub const TENURE_EVENT_PUT: tenure_event_kind = 0;
/// The key was deleted (explicitly, by a transaction, or with its lease).
pub const TENURE_EVENT_DELETE: tenure_event_kind = 1;

/// A watch (from `tenure_watch`). Events arrive in revision order. It may be used from any
/// thread; concurrent `tenure_watcher_next` calls on one watcher take turns. It stays valid
/// after its engine closes (then `tenure_watcher_next` returns `TENURE_ERR_CLOSED`); free it
/// with `tenure_watcher_free`, which cancels the watch.
#[derive(Debug)]
pub struct tenure_watcher {
    w: Mutex<Watcher>,
}

/// One event (from `tenure_watcher_next`).
#[derive(Debug)]
pub struct tenure_event {
    kind: tenure_event_kind,
    revision: i64,
    kv: tenure_kv,
    prev_kv: Option<tenure_kv>,
}

/// Watches `key` (with `TENURE_WATCH_PREFIX`: every key starting with it; an empty prefix
/// watches everything). `flags` is a bitwise OR of `TENURE_WATCH_*`. `start_revision` 0 watches
/// from now on; a positive one first replays the retained history from that revision. `*out`
/// is owned by the caller: free it with `tenure_watcher_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (unknown flag, negative
/// start revision), `TENURE_ERR_COMPACTED` (start revision older than the retained history),
/// `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_watch(
    db: *const tenure,
    key: *const u8,
    key_len: usize,
    flags: u32,
    start_revision: i64,
    out: *mut *mut tenure_watcher,
) -> tenure_result {
    guard("tenure_watch", || {
        // SAFETY: the caller promises a live handle, readable bytes and a writable pointer.
        let (db, key, out) = unsafe {
            (
                engine(db)?,
                bytes(key, key_len, "key")?,
                Out::new(out, "out")?,
            )
        };
        let unknown = flags & !(TENURE_WATCH_PREFIX | TENURE_WATCH_PREV_KV);
        if unknown != 0 {
            return Err(invalid(format!("unknown watch flags {unknown:#x}")));
        }
        let opts = WatchOptions {
            prefix: flags & TENURE_WATCH_PREFIX != 0,
            prev_kv: flags & TENURE_WATCH_PREV_KV != 0,
            start_revision: (start_revision != 0).then_some(start_revision),
        };
        let w = db.watch(key, opts)?;
        out.set(boxed(tenure_watcher { w: Mutex::new(w) }));
        Ok(())
    })
}

/// Waits up to `timeout_ms` for the next event: 0 only checks, -1 waits without limit. `*out` is owned by the caller: free it with `tenure_event_free`.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (`timeout_ms` below -1),
/// `TENURE_ERR_TIMEOUT` (no event in time),
/// `TENURE_ERR_COMPACTED` (the watcher fell too far behind and was cancelled; the message names
/// the revision to resume from), `TENURE_ERR_CLOSED` (the engine closed).
#[no_mangle]
pub unsafe extern "C" fn tenure_watcher_next(
    w: *const tenure_watcher,
    timeout_ms: i64,
    out: *mut *mut tenure_event,
) -> tenure_result {
    guard("tenure_watcher_next", || {
        // SAFETY: the caller promises a live watcher and a writable pointer.
        let (w, out) = unsafe { (arg(w, "w")?, Out::new(out, "out")?) };
        let timeout = timeout(timeout_ms)?;
        let mut w = w.w.lock().unwrap_or_else(|p| p.into_inner());
        let ev = match timeout {
            None => w.recv()?,
            Some(std::time::Duration::ZERO) => w
                .try_recv()?
                .ok_or_else(|| Error::timeout("a watch event", std::time::Duration::ZERO))?,
            Some(d) => w.recv_timeout(d)?,
        };
        out.set(boxed(event(ev)));
        Ok(())
    })
}

fn event(ev: Event) -> tenure_event {
    tenure_event {
        kind: match ev.kind {
            EventKind::Put => TENURE_EVENT_PUT,
            EventKind::Delete => TENURE_EVENT_DELETE,
        },
        revision: ev.revision(),
        kv: tenure_kv::new(ev.kv),
        prev_kv: ev.prev_kv.map(tenure_kv::new),
    }
}

/// Frees a watcher and cancels its watch. NULL is a no-op. No other thread may be inside
/// `tenure_watcher_next` on it.
#[no_mangle]
pub unsafe extern "C" fn tenure_watcher_free(w: *mut tenure_watcher) {
    // SAFETY: from tenure_watch and freed once, as the caller promises.
    shield("tenure_watcher_free", (), || unsafe { free(w) })
}

/// `TENURE_EVENT_PUT` or `TENURE_EVENT_DELETE` (-1 if `ev` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_event_type(ev: *const tenure_event) -> tenure_event_kind {
    // SAFETY: the caller promises NULL or a live event.
    shield("tenure_event_type", -1, || {
        unsafe { ev.as_ref() }.map_or(-1, |e| e.kind)
    })
}

/// The revision of the write that made the event (0 if `ev` is NULL).
#[no_mangle]
pub unsafe extern "C" fn tenure_event_revision(ev: *const tenure_event) -> i64 {
    // SAFETY: the caller promises NULL or a live event.
    shield("tenure_event_revision", 0, || {
        unsafe { ev.as_ref() }.map_or(0, |e| e.revision)
    })
}

/// The key-value after the change (NULL if `ev` is NULL). For a delete: the key, an empty
/// value, the deleting revision as mod revision, create revision and version 0. Borrowed: valid
/// while `ev` lives.
#[no_mangle]
pub unsafe extern "C" fn tenure_event_kv(ev: *const tenure_event) -> *const tenure_kv {
    // SAFETY: the caller promises NULL or a live event.
    shield("tenure_event_kv", std::ptr::null(), || {
        unsafe { ev.as_ref() }.map_or(std::ptr::null(), |e| &e.kv as *const tenure_kv)
    })
}

/// The key-value before the change, or NULL when the watch did not ask for it
/// (`TENURE_WATCH_PREV_KV`), the key did not exist, or `ev` is NULL. Borrowed: valid while `ev`
/// lives.
#[no_mangle]
pub unsafe extern "C" fn tenure_event_prev_kv(ev: *const tenure_event) -> *const tenure_kv {
    // SAFETY: the caller promises NULL or a live event.
    shield("tenure_event_prev_kv", std::ptr::null(), || {
        unsafe { ev.as_ref() }
            .and_then(|e| e.prev_kv.as_ref())
            .map_or(std::ptr::null(), |kv| kv as *const tenure_kv)
    })
}

/// Frees an event. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_event_free(ev: *mut tenure_event) {
    // SAFETY: from tenure_watcher_next and freed once, as the caller promises.
    shield("tenure_event_free", (), || unsafe { free(ev) })
}
