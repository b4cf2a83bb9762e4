//! The embedded engine behind a `Tenure` handle. It composes the pure [`LeaseKv`] with a clock, the redb [`Store`], the
//! write pipeline (committer thread, group commit) and the expiry thread.
//!
//! - `backup`: snapshots, hashes and defragmentation; `builder`: options and open; `commit`: the commit pipeline; `expiry`: the expiry thread;
//!   `wakeups`: lease-gone, demotion and clock wake-ups; this file: the handle and its API.
//!
//! Every lock of the crate and the one order they are taken in: `docs/DESIGN.md`, "Locking".

mod backup;
mod builder;
mod commit;
mod compactor;
#[cfg(feature = "serve")]
mod durable;
mod expiry;
mod quota;
mod requests;
mod wakeups;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};

pub use self::builder::Builder;
use self::commit::{enqueued, wait_done, wait_durable, Ckpt, Leader, Work};
#[cfg(feature = "serve")]
pub use self::durable::Applied;
use self::wakeups::notify_gone;
use crate::alarms::{Alarm, Cost};
use crate::batch::Batch;
use crate::clock::{Clock, Waker};
use crate::error::{Error, Result};
use crate::kv::range::KeyRange;
use crate::kv::txn::{Txn, TxnResponse};
use crate::kv::watch::{WatchHub, WatchOptions, Watcher};
use crate::lease::lessor::ns;
use crate::locks::{Condvar, Mutex};
use crate::metrics::{Metrics, Recorders};
use crate::state::LeaseKv;
use crate::store::{Store, SyncCounter};
use crate::types::{AutoCompaction, Durability, ExpiredLease, KeyValue, LeaseId, LeaseInfo, Stats};
use crate::wait::{Stop, Wait};

/// Capacity, in batches, of the `expired()` channel. When full, auto-revoke notices are
/// dropped (and counted); manual-revoke leases are redelivered anyway.
const EXPIRED_QUEUE: usize = 1 << 14;

#[derive(Clone)]
struct Config {
    auto_compaction: AutoCompaction,
    durability: Durability,
    persist: bool,
    checkpoint_interval: u64,
    /// The file's space quota in bytes (`None`: none), SPEC E20.
    quota: Option<u64>,
    /// The member ID the engine raises its alarms as.
    member: u64,
}

/// A channel whose sender is dropped to disconnect every receiver at once.
type Broadcast = (Sender<()>, Receiver<()>);

type ExpiredChannel = (Sender<Vec<ExpiredLease>>, Receiver<Vec<ExpiredLease>>);

