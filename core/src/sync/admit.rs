//! Waiting until fewer than `limit` entries older than mine are left under a prefix: the wait
//! of the semaphore (fewer than `permits` older holders) and of the read-write lock (no older
//! writer, or no older entry at all). One prefix watch wakes the wait; every wake re-reads the
//! store, so a missed or merged event costs a read, never a wrong answer. Also the held entry
//! ([`Held`]) those recipes hand out.

use std::sync::Arc;

use crossbeam_channel::{Receiver, TryRecvError};

use crate::error::{Error, Result};
use crate::kv::watch::{WatchOptions, Watcher};
use crate::sync::backend::{Backend, CreateOrder, RangeOptions};
use crate::sync::mutex::release;
use crate::sync::session::{Claim, Session};
use crate::sync::turn::own_entries;
use crate::types::{KeyValue, LeaseId};
use crate::wait::{Interest, Pollable, Stop, Wait};

/// Which entries are counted against mine.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// The entries counted: keys starting with this prefix...
    pub(crate) counted: Vec<u8>,
    /// ...and, if set, only those directly under it (not of names nested under it).
    pub(crate) own_only: bool,
    /// Admitted when fewer than this many counted entries were created before mine.
    pub(crate) limit: usize,
    /// The prefix watched: every entry of the recipe, mine included.
    pub(crate) watched: Vec<u8>,
}

impl Rule {
    /// The counted entries created before `rev`, oldest first, at most `limit`.
    pub(crate) fn older(&self, db: &dyn Backend, rev: i64) -> Result<Vec<KeyValue>> {
        let opts = RangeOptions {
            order: CreateOrder::Oldest,
            max_create_revision: Some(rev - 1),
            limit: Some(self.limit),
        };
        if self.own_only {
            own_entries(db, &self.counted, opts)
        } else {
            db.range(&self.counted, opts)
        }
    }
}

/// The wait of one entry (`me`, created at `my_rev`) for admission under a [`Rule`]. Ends with
/// `SessionExpired` (or `Closed`) when the session's lease is lost or `me` is deleted, with
/// `Timeout` when the caller's [`Wait`] runs out or is stopped, with `NotPrimary` at a demotion.
pub(crate) struct AdmitWait {
    db: Arc<dyn Backend>,
    rule: Rule,
    me: Vec<u8>,
    my_rev: i64,
    lost: Stop,
    lost_rx: Receiver<()>,
    wait: Wait,
    stopped: Option<Receiver<()>>,
    /// Taken before `me` was put, so that no demote is missed (L9).
    demoted: Option<Receiver<()>>,
    session: LeaseId,
    /// What is awaited, named by `Timeout`.
    what: String,
    /// The watch of `rule.watched`; `None` until the first poll and after it fell behind.
    watch: Option<Watcher>,
}

impl std::fmt::Debug for AdmitWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmitWait")
            .field("key", &String::from_utf8_lossy(&self.me))
            .field("rev", &self.my_rev)
            .finish()
    }
}

/// What draining the watch found.
enum Seen {
    Nothing,
    Changes,
    Behind,
}

impl AdmitWait {
    /// The wait of `me`, put by `session` at `my_rev`; `demoted` taken before the put.
    pub(crate) fn new(
        session: &Session,
        rule: Rule,
        me: Vec<u8>,
        my_rev: i64,
        wait: Wait,
        demoted: Option<Receiver<()>>,
        what: String,
    ) -> AdmitWait {
        let lost = session.lost().clone();
        AdmitWait {
            db: session.backend().clone(),
            rule,
            me,
            my_rev,
            lost_rx: lost.channel().clone(),
            lost,
            stopped: wait.stop_channel(),
            wait,
            demoted,
            session: session.lease_id(),
            what,
            watch: None,
        }
    }

    fn mine_exists(&self) -> Result<bool> {
        Ok(self
            .db
            .get(&self.me)?
            .is_some_and(|kv| kv.create_revision == self.my_rev))
    }

    fn drain(&mut self) -> Result<Seen> {
        let Some(w) = &mut self.watch else {
            return Ok(Seen::Behind);
        };
        let mut seen = Seen::Nothing;
        loop {
            match w.try_recv() {
                Ok(Some(_)) => seen = Seen::Changes,
                Ok(None) => return Ok(seen),
                Err(e @ Error::Closed(_)) => return Err(e),
                Err(_) => return Ok(Seen::Behind),
            }
        }
    }
}

impl Pollable for AdmitWait {
    type Output = ();

