//! A Kubernetes-style leader elector (SPEC S5), after client-go's `leaderelection`, on tenure's
//! primitives: the leader holds a lease of `lease_duration`; the record key `name` (not bound to
//! any lease, so its history survives) names the holder, its lease, the acquire and renew times
//! and the number of leader transitions. A record whose lease no longer exists is free: expiry
//! is decided by the engine's clock alone.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender};

use crate::clock::{Clock, Waker};
use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, Txn};
use crate::locks::Mutex;
use crate::sync::backend::Backend;
use crate::types::LeaseId;
use crate::wait::{Stop, Wait};

/// client-go's jitter factor: acquisition is retried every `retry_period × [1, 2.2)`.
const RETRY_JITTER_FACTOR: f64 = 1.2;

/// Configuration of a [`LeaderElector`] (example there).
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::ElectorConfig;
///
/// let mut cfg = ElectorConfig {
///     name: "leader/scheduler".into(),
///     identity: "host-a".into(),
///     lease_duration: Duration::from_secs(15),
///     renew_deadline: Duration::from_secs(10),
///     retry_period: Duration::from_secs(2),
///     release_on_cancel: true,
/// };
/// cfg.validate()?;
/// cfg.renew_deadline = Duration::from_secs(20); // must stay below lease_duration
/// assert!(cfg.validate().is_err());
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectorConfig {
    /// The record key.
    pub name: String,
    /// This candidate's identity (non-empty).
    pub identity: String,
    /// TTL of the leader's lease: how long others wait after the leader stops renewing.
    pub lease_duration: Duration,
    /// The leader steps down if it could not renew for this long.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
    /// On stop, revoke the lease so another candidate can lead at once: after
    /// `on_started_leading` has returned (waited for at most `lease_duration`), so two
    /// leaders' callbacks never overlap.
    pub release_on_cancel: bool,
}

/// client-go's defaults, published once: the C `tenure_elector_config_init` uses them too.
impl ElectorConfig {
    /// How long others wait after the leader stops renewing.
    pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
    /// How long the leader keeps trying to renew before it steps down.
    pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
    /// How often candidates try to acquire, and the leader to renew.
    pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);
}

impl ElectorConfig {
    /// Checks `lease_duration > renew_deadline > retry_period × 1.2` (client-go's jitter factor),
    /// `renew_deadline + retry_period < lease_duration`, all positive, identity non-empty.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::invalid(format!("leader elector: {m}")));
        if self.identity.is_empty() {
            return bad("identity must not be empty");
        }
        if self.name.is_empty() {
            return bad("name must not be empty");
        }
        if self.lease_duration.is_zero()
            || self.renew_deadline.is_zero()
            || self.retry_period.is_zero()
        {
            return bad("durations must be positive");
        }
        // Bounded like every duration option (it is a lease TTL), so the sums below cannot
        // overflow.
        let max = crate::limits::MAX_DURATION;
        if self.lease_duration > max {
            return bad(&format!(
                "lease_duration must be at most {} s",
                max.as_secs()
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return bad("lease_duration must be greater than renew_deadline");
        }
        if self.renew_deadline.as_secs_f64()
            <= self.retry_period.as_secs_f64() * RETRY_JITTER_FACTOR
        {
            return bad("renew_deadline must be greater than retry_period × 1.2");
        }
        if self.renew_deadline + self.retry_period >= self.lease_duration {
            return bad("renew_deadline + retry_period must be less than lease_duration");
        }
        Ok(())
    }
}

/// The callbacks of a [`LeaderElector`], all run on one thread, one at a time (example
/// there).
///
/// ```
/// use tenure::sync::{ElectorCallbacks, Stop};
///
/// let callbacks = ElectorCallbacks {
///     // The leader's work runs here, and must end when `stop` is raised.
///     on_started_leading: Box::new(|token, stop: Stop| {
///         println!("leading, fencing token {token}");
///         stop.wait(None);
///     }),
///     on_stopped_leading: Box::new(|| println!("no longer leading")),
///     on_new_leader: Box::new(|who| println!("the leader is {who}")),
/// };
/// # let _ = callbacks;
/// ```
pub struct ElectorCallbacks {
    /// Became leader with this fencing token; should return once the [`Stop`] is raised.
    pub on_started_leading: Box<dyn FnMut(i64, Stop) + Send>,
    /// Stopped leading; only after a start, and after `on_started_leading` has returned.
    pub on_stopped_leading: Box<dyn FnMut() + Send>,
    /// The observed leader changed (this candidate included).
    pub on_new_leader: Box<dyn FnMut(&str) + Send>,
}

impl std::fmt::Debug for ElectorCallbacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ElectorCallbacks")
    }
}

