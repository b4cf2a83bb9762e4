//! Online snapshots (SPEC D8).

use std::ffi::{c_char, c_void};

use crate::engine::{engine, tenure};
use crate::error::{guard, invalid, tenure_result};
use crate::util::{text, Out};

/// What `tenure_snapshot` wrote.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tenure_snapshot_info {
    /// The store revision the copy holds: every write up to it, none after.
    pub revision: i64,
    /// The copy's size in bytes.
    pub bytes: u64,
    /// Keys in the copy.
    pub keys: u64,
    /// Leases in the copy.
    pub leases: u64,
}

/// A snapshot's progress callback: `done` rows (keys and leases) of `total` copied. Called on
/// the thread that called `tenure_snapshot`, every few thousand rows and once at the end
/// (`done == total`), with the `user` pointer given to `tenure_snapshot`. It must not call
/// into the same engine's snapshot.
pub type tenure_snapshot_progress_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, done: u64, total: u64)>;

/// Writes a consistent copy of the database, as of one revision, to `path` while other threads
/// keep writing (SPEC D8): built under a temporary name in `path`'s directory, fsynced and
/// renamed over `path`, so a crash or a full disk never leaves a partial file there; the
/// database itself is only read. The copy opens with `tenure_open` and holds exactly the keys
/// and leases as of `out->revision`, each lease's remaining TTL as of the snapshot.
/// `progress` may be NULL.
///
/// Errors: `TENURE_ERR_NULL_POINTER` (`db`, `path`, `out`), `TENURE_ERR_INVALID_ARGUMENT` (an
/// in-memory engine, `path` empty or the database's own file), `TENURE_ERR_STORAGE` (`path`
/// cannot be written; the message names it), `TENURE_ERR_CLOSED`, `TENURE_ERR_UNSUPPORTED`
/// (a handle from `tenure_connect`).
#[no_mangle]
pub unsafe extern "C" fn tenure_snapshot(
    db: *const tenure,
    path: *const c_char,
    progress: tenure_snapshot_progress_fn,
    user: *mut c_void,
    out: *mut tenure_snapshot_info,
) -> tenure_result {
    guard("tenure_snapshot", || {
        // SAFETY: the caller promises a live handle, a NUL-terminated string and a writable
        // struct.
        let (db, path, out) = unsafe { (engine(db)?, text(path, "path")?, Out::new(out, "out")?) };
        if path.is_empty() {
            return Err(invalid("path must not be empty"));
        }
        let info = db.snapshot_with_progress(path, |p| {
            if let Some(f) = progress {
                // SAFETY: the caller's function and pointer, as documented.
                unsafe { f(user, p.done, p.total) }
            }
        })?;
        out.set(tenure_snapshot_info {
            revision: info.revision,
            bytes: info.bytes,
            keys: info.keys,
            leases: info.leases,
        });
        Ok(())
    })
}
