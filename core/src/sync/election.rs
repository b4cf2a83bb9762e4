use std::sync::Arc;

use crossbeam_channel::Receiver;

use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, Txn};
use crate::kv::watch::{WatchOptions, Watcher};
use crate::sync::backend::Backend;
use crate::sync::session::Session;
use crate::sync::turn::{
    first_entry, key_of, prefix_of, put_entry, Entered, QueueWait, Turn, TurnWait,
};
use crate::types::{Event, KeyValue, LeaseId};
use crate::wait::{block_on, Interest, Next, Pollable, Source, Wait};

/// A leader election (SPEC S4), etcd's algorithm and key layout: candidates put
/// `name/<lease hex>` with their value; the leader is the candidate with the lowest create
/// revision. Names nest without interfering: `svc` and `svc/eu` are different elections.
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::{Election, Session, SessionOptions};
///
/// let db = tenure::Tenure::in_memory()?;
/// let a = Session::new(&db, SessionOptions::default())?;
/// let b = Session::new(&db, SessionOptions::default())?;
/// let leading = Election::new(&a, "svc").campaign("host-a", None)?;
/// assert_eq!(Election::leader(&db, "svc")?.unwrap().value, b"host-a");
/// // b campaigns too and waits its turn, here on another thread.
/// let waiting = std::thread::spawn(move || {
///     Election::new(&b, "svc").campaign("host-b", Some(Duration::from_secs(5))).map(|l| l.fencing_token())
/// });
/// leading.resign()?; // or a's session ends: closed, or its lease expired after a crash
/// let token_b = waiting.join().unwrap()?;
/// assert!(token_b > leading.fencing_token());
/// assert_eq!(Election::leader(&db, "svc")?.unwrap().value, b"host-b");
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Election {
    session: Session,
    name: String,
    prefix: Vec<u8>,
}

/// Leadership won by [`Election::campaign`]. Its fencing token is the leader key's create revision.
///
/// ```
/// use tenure::sync::{Election, Session, SessionOptions};
///
/// let db = tenure::Tenure::in_memory()?;
/// let session = Session::new(&db, SessionOptions::default())?;
/// let leading = Election::new(&session, "svc").campaign("host-a", None)?;
/// leading.proclaim("host-a (draining)")?; // a new value, same leadership and fencing token
/// assert_eq!(Election::leader(&db, "svc")?.unwrap().value, b"host-a (draining)");
/// leading.resign()?;
/// assert!(Election::leader(&db, "svc")?.is_none());
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug)]
pub struct Leadership {
    db: Arc<dyn Backend>,
    key: Vec<u8>,
    rev: i64,
    lease: LeaseId,
}

impl Election {
    /// An election named `name` in which `session` can campaign.
    pub fn new(session: &Session, name: &str) -> Election {
        Election {
            session: session.clone(),
            name: name.to_owned(),
            prefix: prefix_of(name),
        }
    }

    /// Becomes a candidate with `value` and waits until leader, as long as `wait` allows
    /// (`None`: no limit; a `Duration`; a [`Wait`]). On failure (`Timeout`, `SessionExpired`,
    /// `NotPrimary`) the candidacy is withdrawn. Campaigning again through the same session
    /// with a live candidacy reuses it (and announces the new value), as in etcd.
    pub fn campaign(&self, value: impl AsRef<[u8]>, wait: impl Into<Wait>) -> Result<Leadership> {
        block_on(self.campaign_wait(value, wait))
    }

    /// [`campaign`](Self::campaign) as a state machine, to wait for many campaigns from one
    /// thread (a [`WaitPool`](crate::WaitPool), an event loop). Nothing happens until it is
    /// polled: the first poll puts the candidacy. Dropped before its end, it withdraws it.
    pub fn campaign_wait(&self, value: impl AsRef<[u8]>, wait: impl Into<Wait>) -> CampaignWait {
        CampaignWait {
            election: self.clone(),
            value: value.as_ref().to_vec(),
            wait: wait.into(),
            queue: QueueWait::Start,
        }
    }

