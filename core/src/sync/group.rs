//! Group membership (SPEC S12), tenure's own key layout: member `m` of group `name` is the key
//! `name/members/m`, its value the member's capabilities, on the joining session's lease, so a
//! member whose session ends leaves. Watching the prefix reports joins and leaves.

use std::sync::Arc;

use crossbeam_channel::Receiver;

use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, OpResponse, Txn};
use crate::kv::watch::{WatchOptions, Watcher};
use crate::locks;
use crate::sync::backend::{Backend, RangeOptions};
use crate::sync::session::Session;
use crate::types::{Event, EventKind, KeyValue};
use crate::wait::{block_on, Next, Source, Wait};

/// The longest member ID, in bytes (it is part of a key).
pub const MAX_MEMBER_LEN: usize = 256;

/// `name/members/`: the prefix of a group's member keys.
fn members_prefix(name: &str) -> Vec<u8> {
    format!("{name}/members/").into_bytes()
}

/// A live member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member's ID.
    pub id: String,
    /// What it announced when it joined.
    pub capabilities: Vec<u8>,
}

impl Member {
    fn from_kv(prefix: &[u8], kv: &KeyValue) -> Option<Member> {
        let id = std::str::from_utf8(kv.key.strip_prefix(prefix)?).ok()?;
        // Keys of nested groups (`name/members/x/...` cannot be made by `join`) are not members.
        (!id.contains('/')).then(|| Member {
            id: id.to_owned(),
            capabilities: kv.value.clone(),
        })
    }
}

/// A join or a leave, from [`GroupWatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupChange {
    /// A member joined (or re-joined with new capabilities).
    Joined(Member),
    /// A member left: `leave`, or its session ended.
    Left(String),
}

/// A group (SPEC S12) that a session can join under one member ID at a time.
///
/// ```
/// use tenure::sync::{Group, GroupChange, Session, SessionOptions};
///
/// let db = tenure::Tenure::in_memory()?;
/// let mut changes = Group::watch(&db, "workers")?;
/// let s = Session::new(&db, SessionOptions::default())?;
/// let g = Group::new(&s, "workers");
/// g.join("w1", "gpu")?;
/// assert_eq!(Group::members(&db, "workers")?[0].id, "w1");
/// assert!(matches!(changes.next(None)?, GroupChange::Joined(m) if m.id == "w1"));
/// s.close()?; // or the process dies and its lease expires
/// assert_eq!(changes.next(None)?, GroupChange::Left("w1".into()));
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug)]
pub struct Group {
    session: Session,
    name: String,
    prefix: Vec<u8>,
    /// The member key this handle joined with and its create revision.
    // Its own lock, taken alone and briefly.
    joined: locks::Mutex<Option<(Vec<u8>, i64)>>,
}

fn check_member(member: &str) -> Result<()> {
    if member.is_empty() || member.len() > MAX_MEMBER_LEN || member.contains('/') {
        return Err(Error::invalid(format!(
            "member ID {member:?}: must be 1 to {MAX_MEMBER_LEN} bytes without '/'"
        )));
    }
    Ok(())
}