/// Engine state guarded by `Shared::state`.
struct WriteState {
    lease_kv: LeaseKv,
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
struct CommitProgress {
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
    /// Async tasks awaiting a commit (feature `serve`, `durable.rs`), completed by the end of
    /// the commit that covers them, or by a failure.
    #[cfg(feature = "serve")]
    futures: Vec<durable::Waiting>,
}

pub(crate) struct Shared {
    state: Mutex<WriteState>,
    /// The expiry thread waits on it (with `state`).
    expiry_cv: Condvar,
    /// The committer waits on it (with `state`).
    commit_cv: Condvar,
    /// A gathering commit leader waits on it (with `state`).
    gather_cv: Condvar,
    hub: Mutex<WatchHub>,
    done: Mutex<CommitProgress>,
    done_cv: Condvar,
    /// The committer alone without a log; the checkpointer alone with one (then `close`,
    /// after both stopped).
    store: Mutex<Option<Store>>,
    /// The commit leader's own state (the log's writer side, if any): taken only by the
    /// holder of `CommitProgress::committing`, across the commit's fsync.
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
    /// The redb file's length as of its last change (`quota::note_file_bytes`): what the
    /// space quota judges.
    file_bytes: AtomicU64,
    /// The revision the redb file holds (with the log it lags the log): a read at a past
    /// revision above it first brings the file up to date (`flush_to_file`).
    file_revision: AtomicI64,
    /// Writes that relabeled a key's history row (attach, detach: no revision moves), and how
    /// many of them the file held at the last past read's barrier.
    relabels: AtomicU64,
    relabels_flushed: AtomicU64,
    /// Wakes the compactor (`compactor::run`) after a compaction reached the file, or on close.
    compact_tx: Sender<()>,
    compact_rx: Receiver<()>,
    /// Sender and receiver of `expired()`; `None` once closed.
    expired: Mutex<Option<ExpiredChannel>>,
    commits: AtomicU64,
    /// The store's fsync counter and its value when the engine opened (none in memory).
    syncs: Option<(SyncCounter, u64)>,
    expired_dropped: AtomicU64,
    /// Expiry lateness, commit durations and sizes (atomics, no lock).
    recorders: Recorders,
    /// Keeps the clock subscription alive.
    waker: Mutex<Option<Arc<Waker>>>,
    /// Lease ID → tokens raised when the lease is gone (see `Tenure::lease_gone`).
    lease_waiters: Mutex<HashMap<i64, Vec<Stop>>>,
    /// Replaced (disconnecting every clone of the old receiver) on each demote (L9).
    demotion: Mutex<Broadcast>,
    /// `Closed` naming this database, returned by every call after close.
    closed: Error,
    /// The database file (`None`: in memory).
    path: Option<PathBuf>,
}

/// The embedded engine behind a [`Tenure`](crate::Tenure) handle: its state and threads. The
/// engine closes when [`close`](Engine::close) is called or it is dropped (with the last handle).
pub(crate) struct Engine {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = close_engine(&self.shared, &self.threads);
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("persist", &self.shared.cfg.persist)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// Lazy access to the clock for a write: most writes need neither time.
struct LazyClock<'a>(&'a dyn Clock);

impl LazyClock<'_> {
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

impl Engine {
    fn shared(&self) -> &Shared {
        &self.shared
    }

    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        self.shared.clock.clone()
    }

    /// Runs a write under the state lock, then waits for its durability (Immediate mode).
    /// `f` reads the clock through [`LazyClock`] only if it needs to.
    fn write<T>(
        &self,
        f: impl FnOnce(&mut LeaseKv, &mut Batch, &LazyClock) -> Result<T>,
    ) -> Result<T> {
        let (out, wait_for) = self.apply(f, true);
        if let Some(seq) = wait_for {
            wait_durable(self.shared(), seq)?;
        }
        out
    }

    /// The first half of [`write`](Engine::write): runs the write under the state lock and
    /// returns its result with the sequence number to wait for, if any. `leads`: the caller
    /// waits with [`wait_durable`] (and so may lead the commit itself); otherwise the committer
    /// thread is woken to commit it (an async waiter, `durable.rs`).
    #[inline(always)]
    fn apply<T>(
        &self,
        f: impl FnOnce(&mut LeaseKv, &mut Batch, &LazyClock) -> Result<T>,
        leads: bool,
    ) -> (Result<T>, Option<u64>) {
        let s = self.shared();
        {
            let mut st = s.state.lock();
            let st = &mut *st;
            if st.closed {
                return (Err(s.closed.clone()), None);
            }
            if let Some(e) = &st.poisoned {
                return (Err(e.clone()), None);
            }
            st.pending.record_events = s.record_events.load(Ordering::Relaxed);
            let before = (
                st.pending.ops.len(),
                st.pending.events.len(),
                st.pending.expired.len(),
            );
            // A refused write may still leave one thing to commit: the NOSPACE alarm it raised.
            let out = f(&mut st.lease_kv, &mut st.pending, &LazyClock(&*s.clock));
            notify_gone(s, &mut st.pending);
            if std::mem::take(&mut st.pending.relabeled) {
                s.relabels.fetch_add(1, Ordering::Release);
            }
            let after = (
                st.pending.ops.len(),
                st.pending.events.len(),
                st.pending.expired.len(),
            );
            let wait_for = if before != after {
                enqueued(s, st, leads)
            } else {
                None
            };
            wake_expiry_if_earlier(s, st);
            (out, wait_for)
        }
    }

    fn read<T>(&self, f: impl FnOnce(&LeaseKv, u64) -> T) -> Result<T> {
        let s = self.shared();
        let st = s.state.lock();
        if st.closed {
            return Err(s.closed.clone());
        }
        Ok(f(&st.lease_kv, s.clock.now_ns()))
    }

