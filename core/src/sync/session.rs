use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;

use crate::error::{Error, Result};
use crate::keepalive::KeepAlive;
use crate::locks;
use crate::sync::backend::Backend;
use crate::types::LeaseId;
use crate::wait::{Stop, Wait};

/// Options of a [`Session`].
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::SessionOptions;
///
/// // A 10 s lease renewed every 2 s (default: every third of the TTL).
/// let opts = SessionOptions { ttl: Duration::from_secs(10), keepalive_interval: Some(Duration::from_secs(2)) };
/// assert_eq!(SessionOptions::default().ttl, Duration::from_secs(60));
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOptions {
    /// The TTL of the session's lease. Default: [`SessionOptions::DEFAULT_TTL`].
    pub ttl: Duration,
    /// How often the lease is renewed. Default: a third of the TTL. More than zero and at most
    /// [`MAX_KEEPALIVE_INTERVAL`](crate::limits::MAX_KEEPALIVE_INTERVAL), else `InvalidArgument`.
    pub keepalive_interval: Option<Duration>,
}

impl SessionOptions {
    /// The default TTL of a session's lease (etcd's `concurrency` default).
    pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

    /// The interval's bound, checked before anything is granted or renewed.
    fn check(&self) -> Result<()> {
        self.keepalive_interval.map_or(Ok(()), |d| {
            crate::limits::check_keepalive_interval(d).map(drop)
        })
    }
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            ttl: SessionOptions::DEFAULT_TTL,
            keepalive_interval: None,
        }
    }
}

/// The mutex keys this process has acquired, or is acquiring, through one session: a session
/// holds a given mutex at most once at a time (see [`Mutex`](crate::sync::Mutex)).
/// Key → (claim number, the create revision once acquired).
pub(crate) type Claims = Arc<locks::Mutex<HashMap<Vec<u8>, (u64, Option<i64>)>>>;

/// This process's claim on one (session, key) pair: a mutex, semaphore or read-write lock
/// entry. Dropping it releases the claim.
#[derive(Debug)]
pub(crate) struct Claim {
    claims: Claims,
    key: Vec<u8>,
    id: u64,
}

impl Claim {
    /// Records the acquisition made at `rev`.
    pub(crate) fn acquired(&self, rev: i64) {
        if let Some(c) = self.claims.lock().get_mut(&self.key) {
            if c.0 == self.id {
                c.1 = Some(rev);
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut claims = self.claims.lock();
        if claims.get(&self.key).is_some_and(|c| c.0 == self.id) {
            claims.remove(&self.key);
        }
    }
}

struct Inner {
    db: Arc<dyn Backend>,
    id: LeaseId,
    keepalive: locks::Mutex<Option<KeepAlive>>,
    /// Raised when the lease is lost (fast path from the backend, or the keep-alive).
    lost: Stop,
    claims: Claims,
    next_claim: std::sync::atomic::AtomicU64,
}

/// A lease kept alive by a background renewal (SPEC S1). Cloning shares the session.
///
/// Everything a session holds (its locks, candidacies, keys put with its lease) goes when the
/// session ends: closed, or its lease expired because the process stopped renewing it.
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::{Session, SessionOptions};
///
/// let db = tenure::Tenure::in_memory()?;
/// let opts = SessionOptions { ttl: Duration::from_secs(10), ..Default::default() };
/// let session = Session::new(&db, opts)?;
/// db.put("workers/a", "10.0.0.1", Some(session.lease_id()))?; // lives as long as the session
/// session.close()?; // revokes the lease: the key goes with it
/// assert!(db.get("workers/a")?.is_none());
/// assert!(session.is_done());
/// # Ok::<(), tenure::Error>(())
/// ```
///
/// [`done`](Session::done) disconnects when the lease is lost: expired, revoked or engine
/// closed. Dropping the last clone stops the keep-alive but leaves the lease to expire;
/// [`close`](Session::close) revokes it at once.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("lease", &self.inner.id)
            .field("done", &self.is_done())
            .finish()
    }
}

impl Session {
    /// Grants a lease with `opts.ttl` and starts renewing it.
    pub fn new<B: Backend + Clone>(db: &B, opts: SessionOptions) -> Result<Session> {
        opts.check()?;
        let db: Arc<dyn Backend> = Arc::new(db.clone());
        let id = db.grant(opts.ttl)?;
        Session::start(db.clone(), id, &opts).inspect_err(|_| {
            let _ = db.revoke(id);
        })
    }

    /// Resumes a session on an existing lease (e.g. after a restart) and starts renewing it.
    pub fn resume<B: Backend + Clone>(
        db: &B,
        id: impl Into<LeaseId>,
        opts: SessionOptions,
    ) -> Result<Session> {
        let id = id.into();
        opts.check()?;
        db.time_to_live(id)?;
        Session::start(Arc::new(db.clone()), id, &opts)
    }

