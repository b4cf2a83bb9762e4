//! Engine handles, options, the manual clock, stats and the library-level functions.

use std::ffi::{c_char, CStr};
use std::sync::Arc;

#[cfg(feature = "remote")]
use tenure_core::Credentials;
use tenure_core::{Builder, Clock, Durability, Error, ManualClock, Recovery, Stats, Tenure};

use crate::error::{
    c_name_of, guard, invalid, last_compact_revision, last_error_ptr, null, set_last_error, shield,
    tenure_result, Res,
};
#[cfg(feature = "remote")]
use crate::util::text;
use crate::util::{arg, boxed, free, ms, to_ms, Out};

/// An engine handle. Thread-safe: any number of threads may call functions on one handle at
/// once. Each handle (from `tenure_open` or `tenure_clone`) is released exactly once, with
/// `tenure_close` or `tenure_free`, when no other thread is still using *that* handle.
#[derive(Debug)]
pub struct tenure {
    pub(crate) db: Tenure,
}

/// A manual clock for deterministic tests: time moves only with `tenure_clock_advance`.
/// Thread-safe. An engine opened with it keeps its own reference, so the clock may be freed
/// before the engine.
#[derive(Debug)]
pub struct tenure_clock {
    clock: Arc<ManualClock>,
}

/// How writes are acknowledged (`tenure_options.durability`).
pub type tenure_durability = i32;
/// Every write is on disk (fsync) when the call returns; concurrent writers share commits.
pub const TENURE_DURABILITY_IMMEDIATE: tenure_durability = 0;
/// Writes are acknowledged after the in-memory apply and a commit starts at least every
/// `flush_interval_ms`; a crash loses at most the last interval plus the commit in progress.
pub const TENURE_DURABILITY_BUFFERED: tenure_durability = 1;

/// How lease deadlines are rebuilt on open (`tenure_options.recovery`).
pub type tenure_recovery = i32;
/// Remaining TTL = last persisted remaining time minus the wall-clock time since (default).
pub const TENURE_RECOVERY_WALL: tenure_recovery = 0;
/// etcd's model: every lease restarts from its checkpointed remaining TTL (else its TTL) plus
/// `extend_ms`.
pub const TENURE_RECOVERY_EXTEND: tenure_recovery = 1;

/// Engine options. Always start from `tenure_options_init`, then change fields; a NULL options
/// pointer to `tenure_open` means the defaults. Every time in ms is at most 9 000 000 000 000
/// (9 000 000 000 s, the core's `MAX_DURATION`) and the watch sizes at most 16 777 216 (the
/// core's `MAX_WATCH_EVENTS`); beyond them, `TENURE_ERR_INVALID_ARGUMENT`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenure_options {
    /// `TENURE_DURABILITY_IMMEDIATE` (default) or `TENURE_DURABILITY_BUFFERED`.
    pub durability: tenure_durability,
    /// Buffered durability: the longest time between commits, ms (> 0). Default 10.
    pub flush_interval_ms: i64,
    /// `TENURE_RECOVERY_WALL` (default) or `TENURE_RECOVERY_EXTEND`.
    pub recovery: tenure_recovery,
    /// Extend recovery: time added to every lease on open, ms (>= 0). Default 0.
    pub extend_ms: i64,
    /// TTLs below this are raised to it, ms (>= 0). Default 0.
    pub min_ttl_ms: i64,
    /// How often renewed leases' remaining TTLs are persisted, ms (> 0). Default 5000.
    pub checkpoint_interval_ms: i64,
    /// Manual revoke: how long until an expired, unrevoked lease is delivered again, ms (> 0).
    /// Default 3000.
    pub expired_retry_interval_ms: i64,
    /// Open as primary (expires leases; default) or standby.
    pub primary: bool,
    /// Revoke expired leases automatically (default) or leave them to the application.
    pub auto_revoke: bool,
    /// Events kept so a watch can start from a past revision. Default 10000.
    pub watch_history: usize,
    /// Undelivered events a watcher may have before it is cancelled. Default 10000.
    pub watch_queue: usize,
    /// The time source: NULL (default) for the system clock, or a clock from
    /// `tenure_clock_manual_new`. Borrowed: the engine takes its own reference.
    pub clock: *const tenure_clock,
    /// Shared mode (default false): any number of processes of this user open the same path
    /// with `shared` true and see one database, no server to run. The first owns the file (the
    /// engine runs in it) and serves the others over a unix socket beside it; when it closes
    /// or dies another takes over and every process reconnects by itself. `tenure_stats.owner`
    /// says whether this process owns the file; in one that does not, engine-only calls
    /// (`tenure_expired_next`, `tenure_promote`, `tenure_demote`, `tenure_lease_checkpoint`)
    /// return `TENURE_ERR_UNSUPPORTED` naming the call. Needs a path. A process that does not own
    /// the file talks to the owner over a unix socket: the first shared open sets SIGPIPE to
    /// ignored if it is at its default (as `tenure_connect` does; a handler the program set is
    /// left alone), so a write to an owner that just died is an error, not the end of the process.
    pub shared: bool,
    /// The file's space quota in bytes (SPEC E20): a write that would take the file to it
    /// fails with `TENURE_ERR_QUOTA_EXCEEDED` and raises a NOSPACE alarm (`tenure_alarms`).
    /// 0 (default): none.
    pub quota_backend_bytes: u64,
    /// The member ID the engine raises its own alarms as. Default 0.
    pub member_id: u64,
}