    /// Like `read`, but returns only once every write the result could reflect is durable
    /// (SPEC E8; Immediate mode: a reader never sees what a crash could still lose).
    pub(crate) fn read_durable<T>(&self, f: impl FnOnce(&LeaseKv) -> T) -> Result<T> {
        let s = self.shared();
        let (out, seq) = {
            let st = s.state.lock();
            if st.closed {
                return Err(s.closed.clone());
            }
            (f(&st.lease_kv), st.seq)
        };
        if s.cfg.persist && s.cfg.durability == Durability::Immediate {
            wait_durable(s, seq)?;
        }
        Ok(out)
    }

    /// Like `read_durable`, but `Ok(None)` instead of waiting when some applied write is not
    /// durable yet: lets an async caller read inline and wait elsewhere only when it must.
    pub(crate) fn try_read_durable<T>(&self, f: impl FnOnce(&LeaseKv) -> T) -> Result<Option<T>> {
        let s = self.shared();
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
        Ok(Some(f(&st.lease_kv)))
    }

    /// Runs `f` on a write's machine and batch (see `write`), for requests defined elsewhere.
    pub(crate) fn write_with<T>(
        &self,
        f: impl FnOnce(&mut LeaseKv, &mut Batch) -> Result<T>,
    ) -> Result<T> {
        self.write(|lease_kv, b, _| f(lease_kv, b))
    }

    /// Runs `f` on the watch hub with the current (applied) revision, under the state lock.
    pub(crate) fn with_hub<T>(&self, f: impl FnOnce(&mut WatchHub, i64) -> Result<T>) -> Result<T> {
        let s = self.shared();
        let st = s.state.lock();
        if st.closed {
            return Err(s.closed.clone());
        }
        let mut hub = s.hub.lock();
        let out = f(&mut hub, st.lease_kv.kv.revision)?;
        s.record_events.store(hub.wants_events(), Ordering::Relaxed);
        Ok(out)
    }

    /// [`Tenure::durable_revision`](crate::Tenure::durable_revision), for this engine.
    pub(crate) fn durable_revision(&self) -> i64 {
        let s = self.shared();
        if !s.cfg.persist {
            return s.state.lock().lease_kv.kv.revision;
        }
        s.done.lock().revision
    }