impl Group {
    /// The group `name`, joined through `session`.
    pub fn new(session: &Session, name: &str) -> Group {
        Group {
            session: session.clone(),
            name: name.to_owned(),
            prefix: members_prefix(name),
            joined: locks::Mutex::new(None),
        }
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Joins as `member` with `capabilities`; joining again through the same session updates
    /// them. `Locked` if another session is that member; `InvalidArgument` for an ID that is
    /// empty, longer than [`MAX_MEMBER_LEN`] or has a '/', or if this handle joined as another
    /// member.
    pub fn join(&self, member: &str, capabilities: impl AsRef<[u8]>) -> Result<()> {
        check_member(member)?;
        let mut key = self.prefix.clone();
        key.extend_from_slice(member.as_bytes());
        if let Some((k, _)) = &*self.joined.lock() {
            if *k != key {
                return Err(Error::invalid(format!(
                    "this handle of group {:?} has joined as another member; leave first",
                    self.name
                )));
            }
        }
        let lease = self.session.lease_id();
        let db = self.session.backend();
        let r = db
            .txn(
                Txn::new()
                    .when([Compare::create_revision(&key, CompareOp::Equal, 0)])
                    .then([Op::put(&key, capabilities.as_ref(), Some(lease))])
                    .otherwise([Op::get(&key)]),
            )
            .map_err(|e| self.session.ended(e))?;
        let rev = if r.succeeded {
            r.revision
        } else {
            let Some(OpResponse::Get(Some(kv))) = r.responses.into_iter().next() else {
                // Gone in between: try again.
                return self.join(member, capabilities);
            };
            if kv.lease != Some(lease) {
                return Err(Error::Locked {
                    name: format!("{}/{member}", self.name),
                    holder: kv.lease.unwrap_or(crate::types::LeaseId::new(0)),
                });
            }
            let r = db
                .txn(
                    Txn::new()
                        .when([Compare::create_revision(
                            &key,
                            CompareOp::Equal,
                            kv.create_revision,
                        )])
                        .then([Op::put(&key, capabilities.as_ref(), Some(lease))]),
                )
                .map_err(|e| self.session.ended(e))?;
            if !r.succeeded {
                return self.join(member, capabilities);
            }
            kv.create_revision
        };
        *self.joined.lock() = Some((key, rev));
        Ok(())
    }

    /// Leaves the group (deletes only this handle's membership); nothing if not joined.
    pub fn leave(&self) -> Result<()> {
        let Some((key, rev)) = self.joined.lock().take() else {
            return Ok(());
        };
        self.session.backend().txn(
            Txn::new()
                .when([Compare::create_revision(&key, CompareOp::Equal, rev)])
                .then([Op::delete(&key)]),
        )?;
        Ok(())
    }

    /// The live members of group `name`, in ID order.
    pub fn members<B: Backend>(db: &B, name: &str) -> Result<Vec<Member>> {
        members_of(db, &members_prefix(name))
    }

    /// Follows the joins and leaves of group `name` from now on.
    pub fn watch<B: Backend>(db: &B, name: &str) -> Result<GroupWatch> {
        let prefix = members_prefix(name);
        let watcher = db.watch(
            &prefix,
            WatchOptions {
                prefix: true,
                ..Default::default()
            },
        )?;
        Ok(GroupWatch {
            name: name.to_owned(),
            prefix,
            watcher,
        })
    }
}

pub(crate) fn members_of(db: &dyn Backend, prefix: &[u8]) -> Result<Vec<Member>> {
    let mut members: Vec<Member> = db
        .range(prefix, RangeOptions::default())?
        .iter()
        .filter_map(|kv| Member::from_kv(prefix, kv))
        .collect();
    members.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(members)
}

/// The joins and leaves of a group, from [`Group::watch`].
#[derive(Debug)]
pub struct GroupWatch {
    name: String,
    prefix: Vec<u8>,
    watcher: Watcher,
}

impl GroupWatch {
    /// The next join or leave, waiting as long as `wait` allows (`Timeout` otherwise).
    /// `Compacted` or another watch error if the watch fell behind (read
    /// [`Group::members`] and watch again).
    pub fn next(&mut self, wait: impl Into<Wait>) -> Result<GroupChange> {
        block_on(Next::new(&mut *self, wait.into(), "a group change")).map_err(|e| match e {
            Error::Timeout { after, .. } => Error::Timeout {
                what: format!("a change of group {:?}", self.name),
                after,
            },
            e => e,
        })
    }
}

/// A group watch is a stream of changes: the async bindings wait for it in the shared wait
/// pool, as for a plain watch.
impl Source for GroupWatch {
    type Item = GroupChange;
    type Wakeup = Arc<Event>;

    fn try_next(&mut self) -> Result<Option<GroupChange>> {
        while let Some(ev) = self.watcher.try_next()? {
            let Some(member) = Member::from_kv(&self.prefix, &ev.kv) else {
                continue;
            };
            return Ok(Some(match ev.kind {
                EventKind::Put => GroupChange::Joined(member),
                EventKind::Delete => GroupChange::Left(member.id),
            }));
        }
        Ok(None)
    }

    fn wakeup(&self) -> &Receiver<Arc<Event>> {
        self.watcher.wakeup()
    }
}

impl Group {
    /// The backend, for the partitioner.
    pub(crate) fn members_dyn(db: &Arc<dyn Backend>, name: &str) -> Result<Vec<Member>> {
        members_of(&**db, &members_prefix(name))
    }
}