    fn poll(&mut self) -> Result<Option<()>> {
        let expired = Error::SessionExpired(self.session);
        if self.lost.is_stopped() {
            return Err(if self.db.is_closed() {
                self.db.closed_error()
            } else {
                expired
            });
        }
        let changed = match self.drain()? {
            Seen::Nothing => false,
            Seen::Changes => true,
            Seen::Behind => {
                // (Re)watch first, then read: a change in between is in the watch.
                let opts = WatchOptions {
                    prefix: true,
                    ..WatchOptions::default()
                };
                self.watch = Some(self.db.watch(&self.rule.watched, opts)?);
                true
            }
        };
        if changed {
            if !self.mine_exists()? {
                return Err(expired);
            }
            if self.rule.older(&*self.db, self.my_rev)?.len() < self.rule.limit {
                // Checked again: mine may have gone since the first check.
                return if self.mine_exists()? {
                    Ok(Some(()))
                } else {
                    Err(expired)
                };
            }
        }
        if self.wait.is_over() {
            return Err(self.wait.timed_out(&self.what));
        }
        let demoted = self
            .demoted
            .as_ref()
            .is_some_and(|d| !matches!(d.try_recv(), Err(TryRecvError::Empty)));
        if demoted {
            return Err(Error::NotPrimary);
        }
        Ok(None)
    }

    fn polls_the_network(&self) -> bool {
        self.db.over_network()
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        interest.recv(&self.lost_rx);
        interest.wait(&self.wait, &self.stopped);
        if let Some(w) = &self.watch {
            interest.recv(w.channel());
        }
        if let Some(d) = &self.demoted {
            interest.recv(d);
        }
    }
}

/// An entry put for an acquisition: its key, create revision, whether this acquisition put it
/// (a fresh entry is withdrawn when the wait fails), and the process's claim on it, if any.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) key: Vec<u8>,
    pub(crate) rev: i64,
    pub(crate) fresh: bool,
    pub(crate) claim: Option<Claim>,
}

/// The state machine of an acquisition: put the entry at the first poll, wait for admission,
/// hand the entry on; a failed or dropped wait withdraws a fresh entry.
#[derive(Debug)]
pub(crate) enum Acquire {
    Start,
    Queued(Entry, Box<AdmitWait>),
    Over,
}

impl Acquire {
    /// Advances: `enter` puts the entry and makes its wait (first poll only).
    pub(crate) fn poll(
        &mut self,
        enter: impl FnOnce() -> Result<(Entry, AdmitWait)>,
    ) -> Result<Option<Entry>> {
        if let Acquire::Start = self {
            *self = Acquire::Over;
            let (entry, wait) = enter()?;
            *self = Acquire::Queued(entry, Box::new(wait));
        }
        let Acquire::Queued(_, wait) = self else {
            return Err(Error::invalid("this wait is over"));
        };
        match wait.poll() {
            Ok(None) => Ok(None),
            Ok(Some(())) => match std::mem::replace(self, Acquire::Over) {
                Acquire::Queued(entry, _) => Ok(Some(entry)),
                _ => unreachable!("matched above"),
            },
            Err(e) => {
                self.withdraw();
                Err(e)
            }
        }
    }

    pub(crate) fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        if let Acquire::Queued(_, wait) = self {
            wait.register(interest);
        }
    }

    /// Removes the entry if this acquisition put it; the wait is then over.
    pub(crate) fn withdraw(&mut self) {
        if let Acquire::Queued(e, wait) = std::mem::replace(self, Acquire::Over) {
            if e.fresh {
                let _ = release(&*wait.db, &e.key, e.rev);
            }
        }
    }
}

/// An entry held by a semaphore permit or a read-write lock: deleted (only if it is still this
/// acquisition's) on release or drop. Its fencing token is its create revision.
#[derive(Debug)]
pub(crate) struct Held {
    db: Arc<dyn Backend>,
    key: Vec<u8>,
    rev: i64,
    released: bool,
    /// The session's lost token: once raised, nothing is held as far as this holder knows.
    lost: Stop,
    _claim: Option<Claim>,
}

impl Held {
    pub(crate) fn new(session: &Session, entry: Entry) -> Held {
        if let Some(c) = &entry.claim {
            c.acquired(entry.rev);
        }
        Held {
            db: session.backend().clone(),
            key: entry.key,
            rev: entry.rev,
            released: false,
            lost: session.lost().clone(),
            _claim: entry.claim,
        }
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    pub(crate) fn fencing_token(&self) -> i64 {
        self.rev
    }

    pub(crate) fn is_held(&self) -> bool {
        !self.released
            && !self.lost.is_stopped()
            && matches!(self.db.get(&self.key), Ok(Some(kv)) if kv.create_revision == self.rev)
    }

    /// Deletes the entry; `NotLeader` if it had already been lost.
    pub(crate) fn release(mut self) -> Result<()> {
        self.released = true;
        if release(&*self.db, &self.key, self.rev)? {
            Ok(())
        } else {
            Err(Error::NotLeader)
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.released {
            let _ = release(&*self.db, &self.key, self.rev);
        }
    }
}