impl Default for tenure_options {
    /// The core's defaults (`tenure::Builder`).
    fn default() -> Self {
        tenure_options {
            durability: TENURE_DURABILITY_IMMEDIATE,
            flush_interval_ms: to_ms(Builder::DEFAULT_FLUSH_INTERVAL),
            recovery: TENURE_RECOVERY_WALL,
            extend_ms: 0,
            min_ttl_ms: 0,
            checkpoint_interval_ms: to_ms(Builder::DEFAULT_CHECKPOINT_INTERVAL),
            expired_retry_interval_ms: to_ms(Builder::DEFAULT_EXPIRED_RETRY_INTERVAL),
            primary: true,
            auto_revoke: true,
            watch_history: Builder::DEFAULT_WATCH_HISTORY,
            watch_queue: Builder::DEFAULT_WATCH_QUEUE,
            clock: std::ptr::null(),
            shared: false,
            quota_backend_bytes: 0,
            member_id: 0,
        }
    }
}

/// The engine behind a handle, or `TENURE_ERR_NULL_POINTER`.
///
/// # Safety
/// `db` must be NULL or a live handle.
pub(crate) unsafe fn engine<'a>(db: *const tenure) -> Res<&'a Tenure> {
    // SAFETY: forwarded from the caller.
    Ok(&unsafe { arg(db, "db") }?.db)
}

fn builder(path: Option<&str>, o: &tenure_options) -> Res<tenure_core::Builder> {
    let durability = match o.durability {
        TENURE_DURABILITY_IMMEDIATE => Durability::Immediate,
        TENURE_DURABILITY_BUFFERED => {
            Durability::Buffered(ms(o.flush_interval_ms, "flush_interval_ms")?)
        }
        other => return Err(invalid(format!("unknown durability {other}"))),
    };
    let recovery = match o.recovery {
        TENURE_RECOVERY_WALL => Recovery::Wall,
        TENURE_RECOVERY_EXTEND => Recovery::Extend(ms(o.extend_ms, "extend_ms")?),
        other => return Err(invalid(format!("unknown recovery mode {other}"))),
    };
    let mut b = Tenure::builder()
        .durability(durability)
        .recovery(recovery)
        .min_ttl(ms(o.min_ttl_ms, "min_ttl_ms")?)
        .checkpoint_interval(ms(o.checkpoint_interval_ms, "checkpoint_interval_ms")?)
        .expired_retry_interval(ms(
            o.expired_retry_interval_ms,
            "expired_retry_interval_ms",
        )?)
        .primary(o.primary)
        .auto_revoke(o.auto_revoke)
        .watch_history(o.watch_history)
        .watch_queue(o.watch_queue)
        .shared(o.shared)
        .quota_backend_bytes((o.quota_backend_bytes > 0).then_some(o.quota_backend_bytes))
        .member_id(o.member_id);
    // SAFETY: the caller promises `clock` is NULL or a live clock.
    if let Some(c) = unsafe { o.clock.as_ref() } {
        b = b.clock(c.clock.clone() as Arc<dyn Clock>);
    }
    if let Some(p) = path {
        b = b.path(p);
    }
    Ok(b)
}