    /// A session on an existing lease that someone else renews (SPEC S1): no keep-alive and no
    /// thread. For a server that takes locks and candidacies on its clients' leases, which the
    /// clients keep alive (`tenure serve`'s Lock and Campaign). `done()` fires when the lease
    /// is lost, as for any session (at once with the backend's lease-loss fast path; otherwise
    /// the recipes' waits notice their own key's delete). Dropping it leaves the lease alone;
    /// [`close`](Session::close) revokes it. `LeaseNotFound` if the lease is gone.
    pub fn attach<B: Backend + Clone>(db: &B, id: impl Into<LeaseId>) -> Result<Session> {
        let id = id.into();
        db.time_to_live(id)?;
        Session::with(Arc::new(db.clone()), id, None)
    }

    fn start(db: Arc<dyn Backend>, id: LeaseId, opts: &SessionOptions) -> Result<Session> {
        let session = Session::with(db, id, Some(opts))?;
        session.inner.db.session_lease(id, true);
        Ok(session)
    }

    /// The session of lease `id`, renewed per `renew` (`None`: by someone else).
    fn with(db: Arc<dyn Backend>, id: LeaseId, renew: Option<&SessionOptions>) -> Result<Session> {
        let lost = Stop::new();
        if let Some(r) = db.lease_lost(id, &lost) {
            r?;
        }
        let keepalive = match renew {
            Some(opts) => Some(db.keep_alive(id, opts.keepalive_interval, &lost)?),
            None => None,
        };
        Ok(Session {
            inner: Arc::new(Inner {
                db,
                id,
                keepalive: locks::Mutex::new(keepalive),
                lost,
                claims: Claims::default(),
                next_claim: std::sync::atomic::AtomicU64::new(0),
            }),
        })
    }

    /// The session's lease.
    pub fn lease_id(&self) -> LeaseId {
        self.inner.id
    }

    /// The backend the session lives in.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.db
    }

    pub(crate) fn claims(&self) -> &Claims {
        &self.inner.claims
    }

    fn next_claim(&self) -> u64 {
        self.inner
            .next_claim
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Claims the entry `key` (of the `kind` named by `prefix`) for one acquisition in this
    /// process: a session holds a given mutex, semaphore permit or read-write lock at most once
    /// at a time. A claim whose acquisition was lost (its key is gone or re-created) no longer
    /// counts.
    pub(crate) fn claim(&self, key: &[u8], kind: &str, prefix: &[u8]) -> Result<Claim> {
        let claims = self.claims().clone();
        let held = claims.lock().get(key).map(|c| c.1);
        let live = match held {
            None => false,
            Some(None) => true, // being acquired
            Some(Some(rev)) => self
                .backend()
                .get(key)?
                .is_some_and(|kv| kv.create_revision == rev),
        };
        if live {
            return Err(Error::invalid(format!(
                "session {} already holds or is acquiring {kind} {:?}; a {kind} is held at most \
                 once per session (use one session per concurrent holder)",
                self.lease_id(),
                String::from_utf8_lossy(&prefix[..prefix.len().saturating_sub(1)]),
            )));
        }
        let id = self.next_claim();
        let mut map = claims.lock();
        // Re-checked under the lock: another thread may have claimed it since.
        if map.get(key).map(|c| c.1) != held {
            drop(map);
            return self.claim(key, kind, prefix);
        }
        map.insert(key.to_vec(), (id, None));
        drop(map);
        Ok(Claim {
            claims,
            key: key.to_vec(),
            id,
        })
    }

    /// A channel that disconnects (receives `Err`) when the lease is lost.
    pub fn done(&self) -> Receiver<()> {
        self.inner.lost.channel().clone()
    }

    pub(crate) fn lost(&self) -> &Stop {
        &self.inner.lost
    }

    /// Blocks until the lease is lost (true) or `wait` runs out (false).
    pub fn wait_done(&self, wait: impl Into<Wait>) -> bool {
        self.inner.lost.wait(wait)
    }

    /// Whether the lease has been lost.
    pub fn is_done(&self) -> bool {
        self.inner.lost.is_stopped()
    }

    /// `SessionExpired` in place of the `LeaseNotFound`/`LeaseExpired` of this session's own
    /// lease: a write with a lease that is gone means the session has ended.
    pub(crate) fn ended(&self, e: Error) -> Error {
        match e {
            Error::LeaseNotFound(id) | Error::LeaseExpired(id) if id == self.inner.id => {
                Error::SessionExpired(id)
            }
            e => e,
        }
    }

    /// Stops renewing but keeps the lease (it expires after its TTL unless resumed).
    pub fn orphan(&self) {
        if let Some(ka) = self.inner.keepalive.lock().take() {
            ka.stop();
        }
    }

    /// Stops renewing and revokes the lease, deleting every key it holds (locks, candidacies).
    pub fn close(&self) -> Result<()> {
        self.orphan();
        match self.inner.db.revoke(self.inner.id) {
            Ok(()) | Err(Error::LeaseNotFound(_)) => {
                self.inner.db.session_lease(self.inner.id, false);
                // Without the backend's lease-loss fast path nothing else reports it.
                self.inner.lost.stop();
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}