enum Call {
    /// The fencing token, the callback's stop, and the token the worker raises once the
    /// callback has returned (or unwound), so the leader releases only after it (S5).
    Started(i64, Stop, Stop),
    Stopped,
    NewLeader(String),
}

/// Raises its token when dropped: on a callback's return and on its unwind alike.
struct RaiseOnDrop(Stop);

impl Drop for RaiseOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The leader record stored at the record key.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    lease: i64,
    acquire_ms: i64,
    renew_ms: i64,
    transitions: i64,
    holder: String,
}

impl Record {
    fn encode(&self) -> Vec<u8> {
        format!(
            "{} {} {} {} {}",
            self.lease, self.acquire_ms, self.renew_ms, self.transitions, self.holder
        )
        .into_bytes()
    }

    fn decode(b: &[u8]) -> Option<Record> {
        let s = std::str::from_utf8(b).ok()?;
        let mut it = s.splitn(5, ' ');
        Some(Record {
            lease: it.next()?.parse().ok()?,
            acquire_ms: it.next()?.parse().ok()?,
            renew_ms: it.next()?.parse().ok()?,
            transitions: it.next()?.parse().ok()?,
            holder: it.next()?.to_string(),
        })
    }
}

/// Leadership state shared with observers of the elector.
#[derive(Default)]
struct LeaderState {
    is_leader: AtomicBool,
    leader: Mutex<Option<String>>,
}

/// A client-go–style leader elector (SPEC S5): candidates race for a record key bound to a
/// lease of `lease_duration`; the leader renews it every `retry_period` and steps down if it
/// could not for `renew_deadline`. `on_started_leading` does the leader's work and must return
/// once its [`Stop`] is raised.
///
/// ```
/// use std::sync::mpsc;
/// use std::time::Duration;
/// use tenure::sync::{ElectorCallbacks, ElectorConfig, LeaderElector, Stop};
///
/// let db = tenure::Tenure::in_memory()?;
/// let cfg = ElectorConfig {
///     name: "leader/scheduler".into(),
///     identity: "host-a".into(),
///     lease_duration: Duration::from_secs(3),
///     renew_deadline: Duration::from_secs(2),
///     retry_period: Duration::from_millis(200),
///     release_on_cancel: true,
/// };
/// let (events, seen) = mpsc::channel();
/// let (started, stopped) = (events.clone(), events);
/// let callbacks = ElectorCallbacks {
///     on_started_leading: Box::new(move |token, stop: Stop| {
///         started.send(format!("leading with token {token}")).unwrap();
///         stop.wait(None); // lead until the leadership ends
///     }),
///     on_stopped_leading: Box::new(move || stopped.send("stopped".to_string()).unwrap()),
///     on_new_leader: Box::new(|_who| {}),
/// };
/// let elector = LeaderElector::new(&db, cfg, callbacks)?;
/// let stop = Stop::new();
/// std::thread::scope(|s| {
///     let running = s.spawn(|| elector.run(&stop));
///     assert!(seen.recv().unwrap().starts_with("leading with token"));
///     assert!(elector.is_leader());
///     stop.stop(); // step down (and, with release_on_cancel, free the record at once)
///     running.join().unwrap()
/// })?;
/// assert_eq!(seen.recv().unwrap(), "stopped");
/// # Ok::<(), tenure::Error>(())
/// ```
pub struct LeaderElector {
    db: Arc<dyn Backend>,
    cfg: ElectorConfig,
    callbacks: Mutex<Option<ElectorCallbacks>>,
    shared: Arc<LeaderState>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("cfg", &self.cfg)
            .field("is_leader", &self.is_leader())
            .finish()
    }
}