    /// [`Tenure::flush_to_file`](crate::Tenure::flush_to_file), for this engine.
    pub(crate) fn flush_to_file(&self) -> Result<()> {
        let s = self.shared();
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

    /// [`Tenure::grant`](crate::Tenure::grant), for this engine.
    pub(crate) fn grant(&self, ttl: Duration) -> Result<LeaseId> {
        let s = self.shared();
        self.write(|lease_kv, b, t| {
            quota::admit(s, lease_kv, b, Cost::GRANT)?;
            lease_kv.grant(None, ttl, t.now(), t.wall(), b)
        })
        .map(LeaseId::new)
    }

    /// [`Tenure::grant_with_id`](crate::Tenure::grant_with_id), for this engine.
    pub(crate) fn grant_with_id(&self, id: impl Into<LeaseId>, ttl: Duration) -> Result<LeaseId> {
        let id = lease_id(id);
        let s = self.shared();
        self.write(|lease_kv, b, t| {
            quota::admit(s, lease_kv, b, Cost::GRANT)?;
            lease_kv.grant(Some(id), ttl, t.now(), t.wall(), b)
        })
        .map(LeaseId::new)
    }

    /// [`Tenure::grant_lease`](crate::Tenure::grant_lease), for this engine.
    pub(crate) fn grant_lease(&self, id: Option<LeaseId>, ttl: Duration) -> Result<LeaseInfo> {
        let s = self.shared();
        self.write(|lease_kv, b, t| {
            quota::admit(s, lease_kv, b, Cost::GRANT)?;
            let now = t.now();
            let id = lease_kv.grant(id.map(LeaseId::get), ttl, now, t.wall(), b)?;
            let lease = lease_kv
                .lessor
                .get(id)
                .ok_or(Error::LeaseNotFound(LeaseId::new(id)))?;
            Ok(lease_kv.lessor.info(lease, now))
        })
    }

    /// [`Tenure::revoke`](crate::Tenure::revoke), for this engine.
    pub(crate) fn revoke(&self, id: impl Into<LeaseId>) -> Result<()> {
        let id = lease_id(id);
        let s = self.shared();
        self.write(|lease_kv, b, _| {
            quota::admit(s, lease_kv, b, Cost::NONE)?;
            lease_kv.revoke(id, b)
        })
    }

    /// [`Tenure::renew`](crate::Tenure::renew), for this engine.
    #[inline]
    pub(crate) fn renew(&self, id: impl Into<LeaseId>) -> Result<Duration> {
        let id = lease_id(id);
        let s = self.shared();
        let mut st = s.state.lock();
        if st.closed {
            return Err(s.closed.clone());
        }
        let now = s.clock.now_ns();
        let ttl = st.lease_kv.renew(id, now)?;
        wake_expiry_if_earlier(s, &mut st);
        Ok(Duration::from_nanos(ttl))
    }

    /// [`Tenure::time_to_live`](crate::Tenure::time_to_live), for this engine.
    pub(crate) fn time_to_live(&self, id: impl Into<LeaseId>) -> Result<LeaseInfo> {
        let id = lease_id(id);
        self.read(|lease_kv, now| {
            lease_kv
                .lessor
                .get(id)
                .map(|l| lease_kv.lessor.info(l, now))
                .ok_or(Error::LeaseNotFound(LeaseId::new(id)))
        })?
    }

    /// [`Tenure::leases`](crate::Tenure::leases), for this engine.
    pub(crate) fn leases(&self) -> Result<Vec<LeaseInfo>> {
        self.read(|lease_kv, now| lease_kv.lessor.list(now))
    }

    /// [`Tenure::attach`](crate::Tenure::attach), for this engine.
    pub(crate) fn attach<K: AsRef<[u8]>>(&self, id: impl Into<LeaseId>, keys: &[K]) -> Result<()> {
        let id = lease_id(id);
        let s = self.shared();
        self.write(|lease_kv, b, _| {
            quota::admit(s, lease_kv, b, quota::of_relabel(keys))?;
            lease_kv.attach(id, keys, b)
        })
    }

    /// [`Tenure::detach`](crate::Tenure::detach), for this engine.
    pub(crate) fn detach<K: AsRef<[u8]>>(&self, id: impl Into<LeaseId>, keys: &[K]) -> Result<()> {
        let id = lease_id(id);
        let s = self.shared();
        self.write(|lease_kv, b, _| {
            quota::admit(s, lease_kv, b, quota::of_relabel(keys))?;
            lease_kv.detach(id, keys, b)
        })
    }

    /// [`Tenure::lease_of`](crate::Tenure::lease_of), for this engine.
    pub(crate) fn lease_of(&self, key: impl AsRef<[u8]>) -> Result<Option<LeaseId>> {
        self.read(|lease_kv, _| lease_kv.kv.lease_of(key.as_ref()).map(LeaseId::new))
    }

    /// [`Tenure::checkpoint`](crate::Tenure::checkpoint), for this engine.
    pub(crate) fn checkpoint(&self, id: impl Into<LeaseId>, remaining: Duration) -> Result<()> {
        let id = lease_id(id);
        self.write(|lease_kv, b, t| lease_kv.checkpoint(id, remaining, t.wall(), b))
    }

    /// [`Tenure::promote`](crate::Tenure::promote), for this engine.
    pub(crate) fn promote(&self, extend: Duration) -> Result<()> {
        self.write(|lease_kv, _, t| {
            lease_kv.lessor.promote(ns(extend), t.now());
            Ok(())
        })?;
        self.wake_expiry();
        Ok(())
    }

    /// [`Tenure::demote`](crate::Tenure::demote), for this engine.
    pub(crate) fn demote(&self) -> Result<()> {
        self.write(|lease_kv, _, _| {
            lease_kv.lessor.demote();
            Ok(())
        })?;
        wakeups::demoted(self.shared());
        Ok(())
    }

    /// [`Tenure::is_primary`](crate::Tenure::is_primary), for this engine.
    pub(crate) fn is_primary(&self) -> Result<bool> {
        self.read(|lease_kv, _| lease_kv.lessor.is_primary())
    }

    /// [`Tenure::expired`](crate::Tenure::expired), for this engine.
    pub(crate) fn expired(&self) -> Receiver<Vec<ExpiredLease>> {
        let s = self.shared();
        match &*s.expired.lock() {
            Some((_, rx)) => rx.clone(),
            None => bounded(0).1,
        }
    }

    /// [`Tenure::next_expired`](crate::Tenure::next_expired), for this engine.
    pub(crate) fn next_expired(&self, wait: impl Into<Wait>) -> Result<Vec<ExpiredLease>> {
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

    /// [`Tenure::put`](crate::Tenure::put), for this engine.
    pub(crate) fn put(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        lease: Option<LeaseId>,
    ) -> Result<i64> {
        let lease = lease.map_or(0, LeaseId::get);
        let s = self.shared();
        let (key, value) = (key.as_ref(), value.as_ref());
        self.write(|lease_kv, b, _| {
            quota::admit(s, lease_kv, b, Cost::put(key, value))?;
            lease_kv.put(key, value, lease, b)
        })
    }

    /// [`Tenure::get`](crate::Tenure::get), for this engine.
    pub(crate) fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<KeyValue>> {
        self.read(|lease_kv, _| lease_kv.kv.get(key.as_ref()))
    }

    /// [`Tenure::range`](crate::Tenure::range), for this engine.
    pub(crate) fn range(
        &self,
        prefix: impl AsRef<[u8]>,
        limit: Option<usize>,
    ) -> Result<Vec<KeyValue>> {
        self.read(|lease_kv, _| lease_kv.kv.range(prefix.as_ref(), limit))
    }

    /// [`Tenure::delete`](crate::Tenure::delete), for this engine.
    pub(crate) fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let s = self.shared();
        self.write(|lease_kv, b, _| {
            quota::admit(s, lease_kv, b, Cost::NONE)?;
            lease_kv.delete(key.as_ref(), b)
        })
    }

    /// [`Tenure::delete_prefix`](crate::Tenure::delete_prefix), for this engine.
    pub(crate) fn delete_prefix(&self, prefix: impl AsRef<[u8]>) -> Result<u64> {
        let s = self.shared();
        self.write(|lease_kv, b, _| {
            quota::admit(s, lease_kv, b, Cost::NONE)?;
            lease_kv.delete_prefix(prefix.as_ref(), b)
        })
    }

    /// [`Tenure::revision`](crate::Tenure::revision), for this engine.
    pub(crate) fn revision(&self) -> Result<i64> {
        self.read(|lease_kv, _| lease_kv.kv.revision)
    }

    /// [`Tenure::txn`](crate::Tenure::txn), for this engine.
    pub(crate) fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        // Borrowed by the apply, so it is dropped after the state lock is released.
        let s = self.shared();
        self.write(|lease_kv, b, _| {
            quota::admit(s, lease_kv, b, quota::of_txn(&txn))?;
            lease_kv.txn(&txn, b)
        })
    }

