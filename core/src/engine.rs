//! `Tenure`: the engine. It composes the pure [`Machine`] with a clock, the redb [`Store`], the
//! write pipeline (committer thread, group commit) and the expiry thread.
//!
//! Locks, in the only order they may be taken:
//! 1. `Shared::state` — the machine, the pending batch and the engine flags.
//! 2. `Shared::hub` — watchers and event history.
//! 3. `Shared::done` — commit progress, for callers waiting on durability.
//!
//! `Shared::store` is used by the committer thread only (and by `close` after it has stopped).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::locks::{Condvar, Mutex};
use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

use crate::batch::Batch;
use crate::clock::{Clock, SystemClock, Waker};
use crate::error::{Error, Result};
use crate::kv::txn::{Txn, TxnResponse};
use crate::kv::watch::{WatchHub, WatchOptions, Watcher};
use crate::lease::lessor::{ns, Due, NO_TIME};
use crate::state::Machine;
use crate::store::{Loaded, StorageFaults, Store};
use crate::types::{Durability, ExpiredLease, KeyValue, LeaseId, LeaseInfo, Recovery, Stats};

/// Most leases expired (or checkpointed) per state-lock hold, and per write.
const EXPIRY_BATCH: usize = 256;
/// Between expiry batches: how long the expiry thread lets blocked callers go first.
const LET_IN: Duration = Duration::from_micros(200);
/// Immediate mode: how long a commit waits for the writers of the previous commit to come back.
const GATHER: Duration = Duration::from_micros(50);
/// Buffered mode: flush early once this many ops are pending.
const FLUSH_OPS: usize = 1 << 16;
/// Capacity, in batches, of the `expired()` channel. When full, auto-revoke notices are
/// dropped (and counted); manual-revoke leases are redelivered anyway.
const EXPIRED_QUEUE: usize = 1 << 14;

#[derive(Clone)]
struct Config {
    durability: Durability,
    persist: bool,
    checkpoint_interval: u64,
}

type ExpiredChannel = (Sender<Vec<ExpiredLease>>, Receiver<Vec<ExpiredLease>>);

/// Engine state guarded by `Shared::state`.
struct State {
    m: Machine,
    /// Effects applied in memory, not yet handed to the committer.
    pending: Batch,
    /// Sequence number of the last write that added to `pending`.
    seq: u64,
    closed: bool,
    /// Set after a failed commit (D6): every write fails with it until reopen.
    poisoned: Option<Error>,
    /// When the expiry thread next checkpoints renewed leases (ns).
    next_checkpoint: u64,
    /// What the expiry thread sleeps until (ns); a write with an earlier deadline wakes it.
    sleep_until: u64,
}

/// Commit progress guarded by `Shared::done`.
#[derive(Default)]
struct Done {
    committed: u64,
    failed: Option<Error>,
}

struct Shared {
    state: Mutex<State>,
    /// The expiry thread waits on it (with `state`).
    expiry_cv: Condvar,
    /// The committer waits on it (with `state`).
    commit_cv: Condvar,
    hub: Mutex<WatchHub>,
    done: Mutex<Done>,
    done_cv: Condvar,
    /// Committer only.
    store: Mutex<Option<Store>>,
    clock: Arc<dyn Clock>,
    cfg: Config,
    /// Mirrors `hub.wants_events()` so writers can skip building events.
    record_events: AtomicBool,
    /// Sender and receiver of `expired()`; `None` once closed.
    expired: Mutex<Option<ExpiredChannel>>,
    commits: AtomicU64,
    expired_dropped: AtomicU64,
    /// Keeps the clock subscription alive.
    waker: Mutex<Option<Arc<Waker>>>,
    /// Lease ID → senders dropped when the lease is gone (see `Tenure::lease_gone`).
    lease_waiters: Mutex<HashMap<i64, Vec<Sender<()>>>>,
    /// Replaced (disconnecting every clone of the old receiver) on each demote (L9).
    demotion: Mutex<(Sender<()>, Receiver<()>)>,
}

