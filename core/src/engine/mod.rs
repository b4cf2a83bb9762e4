//! `Tenure`: the engine. It composes the pure [`Machine`] with a clock, the redb [`Store`], the
//! write pipeline (committer thread, group commit) and the expiry thread.
//!
//! - `backup`: snapshots, hashes and defragmentation; `builder`: options and open; `commit`: the commit pipeline; `expiry`: the expiry thread;
//!   `signals`: lease-gone, demotion and clock wake-ups; this file: the handle and its API.
//!
//! Every lock of the crate and the one order they are taken in: `docs/DESIGN.md`, "Locking".

mod backup;
mod builder;
mod commit;
mod expiry;
mod requests;
mod signals;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};

pub use self::builder::Builder;
use self::commit::{enqueued, wait_done, wait_durable, Ckpt, Leader, Work};
use self::signals::notify_gone;
use crate::batch::Batch;
use crate::clock::{Clock, Waker};
use crate::error::{Error, Result};
use crate::kv::range::KeyRange;
use crate::kv::txn::{Txn, TxnResponse};
use crate::kv::watch::{WatchHub, WatchOptions, Watcher};
use crate::lease::lessor::ns;
use crate::locks::{Condvar, Mutex};
use crate::state::Machine;
use crate::store::{Store, SyncCounter};
use crate::types::{Durability, ExpiredLease, KeyValue, LeaseId, LeaseInfo, Stats};
use crate::wait::{Stop, Wait};

/// Capacity, in batches, of the `expired()` channel. When full, auto-revoke notices are
/// dropped (and counted); manual-revoke leases are redelivered anyway.
const EXPIRED_QUEUE: usize = 1 << 14;

#[derive(Clone)]
struct Config {
    durability: Durability,
    persist: bool,
    checkpoint_interval: u64,
}

/// A channel whose sender is dropped to disconnect every receiver at once.
type Signal = (Sender<()>, Receiver<()>);

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
    /// What the expiry thread sleeps until (ns); `AWAKE` while it is awake or already woken.
    /// A write with an earlier deadline wakes it, once: a write while it is awake needs no
    /// wake-up (it recomputes its deadline before it sleeps again), and a futex wake per
    /// grant or renew would cost more than the write itself.
    sleep_until: u64,
    /// `flush_to_store` barriers requested (the committer serves them in order).
    barriers: u64,
    /// A gathering commit leader waits (`gather_cv`) until `seq` reaches this (0: none
    /// gathers); the write that reaches it wakes the leader, earlier ones do not.
    gather_until: u64,
}

/// Commit progress guarded by `Shared::done`.
#[derive(Default)]
struct Done {
    committed: u64,
    /// The store revision of the last successful commit (SPEC E8).
    revision: i64,
    /// `flush_to_store` barriers served: redb held every write applied before them.
    barriers: u64,
    failed: Option<Error>,
    /// A commit is in flight: its leader holds `Shared::leader`; the next one waits for it.
    committing: bool,
    /// Immediate writers parked until their write is durable or they are handed the lead.
    parked: Vec<commit::Parked>,
    /// Threads waiting on `done_cv` (the committer for the lead, barriers): the end of a
    /// commit notifies `done_cv` only if there are any.
    cv_waiters: usize,
    /// Threads waiting for the lead (the committer): the end of a commit then clears
    /// `committing` for them instead of handing it to a parked writer.
    lead_wanted: usize,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    /// The expiry thread waits on it (with `state`).
    expiry_cv: Condvar,
    /// The committer waits on it (with `state`).
    commit_cv: Condvar,
    /// A gathering commit leader waits on it (with `state`).
    gather_cv: Condvar,
    hub: Mutex<WatchHub>,
    done: Mutex<Done>,
    done_cv: Condvar,
    /// The committer alone without a log; the checkpointer alone with one (then `close`,
    /// after both stopped).
    store: Mutex<Option<Store>>,
    /// The commit leader's own state (the log's writer side, if any): taken only by the
    /// holder of `Done::committing`, across the commit's fsync.
    leader: Mutex<Leader>,
    /// The checkpointer's work queue, taken by it when it starts.
    ckpt_rx: Mutex<Option<Receiver<Work>>>,
    /// Whether the checkpointer is applying a hand-off (taken alone); `ckpt_cv` signals it.
    ckpt: Mutex<Ckpt>,
    ckpt_cv: Condvar,
    clock: Arc<dyn Clock>,
    cfg: Config,
    /// Mirrors `hub.wants_events()` so writers can skip building events.
    record_events: AtomicBool,
    /// Sender and receiver of `expired()`; `None` once closed.
    expired: Mutex<Option<ExpiredChannel>>,
    commits: AtomicU64,
    /// The store's fsync counter and its value when the engine opened (none in memory).
    syncs: Option<(SyncCounter, u64)>,
    expired_dropped: AtomicU64,
    /// Keeps the clock subscription alive.
    waker: Mutex<Option<Arc<Waker>>>,
    /// Lease ID → tokens raised when the lease is gone (see `Tenure::lease_gone`).
    lease_waiters: Mutex<HashMap<i64, Vec<Stop>>>,
    /// Replaced (disconnecting every clone of the old receiver) on each demote (L9).
    demotion: Mutex<Signal>,
    /// `Closed` naming this database, returned by every call after close.
    closed: Error,
    /// The database file (`None`: in memory).
    path: Option<PathBuf>,
}

