//! Waiting for one's turn under a prefix, etcd's `waitDeletes`: watch only the newest key
//! created before mine, until none is left (no thundering herd, no polling). The delete of my
//! own key, the session's lost-lease token, the caller's [`Wait`] and the demotion signal end
//! it early.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, TryRecvError};

use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, OpResponse, Txn};
use crate::kv::watch::WatchOptions;
use crate::kv::watch::Watcher;
use crate::sync::backend::{Backend, CreateOrder, RangeOptions};
use crate::sync::hold::ended_involuntarily;
use crate::sync::session::Session;
use crate::types::{EventKind, KeyValue, LeaseId};
use crate::wait::{Alarm, Interest, Pollable, Stop, Wait};

/// `name/` as bytes: the prefix of a mutex's or an election's keys.
pub(crate) fn prefix_of(name: &str) -> Vec<u8> {
    let mut p = name.as_bytes().to_vec();
    p.push(b'/');
    p
}

/// The key of a session's entry under `prefix`: `prefix` + the lease ID in hex (as etcd).
pub(crate) fn key_of(prefix: &[u8], lease: i64) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(format!("{lease:x}").as_bytes());
    k
}

/// Puts this session's entry `key` (with `value`, on its lease) unless the key exists: the
/// key's create revision and whether this call made it (a failed wait withdraws only what it
/// made; a key found that is not made here is an earlier entry of this session, or another
/// contender's where the key does not name the lease). The put is guarded by "absent", so it
/// is made once more when its answer was lost (`Unavailable`: the server may have applied it,
/// SPEC P14, as when a shared file's owner dies while it answers); the second answer finds the
/// first one's key, which then counts as made here if it is on this lease. An entry is so
/// never left behind by a failed enter (SPEC P17).
pub(crate) fn put_entry(session: &Session, key: &[u8], value: &[u8]) -> Result<(i64, bool)> {
    let db = session.backend();
    let lease = session.lease_id();
    let put = || {
        Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .then([Op::put(key, value, Some(lease))])
            .otherwise([Op::get(key)])
    };
    let (answer, answer_lost) = match db.txn(put()) {
        Err(Error::Unavailable(_)) => (db.txn(put()), true),
        answer => (answer, false),
    };
    let r = answer.map_err(|e| session.ended(e))?;
    if r.succeeded {
        return Ok((r.revision, true));
    }
    match r.responses.first() {
        Some(OpResponse::Get(Some(kv))) => {
            Ok((kv.create_revision, answer_lost && kv.lease == Some(lease)))
        }
        _ => Err(Error::SessionExpired(lease)),
    }
}

/// The entries of `prefix`'s own name, not of names nested under it: `jobs/<lease>` belongs
/// to `jobs`, `jobs/nightly/<lease>` to `jobs/nightly` only.
pub(crate) fn own_entries(
    db: &dyn Backend,
    prefix: &[u8],
    opts: RangeOptions,
) -> Result<Vec<KeyValue>> {
    // The limit is applied after the filter: nested names may come first.
    let kvs = db.range(
        prefix,
        RangeOptions {
            limit: None,
            ..opts
        },
    )?;
    Ok(own_only(kvs, prefix, opts.limit))
}

/// [`own_entries`] as the store was at `revision`; `None` where the backend has no history
/// back to it.
fn own_entries_at(
    db: &dyn Backend,
    prefix: &[u8],
    opts: RangeOptions,
    revision: i64,
) -> Result<Option<Vec<KeyValue>>> {
    let kvs = db.range_at(
        prefix,
        RangeOptions {
            limit: None,
            ..opts
        },
        revision,
    )?;
    Ok(kvs.map(|kvs| own_only(kvs, prefix, opts.limit)))
}

/// The entries directly under `prefix` (not nested names), at most `limit`.
fn own_only(mut kvs: Vec<KeyValue>, prefix: &[u8], limit: Option<usize>) -> Vec<KeyValue> {
    kvs.retain(|kv| !kv.key[prefix.len()..].contains(&b'/'));
    if let Some(n) = limit {
        kvs.truncate(n);
    }
    kvs
}

/// The first entry of `prefix` by create revision (the holder, the leader).
pub(crate) fn first_entry(db: &dyn Backend, prefix: &[u8]) -> Result<Option<KeyValue>> {
    Ok(own_entries(
        db,
        prefix,
        RangeOptions {
            order: CreateOrder::Oldest,
            limit: Some(1),
            ..RangeOptions::default()
        },
    )?
    .pop())
}

