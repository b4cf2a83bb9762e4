use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, OpResponse, Txn};
use crate::sync::session::Session;
use crate::sync::wait::{key_of, prefix_of, wait_turn, Interrupts};
use crate::Tenure;

/// A fair, distributed-style mutex (SPEC S2), etcd's algorithm: each contender puts
/// `name/<lease hex>` with its session's lease; the holder is the key with the lowest create
/// revision; each waiter watches only its predecessor.
#[derive(Debug, Clone)]
pub struct Mutex {
    session: Session,
    prefix: Vec<u8>,
    key: Vec<u8>,
}

/// A held lock. Its fencing token is the create revision of its key (SPEC S3). Dropping the
/// guard unlocks.
#[derive(Debug)]
pub struct LockGuard {
    db: Tenure,
    key: Vec<u8>,
    rev: i64,
    released: bool,
}

impl Mutex {
    /// A mutex named `name` for `session`.
    pub fn new(session: &Session, name: &str) -> Mutex {
        let prefix = prefix_of(name);
        let key = key_of(&prefix, session.lease_id().get());
        Mutex {
            session: session.clone(),
            prefix,
            key,
        }
    }

    /// This contender's key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Puts this contender's key if absent; returns its create revision and whether it was new.
    fn enqueue(&self) -> Result<(i64, bool)> {
        let db = self.session.db();
        let lease = self.session.lease_id();
        let r = db.txn(
            Txn::new()
                .when([Compare::create_revision(&self.key, CompareOp::Equal, 0)])
                .then([Op::put(&self.key, b"", Some(lease))])
                .otherwise([Op::get(&self.key)]),
        )?;
        if r.succeeded {
            return Ok((r.revision, true));
        }
        match r.responses.first() {
            Some(OpResponse::Get(Some(kv))) => Ok((kv.create_revision, false)),
            _ => Err(Error::SessionExpired),
        }
    }

    fn guard(&self, rev: i64) -> LockGuard {
        LockGuard {
            db: self.session.db().clone(),
            key: self.key.clone(),
            rev,
            released: false,
        }
    }

    /// Waits until this session holds the lock, at most `timeout` (`None`: no limit).
    /// `Timeout` if it runs out; `SessionExpired` at once if the session's lease is lost.
    /// On failure this contender's key is removed, so it blocks no one.
    pub fn lock(&self, timeout: Option<Duration>) -> Result<LockGuard> {
        self.lock_inner(timeout, None)
    }

    /// Like [`lock`](Mutex::lock), also giving up (with `Timeout`) as soon as `cancel`
    /// receives a message or disconnects: for callers that must stay interruptible.
    pub fn lock_with_cancel(
        &self,
        timeout: Option<Duration>,
        cancel: &crossbeam_channel::Receiver<()>,
    ) -> Result<LockGuard> {
        self.lock_inner(timeout, Some(cancel))
    }

    fn lock_inner(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&crossbeam_channel::Receiver<()>>,
    ) -> Result<LockGuard> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let demoted = self.session.db().demotion();
        let (rev, fresh) = self.enqueue()?;
        let db = self.session.db();
        let gone = self.session.done();
        let stop = Interrupts {
            gone: &gone,
            cancel,
            demoted: &demoted,
            deadline,
        };
        match wait_turn(db, &self.prefix, &self.key, rev, &stop) {
            Ok(()) => Ok(self.guard(rev)),
            Err(e) => {
                if fresh {
                    let _ = release(db, &self.key, rev);
                }
                Err(e)
            }
        }
    }

    /// Takes the lock if no one holds it or waits for it, else `Locked`.
    pub fn try_lock(&self) -> Result<LockGuard> {
        let (rev, fresh) = self.enqueue()?;
        let db = self.session.db();
        let first = db
            .range(&self.prefix, None)?
            .iter()
            .all(|kv| kv.create_revision >= rev);
        if first {
            Ok(self.guard(rev))
        } else {
            if fresh {
                release(db, &self.key, rev)?;
            }
            Err(Error::Locked)
        }
    }
}

/// Deletes `key` only if it is still the acquisition made at `rev` (etcd#22082).
fn release(db: &Tenure, key: &[u8], rev: i64) -> Result<bool> {
    Ok(db
        .txn(
            Txn::new()
                .when([Compare::create_revision(key, CompareOp::Equal, rev)])
                .then([Op::delete(key)]),
        )?
        .succeeded)
}

impl LockGuard {
    /// The fencing token: the create revision of the lock key, strictly increasing per name.
    pub fn fencing_token(&self) -> i64 {
        self.rev
    }

    /// Whether this acquisition still holds the lock (its key exists with the same create
    /// revision; a lost session deletes it).
    pub fn is_held(&self) -> bool {
        !self.released
            && matches!(self.db.get(&self.key), Ok(Some(kv)) if kv.create_revision == self.rev)
    }

    /// Keeps the lock held past this guard: its key stays until someone deletes it or its
    /// lease ends (etcd's lock service hands the key to a client, which unlocks by deleting
    /// it). Returns the key and the fencing token.
    pub fn keep(mut self) -> (Vec<u8>, i64) {
        self.released = true;
        (std::mem::take(&mut self.key), self.rev)
    }

    /// Releases the lock. Deletes only this acquisition's key; returns `NotLeader` if the lock
    /// had already been lost.
    pub fn unlock(mut self) -> Result<()> {
        self.released = true;
        if release(&self.db, &self.key, self.rev)? {
            Ok(())
        } else {
            Err(Error::NotLeader)
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = release(&self.db, &self.key, self.rev);
        }
    }
}
