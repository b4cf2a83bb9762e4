//! Barriers (SPEC S11), etcd `contrib/recipes` key layouts so Go programs using that package
//! interoperate:
//!
//! - [`Barrier`] `name`: held while the key `name` exists (no lease); `wait` returns once it
//!   is gone.
//! - [`DoubleBarrier`] `name` for `count` participants: each entering participant puts
//!   `name/waiters/<unix ns>` with its session's lease; the `count`-th puts `name/ready` (no
//!   lease), which lets everyone in. Leaving: the participant whose key has the lowest mod
//!   revision waits for the others' keys to go, the others delete their own key and wait for
//!   the lowest's; the last one deletes `name/ready`. A participant whose session ends loses its
//!   key, so it never blocks the others' `leave` for ever.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, Txn};
use crate::kv::watch::WatchOptions;
use crate::locks;
use crate::sync::backend::{Backend, RangeOptions};
use crate::sync::session::Session;
use crate::types::{EventKind, KeyValue};
use crate::wait::{block_on, Next, Wait};

/// Waits until `key` no longer holds the entry created at `create_revision` (any, if `None`),
/// as long as `wait` allows; `Timeout` naming `what` otherwise.
fn wait_gone(
    db: &dyn Backend,
    key: &[u8],
    create_revision: Option<i64>,
    wait: &Wait,
    what: &str,
) -> Result<()> {
    // The watch first, then the read: a delete in between is seen by one or the other.
    let mut w = db.watch(key, WatchOptions::default())?;
    let present = |kv: &KeyValue| create_revision.is_none_or(|r| kv.create_revision == r);
    if !db.get(key)?.is_some_and(|kv| present(&kv)) {
        return Ok(());
    }
    loop {
        match block_on(Next::new(&mut w, wait.clone(), "a barrier change")) {
            Ok(ev) if ev.kind == EventKind::Delete => return Ok(()),
            Ok(_) => {}
            Err(Error::Timeout { after, .. }) => {
                return Err(Error::Timeout {
                    what: what.to_owned(),
                    after,
                })
            }
            Err(e @ Error::Closed(_)) => return Err(e),
            // Fell behind: read again.
            Err(_) => return wait_gone(db, key, create_revision, wait, what),
        }
    }
}

/// A barrier (SPEC S11), etcd's `recipe.Barrier` layout: the key `name` exists while it is
/// held; waiters pass once it is released.
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::Barrier;
///
/// let db = tenure::Tenure::in_memory()?;
/// let gate = Barrier::new(&db, "deploy");
/// assert!(gate.hold()?);
/// assert!(!gate.hold()?, "already held");
/// let waiter = { let gate = gate.clone(); std::thread::spawn(move || gate.wait(Duration::from_secs(5))) };
/// gate.release()?;
/// waiter.join().unwrap()?;
/// gate.wait(None)?; // released: passes at once
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Barrier {
    db: Arc<dyn Backend>,
    name: String,
}

impl Barrier {
    /// The barrier `name` on `db`.
    pub fn new<B: Backend + Clone>(db: &B, name: &str) -> Barrier {
        Barrier {
            db: Arc::new(db.clone()),
            name: name.to_owned(),
        }
    }

    /// The barrier's name (its key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Holds the barrier: puts its key if absent. `true` if this call put it, `false` if it was
    /// already held.
    pub fn hold(&self) -> Result<bool> {
        let key = self.name.as_bytes();
        let r = self.db.txn(
            Txn::new()
                .when([Compare::version(key, CompareOp::Equal, 0)])
                .then([Op::put(key, b"", None)]),
        )?;
        Ok(r.succeeded)
    }

    /// Releases the barrier (deletes its key; releasing a free barrier does nothing).
    pub fn release(&self) -> Result<()> {
        self.db
            .txn(Txn::new().then([Op::delete(self.name.as_bytes())]))?;
        Ok(())
    }

    /// Whether the barrier is held now.
    pub fn is_held(&self) -> Result<bool> {
        Ok(self.db.get(self.name.as_bytes())?.is_some())
    }

    /// Waits until the barrier is released (at once if it is free), as long as `wait` allows;
    /// `Timeout` otherwise.
    pub fn wait(&self, wait: impl Into<Wait>) -> Result<()> {
        wait_gone(
            &*self.db,
            self.name.as_bytes(),
            None,
            &wait.into(),
            &format!("barrier {:?}", self.name),
        )
    }
}

/// A double barrier (SPEC S11), etcd's `recipe.DoubleBarrier` layout: `enter` blocks until
/// `count` participants have entered, `leave` until all of them have left. Each participant has
/// its own session (its key is ephemeral).
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::{DoubleBarrier, Session, SessionOptions};
///
/// let db = tenure::Tenure::in_memory()?;
/// let workers: Vec<_> = (0..3)
///     .map(|_| {
///         let s = Session::new(&db, SessionOptions::default()).unwrap();
///         std::thread::spawn(move || {
///             let b = DoubleBarrier::new(&s, "batch", 3);
///             b.enter(Duration::from_secs(5))?; // all three are in
///             b.leave(Duration::from_secs(5)) // all three are out
///         })
///     })
///     .collect();
/// for w in workers {
///     w.join().unwrap()?;
/// }
/// assert!(db.range("batch/", None)?.is_empty());
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug)]
pub struct DoubleBarrier {
    session: Session,
    name: String,
    count: usize,
    waiters: Vec<u8>,
    ready: Vec<u8>,
    /// This participant's key and its create revision, once entered.
    // Its own lock, taken alone and briefly (never across a wait).
    mine: locks::Mutex<Option<(Vec<u8>, i64)>>,
}