    /// Puts the candidacy: the first poll of a campaign.
    fn start_campaign(&self, value: &[u8], wait: Wait) -> Result<Entered<Leadership>> {
        let db = self.session.backend();
        // Taken before the key is put, so that no demote in between is missed.
        let demoted = db.demotion();
        let lease = self.session.lease_id();
        let key = key_of(&self.prefix, lease.get());
        let (rev, fresh) = put_entry(&self.session, &key, value)?;
        if !fresh {
            // Campaigning again on a candidacy of this lease: the new value.
            db.txn(Txn::new().then([Op::put(&key, value, Some(lease))]))
                .map_err(|e| self.session.ended(e))?;
        }
        let turn = Turn {
            session: &self.session,
            prefix: &self.prefix,
            me: &key,
            what: format!("leadership of {:?}", self.name),
        };
        let turn = TurnWait::new(turn, rev, wait, demoted);
        Ok(Entered {
            entry: Leadership {
                db: db.clone(),
                key,
                rev,
                lease,
            },
            fresh,
            turn,
        })
    }

    /// The current leader's key-value, if any.
    pub fn leader<B: Backend>(db: &B, name: &str) -> Result<Option<KeyValue>> {
        leader_of(db, &prefix_of(name))
    }

    /// Follows the leadership of `name`: the first item is the current state, then one item per
    /// change (new leader, new value, or `None` for no leader).
    pub fn observe<B: Backend + Clone>(db: &B, name: &str) -> Result<Observer> {
        let db: Arc<dyn Backend> = Arc::new(db.clone());
        let prefix = prefix_of(name);
        let watcher = db.watch(
            &prefix,
            WatchOptions {
                prefix: true,
                ..Default::default()
            },
        )?;
        Ok(Observer {
            db,
            prefix,
            watcher,
            last: None,
            stale: true,
        })
    }
}

/// A campaign in progress, from [`Election::campaign_wait`]: polled to a [`Leadership`].
#[derive(Debug)]
pub struct CampaignWait {
    election: Election,
    value: Vec<u8>,
    wait: Wait,
    queue: QueueWait<Leadership>,
}

/// Withdraws a candidacy (a failed or dropped campaign's).
fn withdraw(l: Leadership) {
    let _ = l.resign();
}

impl Pollable for CampaignWait {
    type Output = Leadership;

    fn poll(&mut self) -> Result<Option<Leadership>> {
        let (e, value, wait) = (&self.election, &self.value, &self.wait);
        self.queue
            .poll(|| e.start_campaign(value, wait.clone()), withdraw)
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        self.queue.register(interest);
    }

    fn polls_the_network(&self) -> bool {
        self.election.session.backend().over_network()
    }
}

impl Drop for CampaignWait {
    fn drop(&mut self) {
        self.queue.withdraw(withdraw);
    }
}

fn leader_of(db: &dyn Backend, prefix: &[u8]) -> Result<Option<KeyValue>> {
    first_entry(db, prefix)
}

impl Leadership {
    /// The leadership of the leader key `key` created at revision `rev` with lease `lease`
    /// (etcd's `LeaderKey`), rebuilt from what a campaign returned, e.g. by another process
    /// (`tenure serve` answers Proclaim and Resign with it). Nothing is read here: `proclaim`
    /// answers `NotLeader` and `resign` does nothing once `key` is no longer that leadership.
    /// A `lease` of 0 or less puts proclaimed values without a lease.
    pub fn resume<B: Backend + Clone>(
        db: &B,
        key: impl AsRef<[u8]>,
        rev: i64,
        lease: impl Into<LeaseId>,
    ) -> Leadership {
        Leadership {
            db: Arc::new(db.clone()),
            key: key.as_ref().to_vec(),
            rev,
            lease: lease.into(),
        }
    }

    /// The fencing token: the leader key's create revision, strictly increasing per election.
    pub fn fencing_token(&self) -> i64 {
        self.rev
    }

    /// Whether this leadership still holds: its key exists with the same create revision.
    pub fn is_held(&self) -> bool {
        matches!(self.db.get(&self.key), Ok(Some(kv)) if kv.create_revision == self.rev)
    }