/// Builder for [`Tenure`]; every option has a default (see each method).
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
    faults: Option<StorageFaults>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("path", &self.path)
            .field("durability", &self.durability)
            .field("recovery", &self.recovery)
            .field("primary", &self.primary)
            .field("auto_revoke", &self.auto_revoke)
            .finish_non_exhaustive()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            path: None,
            durability: Durability::Immediate,
            recovery: Recovery::Wall,
            clock: None,
            min_ttl: Duration::ZERO,
            checkpoint_interval: Duration::from_secs(5),
            expired_retry_interval: Duration::from_secs(3),
            primary: true,
            auto_revoke: true,
            watch_history: 10_000,
            watch_queue: 10_000,
            faults: None,
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

    /// When writes are acknowledged. Default: [`Durability::Immediate`].
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

    /// TTLs below this are raised to it. Default: zero.
    pub fn min_ttl(mut self, d: Duration) -> Builder {
        self.min_ttl = d;
        self
    }

    /// How often renewed leases' remaining TTLs are persisted. Default: 5 s. Must be > 0.
    pub fn checkpoint_interval(mut self, d: Duration) -> Builder {
        self.checkpoint_interval = d;
        self
    }

    /// Manual revoke: how long until an expired, unrevoked lease is delivered again.
    /// Default: 3 s. Must be > 0.
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
    /// Default: 10 000.
    pub fn watch_history(mut self, events: usize) -> Builder {
        self.watch_history = events;
        self
    }

    /// How many undelivered events a watcher may have before it is cancelled. Default: 10 000.
    pub fn watch_queue(mut self, events: usize) -> Builder {
        self.watch_queue = events;
        self
    }

    /// Injects storage faults (tests of SPEC D6).
    pub fn storage_faults(mut self, faults: StorageFaults) -> Builder {
        self.faults = Some(faults);
        self
    }

    /// Opens the engine: recovers the file if there is one and starts its threads.
    pub fn open(self) -> Result<Tenure> {
        Tenure::open_with(self)
    }
}

/// An embedded lease engine: leases, TTL keys and watches over one redb file.
///
/// A `Tenure` is a cheap handle (`Clone + Send + Sync`); the engine closes when
/// [`close`](Tenure::close) is called or the last handle is dropped.
#[derive(Clone)]
pub struct Tenure {
    h: Arc<Handle>,
}

pub(crate) struct Handle {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = close_engine(&self.shared, &self.threads);
    }
}

impl std::fmt::Debug for Tenure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenure")
            .field("persist", &self.h.shared.cfg.persist)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// Lazy access to the clock for a write: most writes need neither time.
struct Time<'a>(&'a dyn Clock);

impl Time<'_> {
    fn now(&self) -> u64 {
        self.0.now_ns()
    }

    fn wall(&self) -> i64 {
        self.0.wall_ms()
    }
}

fn lease_id(id: impl Into<LeaseId>) -> i64 {
    id.into().get()
}