/// Small deterministic jitter source (xorshift), seeded per elector.
struct Jitter(u64);

impl Jitter {
    fn next_unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl LeaderElector {
    /// Validates `cfg` (`InvalidArgument` if inconsistent) and prepares an elector.
    pub fn new<B: Backend + Clone>(
        db: &B,
        cfg: ElectorConfig,
        callbacks: ElectorCallbacks,
    ) -> Result<LeaderElector> {
        cfg.validate()?;
        Ok(LeaderElector {
            db: Arc::new(db.clone()),
            cfg,
            callbacks: Mutex::new(Some(callbacks)),
            shared: Arc::default(),
        })
    }

    /// Whether this candidate leads now.
    pub fn is_leader(&self) -> bool {
        self.shared.is_leader.load(Ordering::Acquire)
    }

    /// The identity of the last observed leader.
    pub fn leader(&self) -> Option<String> {
        self.shared.leader.lock().clone()
    }

    /// Campaigns, leads and renews until `wait` is over (its stop token raised or its deadline
    /// passed; `&stop` converts), then returns `Ok` once every callback has run. A second call
    /// fails with `InvalidArgument`. `Closed` if the engine closes.
    pub fn run(&self, wait: impl Into<Wait>) -> Result<()> {
        let wait = wait.into();
        // One token for the loop: raised by the caller's token or at the deadline.
        let stop = Stop::new();
        let _linked = wait.stop_token().map(|t| {
            let s = stop.clone();
            t.on_stop(move || s.stop())
        });
        let deadline = wait.deadline();
        let stop = &stop;
        let mut callbacks = self
            .callbacks
            .lock()
            .take()
            .ok_or_else(|| Error::invalid("LeaderElector::run may be called once"))?;
        let (tx, rx) = unbounded::<Call>();
        let worker: JoinHandle<()> = std::thread::Builder::new()
            .name(format!("tenure-elector-{}", self.cfg.identity))
            .spawn(move || {
                for call in rx {
                    match call {
                        Call::Started(token, s, returned) => {
                            let _returned = RaiseOnDrop(returned);
                            (callbacks.on_started_leading)(token, s)
                        }
                        Call::Stopped => (callbacks.on_stopped_leading)(),
                        Call::NewLeader(who) => (callbacks.on_new_leader)(&who),
                    }
                }
            })
            .map_err(|e| Error::storage(format!("cannot start the elector thread: {e}")))?;
        let clock = self.db.clock();
        let s = stop.clone();
        let waker: Arc<Waker> = Arc::new(move || s.wake());
        clock.subscribe(Arc::downgrade(&waker));
        let result = self.campaign_loop(stop, &*clock, &tx, deadline);
        stop.stop();
        drop(waker);
        drop(tx);
        let _ = worker.join();
        result
    }

    /// Runs the elector on its own thread until [`ElectorRun::stop`] (or `stop`, if given, is
    /// raised), as [`run`](LeaderElector::run) would. Like `run`, once per elector.
    pub fn spawn(self: &Arc<Self>, stop: Option<&Stop>) -> Result<ElectorRun> {
        if self.callbacks.lock().is_none() {
            return Err(Error::invalid("LeaderElector::run may be called once"));
        }
        let stop = stop.cloned().unwrap_or_default();
        let (tx, rx) = bounded(1);
        let (e, s) = (self.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("tenure-elector-run-{}", self.cfg.identity))
            .spawn(move || {
                let _ = tx.send(catch_unwind(AssertUnwindSafe(|| e.run(&s))));
            })
            .map_err(|e| Error::storage(format!("cannot start the elector thread: {e}")))?;
        Ok(ElectorRun {
            stop,
            done: rx,
            thread: Mutex::new(Some(thread)),
            result: Mutex::new(None),
        })
    }

    fn observe(&self, holder: &str, tx: &Sender<Call>) {
        let mut leader = self.shared.leader.lock();
        if leader.as_deref() != Some(holder) && !holder.is_empty() {
            *leader = Some(holder.to_string());
            let _ = tx.send(Call::NewLeader(holder.to_string()));
        }
    }

    fn campaign_loop(
        &self,
        stop: &Stop,
        clock: &dyn Clock,
        tx: &Sender<Call>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let mut jitter = Jitter(
            self.cfg
                .identity
                .bytes()
                .fold(0x9e37_79b9_7f4a_7c15u64, |h, b| {
                    (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
                })
                | 1,
        );
        loop {
            match self.try_acquire(clock)? {
                Some((lease, token, rev)) => {
                    self.observe(&self.cfg.identity, tx);
                    self.lead(stop, clock, tx, deadline, (lease, token, rev))?;
                    if stop.is_stopped() {
                        return Ok(());
                    }
                }
                None => {
                    if let Some(holder) = self.current_holder()? {
                        self.observe(&holder, tx);
                    }
                }
            }
            let wait = self
                .cfg
                .retry_period
                .mul_f64(1.0 + jitter.next_unit() * RETRY_JITTER_FACTOR);
            if stop.sleep_until(clock, clock.now().saturating_add(wait), deadline) {
                return Ok(());
            }
        }
    }

    fn current_holder(&self) -> Result<Option<String>> {
        Ok(self
            .db
            .get(self.cfg.name.as_bytes())?
            .and_then(|kv| Record::decode(&kv.value))
            .filter(|r| self.db.time_to_live(LeaseId::new(r.lease)).is_ok())
            .map(|r| r.holder))
    }

    /// One acquisition attempt: the record is free if absent, undecodable, released, or its
    /// lease is gone. Returns (lease, token, record mod revision) on success.
    fn try_acquire(&self, clock: &dyn Clock) -> Result<Option<(LeaseId, i64, i64)>> {
        let db = &self.db;
        let current = db.get(self.cfg.name.as_bytes())?;
        let prev = current.as_ref().and_then(|kv| Record::decode(&kv.value));
        if let Some(r) = &prev {
            if !r.holder.is_empty() && db.time_to_live(LeaseId::new(r.lease)).is_ok() {
                return Ok(None); // held, and its lease is alive on the engine's clock
            }
        }
        let guard = match &current {
            Some(kv) => Compare::mod_revision(&self.cfg.name, CompareOp::Equal, kv.mod_revision),
            None => Compare::version(&self.cfg.name, CompareOp::Equal, 0),
        };
        let lease = db.grant(self.cfg.lease_duration)?;
        let now = clock.wall_ms();
        let record = Record {
            lease: lease.get(),
            acquire_ms: now,
            renew_ms: now,
            transitions: prev.as_ref().map_or(0, |r| {
                r.transitions + i64::from(r.holder != self.cfg.identity)
            }),
            holder: self.cfg.identity.clone(),
        };
        let r = db.txn(Txn::new().when([guard]).then([Op::put(
            &self.cfg.name,
            record.encode(),
            None,
        )]))?;
        if r.succeeded {
            Ok(Some((lease, r.revision, r.revision)))
        } else {
            let _ = db.revoke(lease);
            Ok(None)
        }
    }

    /// Leads until the lease cannot be renewed within `renew_deadline`, someone else took the
    /// record, or `stop` is raised.
    fn lead(
        &self,
        stop: &Stop,
        clock: &dyn Clock,
        tx: &Sender<Call>,
        deadline: Option<Instant>,
        (lease, token, mut rev): (LeaseId, i64, i64),
    ) -> Result<()> {
        let leading = Stop::new();
        // The renew schedule is fixed before leadership is announced and advances in fixed
        // steps (a missed slot fires at once): it never depends on when this thread runs.
        let mut last_ok = clock.now();
        let mut next = last_ok.saturating_add(self.cfg.retry_period);
        self.shared.is_leader.store(true, Ordering::Release);
        let returned = Stop::new();
        let _ = tx.send(Call::Started(token, leading.clone(), returned.clone()));
        let outcome = loop {
            if stop.sleep_until(clock, next, deadline) {
                break Ok(());
            }
            next = next.saturating_add(self.cfg.retry_period).max(clock.now());
            match self.renew(clock, lease, rev) {
                Ok(Some(new_rev)) => {
                    rev = new_rev;
                    last_ok = clock.now();
                }
                Ok(None) => break Ok(()), // the record was taken: no longer leader
                Err(e @ Error::Closed(_)) => break Err(e),
                Err(_) if clock.now().saturating_sub(last_ok) < self.cfg.renew_deadline => {}
                Err(_) => break Ok(()),
            }
        };
        self.shared.is_leader.store(false, Ordering::Release);
        leading.stop();
        if stop.is_stopped() && self.cfg.release_on_cancel {
            // Never two leaders at work (client-go's kubernetes#139991): the callback is told
            // to stop, and the lease is revoked only once it has returned. Past the lease
            // duration the lease has expired anyway, so that bounds the wait.
            let r = returned.clone();
            let waker: Arc<Waker> = Arc::new(move || r.wake());
            clock.subscribe(Arc::downgrade(&waker));
            returned.sleep_until(
                clock,
                clock.now().saturating_add(self.cfg.lease_duration),
                None,
            );
            let _ = self.db.revoke(lease);
        }
        let _ = tx.send(Call::Stopped);
        outcome
    }

    /// Renews the lease and the record's renew time; `Ok(None)` if the record is no longer ours.
    fn renew(&self, clock: &dyn Clock, lease: LeaseId, rev: i64) -> Result<Option<i64>> {
        match self.db.renew(lease) {
            Ok(_) => {}
            Err(Error::LeaseNotFound(_) | Error::LeaseExpired(_)) => return Ok(None),
            Err(e) => return Err(e),
        }
        let Some(kv) = self.db.get(self.cfg.name.as_bytes())? else {
            return Ok(None);
        };
        let Some(mut record) = Record::decode(&kv.value).filter(|r| r.lease == lease.get()) else {
            return Ok(None);
        };
        record.renew_ms = clock.wall_ms();
        let r = self.db.txn(
            Txn::new()
                .when([Compare::mod_revision(&self.cfg.name, CompareOp::Equal, rev)])
                .then([Op::put(&self.cfg.name, record.encode(), None)]),
        )?;
        Ok(r.succeeded.then_some(r.revision))
    }
}

/// A [`LeaderElector`] running on its own thread, from [`LeaderElector::spawn`].
#[derive(Debug)]
pub struct ElectorRun {
    stop: Stop,
    done: Receiver<std::thread::Result<Result<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The run's result once received (a panic is reported once, then as an error).
    result: Mutex<Option<Result<()>>>,
}

impl ElectorRun {
    /// Stops the elector (with `release_on_cancel` it releases leadership as soon as
    /// `on_started_leading` has returned); returns at once: [`join`](ElectorRun::join) waits for the end.
    pub fn stop(&self) {
        self.stop.stop();
    }

    /// The token that stops it.
    pub fn stop_token(&self) -> &Stop {
        &self.stop
    }

    /// Waits until the run has ended and every callback has run, as long as `wait` allows:
    /// `Some(result)` then (every later call answers the same), `None` if `wait` ran out. A
    /// panic of the run is resumed here, the first time.
    pub fn join(&self, wait: impl Into<Wait>) -> Option<Result<()>> {
        if let Some(r) = &*self.result.lock() {
            return Some(r.clone());
        }
        let wait = wait.into();
        let (timer, stopped) = (wait.timer(), wait.stopped());
        let got = select! {
            recv(self.done) -> r => r.ok(),
            recv(timer) -> _ => return None,
            recv(stopped) -> _ => return None,
        };
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
        let (result, panic) = match got {
            Some(Ok(r)) => (r, None),
            Some(Err(payload)) => (
                Err(Error::storage("the leader elector's thread panicked")),
                Some(payload),
            ),
            None => (Ok(()), None),
        };
        *self.result.lock() = Some(result.clone());
        if let Some(payload) = panic {
            std::panic::resume_unwind(payload);
        }
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_with_spaces_in_the_identity() {
        let r = Record {
            lease: 7,
            acquire_ms: 1,
            renew_ms: 2,
            transitions: 3,
            holder: "host a (pod 1)".into(),
        };
        assert_eq!(Record::decode(&r.encode()), Some(r));
        assert_eq!(Record::decode(b"garbage"), None);
    }
}