    /// The leader key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Announces a new value, only while still this leadership; else `NotLeader`.
    pub fn proclaim(&self, value: impl AsRef<[u8]>) -> Result<()> {
        let r = self.db.txn(
            Txn::new()
                .when([Compare::create_revision(
                    &self.key,
                    CompareOp::Equal,
                    self.rev,
                )])
                .then([Op::put(
                    &self.key,
                    value.as_ref(),
                    Some(self.lease).filter(|l| l.get() > 0),
                )]),
        )?;
        if r.succeeded {
            Ok(())
        } else {
            Err(Error::NotLeader)
        }
    }

    /// Gives up leadership (deletes the key only if it is still this leadership's).
    pub fn resign(&self) -> Result<()> {
        self.db.txn(
            Txn::new()
                .when([Compare::create_revision(
                    &self.key,
                    CompareOp::Equal,
                    self.rev,
                )])
                .then([Op::delete(&self.key)]),
        )?;
        Ok(())
    }
}

/// Leadership changes of one election, from [`Election::observe`]. It never loses the latest
/// state: each item is read from the store after the events that announced it.
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::{Election, Session, SessionOptions};
///
/// let db = tenure::Tenure::in_memory()?;
/// let mut changes = Election::observe(&db, "svc")?;
/// let wait = Some(Duration::from_secs(5));
/// assert_eq!(changes.recv_timeout(wait)?, None); // no leader yet
/// let session = Session::new(&db, SessionOptions::default())?;
/// let _leading = Election::new(&session, "svc").campaign("host-a", None)?;
/// assert_eq!(changes.recv_timeout(wait)?.unwrap().value, b"host-a");
/// session.close()?;
/// assert_eq!(changes.recv_timeout(wait)?, None); // the leader's session ended
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug)]
pub struct Observer {
    db: Arc<dyn Backend>,
    prefix: Vec<u8>,
    watcher: Watcher,
    /// The last state reported; `None` before the first.
    last: Option<Option<LeaderId>>,
    /// Events arrived since the store was last read (initially true: nothing read yet).
    stale: bool,
}

/// What identifies a leadership state: key, create revision and value.
type LeaderId = (Vec<u8>, i64, Vec<u8>);

impl Observer {
    fn changed(&mut self) -> Result<Option<Option<KeyValue>>> {
        let now = leader_of(&*self.db, &self.prefix)?;
        let id = now
            .as_ref()
            .map(|kv| (kv.key.clone(), kv.create_revision, kv.value.clone()));
        if self.last.as_ref() == Some(&id) {
            return Ok(None);
        }
        self.last = Some(id);
        Ok(Some(now))
    }

    /// Waits for the next leadership state as long as `wait` allows (`None`: no limit);
    /// `Timeout` if there is none by then, `Closed` when the engine closes.
    pub fn recv_timeout(&mut self, wait: impl Into<Wait>) -> Result<Option<KeyValue>> {
        block_on(Next::new(self, wait, "a leadership change"))
    }

    /// The next leadership state if it is known without waiting (`Ok(None)`: no change yet).
    pub fn try_recv(&mut self) -> Result<Option<Option<KeyValue>>> {
        loop {
            match self.watcher.try_recv() {
                Ok(Some(_)) => self.stale = true,
                Ok(None) => break,
                Err(Error::Compacted { .. }) => {
                    self.stale = true;
                    // Fell behind: start a fresh watch; the store has the latest state.
                    self.watcher = self.db.watch(
                        &self.prefix,
                        WatchOptions {
                            prefix: true,
                            ..Default::default()
                        },
                    )?;
                }
                Err(e) => return Err(e),
            }
        }
        if !self.stale {
            return Ok(None);
        }
        self.stale = false;
        self.changed()
    }
}

impl Source for Observer {
    type Item = Option<KeyValue>;
    type Wakeup = Arc<Event>;

    fn try_next(&mut self) -> Result<Option<Option<KeyValue>>> {
        self.try_recv()
    }

    /// The watch's events (a fresh watch after it fell behind).
    fn wakeup(&self) -> &Receiver<Arc<Event>> {
        self.watcher.channel()
    }
}

impl Iterator for Observer {
    type Item = Result<Option<KeyValue>>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.recv_timeout(None) {
            Err(Error::Closed(_)) => None,
            other => Some(other),
        }
    }
}
