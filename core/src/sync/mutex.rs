use std::sync::Arc;

use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, OpResponse, Txn};
use crate::sync::backend::Backend;
use crate::sync::session::{Claim, Session};
use crate::sync::turn::{first_entry, key_of, prefix_of, Entered, QueueWait, Turn, TurnWait};
use crate::types::LeaseId;
use crate::wait::{block_on, Interest, Pollable, Stop, Wait};

/// A fair, distributed-style mutex (SPEC S2), etcd's algorithm and key layout: each contender
/// puts `name/<lease hex>` with its session's lease; the holder is the key with the lowest
/// create revision; each waiter watches only its predecessor. Names nest without interfering:
/// `jobs` and `jobs/nightly` are different mutexes.
///
/// A session holds a given mutex at most once at a time: a second `lock` or `try_lock` of the
/// same name through the same session (from any thread) while the first is held or being
/// acquired fails with `InvalidArgument`; use one session per concurrent holder. A key left by
/// an earlier process on the same lease (a resumed session) is taken over, as in etcd.
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::{Mutex, Session, SessionOptions};
/// use tenure::{Error, Tenure};
///
/// let db = Tenure::in_memory()?;
/// let a = Session::new(&db, SessionOptions::default())?;
/// let b = Session::new(&db, SessionOptions::default())?;
/// let guard = Mutex::new(&a, "jobs/nightly").lock(Some(Duration::from_secs(5)))?;
/// // While a holds it, b is refused (or, with `lock`, waits its turn).
/// let refused = Mutex::new(&b, "jobs/nightly").try_lock().unwrap_err();
/// assert!(matches!(refused, Error::Locked { .. }));
/// // Send the token with every write to the guarded resource (see `FenceGate`).
/// let token = guard.fencing_token();
/// guard.unlock()?;
/// let next = Mutex::new(&b, "jobs/nightly").try_lock()?;
/// assert!(next.fencing_token() > token);
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Mutex {
    session: Session,
    name: String,
    prefix: Vec<u8>,
    key: Vec<u8>,
}

/// A held lock. Its fencing token is the create revision of its key (SPEC S3). Dropping the
/// guard unlocks.
///
/// ```
/// use tenure::sync::{Mutex, Session, SessionOptions};
///
/// let db = tenure::Tenure::in_memory()?;
/// let session = Session::new(&db, SessionOptions::default())?;
/// {
///     let guard = Mutex::new(&session, "jobs/nightly").lock(None)?;
///     assert!(guard.is_held());
/// } // dropped: unlocked
/// assert!(db.range("jobs/nightly/", None)?.is_empty());
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug)]
pub struct LockGuard {
    db: Arc<dyn Backend>,
    key: Vec<u8>,
    rev: i64,
    released: bool,
    /// The session's lost token: once raised, the lock is no longer held as far as this
    /// holder knows (SPEC R3: its lease may be gone on the server).
    lost: Stop,
    _claim: Claim,
}

impl Mutex {
    /// A mutex named `name` for `session`.
    pub fn new(session: &Session, name: &str) -> Mutex {
        let prefix = prefix_of(name);
        let key = key_of(&prefix, session.lease_id().get());
        Mutex {
            session: session.clone(),
            name: name.to_owned(),
            prefix,
            key,
        }
    }

    /// This contender's key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Claims this (session, mutex) pair for one acquisition in this process.
    fn claim(&self) -> Result<Claim> {
        self.session.claim(&self.key, "mutex", &self.prefix)
    }

    /// Puts this contender's key if absent; returns its create revision and whether it was new.
    fn enqueue(&self) -> Result<(i64, bool)> {
        let db = self.session.backend();
        let lease = self.session.lease_id();
        let r = db
            .txn(
                Txn::new()
                    .when([Compare::create_revision(&self.key, CompareOp::Equal, 0)])
                    .then([Op::put(&self.key, b"", Some(lease))])
                    .otherwise([Op::get(&self.key)]),
            )
            .map_err(|e| self.session.ended(e))?;
        if r.succeeded {
            return Ok((r.revision, true));
        }
        match r.responses.first() {
            Some(OpResponse::Get(Some(kv))) => Ok((kv.create_revision, false)),
            _ => Err(Error::SessionExpired(lease)),
        }
    }

    fn guard(&self, rev: i64, claim: Claim) -> LockGuard {
        claim.acquired(rev);
        LockGuard {
            db: self.session.backend().clone(),
            key: self.key.clone(),
            rev,
            released: false,
            lost: self.session.lost().clone(),
            _claim: claim,
        }
    }

