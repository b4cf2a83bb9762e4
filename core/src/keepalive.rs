//! Keep-alive: a thread that renews one lease at a fixed interval (default TTL/3), driven by the
//! engine's clock, so a `ManualClock` drives it in tests.
//!
//! Its failures have no caller to raise to: they are reported on the `log` facade (target
//! `tenure::keepalive`), from the keep-alive's own thread with no lock held: a warning when a
//! renew fails (the first of a run of retries, and the one that ends the keep-alive: the lease
//! is lost), info when renewing works again, debug when the engine closed.
//!
//! A session's keep-alive over a connection that binds sessions (`bind_sessions`, shared mode;
//! SPEC P10) renews on one stream of its own, opened before the keep-alive starts and ended on
//! purpose when it stops ([`Binding`]), so the server revokes the lease only when the process
//! dies.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::Waker;
use crate::error::{Error, Result};
#[cfg(feature = "remote")]
use crate::etcd::client::BoundStream;
#[cfg(feature = "remote")]
use crate::handle::Backend;
use crate::handle::{Tenure, WeakTenure};
use crate::locks::Mutex;
use crate::types::LeaseId;
use crate::wait::Stop;

/// Renews a lease in the background until stopped, dropped, or a renew fails.
///
/// Made by [`Tenure::keep_alive`]. It holds no strong reference to the engine: closing or
/// dropping the engine ends it with [`Error::Closed`].
pub struct KeepAlive {
    id: LeaseId,
    stop: Stop,
    /// The error of the renew that ended it.
    error: Arc<Mutex<Option<Error>>>,
    thread: Option<JoinHandle<()>>,
    _waker: Arc<Waker>,
    /// The stream the lease is bound to, ended when the keep-alive stops (after its thread).
    binding: Option<Binding>,
}

/// The stream a session's lease is renewed on (feature `remote`; uninhabited without it).
#[cfg(feature = "remote")]
type Stream = Arc<BoundStream>;
#[cfg(not(feature = "remote"))]
#[derive(Clone)]
enum Stream {}

/// A session's keep-alive stream bound to this process; dropping it ends the stream on
/// purpose, so the server revokes nothing.
#[cfg(feature = "remote")]
pub(crate) struct Binding {
    engine: WeakTenure,
    stream: Stream,
}

/// Without feature `remote` nothing is bound.
#[cfg(not(feature = "remote"))]
pub(crate) enum Binding {}

#[cfg(feature = "remote")]
impl Binding {
    fn stream(&self) -> Stream {
        self.stream.clone()
    }

    /// The first renew, made before the keep-alive starts: the lease's TTL.
    fn first_renew(&self, db: &Tenure, id: LeaseId) -> Result<Duration> {
        match db.backend() {
            Backend::Etcd(r) => r.renew_bound(&self.stream, None),
            Backend::Engine(_) => db.renew(id),
        }
    }
}

#[cfg(not(feature = "remote"))]
impl Binding {
    fn stream(&self) -> Stream {
        match *self {}
    }

    fn first_renew(&self, _: &Tenure, _: LeaseId) -> Result<Duration> {
        match *self {}
    }
}

#[cfg(feature = "remote")]
impl Drop for Binding {
    fn drop(&mut self) {
        if let Some(db) = Tenure::upgrade(&self.engine) {
            if let Backend::Etcd(r) = db.backend() {
                r.end_bound(&self.stream);
            }
        }
    }
}

/// One renew of `id`, on its bound stream if it has one.
fn renew(db: &Tenure, id: LeaseId, limit: Duration, bound: Option<&Stream>) -> Result<()> {
    match (bound, db.backend()) {
        #[cfg(feature = "remote")]
        (Some(stream), Backend::Etcd(r)) => r.renew_bound(stream, Some(limit)).map(drop),
        #[cfg(not(feature = "remote"))]
        (Some(stream), _) => match *stream {},
        _ => db.renew_within(id, limit),
    }
}

impl std::fmt::Debug for KeepAlive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeepAlive")
            .field("id", &self.id)
            .field("alive", &self.is_alive())
            .finish()
    }
}

impl KeepAlive {
    /// The lease being renewed.
    pub fn lease_id(&self) -> LeaseId {
        self.id
    }

    /// Whether it is still renewing (false once stopped or after a failed renew).
    pub fn is_alive(&self) -> bool {
        !self.stop.is_stopped()
    }

    /// The error of the renew that ended it, if one did.
    pub fn error(&self) -> Option<Error> {
        self.error.lock().clone()
    }

    /// Stops renewing and waits for the thread to finish. The lease is left as it is.
    pub fn stop(mut self) {
        self.halt();
    }

    /// Stops renewing like [`stop`](KeepAlive::stop) but hands over the stream the lease is
    /// bound to, still open: a session that revokes its lease ends the stream after the revoke.
    pub(crate) fn stop_holding_binding(mut self) -> Option<Binding> {
        let binding = self.binding.take();
        self.halt();
        binding
    }

    fn halt(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        self.binding = None;
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.halt();
    }
}

/// How soon a renew that found the server unavailable is retried.
const UNAVAILABLE_RETRY: Duration = Duration::from_millis(250);

/// Where a keep-alive stands: its schedule and (SPEC R3) the time by which the lease must have
/// been renewed, counted from when the last successful renew was sent.
struct Schedule {
    first: Duration,
    every: Duration,
    ttl: Duration,
    deadline: Duration,
    /// What a renewal reports once the engine is gone (`Closed`, naming the database).
    closed: Error,
}