impl Tenure {
    /// Opens (or creates) the database at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Tenure> {
        Builder::default().path(path).open()
    }

    /// An engine that keeps everything in memory.
    pub fn in_memory() -> Result<Tenure> {
        Builder::default().open()
    }

    /// Every option, with defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    fn open_with(b: Builder) -> Result<Tenure> {
        if b.checkpoint_interval.is_zero() {
            return Err(Error::invalid("checkpoint_interval must be positive"));
        }
        if b.expired_retry_interval.is_zero() {
            return Err(Error::invalid("expired_retry_interval must be positive"));
        }
        if let Durability::Buffered(d) = b.durability {
            if d.is_zero() {
                return Err(Error::invalid(
                    "the buffered flush interval must be positive",
                ));
            }
        }
        let clock: Arc<dyn Clock> = b
            .clock
            .clone()
            .unwrap_or_else(|| Arc::new(SystemClock::new()));
        let (store, loaded) = match &b.path {
            Some(p) => {
                let (s, l) = Store::open(p, b.faults.clone())?;
                (Some(s), l)
            }
            None => (
                None,
                Loaded {
                    next_id: 1,
                    ..Loaded::default()
                },
            ),
        };
        let now = clock.now_ns();
        let m = recover(&b, loaded, now, clock.wall_ms(), b.path.as_deref())?;
        let revision = m.kv.revision;
        let cfg = Config {
            durability: b.durability,
            persist: store.is_some(),
            checkpoint_interval: ns(b.checkpoint_interval),
        };
        let hub = WatchHub::new(b.watch_history, b.watch_queue, revision);
        let shared = Arc::new(Shared {
            record_events: AtomicBool::new(hub.wants_events()),
            state: Mutex::new(State {
                m,
                pending: Batch::new(cfg.persist, hub.wants_events()),
                seq: 0,
                closed: false,
                poisoned: None,
                next_checkpoint: now.saturating_add(cfg.checkpoint_interval),
                sleep_until: NO_TIME,
            }),
            expiry_cv: Condvar::new(),
            commit_cv: Condvar::new(),
            hub: Mutex::new(hub),
            done: Mutex::new(Done::default()),
            done_cv: Condvar::new(),
            store: Mutex::new(store),
            clock: clock.clone(),
            cfg,
            expired: Mutex::new(Some(bounded(EXPIRED_QUEUE))),
            commits: AtomicU64::new(0),
            expired_dropped: AtomicU64::new(0),
            waker: Mutex::new(None),
            lease_waiters: Mutex::new(HashMap::new()),
            demotion: Mutex::new(bounded(0)),
        });
        let weak = Arc::downgrade(&shared);
        let waker: Arc<Waker> = Arc::new(move || {
            if let Some(s) = weak.upgrade() {
                let _guard = s.state.lock();
                s.expiry_cv.notify_all();
            }
        });
        clock.subscribe(Arc::downgrade(&waker));
        *shared.waker.lock() = Some(waker);

        let mut threads = Vec::new();
        let s = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("tenure-expiry".into())
                .spawn(move || expiry_loop(&s))
                .map_err(|e| Error::Storage(format!("cannot start the expiry thread: {e}")))?,
        );
        if shared.cfg.persist {
            let s = shared.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("tenure-commit".into())
                    .spawn(move || commit_loop(&s))
                    .map_err(|e| Error::Storage(format!("cannot start the committer: {e}")))?,
            );
        }
        Ok(Tenure {
            h: Arc::new(Handle {
                shared,
                threads: Mutex::new(threads),
            }),
        })
    }

    fn shared(&self) -> &Shared {
        &self.h.shared
    }

    pub(crate) fn downgrade(&self) -> std::sync::Weak<Handle> {
        Arc::downgrade(&self.h)
    }

    pub(crate) fn upgrade(h: &std::sync::Weak<Handle>) -> Option<Tenure> {
        h.upgrade().map(|h| Tenure { h })
    }

    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        self.h.shared.clock.clone()
    }

    /// Runs a write under the state lock, then waits for its durability (Immediate mode).
    /// `f` reads the clock through [`Time`] only if it needs to.
    fn write<T>(&self, f: impl FnOnce(&mut Machine, &mut Batch, &Time) -> Result<T>) -> Result<T> {
        let s = self.shared();
        let (out, wait_for) = {
            let mut st = s.state.lock();
            let st = &mut *st;
            if st.closed {
                return Err(Error::Closed);
            }
            if let Some(e) = &st.poisoned {
                return Err(e.clone());
            }
            st.pending.record_events = s.record_events.load(Ordering::Relaxed);
            let before = (
                st.pending.ops.len(),
                st.pending.events.len(),
                st.pending.expired.len(),
            );
            let out = f(&mut st.m, &mut st.pending, &Time(&*s.clock))?;
            notify_gone(s, &mut st.pending);
            let after = (
                st.pending.ops.len(),
                st.pending.events.len(),
                st.pending.expired.len(),
            );
            let wait_for = if before != after {
                enqueued(s, st)
            } else {
                None
            };
            if st.m.lessor.next_wake().is_some_and(|w| w < st.sleep_until) {
                s.expiry_cv.notify_one();
            }
            (out, wait_for)
        };
        if let Some(seq) = wait_for {
            wait_durable(s, seq)?;
        }
        Ok(out)
    }

    fn read<T>(&self, f: impl FnOnce(&Machine, u64) -> T) -> Result<T> {
        let s = self.shared();
        let st = s.state.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        Ok(f(&st.m, s.clock.now_ns()))
    }

    // ---- leases -------------------------------------------------------------------------------

    /// Grants a lease with a fresh ID (SPEC L1–L3).
    pub fn grant(&self, ttl: Duration) -> Result<LeaseId> {
        self.write(|m, b, t| m.grant(None, ttl, t.now(), t.wall(), b))
            .map(LeaseId::new)
    }

    /// Grants a lease with a chosen ID; `LeaseExists` if it is live, `InvalidArgument` if ≤ 0.
    pub fn grant_with_id(&self, id: impl Into<LeaseId>, ttl: Duration) -> Result<LeaseId> {
        let id = lease_id(id);
        self.write(|m, b, t| m.grant(Some(id), ttl, t.now(), t.wall(), b))
            .map(LeaseId::new)
    }

    /// Revokes a lease and deletes its keys in one durable write (SPEC L4).
    pub fn revoke(&self, id: impl Into<LeaseId>) -> Result<()> {
        let id = lease_id(id);
        self.write(|m, b, _| m.revoke(id, b))
    }

    /// Renews a lease: deadline = now + TTL; returns the TTL (SPEC L5). Writes nothing to disk.
    #[inline]
    pub fn renew(&self, id: impl Into<LeaseId>) -> Result<Duration> {
        let id = lease_id(id);
        let s = self.shared();
        let mut st = s.state.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        let now = s.clock.now_ns();
        let ttl = st.m.renew(id, now)?;
        if st.m.lessor.next_wake().is_some_and(|w| w < st.sleep_until) {
            s.expiry_cv.notify_one();
        }
        Ok(Duration::from_nanos(ttl))
    }

    /// The lease's TTL, remaining time and keys (SPEC L7).
    pub fn time_to_live(&self, id: impl Into<LeaseId>) -> Result<LeaseInfo> {
        let id = lease_id(id);
        self.read(|m, now| {
            m.lessor
                .get(id)
                .map(|l| m.lessor.info(l, now))
                .ok_or(Error::LeaseNotFound(LeaseId::new(id)))
        })?
    }

    /// Every live lease, in ascending order of remaining time (SPEC L7). Empty once closed.
    pub fn leases(&self) -> Vec<LeaseInfo> {
        self.read(|m, now| m.lessor.list(now)).unwrap_or_default()
    }

    /// Attaches keys to a lease; a key attached elsewhere moves (SPEC L6).
    pub fn attach<K: AsRef<[u8]>>(&self, id: impl Into<LeaseId>, keys: &[K]) -> Result<()> {
        let id = lease_id(id);
        self.write(|m, b, _| m.attach(id, keys, b))
    }

    /// Detaches keys from a lease (SPEC L6).
    pub fn detach<K: AsRef<[u8]>>(&self, id: impl Into<LeaseId>, keys: &[K]) -> Result<()> {
        let id = lease_id(id);
        self.write(|m, b, _| m.detach(id, keys, b))
    }

    /// The lease a key is attached to (SPEC L6). `None` also once closed.
    pub fn lease_of(&self, key: impl AsRef<[u8]>) -> Option<LeaseId> {
        self.read(|m, _| m.kv.lease_of(key.as_ref()).map(LeaseId::new))
            .ok()
            .flatten()
    }

    /// Records a remaining TTL for the next promote or reopen, durably (SPEC L8).
    pub fn checkpoint(&self, id: impl Into<LeaseId>, remaining: Duration) -> Result<()> {
        let id = lease_id(id);
        self.write(|m, b, t| m.checkpoint(id, remaining, t.wall(), b))
    }

    /// Becomes primary: every deadline = now + extend + (checkpointed remaining, else TTL).
    pub fn promote(&self, extend: Duration) -> Result<()> {
        self.write(|m, _, t| {
            m.lessor.promote(ns(extend), t.now());
            Ok(())
        })?;
        self.wake_expiry();
        Ok(())
    }

    /// Becomes standby: no lease expires, renew fails with `NotPrimary`, and everything
    /// blocked waiting on a lease (lock and campaign waits) is woken with `NotPrimary` (SPEC L9).
    pub fn demote(&self) -> Result<()> {
        self.write(|m, _, _| {
            m.lessor.demote();
            Ok(())
        })?;
        drop(std::mem::replace(
            &mut *self.shared().demotion.lock(),
            bounded(0),
        ));
        Ok(())
    }

    /// A receiver that disconnects at the next demote.
    pub(crate) fn demotion(&self) -> Receiver<()> {
        self.shared().demotion.lock().1.clone()
    }

    /// Whether this engine is the primary.
    pub fn is_primary(&self) -> bool {
        self.read(|m, _| m.lessor.is_primary()).unwrap_or(false)
    }

    /// Batches of expired leases (SPEC L11, L12). Every receiver shares one queue: each batch
    /// goes to one of them. The channel disconnects when the engine closes.
    pub fn expired(&self) -> Receiver<Vec<ExpiredLease>> {
        match &*self.shared().expired.lock() {
            Some((_, rx)) => rx.clone(),
            None => bounded(0).1,
        }
    }

    // ---- keys ---------------------------------------------------------------------------------

    /// Puts a key, attached to `lease` or detached; returns the new revision (SPEC K1).
    pub fn put(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        lease: Option<LeaseId>,
    ) -> Result<i64> {
        let lease = lease.map_or(0, LeaseId::get);
        self.write(|m, b, _| m.put(key.as_ref(), value.as_ref(), lease, b))
    }

    /// The key's value and revisions, or `None` (SPEC K2).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<KeyValue>> {
        self.read(|m, _| m.kv.get(key.as_ref()))
    }

    /// Keys starting with `prefix`, in key order, at most `limit` (SPEC K2).
    pub fn range(&self, prefix: impl AsRef<[u8]>, limit: Option<usize>) -> Result<Vec<KeyValue>> {
        self.read(|m, _| m.kv.range(prefix.as_ref(), limit))
    }

    /// Deletes a key; returns whether it existed (SPEC K3).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.write(|m, b, _| m.delete(key.as_ref(), b))
    }

    /// Deletes every key starting with `prefix`; returns how many (SPEC K3).
    pub fn delete_prefix(&self, prefix: impl AsRef<[u8]>) -> Result<u64> {
        self.write(|m, b, _| Ok(m.delete_prefix(prefix.as_ref(), b)))
    }

    /// The current store revision (SPEC K4).
    pub fn revision(&self) -> i64 {
        let st = self.shared().state.lock();
        st.m.kv.revision
    }

    /// Runs a compare-and-swap transaction (SPEC K5).
    pub fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        self.write(|m, b, _| m.txn(&txn, b))
    }

    /// Watches a key or prefix (SPEC K6).
    pub fn watch(&self, key: impl AsRef<[u8]>, opts: WatchOptions) -> Result<Watcher> {
        let s = self.shared();
        let st = s.state.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        let mut hub = s.hub.lock();
        let w = hub.register(key.as_ref(), &opts, st.m.kv.revision)?;
        s.record_events.store(true, Ordering::Relaxed);
        Ok(w)
    }

    // ---- engine -------------------------------------------------------------------------------

    /// Counters and gauges (SPEC L15). Still readable after close.
    pub fn stats(&self) -> Stats {
        let s = self.shared();
        let st = s.state.lock();
        let c = st.m.counters;
        let commits = s.commits.load(Ordering::Relaxed);
        Stats {
            granted: c.granted,
            revoked: c.revoked,
            renewed: c.renewed,
            expired: c.expired,
            leases: st.m.lessor.len() as u64,
            keys: st.m.kv.live(),
            revision: st.m.kv.revision,
            commits,
            fsyncs: commits,
            expired_dropped: s.expired_dropped.load(Ordering::Relaxed),
            watchers: s.hub.lock().watcher_count() as u64,
        }
    }

    /// Whether [`close`](Tenure::close) has run.
    pub fn is_closed(&self) -> bool {
        self.shared().state.lock().closed
    }

    /// Checkpoints renewed leases, flushes everything pending, stops the threads and releases
    /// the file. Idempotent; later calls on any handle fail with `Closed` (SPEC D7).
    pub fn close(&self) -> Result<()> {
        close_engine(&self.h.shared, &self.h.threads)
    }

    /// A receiver that disconnects when lease `id` is gone: revoked, expired, or the engine
    /// closed. `LeaseNotFound` if it is already gone.
    pub(crate) fn lease_gone(&self, id: LeaseId) -> Result<Receiver<()>> {
        let s = self.shared();
        let mut st = s.state.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        if !st.m.lessor.contains(id.get()) {
            return Err(Error::LeaseNotFound(id));
        }
        let (tx, rx) = bounded(0);
        s.lease_waiters.lock().entry(id.get()).or_default().push(tx);
        // Under the state lock, like every write, so no removal can be missed.
        st.pending.track_gone = true;
        Ok(rx)
    }

    fn wake_expiry(&self) {
        let s = self.shared();
        let _g = s.state.lock();
        s.expiry_cv.notify_all();
    }
}