    /// Waits until this session holds the lock, as long as `wait` allows (`None`: no limit;
    /// a `Duration`; a [`Wait`] with a deadline and a stop token). `Timeout` if it runs out or
    /// is stopped; `SessionExpired` at once if the session's lease is lost; `NotPrimary` if the
    /// engine is demoted. On failure this contender's key is removed, so it blocks no one.
    pub fn lock(&self, wait: impl Into<Wait>) -> Result<LockGuard> {
        block_on(self.lock_wait(wait))
    }

    /// [`lock`](Self::lock) as a state machine, to wait for many locks from one thread (a
    /// [`WaitPool`](crate::WaitPool), an event loop). Nothing happens until it is polled: the
    /// first poll puts this contender's key. Dropped before its end, it withdraws the key.
    pub fn lock_wait(&self, wait: impl Into<Wait>) -> LockWait {
        LockWait {
            mutex: self.clone(),
            wait: wait.into(),
            queue: QueueWait::Start,
        }
    }

    /// Removes the key of the acquisition made at `rev` (a failed or dropped wait's).
    fn withdraw(&self, rev: i64) {
        let _ = release(&**self.session.backend(), &self.key, rev);
    }

    /// Claims the pair and puts this contender's key: the first poll of a lock wait.
    fn enter(&self, wait: Wait) -> Result<Entered<(Claim, i64)>> {
        let claim = self.claim()?;
        // Taken before the key is put, so that no demote in between is missed.
        let demoted = self.session.backend().demotion();
        let (rev, fresh) = self.enqueue()?;
        let turn = Turn {
            session: &self.session,
            prefix: &self.prefix,
            me: &self.key,
            what: format!("lock {:?}", self.name),
        };
        Ok(Entered {
            entry: (claim, rev),
            fresh,
            turn: TurnWait::new(turn, rev, wait, demoted),
        })
    }

    /// Takes the lock if no one holds it or waits for it, else `Locked`.
    pub fn try_lock(&self) -> Result<LockGuard> {
        let claim = self.claim()?;
        let (rev, fresh) = self.enqueue()?;
        let db = self.session.backend();
        match first_entry(&**db, &self.prefix)? {
            Some(kv) if kv.create_revision == rev => Ok(self.guard(rev, claim)),
            // The oldest entry is not mine and is not older: mine is gone (its lease was lost
            // since the put), so nothing is acquired (etcd#11051's race, without the wait).
            None => Err(Error::SessionExpired(self.session.lease_id())),
            Some(kv) if kv.create_revision > rev => {
                Err(Error::SessionExpired(self.session.lease_id()))
            }
            Some(holder) => {
                if fresh {
                    release(&**db, &self.key, rev)?;
                }
                Err(Error::Locked {
                    name: self.name.clone(),
                    holder: holder.lease.unwrap_or(LeaseId::new(0)),
                })
            }
        }
    }
}

/// A lock wait in progress, from [`Mutex::lock_wait`]: polled to a [`LockGuard`].
#[derive(Debug)]
pub struct LockWait {
    mutex: Mutex,
    wait: Wait,
    /// The entry: this process's claim and the key's create revision.
    queue: QueueWait<(Claim, i64)>,
}

impl Pollable for LockWait {
    type Output = LockGuard;

    fn poll(&mut self) -> Result<Option<LockGuard>> {
        let (m, wait) = (&self.mutex, &self.wait);
        let held = self
            .queue
            .poll(|| m.enter(wait.clone()), |(_, rev)| m.withdraw(rev))?;
        Ok(held.map(|(claim, rev)| m.guard(rev, claim)))
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        self.queue.register(interest);
    }

    fn polls_the_network(&self) -> bool {
        self.mutex.session.backend().over_network()
    }
}

impl Drop for LockWait {
    fn drop(&mut self) {
        let m = &self.mutex;
        self.queue.withdraw(|(_, rev)| m.withdraw(rev));
    }
}

/// Deletes `key` only if it is still the acquisition made at `rev` (etcd#22082).
pub(crate) fn release(db: &dyn Backend, key: &[u8], rev: i64) -> Result<bool> {
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

    /// Whether this acquisition still holds the lock: its session is not done and its key
    /// exists with the same create revision (a lost session deletes it).
    pub fn is_held(&self) -> bool {
        !self.released
            && !self.lost.is_stopped()
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
        if release(&*self.db, &self.key, self.rev)? {
            Ok(())
        } else {
            Err(Error::NotLeader)
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = release(&*self.db, &self.key, self.rev);
        }
    }
}