/// Renews at `first`, then every `every` on a fixed schedule (a missed slot fires at once, and
/// the schedule continues from there): the schedule never depends on when this thread runs.
/// A server that is unavailable (over `connect`) is retried until the lease's deadline as this
/// side counts it; then the lease is reported lost.
fn run(
    engine: WeakTenure,
    id: LeaseId,
    sched: Schedule,
    stop: &Stop,
    error: &Mutex<Option<Error>>,
    lost: Option<&Stop>,
    bound: Option<&Stream>,
) {
    let Some(clock) = Tenure::upgrade(&engine).map(|db| db.clock()) else {
        return;
    };
    let (mut next, mut deadline) = (sched.first, sched.deadline);
    let mut retrying = false;
    while !stop.sleep_until(&*clock, next, None) {
        let sent = clock.now();
        let result = match Tenure::upgrade(&engine) {
            Some(db) => renew(&db, id, deadline.saturating_sub(sent), bound),
            None => Err(sched.closed.clone()),
        };
        match result {
            Ok(()) => {
                if std::mem::take(&mut retrying) {
                    log::info!(target: "tenure::keepalive", "lease {id} renewed again");
                }
                deadline = sent.saturating_add(sched.ttl);
            }
            Err(e @ Error::Unavailable(_)) if clock.now() < deadline => {
                if !std::mem::replace(&mut retrying, true) {
                    let left = crate::error::human(deadline.saturating_sub(clock.now()));
                    log::warn!(
                        target: "tenure::keepalive",
                        "renewing lease {id} failed, retrying for up to {left} (until it would \
                         expire): {e}"
                    );
                }
                next = clock.now().saturating_add(UNAVAILABLE_RETRY).min(deadline);
                continue;
            }
            Err(e) => {
                if let Error::Closed(_) = e {
                    log::debug!(target: "tenure::keepalive", "keep-alive of lease {id} ended: {e}");
                } else if let Error::LeaseNotFound(_) | Error::Unavailable(_) = e {
                    log::warn!(
                        target: "tenure::keepalive",
                        "lease {id} lost: its keep-alive could not renew it: {e}"
                    );
                } else {
                    log::warn!(
                        target: "tenure::keepalive",
                        "keep-alive of lease {id} stopped: renewing it failed: {e}"
                    );
                }
                if matches!(
                    e,
                    Error::LeaseNotFound(_) | Error::Closed(_) | Error::Unavailable(_)
                ) {
                    if let Some(lost) = lost {
                        lost.stop();
                    }
                }
                *error.lock() = Some(e);
                stop.stop();
                return;
            }
        }
        next = next.saturating_add(sched.every).max(clock.now());
    }
}

impl Tenure {
    /// Starts renewing `id` every `interval` (default: a third of its TTL) on a background
    /// thread. Fails at once if the lease does not exist, and with `InvalidArgument` for an
    /// interval of zero or above [`MAX_KEEPALIVE_INTERVAL`](crate::limits::MAX_KEEPALIVE_INTERVAL).
    pub fn keep_alive(
        &self,
        id: impl Into<LeaseId>,
        interval: Option<Duration>,
    ) -> Result<KeepAlive> {
        self.keep_alive_reporting(id.into(), interval, None, false)
    }

    /// [`keep_alive`](Tenure::keep_alive) that also raises `lost` when a renew finds the
    /// lease gone or the engine closed. `bind`: a session's, bound to this process if the
    /// connection binds sessions (then its first renew, on its own stream, is made here).
    pub(crate) fn keep_alive_reporting(
        &self,
        id: LeaseId,
        interval: Option<Duration>,
        lost: Option<Stop>,
        bind: bool,
    ) -> Result<KeepAlive> {
        if let Some(every) = interval {
            crate::limits::check_keepalive_interval(every)?;
        }
        let start = self.clock().now();
        let binding = if bind { self.binding(id) } else { None };
        let info = match &binding {
            // Bound from the first renew, before the keep-alive starts: a process that dies
            // right after this returns loses its lease at once.
            Some(b) => {
                let ttl = b.first_renew(self, id)?;
                crate::types::LeaseInfo {
                    id,
                    ttl,
                    remaining: Some(ttl),
                    keys: Vec::new(),
                }
            }
            None => self.time_to_live(id)?,
        };
        let ttl = info.ttl;
        // The default, a third of the TTL, is below the bound but zero for a TTL under 3 ns.
        let every = crate::limits::check_keepalive_interval(interval.unwrap_or(ttl / 3))?;
        let stop = Stop::new();
        let error = Arc::new(Mutex::new(None));
        let s = stop.clone();
        let waker: Arc<Waker> = Arc::new(move || s.wake());
        self.clock().subscribe(Arc::downgrade(&waker));
        let engine = self.downgrade();
        let sched = Schedule {
            first: self.clock().now().saturating_add(every),
            every,
            ttl,
            deadline: start.saturating_add(info.remaining.unwrap_or(ttl)),
            closed: self.closed_error(),
        };
        let (s, e) = (stop.clone(), error.clone());
        let bound = binding.as_ref().map(Binding::stream);
        let thread = std::thread::Builder::new()
            .name(format!("tenure-keepalive-{id}"))
            .spawn(move || run(engine, id, sched, &s, &e, lost.as_ref(), bound.as_ref()))
            .map_err(|e| Error::storage(format!("cannot start a keep-alive thread: {e}")))?;
        Ok(KeepAlive {
            id,
            stop,
            error,
            thread: Some(thread),
            _waker: waker,
            binding,
        })
    }

    /// A new stream for a session's lease `id` if this handle's connection binds sessions.
    fn binding(&self, id: LeaseId) -> Option<Binding> {
        match self.backend() {
            #[cfg(feature = "remote")]
            Backend::Etcd(r) if r.binds_sessions() => Some(Binding {
                engine: self.downgrade(),
                stream: Arc::new(BoundStream::new(id)),
            }),
            _ => {
                let _ = id;
                None
            }
        }
    }
}