/// Rebuilds the machine from what was read on open (SPEC L13).
fn recover(
    b: &Builder,
    loaded: Loaded,
    now: u64,
    wall_now: i64,
    path: Option<&Path>,
) -> Result<Machine> {
    let mut m = Machine::new(
        b.primary,
        b.auto_revoke,
        b.min_ttl,
        b.expired_retry_interval,
    );
    m.kv.revision = loaded.revision;
    m.lessor.set_next_id(loaded.next_id);
    for row in loaded.leases {
        let base = if row.remaining == NO_TIME {
            row.ttl
        } else {
            row.remaining
        };
        let (checkpoint, life) = match b.recovery {
            Recovery::Wall => {
                let elapsed_ms = wall_now.saturating_sub(row.wall_ms).max(0) as u64;
                let left = base.saturating_sub(elapsed_ms.saturating_mul(1_000_000));
                (left, left)
            }
            Recovery::Extend(extend) => (row.remaining, base.saturating_add(ns(extend))),
        };
        m.lessor.insert(row.id, row.ttl, checkpoint, life, now);
    }
    for (key, entry) in loaded.keys {
        let lease = entry.lease;
        if lease != 0 && m.lessor.attach(lease, &key).is_err() {
            return Err(Error::Corrupt {
                path: path.map(Path::to_path_buf).unwrap_or_default(),
                detail: format!(
                    "key {:?} is attached to missing lease {lease}",
                    String::from_utf8_lossy(&key)
                ),
            });
        }
        m.kv.load(key, entry);
    }
    Ok(m)
}