    /// [`Tenure::watch`](crate::Tenure::watch), for this engine.
    pub(crate) fn watch(&self, key: impl AsRef<[u8]>, opts: WatchOptions) -> Result<Watcher> {
        let range = if opts.prefix {
            KeyRange::prefix(key.as_ref())
        } else {
            KeyRange::new(key.as_ref(), b"")
        };
        let start = opts.start_revision.unwrap_or(0);
        self.register(range, opts)?
            .map_err(|compacted| Error::Compacted {
                revision: start,
                compact_revision: compacted,
                reason: format!("the history starts at revision {compacted}"),
            })
    }

    // ---- alarms (SPEC E20) ----------------------------------------------------------------------

    /// [`Tenure::alarms`](crate::Tenure::alarms), for this engine.
    pub(crate) fn alarms(&self) -> Result<Vec<Alarm>> {
        self.read(|lease_kv, _| lease_kv.alarms.list(None))
    }

    /// [`Tenure::raise_alarm`](crate::Tenure::raise_alarm) and
    /// [`Tenure::disarm_alarm`](crate::Tenure::disarm_alarm), for this engine: durable on
    /// return; false if the alarm already was so.
    pub(crate) fn set_alarm(&self, alarm: Alarm, raised: bool) -> Result<bool> {
        self.write(|lease_kv, b, _| Ok(lease_kv.set_alarm(alarm, raised, b)))
    }

