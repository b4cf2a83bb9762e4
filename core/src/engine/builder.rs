//! [`Builder`]: the options of an engine, validated and turned into a running engine
//! (`open` on a [`Tenure`](crate::Tenure) handle is in `handle.rs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::bounded;

use super::commit::{Ckpt, Leader, Logged};
use super::{
    commit, expiry, wakeups, CommitProgress, Config, Engine, Shared, WriteState, EXPIRED_QUEUE,
};
use crate::batch::Batch;
use crate::clock::{Clock, SystemClock};
use crate::error::{panic_message, Error, Result};
use crate::kv::watch::{WatchHub, WatchLimits};
use crate::lease::lessor::ns;
use crate::limits::{check_duration, check_interval, check_log_region, check_watch_events};
use crate::locks::{Condvar, Mutex};
use crate::metrics::Recorders;
use crate::rows::Loaded;
use crate::state::LeaseKv;
use crate::store::{StorageFaults, Store};
use crate::types::{AutoCompaction, Durability, Recovery};

/// Options of an embedded [`Tenure`](crate::Tenure); every option has a default (see each method).
#[derive(Clone)]
pub struct Builder {
    path: Option<PathBuf>,
    durability: Durability,
    recovery: Recovery,
    clock: Option<Arc<dyn Clock>>,
    min_ttl: Duration,
    checkpoint_interval: Duration,
    expired_retry_interval: Duration,
    primary: bool,
    auto_revoke: bool,
    watch_history: usize,
    watch_queue: usize,
    watch_history_bytes: usize,
    watch_queue_bytes: usize,
    faults: Option<StorageFaults>,
    base_revision: i64,
    log: bool,
    log_region: u64,
    auto_compaction: AutoCompaction,
    quota: Option<u64>,
    member: u64,
    shared: bool,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("path", &self.path)
            .field("durability", &self.durability)
            .field("recovery", &self.recovery)
            .field("primary", &self.primary)
            .field("auto_revoke", &self.auto_revoke)
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

/// The defaults, published once: the C options and the Python `open()` use them too.
impl Builder {
    /// How often renewed leases' remaining TTLs are persisted.
    pub const DEFAULT_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);
    /// Manual revoke: how long until an expired, unrevoked lease is delivered again.
    pub const DEFAULT_EXPIRED_RETRY_INTERVAL: Duration = Duration::from_secs(3);
    /// Buffered mode's flush interval where a binding needs one before `Buffered(interval)`.
    pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(10);
    /// Recent events kept for watchers that start from a past revision.
    pub const DEFAULT_WATCH_HISTORY: usize = 10_000;
    /// Undelivered events a watcher may have before it is cancelled.
    pub const DEFAULT_WATCH_QUEUE: usize = 10_000;
    /// Bytes of recent events kept for watchers that start from a past revision.
    pub const DEFAULT_WATCH_HISTORY_BYTES: usize = 64 << 20;
    /// Bytes of undelivered events a watcher may have before it is cancelled.
    pub const DEFAULT_WATCH_QUEUE_BYTES: usize = 8 << 20;
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            path: None,
            durability: Durability::Immediate,
            recovery: Recovery::Wall,
            clock: None,
            min_ttl: Duration::ZERO,
            checkpoint_interval: Builder::DEFAULT_CHECKPOINT_INTERVAL,
            expired_retry_interval: Builder::DEFAULT_EXPIRED_RETRY_INTERVAL,
            primary: true,
            auto_revoke: true,
            watch_history: Builder::DEFAULT_WATCH_HISTORY,
            watch_queue: Builder::DEFAULT_WATCH_QUEUE,
            watch_history_bytes: Builder::DEFAULT_WATCH_HISTORY_BYTES,
            watch_queue_bytes: Builder::DEFAULT_WATCH_QUEUE_BYTES,
            faults: None,
            base_revision: 0,
            log: true,
            log_region: crate::store::wal::REGION,
            auto_compaction: AutoCompaction::DEFAULT,
            quota: None,
            member: 0,
            shared: false,
        }
    }
}

impl Builder {
    /// The database file (created if missing). Without a path the engine is in memory.
    pub fn path(mut self, path: impl AsRef<Path>) -> Builder {
        self.path = Some(path.as_ref().to_path_buf());
        self
    }

    /// No file: nothing touches disk (SPEC D4). The default when no path is given.
    pub fn in_memory(mut self) -> Builder {
        self.path = None;
        self
    }

    /// When writes are acknowledged. Default: [`Durability::Immediate`]. A buffered interval
    /// must be > 0 and at most [`MAX_DURATION`](crate::MAX_DURATION).
    pub fn durability(mut self, d: Durability) -> Builder {
        self.durability = d;
        self
    }

