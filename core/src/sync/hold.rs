//! Bounded holds of a mutex (SPEC S9): the options, the marks a holder leaves on its key before
//! deleting it, how a waiter judges how the hold ahead of it ended, and the timer that ends a
//! hold after `max_hold`.
//!
//! A key vanishes the same way whether its holder deleted it or its lease ended: etcd's delete
//! events carry no cause. So a holder that ends its hold on purpose first overwrites its key's
//! value with a mark ([`RELEASED`], or [`ENDED`] when `max_hold` ended it), keeping its lease,
//! then deletes it; a waiter watching with the previous key-value reads the mark. A key deleted
//! without a mark (a Go or `etcdctl` holder, a holder without a `lock_delay`) is judged by its
//! lease: still there, the holder deleted it (released); gone, the lease ended (involuntary).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Waker;
use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, Txn};
use crate::limits::check_interval;
use crate::sync::backend::Backend;
use crate::types::{KeyValue, LeaseId};
use crate::wait::Stop;

/// Options of a [`Mutex`](crate::sync::Mutex) (SPEC S9): bounds on how a hold ends and what
/// follows. Both `None` by default (etcd's mutex).
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::{Mutex, MutexOptions, Session, SessionOptions};
///
/// let db = tenure::Tenure::in_memory()?;
/// let s = Session::new(&db, SessionOptions::default())?;
/// let opts = MutexOptions {
///     lock_delay: Some(Duration::from_secs(15)), // after a holder dies, wait 15 s
///     max_hold: Some(Duration::from_secs(60)),   // a hold ends itself after a minute
/// };
/// let guard = Mutex::with_options(&s, "jobs/nightly", opts)?.lock(None)?;
/// assert!(guard.is_held());
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MutexOptions {
    /// After the hold ahead of this waiter ended involuntarily (its session's lease expired or
    /// was revoked without an unlock, or its `max_hold` ran out), this waiter takes the lock
    /// only this long after it saw that end (Chubby's and Consul's lock-delay: a paused holder
    /// may still be writing). A voluntary unlock never delays. Also makes this mutex's unlocks
    /// leave the [`RELEASED`] mark (one more write), so its waiters never mistake them.
    pub lock_delay: Option<Duration>,
    /// A hold ends itself this long after it was acquired, even while its session is kept
    /// alive: the guard's [`done`](crate::sync::LockGuard::done) signal is raised first, then
    /// its key is marked [`ENDED`] and deleted.
    pub max_hold: Option<Duration>,
}

impl MutexOptions {
    /// Each duration more than zero and at most `limits::MAX_DURATION`, else `InvalidArgument`
    /// naming it.
    pub(crate) fn check(&self) -> Result<()> {
        if let Some(d) = self.lock_delay {
            check_interval(d, "lock_delay")?;
        }
        if let Some(d) = self.max_hold {
            check_interval(d, "max_hold")?;
        }
        Ok(())
    }
}

/// The value a holder puts on its key before deleting it on unlock: the hold ended on purpose.
pub const RELEASED: &[u8] = b"tenure:released";
/// The value put before the delete when `max_hold` ended the hold: not the holder's choice, so
/// waiters with a `lock_delay` treat it as an involuntary end.
pub const ENDED: &[u8] = b"tenure:max-hold";

/// Overwrites the key of the acquisition made at `rev` with `mark` (keeping `lease`), then
/// deletes it; each step only if the key is still that acquisition's. Whether it was deleted.
pub(crate) fn mark_and_release(
    db: &dyn Backend,
    key: &[u8],
    rev: i64,
    lease: LeaseId,
    mark: &[u8],
) -> Result<bool> {
    let still_mine = || Compare::create_revision(key, CompareOp::Equal, rev);
    // A failed mark (lost already) still tries the delete: it is conditioned the same way.
    let _ = db.txn(
        Txn::new()
            .when([still_mine()])
            .then([Op::put(key, mark, Some(lease))]),
    );
    Ok(db
        .txn(Txn::new().when([still_mine()]).then([Op::delete(key)]))?
        .succeeded)
}

/// Whether the hold whose key was last seen as `last` (the delete's previous key-value, or the
/// entry as last read) ended involuntarily: marked [`ENDED`], or unmarked with its lease gone.
pub(crate) fn ended_involuntarily(db: &dyn Backend, last: &KeyValue) -> Result<bool> {
    if last.value == RELEASED {
        return Ok(false);
    }
    if last.value == ENDED {
        return Ok(true);
    }
    let Some(lease) = last.lease else {
        return Ok(false); // no lease: only a delete can have removed it
    };
    match db.time_to_live(lease) {
        Ok(_) => Ok(false),
        Err(Error::LeaseNotFound(_) | Error::LeaseExpired(_)) => Ok(true),
        Err(e) => Err(e),
    }
}

/// The timer of a hold with a `max_hold`: a thread sleeping on the backend's clock until the
/// hold's end, which raises `done` and then marks and deletes the key. Dropping it (the guard
/// unlocked or dropped) cancels it; it is not joined (its last step may be a network call).
#[derive(Debug)]
pub(crate) struct MaxHold {
    cancel: Stop,
    /// Set by the timer before it raises `done`: the hold is the timer's to end from then on.
    fired: Arc<AtomicBool>,
}

/// What the timer ends: the acquisition at `rev` of `key`, on `lease`.
pub(crate) struct Hold {
    pub(crate) db: Arc<dyn Backend>,
    pub(crate) key: Vec<u8>,
    pub(crate) rev: i64,
    pub(crate) lease: LeaseId,
}

impl MaxHold {
    /// Starts the timer of `hold`, due `after` from now on the backend's clock.
    pub(crate) fn start(hold: Hold, after: Duration, done: Stop) -> Result<MaxHold> {
        let cancel = Stop::new();
        let clock = hold.db.clock();
        let due = clock.now().saturating_add(after);
        let sleeper = cancel.clone();
        let fired = Arc::new(AtomicBool::new(false));
        let fire = fired.clone();
        std::thread::Builder::new()
            .name("tenure-max-hold".into())
            .spawn(move || {
                // A ManualClock moves only by hand: wake the sleep at each advance.
                let woken = sleeper.clone();
                let waker: Arc<Waker> = Arc::new(move || woken.wake());
                clock.subscribe(Arc::downgrade(&waker));
                if sleeper.sleep_until(&*clock, due, None) {
                    return; // unlocked or dropped first
                }
                fire.store(true, Ordering::SeqCst);
                done.stop(); // the holder hears first, then the lock goes
                let _ = mark_and_release(&*hold.db, &hold.key, hold.rev, hold.lease, ENDED);
            })
            .map_err(|e| Error::storage(format!("cannot start a max_hold timer: {e}")))?;
        Ok(MaxHold { cancel, fired })
    }

    /// Whether the hold ran out: its key is the timer's to mark and delete, not the guard's.
    pub(crate) fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Drop for MaxHold {
    fn drop(&mut self) {
        self.cancel.stop();
    }
}
