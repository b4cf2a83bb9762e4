use std::sync::Arc;

use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, Txn};
use crate::sync::backend::Backend;
use crate::sync::hold::{mark_and_release, Hold, MaxHold, MutexOptions, RELEASED};
use crate::sync::session::{Claim, Session};
use crate::sync::turn::{
    first_entry, key_of, prefix_of, put_entry, Entered, QueueWait, Turn, TurnWait,
};
use crate::types::LeaseId;
use crate::wait::{block_on, Interest, Pollable, Stop, StopCallback, Wait};
use crossbeam_channel::Receiver;

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
/// [`with_options`](Mutex::with_options) bounds the holds (SPEC S9): a `lock_delay` after a
/// holder's involuntary end, a `max_hold` after which a hold ends itself.
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
    options: MutexOptions,
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
    lease: LeaseId,
    released: bool,
    /// Whether an unlock marks the key [`RELEASED`] before deleting it (a `lock_delay` mutex).
    mark: bool,
    /// Raised when the hold ends without an unlock: the session's lost token (SPEC R3: its
    /// lease may be gone on the server), or, with a `max_hold`, a token of its own that the
    /// session's loss and the timer raise.
    done: Stop,
    /// Links the session's loss to `done` (with a `max_hold`).
    _lost_link: Option<StopCallback>,
    /// Ends the hold after `max_hold`; dropped (cancelled) with the guard.
    max_hold: Option<MaxHold>,
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
            options: MutexOptions::default(),
        }
    }

    /// A mutex named `name` for `session` with bounded holds (SPEC S9, see [`MutexOptions`]).
    /// `InvalidArgument` if a duration is zero or above `limits::MAX_DURATION`.
    pub fn with_options(session: &Session, name: &str, options: MutexOptions) -> Result<Mutex> {
        options.check()?;
        Ok(Mutex {
            options,
            ..Mutex::new(session, name)
        })
    }

    /// The options this mutex was made with.
    pub fn options(&self) -> MutexOptions {
        self.options
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
        put_entry(&self.session, &self.key, b"")
    }

    fn guard(&self, rev: i64, claim: Claim) -> Result<LockGuard> {
        claim.acquired(rev);
        let lost = self.session.lost();
        let mut g = LockGuard {
            db: self.session.backend().clone(),
            key: self.key.clone(),
            rev,
            lease: self.session.lease_id(),
            released: false,
            mark: self.options.lock_delay.is_some(),
            done: lost.clone(),
            _lost_link: None,
            max_hold: None,
            _claim: claim,
        };
        if let Some(after) = self.options.max_hold {
            let done = Stop::new();
            let raise = done.clone();
            g._lost_link = Some(lost.on_stop(move || raise.stop()));
            g.done = done.clone();
            let hold = Hold {
                db: g.db.clone(),
                key: g.key.clone(),
                rev,
                lease: g.lease,
            };
            // On failure the guard is dropped, which unlocks.
            g.max_hold = Some(MaxHold::start(hold, after, done)?);
        }
        Ok(g)
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
            turn: TurnWait::new(turn, rev, wait, demoted).with_lock_delay(self.options.lock_delay),
        })
    }

    /// Takes the lock if no one holds it or waits for it, else `Locked`.
    pub fn try_lock(&self) -> Result<LockGuard> {
        let claim = self.claim()?;
        let (rev, fresh) = self.enqueue()?;
        let db = self.session.backend();
        match first_entry(&**db, &self.prefix)? {
            Some(kv) if kv.create_revision == rev => self.guard(rev, claim),
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
        held.map(|(claim, rev)| m.guard(rev, claim)).transpose()
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        self.queue.register(interest);
    }

    fn polls_the_network(&self) -> bool {
        self.mutex.session.backend().over_network()
    }
}

impl LockWait {
    /// While a lock delay holds this wait back (SPEC S9: the holder ahead ended
    /// involuntarily), the time on the backend's clock at which it will take the lock.
    pub fn delayed_until(&self) -> Option<std::time::Duration> {
        self.queue.turn().and_then(TurnWait::delayed_until)
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

    /// Whether this acquisition still holds the lock: its hold is not [`done`](Self::done) and
    /// its key exists with the same create revision (a lost session deletes it).
    pub fn is_held(&self) -> bool {
        !self.released
            && !self.done.is_stopped()
            && matches!(self.db.get(&self.key), Ok(Some(kv)) if kv.create_revision == self.rev)
    }

    /// Keeps the lock held past this guard: its key stays until someone deletes it or its
    /// lease ends (etcd's lock service hands the key to a client, which unlocks by deleting
    /// it; a `max_hold` timer is cancelled). Returns the key and the fencing token.
    pub fn keep(mut self) -> (Vec<u8>, i64) {
        self.released = true;
        (std::mem::take(&mut self.key), self.rev)
    }

    /// Releases the lock. Deletes only this acquisition's key; returns `NotLeader` if the lock
    /// had already been lost.
    pub fn unlock(mut self) -> Result<()> {
        self.released = true;
        if self.release()? {
            Ok(())
        } else {
            Err(Error::NotLeader)
        }
    }
}

impl LockGuard {
    /// A channel that disconnects when this hold ends without an unlock: the session's lease
    /// is lost, or its `max_hold` ran out (raised before the key is deleted, SPEC S9). Stop
    /// writing to the guarded resource then.
    pub fn done(&self) -> Receiver<()> {
        self.done.channel().clone()
    }

    /// Deletes this acquisition's key, marked [`RELEASED`] first with a `lock_delay`. Not once
    /// `max_hold` ran out: the timer marks it ended and deletes it (false: no longer held).
    fn release(&self) -> Result<bool> {
        if self.max_hold.as_ref().is_some_and(MaxHold::fired) {
            return Ok(false);
        }
        if self.mark {
            mark_and_release(&*self.db, &self.key, self.rev, self.lease, RELEASED)
        } else {
            release(&*self.db, &self.key, self.rev)
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.release();
        }
    }
}