    /// How deadlines are rebuilt on open. Default: [`Recovery::Wall`].
    pub fn recovery(mut self, r: Recovery) -> Builder {
        self.recovery = r;
        self
    }

    /// The time source. Default: [`SystemClock`]; tests pass an `Arc<ManualClock>`.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Builder {
        self.clock = Some(clock);
        self
    }

    /// TTLs below this are raised to it. Default: zero. At most [`MAX_DURATION`](crate::MAX_DURATION).
    pub fn min_ttl(mut self, d: Duration) -> Builder {
        self.min_ttl = d;
        self
    }

    /// How often renewed leases' remaining TTLs are persisted. Default: 5 s. Must be > 0 and
    /// at most [`MAX_DURATION`](crate::MAX_DURATION).
    pub fn checkpoint_interval(mut self, d: Duration) -> Builder {
        self.checkpoint_interval = d;
        self
    }

    /// Manual revoke: how long until an expired, unrevoked lease is delivered again.
    /// Default: 3 s. Must be > 0 and at most [`MAX_DURATION`](crate::MAX_DURATION).
    pub fn expired_retry_interval(mut self, d: Duration) -> Builder {
        self.expired_retry_interval = d;
        self
    }

    /// Open as primary (expires leases) or standby. Default: primary.
    pub fn primary(mut self, primary: bool) -> Builder {
        self.primary = primary;
        self
    }

    /// Revoke expired leases automatically (default) or leave them for the application.
    pub fn auto_revoke(mut self, auto: bool) -> Builder {
        self.auto_revoke = auto;
        self
    }

    /// How many recent events are kept so a watcher can start from a past revision.
    /// Default: 10 000; at most [`MAX_WATCH_EVENTS`](crate::MAX_WATCH_EVENTS).
    pub fn watch_history(mut self, events: usize) -> Builder {
        self.watch_history = events;
        self
    }

    /// How many undelivered events a watcher may have before it is cancelled. Default: 10 000;
    /// at most [`MAX_WATCH_EVENTS`](crate::MAX_WATCH_EVENTS). Queues grow with the events actually waiting.
    pub fn watch_queue(mut self, events: usize) -> Builder {
        self.watch_queue = events;
        self
    }

    /// How much revision history a file-backed engine keeps on its own (SPEC K12): older
    /// revisions are compacted in the background as [`Tenure::compact`](crate::Tenure::compact)
    /// does. Default: [`AutoCompaction::DEFAULT`], the last 100 000 revisions.
    /// `Revisions(0)` is `InvalidArgument`.
    pub fn auto_compaction(mut self, policy: AutoCompaction) -> Builder {
        self.auto_compaction = policy;
        self
    }

    /// How many bytes of recent events the history keeps (as well as at most `watch_history`
    /// events). An event counts its keys and values, its previous key-value and 192 bytes.
    /// Default: 64 MiB.
    pub fn watch_history_bytes(mut self, bytes: usize) -> Builder {
        self.watch_history_bytes = bytes;
        self
    }

    /// How many bytes of undelivered events a watcher may have (as well as at most
    /// `watch_queue` events) before it is cancelled, counted as for `watch_history_bytes`
    /// (the previous key-value only if the watcher asked for it). Events are shared between
    /// the watchers and the history, not copied. A watcher that has read everything always
    /// gets the next revision, however large. Default: 8 MiB.
    pub fn watch_queue_bytes(mut self, bytes: usize) -> Builder {
        self.watch_queue_bytes = bytes;
        self
    }

    /// Injects storage faults (tests of SPEC D6).
    pub fn storage_faults(mut self, faults: StorageFaults) -> Builder {
        self.faults = Some(faults);
        self
    }

    /// The revision of an empty database: its first write is this + 1. Default 0. etcd starts
    /// at 1, and etcd's clients rely on it (`tenure serve` sets 1); an existing database at a
    /// lower revision is raised to it.
    pub fn base_revision(mut self, revision: i64) -> Builder {
        self.base_revision = revision.max(0);
        self
    }

    /// Whether commits go through the write-ahead log beside the file (`PATH.wal`): each group
    /// commit is one append and one `fdatasync`, and the redb file is brought up to date in the
    /// background (DESIGN, "The write-ahead log"). Default: on. Off: each group commit is one
    /// durable redb transaction (slower; kept to compare). Either way a log left by an earlier
    /// run is replayed on open.
    pub fn write_ahead_log(mut self, on: bool) -> Builder {
        self.log = on;
        self
    }

    /// The size of each of the log's two regions when this open makes the log (tests use small
    /// ones to switch regions often). Default 1 MiB; 4 KiB to 1 GiB, a multiple of 8.
    #[doc(hidden)]
    pub fn log_region_size(mut self, bytes: u64) -> Builder {
        self.log_region = bytes;
        self
    }

    /// The space quota of the database file, in bytes (SPEC E20; etcd's
    /// `--quota-backend-bytes`, whose meaning it keeps: the file's length). A put, a txn that
    /// puts, a grant or an attach that would take the file to the quota (its length + the
    /// write's estimated size ≥ the quota) fails with [`Error::QuotaExceeded`] and raises a
    /// NOSPACE alarm, kept in the file: from then on those writes fail until the alarm is
    /// disarmed ([`Tenure::disarm_alarm`](crate::Tenure::disarm_alarm)); deletes, revokes,
    /// reads and compaction still work, so compact, [`defragment`](crate::Tenure::defragment)
    /// and disarm to write again. Default: `None`, no quota (an embedded database is bounded
    /// by its disk; `tenure serve` defaults to etcd's 2 GiB). In memory there is no file: only a
    /// raised alarm refuses writes.
    pub fn quota_backend_bytes(mut self, bytes: Option<u64>) -> Builder {
        self.quota = bytes;
        self
    }

    /// The member ID the engine's own alarms are raised as (etcd's `MemberID`; `tenure serve`
    /// sets its member ID). Default 0.
    pub fn member_id(mut self, id: u64) -> Builder {
        self.member = id;
        self
    }

    /// Shared mode (issue 25, SPEC P): any number of processes of this user on this host open
    /// the same path with `shared(true)`, and all see one database. The first to open owns the
    /// file (the engine runs in it, at embedded speed) and serves the others over a unix socket
    /// beside the file (`PATH.sock`, mode 0600); the others are handles over that socket, as
    /// `Tenure::connect` gives (engine-only calls are `Unsupported` there;
    /// [`Stats::owner`](crate::Stats::owner) says which one this is). When the owner closes or
    /// dies, one of the others takes over. Needs a path and the feature `serve`. Default: off
    /// (a second process's open is `AlreadyOpen`).
    pub fn shared(mut self, shared: bool) -> Builder {
        self.shared = shared;
        self
    }

    /// Whether [`shared`](Builder::shared) was asked for.
    pub(crate) fn is_shared(&self) -> bool {
        self.shared
    }

    /// Raises [`base_revision`](Builder::base_revision) to at least `revision` (what a server's
    /// etcd clients need: they take revision 0 for "none").
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(crate) fn base_revision_at_least(mut self, revision: i64) -> Builder {
        self.base_revision = self.base_revision.max(revision);
        self
    }

    /// The database file, if one was given.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(crate) fn file(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Opens the engine: recovers the file if there is one and starts its threads.
    pub(crate) fn open_engine(self) -> Result<Engine> {
        Engine::open_with(self)
    }
}