impl DoubleBarrier {
    /// The double barrier `name` for `count` participants, entered through `session`.
    pub fn new(session: &Session, name: &str, count: usize) -> DoubleBarrier {
        DoubleBarrier {
            session: session.clone(),
            name: name.to_owned(),
            count,
            waiters: format!("{name}/waiters/").into_bytes(),
            ready: format!("{name}/ready").into_bytes(),
            mine: locks::Mutex::new(None),
        }
    }

    /// The barrier's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many participants it waits for.
    pub fn count(&self) -> usize {
        self.count
    }

    fn mine(&self) -> Option<(Vec<u8>, i64)> {
        self.mine.lock().clone()
    }

    fn set_mine(&self, v: Option<(Vec<u8>, i64)>) {
        *self.mine.lock() = v;
    }

    fn entered(&self) -> Result<Vec<KeyValue>> {
        self.session
            .backend()
            .range(&self.waiters, RangeOptions::default())
    }

    /// Enters and waits until `count` participants have, as long as `wait` allows. On
    /// `Timeout` (or another failure) this participant's key is withdrawn; `InvalidArgument`
    /// when `count` is 0 or this participant already entered, or when `count`
    /// participants are already in (a late arrival takes no place).
    pub fn enter(&self, wait: impl Into<Wait>) -> Result<()> {
        if self.count == 0 {
            return Err(Error::invalid(format!(
                "double barrier {:?}: count must be at least 1",
                self.name
            )));
        }
        if self.mine().is_some() {
            return Err(Error::invalid(format!(
                "double barrier {:?}: this participant has already entered",
                self.name
            )));
        }
        let wait = wait.into();
        let db = self.session.backend();
        let lease = self.session.lease_id();
        let mut nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let (key, rev) = loop {
            let mut key = self.waiters.clone();
            key.extend_from_slice(nanos.to_string().as_bytes());
            let r = db
                .txn(
                    Txn::new()
                        .when([Compare::version(&key, CompareOp::Equal, 0)])
                        .then([Op::put(&key, b"", Some(lease))]),
                )
                .map_err(|e| self.session.ended(e))?;
            if r.succeeded {
                break (key, r.revision);
            }
            nanos += 1;
        };
        let withdraw = |e: Error| {
            let _ = db.txn(
                Txn::new()
                    .when([Compare::create_revision(&key, CompareOp::Equal, rev)])
                    .then([Op::delete(&key)]),
            );
            e
        };
        // The watch of `ready` from my entry on, before counting: the count-th entry's put is
        // seen either in the count or in the watch.
        let mut ready = db
            .watch(
                &self.ready,
                WatchOptions {
                    start_revision: Some(rev),
                    ..Default::default()
                },
            )
            .map_err(withdraw)?;
        let entered = self.entered().map_err(withdraw)?;
        if entered.len() > self.count {
            return Err(withdraw(Error::invalid(format!(
                "double barrier {:?} already has its {} participants",
                self.name, self.count
            ))));
        }
        if entered.len() == self.count {
            db.txn(Txn::new().then([Op::put(&self.ready, b"", None)]))
                .map_err(withdraw)?;
            self.set_mine(Some((key, rev)));
            return Ok(());
        }
        loop {
            if self.session.is_done() {
                return Err(withdraw(Error::SessionExpired(lease)));
            }
            match block_on(Next::new(&mut ready, wait.clone(), "a double barrier")) {
                Ok(ev) if ev.kind == EventKind::Put => break,
                Ok(_) => {}
                Err(Error::Timeout { after, .. }) => {
                    return Err(withdraw(Error::Timeout {
                        what: format!("double barrier {:?} to fill", self.name),
                        after,
                    }))
                }
                Err(e) => return Err(withdraw(e)),
            }
        }
        self.set_mine(Some((key, rev)));
        Ok(())
    }

    /// Leaves and waits until every participant has left, as long as `wait` allows
    /// (`Timeout` otherwise; the participant may call `leave` again). `InvalidArgument` if it
    /// has not entered.
    pub fn leave(&self, wait: impl Into<Wait>) -> Result<()> {
        let wait = wait.into();
        let db = self.session.backend();
        let Some((my_key, my_rev)) = self.mine() else {
            return Err(Error::invalid(format!(
                "double barrier {:?}: leave before enter",
                self.name
            )));
        };
        let what = format!("double barrier {:?} to empty", self.name);
        loop {
            let entered = self.entered()?;
            let (Some(lowest), Some(highest)) = (
                entered.iter().min_by_key(|kv| kv.mod_revision),
                entered.iter().max_by_key(|kv| kv.mod_revision),
            ) else {
                break;
            };
            if entered.len() == 1 {
                // The last one in (as etcd: whoever sees one key left): clear the barrier for
                // the next round.
                db.txn(Txn::new().then([Op::delete(&self.ready), Op::delete(&my_key)]))?;
                break;
            }
            if lowest.key == my_key {
                wait_gone(
                    &**db,
                    &highest.key,
                    Some(highest.create_revision),
                    &wait,
                    &what,
                )?;
            } else {
                db.txn(
                    Txn::new()
                        .when([Compare::create_revision(&my_key, CompareOp::Equal, my_rev)])
                        .then([Op::delete(&my_key)]),
                )?;
                wait_gone(
                    &**db,
                    &lowest.key,
                    Some(lowest.create_revision),
                    &wait,
                    &what,
                )?;
            }
        }
        self.set_mine(None);
        Ok(())
    }
}