/// Fills `opts` with the defaults: immediate durability (flush interval 10 ms), wall recovery
/// (extend 0), min TTL 0, checkpoint interval 5000 ms, expired retry interval 3000 ms, primary,
/// auto revoke, watch history and queue 10000, system clock, not shared, no space quota,
/// member ID 0.
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_options_init(opts: *mut tenure_options) -> tenure_result {
    guard("tenure_options_init", || {
        // SAFETY: the caller promises a writable struct.
        unsafe { Out::new(opts, "opts") }?.set(tenure_options::default());
        Ok(())
    })
}

/// Opens (or creates) the database at `path`, a NUL-terminated UTF-8 path; NULL keeps
/// everything in memory. `opts` NULL means the defaults. On success `*out` is a new handle,
/// owned by the caller: release it with `tenure_close` (or `tenure_free`).
///
/// Errors: `TENURE_ERR_NULL_POINTER` (`out`), `TENURE_ERR_INVALID_ARGUMENT` (path not UTF-8 or
/// empty, bad option), `TENURE_ERR_ALREADY_OPEN` (the file is open elsewhere without `shared`;
/// the message names both ways to share it: `shared` and `tenure serve`), `TENURE_ERR_CORRUPT`,
/// `TENURE_ERR_STORAGE`.
#[no_mangle]
pub unsafe extern "C" fn tenure_open(
    path: *const c_char,
    opts: *const tenure_options,
    out: *mut *mut tenure,
) -> tenure_result {
    guard("tenure_open", || {
        // SAFETY: the caller promises a writable pointer.
        let out = unsafe { Out::new(out, "out") }?;
        let path = if path.is_null() {
            None
        } else {
            // SAFETY: the caller promises a NUL-terminated string.
            let p = unsafe { CStr::from_ptr(path) }
                .to_str()
                .map_err(|e| invalid(format!("path is not valid UTF-8: {e}")))?;
            if p.is_empty() {
                return Err(invalid(
                    "path must not be empty (pass NULL for an in-memory engine)",
                ));
            }
            Some(p)
        };
        // SAFETY: the caller promises NULL or a live options struct.
        let opts = unsafe { opts.as_ref() }.copied().unwrap_or_default();
        if opts.shared {
            crate::sigpipe::ignore_if_default();
        }
        let db = builder(path, &opts)?.open()?;
        out.set(boxed(tenure { db }));
        Ok(())
    })
}

/// Options of `tenure_connect`. Zero-initialise; a field left 0 (or NULL) takes its default; a
/// NULL options pointer means every default. Fields are only ever appended.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenure_connect_options {
    /// The deadline of every call, retries included, ms (>= 0; 0 = the default, 5000).
    pub request_timeout_ms: i64,
    /// PEM file of the CA bundle the server's certificate must chain to (`https://` endpoints);
    /// NULL = the system's roots.
    pub ca_file: *const c_char,
    /// PEM files of the client certificate and its key, for a server that requires one (mutual
    /// TLS); both or neither.
    pub cert_file: *const c_char,
    /// See `cert_file`.
    pub key_file: *const c_char,
    /// The name the server's certificate must carry, instead of the URL's host; NULL = the host.
    pub server_name: *const c_char,
    /// etcd's user name (a cluster with auth enabled), with `password`; NULL = no user. The
    /// token is fetched again whenever the server says it expired.
    pub user: *const c_char,
    /// See `user`.
    pub password: *const c_char,
}

