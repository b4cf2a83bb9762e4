//! # tenure
//!
//! An embedded, in-process lease engine: etcd's lessor, TTL keys with revisions,
//! compare-and-swap transactions and watches — without a server. Everything persists in one
//! [redb](https://docs.rs/redb) file and is recovered on open.
//!
//! ```
//! use std::time::Duration;
//! use tenure::Tenure;
//!
//! let db = Tenure::in_memory()?;
//! let lease = db.grant(Duration::from_secs(10))?;
//! db.put("service/a", "10.0.0.1", Some(lease))?;
//! db.renew(lease)?;
//! db.revoke(lease)?; // deletes service/a in the same write
//! assert!(db.get("service/a")?.is_none());
//! # Ok::<(), tenure::Error>(())
//! ```
//!
//! The behaviour is specified line by line in the project's `docs/SPEC.md`; the design, locking and
//! invariants are in `docs/DESIGN.md`.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod alarms;
mod batch;
mod clock;
mod engine;
mod error;
pub mod etcd;
mod handle;
mod keepalive;
mod kv;
mod lease;
pub mod limits;
mod locks;
mod metrics;
mod rows;
mod shared;
mod state;
mod store;
pub mod sync;
mod types;
mod wait;

pub use crate::alarms::{Alarm, AlarmKind};
pub use crate::clock::{Clock, ManualClock, SystemClock, Waker};
pub use crate::engine::Builder;
pub use crate::error::{Error, ErrorCode, Result};
#[cfg(feature = "remote")]
pub use crate::etcd::client::{ConnectOptions, Credentials};
pub use crate::handle::Tenure;
pub use crate::limits::{MAX_DURATION, MAX_WATCH_EVENTS};
pub use crate::metrics::{write_histogram, HistogramSnapshot, Metrics};
// Shared with the bindings so that every language words durations and TTL errors alike.
#[doc(hidden)]
pub use crate::error::{human as format_duration, ttl_refused};
pub use crate::keepalive::KeepAlive;
pub use crate::kv::txn::{Compare, CompareOp, CompareTarget, Op, OpResponse, Txn, TxnResponse};
pub use crate::kv::watch::{WatchOptions, Watcher};
#[doc(hidden)]
pub use crate::store::temp_beside;
pub use crate::store::StorageFaults;
pub use crate::types::{
    AutoCompaction, ContentHash, Durability, Event, EventKind, ExpiredLease, FileContents,
    KeyValue, LeaseId, LeaseInfo, Recovery, SnapshotInfo, SnapshotProgress, Stats, StorageSize,
};
pub use crate::wait::{
    block_on, Interest, Next, Pollable, Source, Stop, StopCallback, Wait, WaitPool, WaitResult,
};

/// The README's Rust examples, compiled (and run where they can) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The crates.io page's example (core/README.md, shipped in the package), compiled and run.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct CrateReadmeDoctests;

/// The crate version, as `"MAJOR.MINOR.PATCH"`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
