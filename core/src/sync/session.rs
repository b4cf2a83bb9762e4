use std::sync::Arc;
use std::time::Duration;

use crate::locks::Mutex as PlMutex;
use crossbeam_channel::{Receiver, TryRecvError};

use crate::error::{Error, Result};
use crate::keepalive::KeepAlive;
use crate::types::LeaseId;
use crate::Tenure;

/// Options of a [`Session`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOptions {
    /// The TTL of the session's lease. Default: 60 s.
    pub ttl: Duration,
    /// How often the lease is renewed. Default: a third of the TTL.
    pub keepalive_interval: Option<Duration>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            ttl: Duration::from_secs(60),
            keepalive_interval: None,
        }
    }
}

struct Inner {
    db: Tenure,
    id: LeaseId,
    keepalive: PlMutex<Option<KeepAlive>>,
    gone: Receiver<()>,
}

/// A lease kept alive by a background renewal (SPEC S1). Cloning shares the session.
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
    pub fn new(db: &Tenure, opts: SessionOptions) -> Result<Session> {
        let id = db.grant(opts.ttl)?;
        Session::start(db, id, &opts).inspect_err(|_| {
            let _ = db.revoke(id);
        })
    }

    /// Resumes a session on an existing lease (e.g. after a restart) and starts renewing it.
    pub fn resume(db: &Tenure, id: impl Into<LeaseId>, opts: SessionOptions) -> Result<Session> {
        let id = id.into();
        db.time_to_live(id)?;
        Session::start(db, id, &opts)
    }

    fn start(db: &Tenure, id: LeaseId, opts: &SessionOptions) -> Result<Session> {
        let gone = db.lease_gone(id)?;
        let keepalive = db.keep_alive(id, opts.keepalive_interval)?;
        Ok(Session {
            inner: Arc::new(Inner {
                db: db.clone(),
                id,
                keepalive: PlMutex::new(Some(keepalive)),
                gone,
            }),
        })
    }

    /// The session's lease.
    pub fn lease_id(&self) -> LeaseId {
        self.inner.id
    }

    /// The engine the session lives in.
    pub fn db(&self) -> &Tenure {
        &self.inner.db
    }

    /// A channel that disconnects (receives `Err`) when the lease is lost.
    pub fn done(&self) -> Receiver<()> {
        self.inner.gone.clone()
    }

    /// Whether the lease has been lost.
    pub fn is_done(&self) -> bool {
        matches!(self.inner.gone.try_recv(), Err(TryRecvError::Disconnected))
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
            Ok(()) | Err(Error::LeaseNotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