impl Default for tenure_connect_options {
    fn default() -> Self {
        let null = std::ptr::null();
        tenure_connect_options {
            request_timeout_ms: 0,
            ca_file: null,
            cert_file: null,
            key_file: null,
            server_name: null,
            user: null,
            password: null,
        }
    }
}

/// An optional NUL-terminated UTF-8 option (NULL: not given).
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string.
#[cfg(feature = "remote")]
unsafe fn option(ptr: *const c_char, name: &str) -> Res<Option<String>> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL; the caller promises a NUL-terminated string.
    let s = unsafe { text(ptr, name) }?;
    Ok(Some(s.to_owned()))
}

/// The TLS and credential options of `o`, as given (the core checks that the pairs are whole).
///
/// # Safety
/// Each non-NULL string field of `o` must point to a NUL-terminated string.
#[cfg(feature = "remote")]
unsafe fn credentials(o: &tenure_connect_options) -> Res<Credentials> {
    // SAFETY (every `option` below): the caller's promise about `o`'s strings.
    unsafe {
        Ok(Credentials {
            ca_file: option(o.ca_file, "ca_file")?.map(Into::into),
            cert_file: option(o.cert_file, "cert_file")?.map(Into::into),
            key_file: option(o.key_file, "key_file")?.map(Into::into),
            server_name: option(o.server_name, "server_name")?,
            user: option(o.user, "user")?,
            password: option(o.password, "password")?,
        })
    }
}

/// Connects to an etcd v3 server — `tenure serve` or an etcd cluster — at `url`
/// (`http://HOST:PORT` or `https://HOST:PORT`, several comma-separated) and returns the same
/// kind of handle as `tenure_open`: keys, leases, watches and every coordination object work
/// over it; engine-only calls fail with `TENURE_ERR_UNSUPPORTED`, network failures with
/// `TENURE_ERR_UNAVAILABLE`. Release it with `tenure_close` (or `tenure_free`).
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (bad URL or option, an
/// unreadable certificate file), `TENURE_ERR_UNAVAILABLE` (no server answered within the
/// deadline), `TENURE_ERR_UNAUTHENTICATED` (TLS refused: wrong CA, name or client certificate;
/// wrong user or password; the message names the endpoint and the cause).
///
/// Sets SIGPIPE to ignored if it is at its default (a handler the program set is left alone), so
/// a write to a server that just closed its end is an error, not the end of the process.
#[no_mangle]
pub unsafe extern "C" fn tenure_connect(
    url: *const c_char,
    opts: *const tenure_connect_options,
    out: *mut *mut tenure,
) -> tenure_result {
    guard("tenure_connect", || {
        // SAFETY: the caller promises a writable pointer.
        let out = unsafe { Out::new(out, "out") }?;
        // SAFETY: the caller promises a NUL-terminated string.
        let url = unsafe { arg(url, "url") }?;
        // SAFETY: as above: `arg` checked it is not NULL.
        let url = unsafe { CStr::from_ptr(url) }
            .to_str()
            .map_err(|e| invalid(format!("url is not valid UTF-8: {e}")))?;
        // SAFETY: the caller promises NULL or a live options struct.
        let opts = unsafe { opts.as_ref() }.copied().unwrap_or_default();
        crate::sigpipe::ignore_if_default();
        // SAFETY: the caller promises NUL-terminated strings in the options' string fields.
        let db = unsafe { connect(url, &opts) }?;
        out.set(boxed(tenure { db }));
        Ok(())
    })
}

/// The network client of `tenure_connect` (cargo feature `remote`, on by default).
///
/// # Safety
/// Each non-NULL string field of `opts` must point to a NUL-terminated string.
#[cfg(feature = "remote")]
unsafe fn connect(url: &str, opts: &tenure_connect_options) -> Res<Tenure> {
    let mut b = tenure_core::ConnectOptions::new().endpoints([url]);
    if opts.request_timeout_ms != 0 {
        b = b.request_timeout(ms(opts.request_timeout_ms, "request_timeout_ms")?);
    }
    // SAFETY: the caller's promise about `opts`' strings.
    Ok(b.credentials(unsafe { credentials(opts) }?).connect()?)
}

/// A lean libtenure (`make install REMOTE=0`, `--no-default-features`) has no network client:
/// `tenure_connect` keeps its symbol and signature, so the ABI and the header do not depend on
/// the build, and answers `TENURE_ERR_UNSUPPORTED`.
///
/// # Safety
/// Nothing is dereferenced; `unsafe` only to match the remote build's signature.
#[cfg(not(feature = "remote"))]
unsafe fn connect(url: &str, _opts: &tenure_connect_options) -> Res<Tenure> {
    Err(crate::error::Failure::new(
        crate::error::TENURE_ERR_UNSUPPORTED,
        format!(
            "cannot connect to {url}: this libtenure was built without the network client \
             (REMOTE=0, cargo feature `remote` off); use a full build for tenure_connect"
        ),
    ))
}

/// A second handle to the same engine, for another owner or thread. Every handle is released
/// on its own (`tenure_close` or `tenure_free`); the engine closes when `tenure_close` is called
/// on any handle, or when the last handle is freed.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_CLOSED`.
#[no_mangle]
pub unsafe extern "C" fn tenure_clone(db: *const tenure, out: *mut *mut tenure) -> tenure_result {
    guard("tenure_clone", || {
        // SAFETY: the caller promises a live handle and a writable pointer.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        // `Clone` cannot fail in Rust; a closed engine must not hand out new handles.
        if db.is_closed() {
            return Err(Error::closed(db.path()).into());
        }
        let db = db.clone();
        out.set(boxed(tenure { db }));
        Ok(())
    })
}

/// Closes the engine (checkpoints leases, flushes pending writes, stops its threads, releases
/// the file) and frees this handle, which must not be used again. Other handles to the engine
/// then get `TENURE_ERR_CLOSED` and must still be released with `tenure_free`. Blocked
/// `tenure_expired_next` and `tenure_watcher_next` calls return `TENURE_ERR_CLOSED`. If the final
/// flush fails its message is left in `tenure_last_error_message()`. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_close(db: *mut tenure) {
    shield("tenure_close", (), || {
        if db.is_null() {
            return;
        }
        // SAFETY: from tenure_open/tenure_clone and released once, as the caller promises.
        let handle = unsafe { Box::from_raw(db) };
        if let Err(e) = handle.db.close() {
            set_last_error(&format!("tenure_close: {e}"));
        }
        drop(handle);
    })
}