/// An embedded lease engine: leases, TTL keys and watches over one redb file.
///
/// A `Tenure` is a cheap handle (`Clone + Send + Sync`); the engine closes when
/// [`close`](Tenure::close) is called or the last handle is dropped.
#[derive(Clone)]
pub struct Tenure {
    h: Arc<Handle>,
}

/// What a `Tenure` handle drives: this process's engine, or (feature `remote`) an etcd v3
/// server reached by [`Tenure::connect`].
pub(crate) enum Handle {
    Local {
        shared: Arc<Shared>,
        threads: Mutex<Vec<JoinHandle<()>>>,
    },
    #[cfg(feature = "remote")]
    Remote(Box<crate::etcd::client::Remote>),
}

impl Drop for Handle {
    fn drop(&mut self) {
        match self {
            Handle::Local { shared, threads } => {
                let _ = close_engine(shared, threads);
            }
            #[cfg(feature = "remote")]
            Handle::Remote(r) => r.close(),
        }
    }
}

/// Over [`Tenure::connect`], returns `$e` (with the remote backend as `$r`) instead of running
/// the embedded engine's code that follows.
macro_rules! remote {
    ($self:ident, |$r:ident| $e:expr) => {
        #[cfg(feature = "remote")]
        {
            if let Some($r) = $self.remote() {
                return $e;
            }
        }
    };
}