/// Waiting until no entry of `prefix` created before `my_rev` is left, then checking that `me`
/// itself still exists with `my_rev` (`SessionExpired` otherwise, etcd#11051). A state machine
/// ([`Pollable`]): the blocking lock and campaign run it with `block_on`, `tenure.aio` in a
/// [`WaitPool`](crate::WaitPool).
///
/// Besides the awaited deletes, the wait ends with `SessionExpired` (or `Closed`) when the
/// session's lost-lease token is raised or `me` is deleted, with `Timeout` when the caller's
/// [`Wait`] runs out or is stopped, and with `NotPrimary` at a demotion.
///
/// With a lock delay (SPEC S9), a turn that came because the entry ahead ended involuntarily
/// is taken only once the delay has passed on the backend's clock, counted from that moment.
pub(crate) struct TurnWait {
    db: Arc<dyn Backend>,
    prefix: Vec<u8>,
    me: Vec<u8>,
    my_rev: i64,
    /// The session's lost-lease token, and its receiver (disconnects when raised).
    lost: Stop,
    lost_rx: Receiver<()>,
    wait: Wait,
    stopped: Option<Receiver<()>>,
    /// The engine's demotion signal, taken *before* the contender's key was put so that no
    /// demote is missed (L9).
    demoted: Option<Receiver<()>>,
    session: LeaseId,
    /// What is awaited, named by `Timeout` (`lock "jobs/nightly"`).
    what: String,
    /// My own key, watched throughout: its delete (lease lost) ends the wait on any backend.
    /// `None` until the first poll, and after that watch fell behind.
    mine: Option<Watcher>,
    /// The watch on the predecessor; `None`: find the predecessor in the store.
    pred: Option<Watcher>,
    /// The mutex's lock delay, if any (SPEC S9); `None` for elections.
    lock_delay: Option<Duration>,
    /// The entry ahead as last seen (its delete's previous key-value when the watch gave it):
    /// how it ended decides the lock delay. Only kept with a lock delay.
    ahead: Option<KeyValue>,
    /// Set once the turn has come after an involuntary end: due when the delay is over.
    delay: Option<Alarm>,
    /// With a lock delay, the first look for the entry ahead reads the queue as it was when
    /// this entry joined it, so an entry ahead that ended before that look is still judged.
    looked: bool,
}

impl std::fmt::Debug for TurnWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnWait")
            .field("key", &String::from_utf8_lossy(&self.me))
            .field("rev", &self.my_rev)
            .finish()
    }
}

/// Where a turn is taken: the backend and session, the name's prefix and this contender's key.
pub(crate) struct Turn<'a> {
    pub(crate) session: &'a Session,
    pub(crate) prefix: &'a [u8],
    pub(crate) me: &'a [u8],
    /// What is awaited, named by `Timeout`.
    pub(crate) what: String,
}

/// How draining a watch ended.
enum Drained {
    /// Nothing more queued.
    Empty,
    /// The watched key was deleted.
    Deleted,
    /// The watch fell behind: watch again and re-check from the store.
    Behind,
}

/// Records `kv` as the latest value of an entry, keeping the lease already known when an
/// event leaves it out (an entry's lease never changes: its mark is put on the same lease).
fn remember(last: &mut Option<KeyValue>, mut kv: KeyValue) {
    if kv.lease.is_none() {
        kv.lease = last.as_ref().and_then(|l| l.lease);
    }
    *last = Some(kv);
}

/// Takes every queued event of `w`; `Closed` when the backend closed. `last` (if kept) gets
/// the watched key's latest value: a put's, or the one a delete removed.
fn drain(w: &mut Watcher, mut last: Option<&mut Option<KeyValue>>) -> Result<Drained> {
    loop {
        match w.try_recv() {
            Ok(Some(ev)) if ev.kind == EventKind::Delete => {
                if let (Some(last), Some(prev)) = (last, ev.prev_kv) {
                    remember(last, prev);
                }
                return Ok(Drained::Deleted);
            }
            Ok(Some(ev)) => {
                if let Some(last) = last.as_deref_mut() {
                    remember(last, ev.kv);
                }
            }
            Ok(None) => return Ok(Drained::Empty),
            Err(e @ Error::Closed(_)) => return Err(e),
            Err(_) => return Ok(Drained::Behind),
        }
    }
}

