//! Argument bounds, in one place: the core checks every argument against them where it enters,
//! and the C and Python bindings use these constants and checks instead of copies of their own
//! (SPEC L2 for TTLs, D5 for options, S1 for keep-alive intervals).
//!
//! This file holds the bounds and imports nothing of the crate (the error messages word them);
//! `check` holds the checks, which make errors.

use std::time::{Duration, Instant};

mod check;

pub use self::check::*;

/// The longest lease TTL: etcd's `MaxLeaseTTL`, 9 000 000 000 s (SPEC L2).
pub const MAX_TTL: Duration = Duration::from_secs(9_000_000_000);

/// The longest duration any option or interval takes (the same bound as a TTL), so no
/// deadline computed from one can overflow.
pub const MAX_DURATION: Duration = MAX_TTL;

/// The most events `watch_queue` and `watch_history` may be set to (16 Mi).
pub const MAX_WATCH_EVENTS: usize = 1 << 24;

/// The longest keep-alive interval (`Tenure::keep_alive`, `SessionOptions::keepalive_interval`):
/// the bound of every interval. Above it the call is `InvalidArgument` (SPEC S1).
pub const MAX_KEEPALIVE_INTERVAL: Duration = MAX_DURATION;

/// The smallest and largest region of the write-ahead log (`Builder::log_region_size`, a test
/// option, and the region size a log file's header may carry); a multiple of 8 in between.
pub const LOG_REGION_MIN: u64 = 4 << 10;
/// See [`LOG_REGION_MIN`].
pub const LOG_REGION_MAX: u64 = 1 << 30;

/// How far ahead a deadline is put when the one asked for is beyond what the clock
/// (`Instant`) holds: 30 years, which no wait outlives (a sleeper woken then re-checks).
pub const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// The instant `d` from now, saturating at [`FAR_FUTURE`] from now (never a panic).
pub fn instant_after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d).unwrap_or_else(|| now + FAR_FUTURE)
}

/// The most key-values a range may ask for (its limit) and still count as a small read, one
/// answered from memory under the state lock (SPEC E2b); larger ones are read from the store.
pub const SMALL_RANGE_LIMIT: usize = 256;

/// The most key-values a range of the present without a small limit may hold and still be
/// answered by `tenure serve` on the async worker that decoded it (SPEC E26): decided under the
/// engine's state lock by a walk of at most this many entries plus one; a larger range is read
/// from the store on the blocking pool (E2b).
pub const INLINE_RANGE_KEYS: usize = 64;

/// The most bytes of keys and values such a range may hold and still be answered on the async
/// worker (SPEC E26): the answer is copied under the engine's lock, so the copy stays short.
pub const INLINE_RANGE_BYTES: usize = 16 * 1024;

/// The most operations a txn may hold (etcd's default `--max-txn-ops`), counted as etcd counts
/// one level (the largest of its compares, success ops and failure ops) and shared down the
/// nesting: a nested txn's operations come out of the same budget (SPEC E2a).
pub const MAX_TXN_OPS: usize = 128;

/// etcd's text for a txn over [`MAX_TXN_OPS`] (the one table, `etcd::errors`, uses it).
pub const TOO_MANY_TXN_OPS: &str = "etcdserver: too many operations in txn request";

/// The one wording of an empty key, embedded or over connect (K1); `tenure serve` answers it
/// with etcd's own text.
pub const EMPTY_KEY: &str = "key must not be empty";