impl Builder {
    /// Every option checked where it enters (SPEC D5: bad input gives a clear error).
    fn validate(&self) -> Result<()> {
        check_interval(self.checkpoint_interval, "checkpoint_interval")?;
        check_interval(self.expired_retry_interval, "expired_retry_interval")?;
        if let Durability::Buffered(d) = self.durability {
            check_interval(d, "the buffered flush interval")?;
        }
        if let Recovery::Extend(d) = self.recovery {
            check_duration(d, "the recovery extension")?;
        }
        check_duration(self.min_ttl, "min_ttl")?;
        check_log_region(self.log_region)?;
        check_watch_events(self.watch_history, "watch_history")?;
        check_watch_events(self.watch_queue, "watch_queue")?;
        match self.auto_compaction {
            AutoCompaction::Revisions(0) => {
                return Err(Error::invalid(
                    "auto_compaction: Revisions(0) would keep no history; use Off or at least 1",
                ))
            }
            AutoCompaction::Periodic(d) => {
                check_interval(d, "the auto-compaction retention")?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// Starts an engine thread. If it panics (a bug, or a `Clock` that panics), the engine is
/// poisoned like after a failed commit (D6): waiters wake with `Storage`, every later write
/// fails, and nothing acknowledged afterwards is silently dropped.
fn spawn(shared: &Arc<Shared>, name: &'static str, f: fn(&Shared)) -> Result<JoinHandle<()>> {
    let s = shared.clone();
    std::thread::Builder::new()
        .name(format!("tenure-{name}"))
        .spawn(move || {
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&s))) {
                let e = Error::storage(format!(
                    "the {name} thread died ({}); reopen the database",
                    panic_message(&*p)
                ));
                super::commit::poison(&s, e);
            }
        })
        .map_err(|e| Error::storage(format!("cannot start the {name} thread: {e}")))
}

impl Engine {
    pub(super) fn open_with(b: Builder) -> Result<Engine> {
        b.validate()?;
        let clock: Arc<dyn Clock> = b
            .clock
            .clone()
            .unwrap_or_else(|| Arc::new(SystemClock::new()));
        let (store, loaded, syncs, log) = match &b.path {
            Some(p) if p.as_os_str().is_empty() => {
                return Err(Error::invalid(
                    "path must not be empty (no path: an in-memory engine)",
                ))
            }
            Some(p) => {
                let o = Store::open(p, b.faults.clone(), b.log, b.log_region)?;
                log::debug!(
                    "{}: opened; redb's page check: {:?}",
                    p.display(),
                    o.page_check
                );
                let base = o.syncs.get();
                (Some(o.store), o.loaded, Some((o.syncs, base)), o.log)
            }
            None => (None, Loaded::default(), None, None),
        };
        let now = clock.now_ns();
        let mut lease_kv = LeaseKv::new(
            b.primary,
            b.auto_revoke,
            b.min_ttl,
            b.expired_retry_interval,
        );
        lease_kv
            .recover(loaded, b.recovery, now, clock.wall_ms())
            .map_err(|detail| Error::Corrupt {
                path: b.path.clone().unwrap_or_default(),
                detail,
            })?;
        lease_kv.kv.revision = lease_kv.kv.revision.max(b.base_revision);
        let revision = lease_kv.kv.revision;
        let cfg = Config {
            auto_compaction: b.auto_compaction,
            durability: b.durability,
            persist: store.is_some(),
            checkpoint_interval: ns(b.checkpoint_interval),
            quota: b.quota,
            member: b.member,
        };
        let closed = Error::closed(b.path.as_deref());
        let limits = WatchLimits {
            history: b.watch_history,
            history_bytes: b.watch_history_bytes,
            queue: b.watch_queue,
            queue_bytes: b.watch_queue_bytes,
        };
        let hub = WatchHub::new(limits, revision, closed.clone());
        let with_log = log.is_some();
        let (ckpt_tx, ckpt_rx) = bounded(1);
        let (compact_tx, compact_rx) = bounded(1);
        let shared = Arc::new(Shared {
            record_events: AtomicBool::new(hub.wants_events()),
            file_bytes: AtomicU64::new(0),
            file_revision: AtomicI64::new(revision),
            relabels: AtomicU64::new(0),
            relabels_flushed: AtomicU64::new(0),
            compact_tx,
            compact_rx,
            state: Mutex::new(WriteState {
                lease_kv,
                pending: Batch::new(cfg.persist, hub.wants_events()),
                seq: 0,
                closed: false,
                poisoned: None,
                next_checkpoint: now.saturating_add(cfg.checkpoint_interval),
                sleep_until: super::AWAKE,
                barriers: 0,
                gather_until: 0,
            }),
            expiry_cv: Condvar::new(),
            commit_cv: Condvar::new(),
            gather_cv: Condvar::new(),
            hub: Mutex::new(hub),
            done: Mutex::new(CommitProgress {
                revision,
                ..CommitProgress::default()
            }),
            done_cv: Condvar::new(),
            store: Mutex::new(store),
            leader: Mutex::new(Leader::new(log.map(|w| Logged::new(w, ckpt_tx)))),
            ckpt_rx: Mutex::new(Some(ckpt_rx)),
            ckpt: Mutex::new(Ckpt::default()),
            ckpt_cv: Condvar::new(),
            clock: clock.clone(),
            cfg,
            expired: Mutex::new(Some(bounded(EXPIRED_QUEUE))),
            commits: AtomicU64::new(0),
            syncs,
            expired_dropped: AtomicU64::new(0),
            recorders: Recorders::default(),
            waker: Mutex::new(None),
            lease_waiters: Mutex::new(HashMap::new()),
            demotion: Mutex::new(bounded(0)),
            closed,
            path: b.path.clone(),
        });
        wakeups::subscribe_clock(&shared);
        super::quota::note_file_bytes(&shared);

        let mut threads = vec![spawn(&shared, "expiry", expiry::run)?];
        if shared.cfg.persist {
            threads.push(spawn(&shared, "commit", commit::run)?);
        }
        if with_log {
            threads.push(spawn(&shared, "checkpoint", commit::checkpointer)?);
        }
        if shared.cfg.persist {
            // An interrupted compaction goes on where it stopped.
            let _ = shared.compact_tx.try_send(());
            threads.push(spawn(&shared, "compactor", super::compactor::run)?);
        }
        Ok(Engine {
            shared,
            threads: Mutex::new(threads),
        })
    }
}