impl TurnWait {
    /// The wait of the entry `turn.me` created at `my_rev`. `demoted` must have been taken
    /// before that entry was put.
    pub(crate) fn new(
        turn: Turn<'_>,
        my_rev: i64,
        wait: Wait,
        demoted: Option<Receiver<()>>,
    ) -> TurnWait {
        let lost = turn.session.lost().clone();
        TurnWait {
            db: turn.session.backend().clone(),
            prefix: turn.prefix.to_vec(),
            me: turn.me.to_vec(),
            my_rev,
            lost_rx: lost.channel().clone(),
            lost,
            stopped: wait.stop_channel(),
            wait,
            demoted,
            session: turn.session.lease_id(),
            what: turn.what,
            mine: None,
            pred: None,
            lock_delay: None,
            ahead: None,
            delay: None,
            looked: false,
        }
    }

    /// Takes the turn only `d` after an involuntary end of the entry ahead (SPEC S9).
    pub(crate) fn with_lock_delay(mut self, d: Option<Duration>) -> TurnWait {
        self.lock_delay = d;
        self
    }

    /// The backend clock's time until which a lock delay holds this turn back, if one does.
    pub(crate) fn delayed_until(&self) -> Option<Duration> {
        self.delay.as_ref().map(Alarm::at)
    }

    /// The end of a wait that sits out a lock delay: the turn is taken once it is due, unless
    /// the session, my entry, the caller's wait or a demotion ends it first.
    fn poll_delay(&mut self) -> Result<Option<()>> {
        let expired = Error::SessionExpired(self.session);
        if self.lost.is_stopped() {
            return Err(self.lost_error());
        }
        if let Some(w) = &mut self.mine {
            match drain(w, None)? {
                Drained::Empty => {}
                Drained::Deleted => return Err(expired),
                Drained::Behind => self.mine = None,
            }
        }
        if self.mine.is_none() {
            // Watched again, then checked: a delete in between is seen in the watch.
            self.mine = Some(self.db.watch(&self.me, Default::default())?);
            if !self.mine_exists()? {
                return Err(expired);
            }
        }
        if self.delay.as_ref().is_some_and(Alarm::is_due) {
            return if self.mine_exists()? {
                Ok(Some(()))
            } else {
                Err(expired)
            };
        }
        if self.wait.is_over() {
            return Err(self.wait.timed_out(&self.what));
        }
        if self.demoted() {
            return Err(Error::NotPrimary);
        }
        Ok(None)
    }

    fn demoted(&self) -> bool {
        self.demoted
            .as_ref()
            .is_some_and(|d| !matches!(d.try_recv(), Err(TryRecvError::Empty)))
    }

    fn lost_error(&self) -> Error {
        if self.db.is_closed() {
            self.db.closed_error()
        } else {
            Error::SessionExpired(self.session)
        }
    }

    /// Whether my entry exists with my create revision.
    fn mine_exists(&self) -> Result<bool> {
        Ok(self
            .db
            .get(&self.me)?
            .is_some_and(|kv| kv.create_revision == self.my_rev))
    }
}

impl Pollable for TurnWait {
    type Output = ();

    fn poll(&mut self) -> Result<Option<()>> {
        let expired = Error::SessionExpired(self.session);
        loop {
            if self.delay.is_some() {
                return self.poll_delay();
            }
            if self.lost.is_stopped() {
                return Err(self.lost_error());
            }
            let mine = match &mut self.mine {
                Some(w) => w,
                None => self
                    .mine
                    .insert(self.db.watch(&self.me, Default::default())?),
            };
            match drain(mine, None)? {
                Drained::Empty => {}
                Drained::Deleted => return Err(expired),
                Drained::Behind => {
                    self.mine = None;
                    self.pred = None;
                    continue;
                }
            }
            if let Some(w) = &mut self.pred {
                let ahead = self.lock_delay.is_some().then_some(&mut self.ahead);
                match drain(w, ahead)? {
                    Drained::Deleted | Drained::Behind => self.pred = None,
                    Drained::Empty => {
                        // Nothing to do until something registered is ready.
                        if self.wait.is_over() {
                            return Err(self.wait.timed_out(&self.what));
                        }
                        if self.demoted() {
                            return Err(Error::NotPrimary);
                        }
                        return Ok(None);
                    }
                }
            }
            // Mine first: a lease lost while waiting deleted it (etcd#11051).
            if !self.mine_exists()? {
                return Err(expired);
            }
            let newer_first = RangeOptions {
                order: CreateOrder::Newest,
                max_create_revision: Some(self.my_rev - 1),
                limit: Some(1),
            };
            let joined = match (self.lock_delay, self.looked) {
                (Some(_), false) => {
                    own_entries_at(&*self.db, &self.prefix, newer_first, self.my_rev)?
                }
                _ => None,
            };
            self.looked = true;
            let found = match joined {
                Some(kvs) => kvs,
                None => own_entries(&*self.db, &self.prefix, newer_first)?,
            };
            let Some(pred) = found.into_iter().next_back() else {
                // Checked again after the predecessors: mine may have gone between the check
                // above and the range. No older entry can reappear, so "none older and mine
                // exists" holds at the moment of this read.
                if !self.mine_exists()? {
                    return Err(expired);
                }
                if let (Some(d), Some(last)) = (self.lock_delay, self.ahead.take()) {
                    if ended_involuntarily(&*self.db, &last)? {
                        self.delay = Some(Alarm::after(self.db.clock(), d));
                        continue;
                    }
                }
                return Ok(Some(()));
            };
            if self.lock_delay.is_some() {
                // With a lock delay the watch starts right after the read and carries the
                // previous key-value, so the mark (or the lease) of the entry's last value is
                // seen however soon after the read it went.
                let opts = WatchOptions {
                    prev_kv: true,
                    start_revision: Some(pred.mod_revision + 1),
                    ..WatchOptions::default()
                };
                self.ahead = Some(pred.clone());
                if let Ok(w) = self.db.watch(&pred.key, opts) {
                    self.pred = Some(w);
                    continue;
                }
                // Compacted past it already: watch from now, as without a delay.
            }
            let w = self.db.watch(&pred.key, Default::default())?;
            // Registered first, then checked: a delete in between is seen here or in the watch.
            if self
                .db
                .get(&pred.key)?
                .is_some_and(|kv| kv.create_revision == pred.create_revision)
            {
                self.pred = Some(w);
            }
        }
    }