/// Frees a handle without closing the engine, unless it is the engine's last handle (then the
/// engine is closed as by `tenure_close`). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_free(db: *mut tenure) {
    // SAFETY: from tenure_open/tenure_clone and released once, as the caller promises.
    shield("tenure_free", (), || unsafe { free(db) })
}

/// Reads the engine's counters into `*out`. Like the Rust API, still works after the engine is
/// closed (the final counters).
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_stats_read(db: *const tenure, out: *mut Stats) -> tenure_result {
    guard("tenure_stats_read", || {
        // SAFETY: the caller promises a live handle and a writable struct.
        let (db, out) = unsafe { (engine(db)?, Out::new(out, "out")?) };
        out.set(db.stats());
        Ok(())
    })
}

/// Writes the engine's figures (SPEC L16: `tenure_stats` and the histograms of expiry
/// lateness, commit and fsync durations and writes per commit; E24: the space quota and the
/// NOSPACE alarm, as `etcd_server_quota_backend_bytes` and `tenure_server_alarm_nospace`) in
/// Prometheus' text format into
/// `buf`, NUL-terminated, and the text's length (without the NUL) into `*out_n`. The text is
/// a few KiB; a `buf` of `len` bytes too small for it and its NUL is
/// `TENURE_ERR_INVALID_ARGUMENT`: nothing is written to `buf`, and `*out_n` is set to the size
/// needed (the text's length plus its NUL), so the caller can allocate that and call again.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn tenure_metrics_prometheus(
    db: *const tenure,
    buf: *mut c_char,
    len: usize,
    out_n: *mut usize,
) -> tenure_result {
    guard("tenure_metrics_prometheus", || {
        // SAFETY: the caller promises a live handle and a writable `size_t`.
        let (db, out_n) = unsafe { (engine(db)?, Out::new(out_n, "out_n")?) };
        if buf.is_null() {
            return Err(null("buf"));
        }
        let text = db.metrics().to_prometheus();
        if text.len() >= len {
            out_n.set(text.len() + 1);
            return Err(invalid(format!(
                "`buf` holds {len} bytes; the text needs {} (with its NUL)",
                text.len() + 1
            )));
        }
        // SAFETY: `buf` is non-NULL and, as the caller promises, writable for `len` bytes,
        // more than the text and its NUL.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
            buf.add(text.len()).write(0);
        }
        out_n.set(text.len());
        Ok(())
    })
}