impl std::fmt::Debug for Tenure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Tenure");
        match &*self.h {
            Handle::Local { shared, .. } => d.field("persist", &shared.cfg.persist),
            #[cfg(feature = "remote")]
            Handle::Remote(r) => d.field("remote", r),
        };
        d.field("closed", &self.is_closed()).finish_non_exhaustive()
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

    /// Connects to an etcd v3 server (`tenure serve` or etcd): `http://HOST:PORT`, several
    /// comma-separated, or `unix:PATH`. See [`Builder::connect`]. Feature `remote`.
    #[cfg(feature = "remote")]
    pub fn connect(url: &str) -> Result<Tenure> {
        Builder::default().endpoints([url]).connect()
    }

    /// An engine that keeps everything in memory.
    pub fn in_memory() -> Result<Tenure> {
        Builder::default().open()
    }

    /// Every option, with defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The embedded engine's state; `Unsupported` over `connect` (engine-only calls).
    fn shared(&self) -> Result<&Shared> {
        match &*self.h {
            Handle::Local { shared, .. } => Ok(shared),
            #[cfg(feature = "remote")]
            Handle::Remote(_) => Err(Error::Unsupported(
                "an engine-only call over connect".into(),
            )),
        }
    }

    /// The etcd connection, when this handle was made by `connect`.
    #[cfg(feature = "remote")]
    pub(crate) fn remote(&self) -> Option<&crate::etcd::client::Remote> {
        match &*self.h {
            Handle::Remote(r) => Some(r),
            Handle::Local { .. } => None,
        }
    }

    pub(crate) fn downgrade(&self) -> std::sync::Weak<Handle> {
        Arc::downgrade(&self.h)
    }

    pub(crate) fn upgrade(h: &std::sync::Weak<Handle>) -> Option<Tenure> {
        h.upgrade().map(|h| Tenure { h })
    }

    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        match &*self.h {
            Handle::Local { shared, .. } => shared.clock.clone(),
            #[cfg(feature = "remote")]
            Handle::Remote(r) => r.clock(),
        }
    }

    /// Runs a write under the state lock, then waits for its durability (Immediate mode).
    /// `f` reads the clock through [`Time`] only if it needs to.
    fn write<T>(&self, f: impl FnOnce(&mut Machine, &mut Batch, &Time) -> Result<T>) -> Result<T> {
        let s = self.shared()?;
        let (out, wait_for) = {
            let mut st = s.state.lock();
            let st = &mut *st;
            if st.closed {
                return Err(s.closed.clone());
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
                enqueued(s, st, true)
            } else {
                None
            };
            wake_expiry_if_earlier(s, st);
            (out, wait_for)
        };
        if let Some(seq) = wait_for {
            wait_durable(s, seq)?;
        }
        Ok(out)
    }

    fn read<T>(&self, f: impl FnOnce(&Machine, u64) -> T) -> Result<T> {
        let s = self.shared()?;
        let st = s.state.lock();
        if st.closed {
            return Err(s.closed.clone());
        }
        Ok(f(&st.m, s.clock.now_ns()))
    }

    /// Like `read`, but returns only once every write the result could reflect is durable
    /// (SPEC E8; Immediate mode: a reader never sees what a crash could still lose).
    pub(crate) fn read_durable<T>(&self, f: impl FnOnce(&Machine) -> T) -> Result<T> {
        let s = self.shared()?;
        let (out, seq) = {
            let st = s.state.lock();
            if st.closed {
                return Err(s.closed.clone());
            }
            (f(&st.m), st.seq)
        };
        if s.cfg.persist && s.cfg.durability == Durability::Immediate {
            wait_durable(s, seq)?;
        }
        Ok(out)
    }

    /// Like `read_durable`, but `Ok(None)` instead of waiting when some applied write is not
    /// durable yet: lets an async caller read inline and wait elsewhere only when it must.
    pub(crate) fn try_read_durable<T>(&self, f: impl FnOnce(&Machine) -> T) -> Result<Option<T>> {
        let s = self.shared()?;
        let st = s.state.lock();
        if st.closed {
            return Err(s.closed.clone());
        }
        if s.cfg.persist && s.cfg.durability == Durability::Immediate {
            let done = s.done.lock(); // lock order: state, then done
            if let Some(e) = &done.failed {
                return Err(e.clone());
            }
            if done.committed < st.seq {
                return Ok(None);
            }
        }
        Ok(Some(f(&st.m)))
    }

    /// Runs `f` on a write's machine and batch (see `write`), for requests defined elsewhere.
    pub(crate) fn write_with<T>(
        &self,
        f: impl FnOnce(&mut Machine, &mut Batch) -> Result<T>,
    ) -> Result<T> {
        self.write(|m, b, _| f(m, b))
    }

    /// Runs `f` on the watch hub with the current (applied) revision, under the state lock.
    pub(crate) fn with_hub<T>(&self, f: impl FnOnce(&mut WatchHub, i64) -> Result<T>) -> Result<T> {
        let s = self.shared()?;
        let st = s.state.lock();
        if st.closed {
            return Err(s.closed.clone());
        }
        let mut hub = s.hub.lock();
        let out = f(&mut hub, st.m.kv.revision)?;
        s.record_events.store(hub.wants_events(), Ordering::Relaxed);
        Ok(out)
    }

    /// The revision up to which every event has been handed to the watchers: everything up to
    /// it is committed (SPEC E4 progress notifications).
    pub fn durable_revision(&self) -> i64 {
        remote!(self, |r| r.revision_or_last());
        let Ok(s) = self.shared() else { return 0 };
        if !s.cfg.persist {
            return s.state.lock().m.kv.revision;
        }
        s.done.lock().revision
    }

    /// A barrier: returns once the database file itself holds every write applied before the
    /// call. With the write-ahead log (the default) acknowledged writes are durable in the log
    /// and reach the file in the background; whatever reads the file of an open engine (a
    /// snapshot, a backup, a copy) calls this first. In memory there is nothing to do; after a
    /// storage failure it fails with that failure (D6). Engine-only: `Unsupported` over
    /// `connect`.
    pub fn flush_to_file(&self) -> Result<()> {
        let s = self.shared()?;
        if !s.cfg.persist {
            return Ok(());
        }
        let req = {
            let mut st = s.state.lock();
            if st.closed {
                return Err(s.closed.clone());
            }
            st.barriers += 1;
            s.commit_cv.notify_one();
            st.barriers
        };
        wait_done(s, |done| done.barriers >= req)
    }

    // ---- leases -------------------------------------------------------------------------------

    /// Grants a lease with a fresh ID (SPEC L1–L3).
    pub fn grant(&self, ttl: Duration) -> Result<LeaseId> {
        remote!(self, |r| r.grant(None, ttl).map(|l| l.id));
        self.write(|m, b, t| m.grant(None, ttl, t.now(), t.wall(), b))
            .map(LeaseId::new)
    }

    /// Grants a lease with a chosen ID; `LeaseExists` if it is live, `InvalidArgument` if ≤ 0.
    pub fn grant_with_id(&self, id: impl Into<LeaseId>, ttl: Duration) -> Result<LeaseId> {
        let id = lease_id(id);
        remote!(self, |r| r.grant(Some(LeaseId::new(id)), ttl).map(|l| l.id));
        self.write(|m, b, t| m.grant(Some(id), ttl, t.now(), t.wall(), b))
            .map(LeaseId::new)
    }

    /// Grants a lease (with `id`, else a fresh ID) and reports what was granted: its ID and
    /// effective TTL (raised to `min_ttl`), as [`time_to_live`](Tenure::time_to_live) would.
    pub fn grant_lease(&self, id: Option<LeaseId>, ttl: Duration) -> Result<LeaseInfo> {
        remote!(self, |r| r.grant(id, ttl));
        self.write(|m, b, t| {
            let now = t.now();
            let id = m.grant(id.map(LeaseId::get), ttl, now, t.wall(), b)?;
            let lease = m
                .lessor
                .get(id)
                .ok_or(Error::LeaseNotFound(LeaseId::new(id)))?;
            Ok(m.lessor.info(lease, now))
        })
    }

    /// Revokes a lease and deletes its keys in one durable write (SPEC L4).
    pub fn revoke(&self, id: impl Into<LeaseId>) -> Result<()> {
        let id = lease_id(id);
        remote!(self, |r| r.revoke(LeaseId::new(id)));
        self.write(|m, b, _| m.revoke(id, b))
    }

    /// Renews a lease: deadline = now + TTL; returns the TTL (SPEC L5). Writes nothing to disk.
    #[inline]
    pub fn renew(&self, id: impl Into<LeaseId>) -> Result<Duration> {
        let id = lease_id(id);
        remote!(self, |r| r.renew(LeaseId::new(id), None));
        let s = self.shared()?;
        let mut st = s.state.lock();
        if st.closed {
            return Err(s.closed.clone());
        }
        let now = s.clock.now_ns();
        let ttl = st.m.renew(id, now)?;
        wake_expiry_if_earlier(s, &mut st);
        Ok(Duration::from_nanos(ttl))
    }

    /// The lease's TTL, remaining time and keys (SPEC L7).
    pub fn time_to_live(&self, id: impl Into<LeaseId>) -> Result<LeaseInfo> {
        let id = lease_id(id);
        remote!(self, |r| r.time_to_live(LeaseId::new(id)));
        self.read(|m, now| {
            m.lessor
                .get(id)
                .map(|l| m.lessor.info(l, now))
                .ok_or(Error::LeaseNotFound(LeaseId::new(id)))
        })?
    }

    /// Every live lease, in ascending order of remaining time (SPEC L7); `Closed` once closed.
    pub fn leases(&self) -> Result<Vec<LeaseInfo>> {
        remote!(self, |r| r.leases());
        self.read(|m, now| m.lessor.list(now))
    }

    /// Attaches keys to a lease; a key attached elsewhere moves (SPEC L6).
    pub fn attach<K: AsRef<[u8]>>(&self, id: impl Into<LeaseId>, keys: &[K]) -> Result<()> {
        let id = lease_id(id);
        remote!(self, |r| r.attach(LeaseId::new(id), keys, true));
        self.write(|m, b, _| m.attach(id, keys, b))
    }

    /// Detaches keys from a lease (SPEC L6).
    pub fn detach<K: AsRef<[u8]>>(&self, id: impl Into<LeaseId>, keys: &[K]) -> Result<()> {
        let id = lease_id(id);
        remote!(self, |r| r.attach(LeaseId::new(id), keys, false));
        self.write(|m, b, _| m.detach(id, keys, b))
    }

    /// The lease a key is attached to, `None` if detached or absent (SPEC L6); `Closed` once
    /// closed.
    pub fn lease_of(&self, key: impl AsRef<[u8]>) -> Result<Option<LeaseId>> {
        remote!(self, |r| r
            .get(key.as_ref())
            .map(|kv| kv.and_then(|kv| kv.lease)));
        self.read(|m, _| m.kv.lease_of(key.as_ref()).map(LeaseId::new))
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
        signals::demoted(self.shared()?);
        Ok(())
    }

    /// Whether this engine is the primary (a connection always is); `Closed` once closed.
    pub fn is_primary(&self) -> Result<bool> {
        remote!(self, |r| if r.is_closed() {
            Err(self.closed_error())
        } else {
            Ok(true)
        });
        self.read(|m, _| m.lessor.is_primary())
    }

    /// Batches of expired leases (SPEC L11, L12). Every receiver shares one queue: each batch
    /// goes to one of them. The channel disconnects when the engine closes.
    pub fn expired(&self) -> Receiver<Vec<ExpiredLease>> {
        let Ok(s) = self.shared() else {
            return bounded(0).1;
        };
        match &*s.expired.lock() {
            Some((_, rx)) => rx.clone(),
            None => bounded(0).1,
        }
    }

    /// The next batch of [`expired`](Tenure::expired), waiting as long as `wait` allows:
    /// `Timeout` if none came by then (or its stop token was raised), `Closed` once the engine
    /// is closed.
    pub fn next_expired(&self, wait: impl Into<Wait>) -> Result<Vec<ExpiredLease>> {
        let rx = self.expired();
        if let Ok(batch) = rx.try_recv() {
            return Ok(batch);
        }
        let wait = wait.into();
        let (timer, stopped) = (wait.timer(), wait.stopped());
        crossbeam_channel::select! {
            recv(rx) -> batch => batch.map_err(|_| self.closed_error()),
            recv(timer) -> _ => Err(wait.timed_out("an expired lease")),
            recv(stopped) -> _ => Err(wait.timed_out("an expired lease")),
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
        remote!(self, |r| r.put(key.as_ref(), value.as_ref(), lease));
        let lease = lease.map_or(0, LeaseId::get);
        self.write(|m, b, _| m.put(key.as_ref(), value.as_ref(), lease, b))
    }

    /// The key's value and revisions, or `None` (SPEC K2).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<KeyValue>> {
        remote!(self, |r| r.get(key.as_ref()));
        self.read(|m, _| m.kv.get(key.as_ref()))
    }

    /// Keys starting with `prefix`, in key order, at most `limit` (SPEC K2).
    pub fn range(&self, prefix: impl AsRef<[u8]>, limit: Option<usize>) -> Result<Vec<KeyValue>> {
        remote!(self, |r| r.range(prefix.as_ref(), limit, None));
        self.read(|m, _| m.kv.range(prefix.as_ref(), limit))
    }

    /// Deletes a key; returns whether it existed (SPEC K3).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        remote!(self, |r| r.delete(key.as_ref(), false).map(|n| n > 0));
        self.write(|m, b, _| m.delete(key.as_ref(), b))
    }

    /// Deletes every key starting with `prefix`; returns how many (SPEC K3).
    pub fn delete_prefix(&self, prefix: impl AsRef<[u8]>) -> Result<u64> {
        remote!(self, |r| r.delete(prefix.as_ref(), true));
        self.write(|m, b, _| Ok(m.delete_prefix(prefix.as_ref(), b)))
    }

    /// The current store revision (SPEC K4); `Closed` once closed.
    pub fn revision(&self) -> Result<i64> {
        remote!(self, |r| r.revision());
        self.read(|m, _| m.kv.revision)
    }

    /// Runs a compare-and-swap transaction (SPEC K5).
    pub fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        remote!(self, |r| r.txn(&txn));
        self.write(|m, b, _| m.txn(txn, b))
    }

    /// Watches a key or prefix (SPEC K6).
    pub fn watch(&self, key: impl AsRef<[u8]>, opts: WatchOptions) -> Result<Watcher> {
        remote!(self, |r| r.watch(key.as_ref(), &opts));
        let s = self.shared()?;
        let st = s.state.lock();
        if st.closed {
            return Err(s.closed.clone());
        }
        let range = if opts.prefix {
            KeyRange::prefix(key.as_ref())
        } else {
            KeyRange::new(key.as_ref(), b"")
        };
        let mut hub = s.hub.lock();
        let w = hub.register(range, &opts, st.m.kv.revision)?;
        s.record_events.store(true, Ordering::Relaxed);
        Ok(w)
    }

    // ---- engine -------------------------------------------------------------------------------

    /// Counters and gauges (SPEC L15). Still readable after close.
    pub fn stats(&self) -> Stats {
        remote!(self, |r| r.stats());
        let Ok(s) = self.shared() else {
            return Stats::default();
        };
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
            fsyncs: s.syncs.as_ref().map_or(0, |(c, base)| c.get() - base),
            expired_dropped: s.expired_dropped.load(Ordering::Relaxed),
            watchers: s.hub.lock().watcher_count() as u64,
        }
    }

    /// The `Closed` error of this engine (it names the database).
    pub(crate) fn closed_error(&self) -> Error {
        match self.shared() {
            Ok(s) => s.closed.clone(),
            Err(_) => Error::Closed("(etcd connection)".into()),
        }
    }

    /// The database file, as given to the builder; `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.shared().ok().and_then(|s| s.path.as_deref())
    }

    /// Whether [`close`](Tenure::close) has run.
    pub fn is_closed(&self) -> bool {
        remote!(self, |r| r.is_closed());
        self.shared().is_ok_and(|s| s.state.lock().closed)
    }

    /// Checkpoints renewed leases, flushes everything pending, stops the threads and releases
    /// the file. Idempotent; later calls on any handle fail with `Closed` (SPEC D7).
    pub fn close(&self) -> Result<()> {
        match &*self.h {
            Handle::Local { shared, threads } => close_engine(shared, threads),
            #[cfg(feature = "remote")]
            Handle::Remote(r) => {
                r.close();
                Ok(())
            }
        }
    }

    fn wake_expiry(&self) {
        let Ok(s) = self.shared() else { return };
        let _g = s.state.lock();
        s.expiry_cv.notify_all();
    }
}

/// `State::sleep_until` while the expiry thread is awake or already woken.
const AWAKE: u64 = 0;

/// Wakes the expiry thread if it sleeps past the earliest deadline (see `State::sleep_until`).
#[inline]
fn wake_expiry_if_earlier(s: &Shared, st: &mut State) {
    if st.m.lessor.next_wake().is_some_and(|w| w < st.sleep_until) {
        st.sleep_until = AWAKE;
        s.expiry_cv.notify_one();
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
    // A storage failure (D6), the close's own last checkpoint included, is reported: the file
    // is then not complete on its own (its log still holds every acknowledged write).
    let result = if s.cfg.persist {
        wait_durable(s, seq).and_then(|()| match &s.done.lock().failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        })
    } else {
        Ok(())
    };
    s.hub.lock().close();
    signals::raise_all(s);
    *s.expired.lock() = None;
    let store = s.store.lock().take();
    // Releases the file lock.
    let result = result.and(store.map_or(Ok(()), Store::close));
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
