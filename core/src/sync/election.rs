use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, OpResponse, Txn};
use crate::kv::watch::Watcher;
use crate::sync::session::Session;
use crate::sync::wait::{key_of, prefix_of, wait_turn, Interrupts};
use crate::types::KeyValue;
use crate::{Tenure, WatchOptions};

/// A leader election (SPEC S4), etcd's algorithm: candidates put `name/<lease hex>` with their
/// value; the leader is the candidate with the lowest create revision.
#[derive(Debug, Clone)]
pub struct Election {
    session: Session,
    prefix: Vec<u8>,
}

/// Leadership won by [`Election::campaign`]. Its token is the leader key's create revision.
#[derive(Debug)]
pub struct Leadership {
    db: Tenure,
    key: Vec<u8>,
    rev: i64,
    lease: crate::LeaseId,
}

impl Election {
    /// An election named `name` in which `session` can campaign.
    pub fn new(session: &Session, name: &str) -> Election {
        Election {
            session: session.clone(),
            prefix: prefix_of(name),
        }
    }

    /// Becomes a candidate with `value` and waits until leader, at most `timeout`. On failure
    /// the candidacy is withdrawn. Campaigning again with a live candidacy reuses it.
    pub fn campaign(
        &self,
        value: impl AsRef<[u8]>,
        timeout: Option<Duration>,
    ) -> Result<Leadership> {
        self.campaign_inner(value.as_ref(), timeout, None)
    }

    /// Like [`campaign`](Election::campaign), also giving up (with `Timeout`) as soon as
    /// `cancel` receives a message or disconnects.
    pub fn campaign_with_cancel(
        &self,
        value: impl AsRef<[u8]>,
        timeout: Option<Duration>,
        cancel: &crossbeam_channel::Receiver<()>,
    ) -> Result<Leadership> {
        self.campaign_inner(value.as_ref(), timeout, Some(cancel))
    }

    fn campaign_inner(
        &self,
        value: &[u8],
        timeout: Option<Duration>,
        cancel: Option<&crossbeam_channel::Receiver<()>>,
    ) -> Result<Leadership> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let db = self.session.db();
        let demoted = db.demotion();
        let lease = self.session.lease_id();
        let key = key_of(&self.prefix, lease.get());
        let r = db.txn(
            Txn::new()
                .when([Compare::create_revision(&key, CompareOp::Equal, 0)])
                .then([Op::put(&key, value, Some(lease))])
                .otherwise([Op::get(&key)]),
        )?;
        let (rev, fresh) = if r.succeeded {
            (r.revision, true)
        } else {
            match r.responses.first() {
                Some(OpResponse::Get(Some(kv))) => {
                    db.put(&key, value, Some(lease))?;
                    (kv.create_revision, false)
                }
                _ => return Err(Error::SessionExpired),
            }
        };
        let leadership = Leadership {
            db: db.clone(),
            key,
            rev,
            lease,
        };
        let gone = self.session.done();
        let stop = Interrupts {
            gone: &gone,
            cancel,
            demoted: &demoted,
            deadline,
        };
        match wait_turn(db, &self.prefix, &leadership.key, rev, &stop) {
            Ok(()) => Ok(leadership),
            Err(e) => {
                if fresh {
                    let _ = leadership.resign();
                }
                Err(e)
            }
        }
    }

    /// The current leader's key-value, if any.
    pub fn leader(db: &Tenure, name: &str) -> Result<Option<KeyValue>> {
        leader_of(db, &prefix_of(name))
    }

    /// Follows the leadership of `name`: the first item is the current state, then one item per
    /// change (new leader, new value, or `None` for no leader).
    pub fn observe(db: &Tenure, name: &str) -> Result<Observer> {
        let prefix = prefix_of(name);
        let watcher = db.watch(
            &prefix,
            WatchOptions {
                prefix: true,
                ..Default::default()
            },
        )?;
        Ok(Observer {
            db: db.clone(),
            prefix,
            watcher,
            last: None,
            stale: true,
        })
    }
}

fn leader_of(db: &Tenure, prefix: &[u8]) -> Result<Option<KeyValue>> {
    Ok(db
        .range(prefix, None)?
        .into_iter()
        .min_by_key(|kv| kv.create_revision))
}

impl Leadership {
    /// The fencing token: the leader key's create revision, strictly increasing per election.
    pub fn token(&self) -> i64 {
        self.rev
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
                .then([Op::put(&self.key, value.as_ref(), Some(self.lease))]),
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
#[derive(Debug)]
pub struct Observer {
    db: Tenure,
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
        let now = leader_of(&self.db, &self.prefix)?;
        let id = now
            .as_ref()
            .map(|kv| (kv.key.clone(), kv.create_revision, kv.value.clone()));
        if self.last.as_ref() == Some(&id) {
            return Ok(None);
        }
        self.last = Some(id);
        Ok(Some(now))
    }

    /// Waits for the next leadership state, at most `timeout` (`None`: no limit); `Timeout`
    /// if there is none by then, `Closed` when the engine closes.
    pub fn recv_timeout(&mut self, timeout: Option<Duration>) -> Result<Option<KeyValue>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if self.stale {
                self.stale = false;
                if let Some(state) = self.changed()? {
                    return Ok(state);
                }
            }
            let event = match deadline {
                Some(d) => self
                    .watcher
                    .recv_timeout(d.saturating_duration_since(Instant::now())),
                None => self.watcher.recv(),
            };
            match event {
                Ok(_) => self.stale = true,
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
    }
}

impl Iterator for Observer {
    type Item = Result<Option<KeyValue>>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.recv_timeout(None) {
            Err(Error::Closed) => None,
            other => Some(other),
        }
    }
}