/// A new manual clock at monotonic time 0 and the current wall time. Free it with
/// `tenure_clock_free` (engines using it keep their own reference).
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_clock_manual_new(out: *mut *mut tenure_clock) -> tenure_result {
    guard("tenure_clock_manual_new", || {
        // SAFETY: the caller promises a writable pointer.
        let out = unsafe { Out::new(out, "out") }?;
        out.set(boxed(tenure_clock {
            clock: ManualClock::new(),
        }));
        Ok(())
    })
}

/// Moves the clock (monotonic and wall time) forward by `ms` and wakes every engine using it,
/// which then expires what is due.
///
/// Errors: `TENURE_ERR_NULL_POINTER`, `TENURE_ERR_INVALID_ARGUMENT` (negative `ms`).
#[no_mangle]
pub unsafe extern "C" fn tenure_clock_advance(
    clock: *const tenure_clock,
    ms: i64,
) -> tenure_result {
    guard("tenure_clock_advance", || {
        // SAFETY: the caller promises a live clock.
        let c = unsafe { arg(clock, "clock") }?;
        c.clock.advance(crate::util::ms(ms, "ms")?);
        Ok(())
    })
}

/// Steps the clock's wall time alone by `delta_ms` (either way), leaving monotonic time: a
/// wall-clock jump, which moves no deadline (SPEC L14) but counts in wall recovery (L13).
///
/// Errors: `TENURE_ERR_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn tenure_clock_step_wall(
    clock: *const tenure_clock,
    delta_ms: i64,
) -> tenure_result {
    guard("tenure_clock_step_wall", || {
        // SAFETY: the caller promises a live clock.
        let c = unsafe { arg(clock, "clock") }?;
        c.clock.step_wall(delta_ms);
        Ok(())
    })
}

/// Frees a clock. Engines opened with it keep working. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tenure_clock_free(clock: *mut tenure_clock) {
    // SAFETY: from tenure_clock_manual_new and freed once, as the caller promises.
    shield("tenure_clock_free", (), || unsafe { free(clock) })
}

/// The static name of a result code, e.g. `"TENURE_ERR_LEASE_NOT_FOUND"`;
/// `"TENURE_ERR_UNKNOWN"` for a number that is not a code. Never NULL; do not free.
#[no_mangle]
pub extern "C" fn tenure_result_str(code: tenure_result) -> *const c_char {
    c_name_of(code)
}

/// The message of the last failed call on the calling thread (which lease, key or path, and
/// which function), or `""` if none failed yet. Never NULL; do not free. Valid until the next
/// failing call on the same thread.
#[no_mangle]
pub extern "C" fn tenure_last_error_message() -> *const c_char {
    last_error_ptr()
}

/// When the last failed call on the calling thread failed `TENURE_ERR_COMPACTED` because of a
/// compaction, the compaction revision (etcd's `compact_revision`: the oldest revision still
/// kept, where a read or a watch can resume); else 0 (also for a watcher that fell behind, and
/// for a read over `tenure_connect`, whose etcd error carries no number). Per thread, like the
/// message.
#[no_mangle]
pub extern "C" fn tenure_last_error_compact_revision() -> i64 {
    last_compact_revision()
}

/// The library version, `"MAJOR.MINOR.PATCH"` (see also `TENURE_VERSION_*`). Static; do not
/// free.
#[no_mangle]
pub extern "C" fn tenure_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