/// Hands what a write added to `pending` on: to the committer (returning the sequence number to
/// wait for in Immediate mode), or straight to the hub in memory.
fn enqueued(s: &Shared, st: &mut State) -> Option<u64> {
    if !s.cfg.persist {
        let batch = st.pending.take();
        deliver(s, batch);
        return None;
    }
    if st.pending.ops.is_empty() && st.pending.events.is_empty() {
        // Only notices (manual-revoke deliveries) and nothing pending before them: no commit
        // is needed to deliver them.
        let batch = st.pending.take();
        deliver(s, batch);
        return None;
    }
    st.seq += 1;
    match s.cfg.durability {
        Durability::Immediate => {
            s.commit_cv.notify_one();
            Some(st.seq)
        }
        Durability::Buffered(_) => {
            // Buffered acknowledges on apply, and so delivers expired notices on apply too;
            // watch events still wait for their commit (K6).
            if !st.pending.expired.is_empty() {
                let expired = std::mem::take(&mut st.pending.expired);
                deliver(
                    s,
                    Batch {
                        expired,
                        ..Batch::default()
                    },
                );
            }
            if st.pending.ops.len() >= FLUSH_OPS {
                s.commit_cv.notify_one();
            }
            None
        }
    }
}

/// Wakes the waiters of leases that writes just removed (at apply time, so a waiter whose
/// session died stops at once).
fn notify_gone(s: &Shared, b: &mut Batch) {
    if b.gone.is_empty() {
        return;
    }
    let mut waiters = s.lease_waiters.lock();
    for id in b.gone.drain(..) {
        waiters.remove(&id); // dropping the senders disconnects the receivers
    }
    b.track_gone = !waiters.is_empty();
}