    /// The member ID the engine raises its alarms as (`Builder::member_id`).
    pub(crate) fn member_id(&self) -> u64 {
        self.shared.cfg.member
    }

    /// The space quota (`Builder::quota_backend_bytes`), if any.
    pub(crate) fn quota_backend_bytes(&self) -> Option<u64> {
        self.shared.cfg.quota
    }

    // ---- engine -------------------------------------------------------------------------------

    /// [`Tenure::stats`](crate::Tenure::stats), for this engine.
    pub(crate) fn stats(&self) -> Stats {
        let s = self.shared();
        let st = s.state.lock();
        let c = st.lease_kv.counters;
        let commits = s.commits.load(Ordering::Relaxed);
        Stats {
            granted: c.granted,
            revoked: c.revoked,
            renewed: c.renewed,
            expired: c.expired,
            leases: st.lease_kv.lessor.len() as u64,
            keys: st.lease_kv.kv.live(),
            revision: st.lease_kv.kv.revision,
            commits,
            fsyncs: s.syncs.as_ref().map_or(0, |(c, base)| c.get() - base),
            expired_dropped: s.expired_dropped.load(Ordering::Relaxed),
            watchers: s.hub.lock().watcher_count() as u64,
            owner: true,
        }
    }

    /// [`Tenure::metrics`](crate::Tenure::metrics), for this engine.
    pub(crate) fn metrics(&self) -> Metrics {
        let s = self.shared();
        let r = &s.recorders;
        Metrics {
            stats: self.stats(),
            expiry_lateness: r.expiry_lateness.snapshot(),
            commit_duration: r.commit_duration.snapshot(),
            fsync_duration: s
                .syncs
                .as_ref()
                .map_or_else(Default::default, |(c, _)| c.durations()),
            commit_writes: r.commit_writes.snapshot(),
            quota_backend_bytes: s.cfg.quota.unwrap_or(0),
            // From the state, not `alarms()`: readable after close, as the stats are.
            alarms: s.state.lock().lease_kv.alarms.list(None),
        }
    }

    /// The `Closed` error of this engine (it names the database).
    pub(crate) fn closed_error(&self) -> Error {
        self.shared.closed.clone()
    }

    /// [`Tenure::path`](crate::Tenure::path), for this engine.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.shared.path.as_deref()
    }

    /// [`Tenure::is_closed`](crate::Tenure::is_closed), for this engine.
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.state.lock().closed
    }

    /// [`Tenure::close`](crate::Tenure::close), for this engine.
    pub(crate) fn close(&self) -> Result<()> {
        close_engine(&self.shared, &self.threads)
    }

    fn wake_expiry(&self) {
        let s = self.shared();
        let _g = s.state.lock();
        s.expiry_cv.notify_all();
    }
}

/// `WriteState::sleep_until` while the expiry thread is awake or already woken.
const AWAKE: u64 = 0;

/// Wakes the expiry thread if it sleeps past the earliest deadline (see `WriteState::sleep_until`).
#[inline]
fn wake_expiry_if_earlier(s: &Shared, st: &mut WriteState) {
    if st
        .lease_kv
        .lessor
        .next_wake()
        .is_some_and(|w| w < st.sleep_until)
    {
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
        if st.poisoned.is_none() && st.lease_kv.lessor.is_primary() {
            let now = s.clock.now_ns();
            let wall = s.clock.wall_ms();
            let st_ref = &mut *st;
            while st_ref.lease_kv.lessor.has_dirty() {
                st_ref
                    .lease_kv
                    .checkpoint_dirty(now, wall, usize::MAX, &mut st_ref.pending);
            }
            if !st_ref.pending.is_empty() && s.cfg.persist {
                st_ref.seq += 1;
            }
        }
        st.closed = true;
        s.commit_cv.notify_all();
        s.expiry_cv.notify_all();
        let _ = s.compact_tx.try_send(());
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
    wakeups::raise_all(s);
    *s.expired.lock() = None;
    let store = s.store.lock().take();
    // Releases the file lock; a close that lost nothing is recorded as clean (K15).
    let clean = result.is_ok();
    let result = result.and(store.map_or(Ok(()), |store| store.close(clean)));
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