    fn polls_the_network(&self) -> bool {
        self.db.over_network()
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        interest.recv(&self.lost_rx);
        interest.wait(&self.wait, &self.stopped);
        for w in [&self.mine, &self.pred].into_iter().flatten() {
            interest.recv(w.channel());
        }
        if let Some(alarm) = &self.delay {
            alarm.register(interest);
        }
        if let Some(d) = &self.demoted {
            interest.recv(d);
        }
    }
}

/// What entering a queue made: the entry, whether this wait created it (a fresh entry is
/// withdrawn when the wait fails or is dropped) and the wait for its turn.
pub(crate) struct Entered<E> {
    pub(crate) entry: E,
    pub(crate) fresh: bool,
    pub(crate) turn: TurnWait,
}

/// The state machine of a lock or campaign wait: enter the queue at the first poll, wait for the
/// turn, hand the entry on; a failed wait withdraws a fresh entry.
#[derive(Debug)]
pub(crate) enum QueueWait<E> {
    /// Not polled yet: nothing put.
    Start,
    /// The entry is put and waits its turn.
    Queued {
        entry: E,
        fresh: bool,
        turn: Box<TurnWait>,
    },
    /// Over: handed on, failed or withdrawn.
    Over,
}

impl<E> QueueWait<E> {
    /// Advances the wait: `enter` puts the entry (first poll only), `withdraw` removes a fresh
    /// one when the wait fails.
    pub(crate) fn poll(
        &mut self,
        enter: impl FnOnce() -> Result<Entered<E>>,
        withdraw: impl FnOnce(E),
    ) -> Result<Option<E>> {
        if let QueueWait::Start = self {
            *self = QueueWait::Over;
            let Entered { entry, fresh, turn } = enter()?;
            *self = QueueWait::Queued {
                entry,
                fresh,
                turn: Box::new(turn),
            };
        }
        let QueueWait::Queued { turn, .. } = self else {
            return Err(Error::invalid("this wait is over"));
        };
        match turn.poll() {
            Ok(None) => Ok(None),
            Ok(Some(())) => match std::mem::replace(self, QueueWait::Over) {
                QueueWait::Queued { entry, .. } => Ok(Some(entry)),
                _ => unreachable!("matched above"),
            },
            Err(e) => {
                self.withdraw(withdraw);
                Err(e)
            }
        }
    }

    /// The turn being waited for, once the entry is put.
    pub(crate) fn turn(&self) -> Option<&TurnWait> {
        match self {
            QueueWait::Queued { turn, .. } => Some(turn),
            _ => None,
        }
    }

    /// Names what the turn waits on.
    pub(crate) fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        if let QueueWait::Queued { turn, .. } = self {
            turn.register(interest);
        }
    }

    /// Removes the entry with `withdraw` if this wait put it; the wait is then over.
    pub(crate) fn withdraw(&mut self, withdraw: impl FnOnce(E)) {
        if let QueueWait::Queued {
            entry, fresh: true, ..
        } = std::mem::replace(self, QueueWait::Over)
        {
            withdraw(entry);
        }
    }
}