/// Delivers committed events to watchers and expired notices to `expired()`.
fn deliver(s: &Shared, batch: Batch) {
    if !batch.events.is_empty() {
        let mut hub = s.hub.lock();
        hub.dispatch(batch.events);
        s.record_events.store(hub.wants_events(), Ordering::Relaxed);
    }
    if !batch.expired.is_empty() {
        if let Some((tx, _)) = &*s.expired.lock() {
            for notices in batch.expired {
                if notices.is_empty() {
                    continue;
                }
                if let Err(TrySendError::Full(_)) = tx.try_send(notices) {
                    s.expired_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

fn wait_durable(s: &Shared, seq: u64) -> Result<()> {
    let mut done = s.done.lock();
    loop {
        if done.committed >= seq {
            return Ok(());
        }
        if let Some(e) = &done.failed {
            return Err(e.clone());
        }
        s.done_cv.wait(&mut done);
    }
}

/// The committer: takes everything pending, commits it in one redb transaction, then delivers
/// its events and wakes the writers waiting for it (group commit, SPEC D1–D3).
fn commit_loop(s: &Shared) {
    let interval = match s.cfg.durability {
        Durability::Immediate => None,
        Durability::Buffered(d) => Some(d),
    };
    let mut next_flush = interval.map(|d| Instant::now() + d);
    // The previous batch's ops buffer, cleared, handed back to `pending` so a steady stream of
    // writes never regrows it.
    let mut spare: Vec<crate::batch::StoreOp> = Vec::new();
    // Writes the previous commit carried: with that many writers about, a commit that starts
    // with fewer waits briefly for the rest to enqueue (they were woken by the last commit).
    let mut last_writes: u64 = 0;
    let mut taken_seq: u64 = 0;
    loop {
        let (mut batch, seq, revision, next_id, last) = {
            let mut st = s.state.lock();
            loop {
                let due = match next_flush {
                    None => true,
                    Some(t) => Instant::now() >= t || st.pending.ops.len() >= FLUSH_OPS,
                };
                if !st.pending.is_empty() && (due || st.closed) {
                    if interval.is_none() && !st.closed && st.seq - taken_seq < last_writes {
                        let until = Instant::now() + GATHER;
                        while st.seq - taken_seq < last_writes && Instant::now() < until {
                            s.commit_cv.wait_until(&mut st, until);
                        }
                    }
                    break;
                }
                if st.closed {
                    return;
                }
                match next_flush {
                    None => s.commit_cv.wait(&mut st),
                    Some(t) => {
                        if Instant::now() >= t {
                            next_flush = interval.map(|d| Instant::now() + d);
                        }
                        let t = next_flush.expect("buffered");
                        s.commit_cv.wait_until(&mut st, t);
                    }
                }
            }
            if let Some(d) = interval {
                next_flush = Some(Instant::now() + d);
            }
            let batch = st.pending.take();
            std::mem::swap(&mut st.pending.ops, &mut spare);
            last_writes = st.seq - taken_seq;
            taken_seq = st.seq;
            (
                batch,
                st.seq,
                st.m.kv.revision,
                st.m.lessor.next_id(),
                st.closed,
            )
        };
        let failed = s.state.lock().poisoned.is_some();
        let result = if failed {
            Err(Error::Storage(
                "an earlier commit failed; reopen the database".into(),
            ))
        } else {
            match &*s.store.lock() {
                Some(store) => store.commit(&batch.ops, revision, next_id),
                None => Ok(()),
            }
        };
        spare = std::mem::take(&mut batch.ops);
        spare.clear();
        if spare.capacity() > 4 * FLUSH_OPS {
            spare.shrink_to(FLUSH_OPS);
        }
        match result {
            Ok(()) => {
                s.commits.fetch_add(1, Ordering::Relaxed);
                deliver(s, batch);
                let mut done = s.done.lock();
                done.committed = seq;
                s.done_cv.notify_all();
            }
            Err(e) => {
                let e = match e {
                    Error::Storage(m) => Error::Storage(format!("commit failed: {m}")),
                    other => other,
                };
                s.state.lock().poisoned.get_or_insert(e.clone());
                let mut done = s.done.lock();
                done.failed.get_or_insert(e);
                s.done_cv.notify_all();
            }
        }
        if last && s.state.lock().pending.is_empty() {
            return;
        }
    }
}

/// The expiry thread (SPEC L8, L10–L12): sleeps until the earliest deadline or checkpoint,
/// then expires due leases in bounded batches, releasing the lock between batches.
fn expiry_loop(s: &Shared) {
    let mut due: Vec<Due> = Vec::with_capacity(EXPIRY_BATCH);
    let mut st = s.state.lock();
    loop {
        if st.closed {
            return;
        }
        let now = s.clock.now_ns();
        let mut worked = false;
        if st.poisoned.is_none() && st.m.lessor.is_primary() {
            due.clear();
            st.m.lessor.pop_due(now, EXPIRY_BATCH, &mut due);
            let more = st.m.lessor.next_wake().is_some_and(|w| w <= now);
            if !due.is_empty() {
                let st_ref = &mut *st;
                st_ref.pending.record_events = s.record_events.load(Ordering::Relaxed);
                st_ref.m.expire(&due, now, &mut st_ref.pending);
                notify_gone(s, &mut st_ref.pending);
                enqueued(s, st_ref);
            }
            if now >= st.next_checkpoint {
                let st_ref = &mut *st;
                let n = st_ref.m.checkpoint_dirty(
                    now,
                    s.clock.wall_ms(),
                    EXPIRY_BATCH,
                    &mut st_ref.pending,
                );
                if n > 0 {
                    enqueued(s, st_ref);
                }
                if !st.m.lessor.has_dirty() {
                    st.next_checkpoint = now.saturating_add(s.cfg.checkpoint_interval);
                } else {
                    worked = true;
                }
            }
            worked |= more || !due.is_empty();
        }
        if worked {
            // Let renewers and writers in between batches: std's mutex is not fair, so wait
            // until the threads blocked on it have had their turn.
            drop(st);
            s.state.let_waiters_in(LET_IN);
            st = s.state.lock();
            continue;
        }
        let wake =
            st.m.lessor
                .next_wake()
                .unwrap_or(NO_TIME)
                .min(if st.m.lessor.is_primary() {
                    st.next_checkpoint
                } else {
                    NO_TIME
                });
        st.sleep_until = wake;
        match (wake != NO_TIME)
            .then(|| s.clock.instant_at(Duration::from_nanos(wake)))
            .flatten()
        {
            Some(at) => {
                s.expiry_cv.wait_until(&mut st, at);
            }
            None => s.expiry_cv.wait(&mut st),
        }
        st.sleep_until = NO_TIME;
    }
}

fn close_engine(s: &Arc<Shared>, threads: &Mutex<Vec<JoinHandle<()>>>) -> Result<()> {
    let seq = {
        let mut st = s.state.lock();
        if st.closed {
            drop(st);
            join(threads);
            return Ok(());
        }
        // L8: checkpoint every changed lease on clean close.
        if st.poisoned.is_none() && st.m.lessor.is_primary() {
            let now = s.clock.now_ns();
            let wall = s.clock.wall_ms();
            let st_ref = &mut *st;
            while st_ref.m.lessor.has_dirty() {
                st_ref
                    .m
                    .checkpoint_dirty(now, wall, usize::MAX, &mut st_ref.pending);
            }
            if !st_ref.pending.is_empty() && s.cfg.persist {
                st_ref.seq += 1;
            }
        }
        st.closed = true;
        s.commit_cv.notify_all();
        s.expiry_cv.notify_all();
        st.seq
    };
    join(threads);
    let result = if s.cfg.persist {
        wait_durable(s, seq)
    } else {
        Ok(())
    };
    s.hub.lock().close();
    s.lease_waiters.lock().clear();
    *s.expired.lock() = None;
    *s.store.lock() = None; // releases the file lock
    *s.waker.lock() = None;
    result
}

fn join(threads: &Mutex<Vec<JoinHandle<()>>>) {
    let current = std::thread::current().id();
    let handles: Vec<_> = threads.lock().drain(..).collect();
    for h in handles {
        if h.thread().id() != current {
            let _ = h.join();
        }
    }
}
