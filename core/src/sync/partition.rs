//! A partitioner (SPEC S12): which live members of a group own a key, by consistent hashing.
//! Each member puts [`POINTS_PER_MEMBER`] points on a ring of 32-bit CRC-32 (IEEE) hashes, the
//! point `i` of member `m` at `crc32(decimal(i) + m)` (groupcache's `consistenthash` layout); a
//! key at `crc32(key)` is owned by the members of the next points clockwise, the first
//! `replicas` distinct ones. The ring is a pure function of the member IDs: every process that
//! sees the same members agrees, a key moves only when a member next to it on the ring joins
//! or leaves, and the points spread the load evenly.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::sync::backend::Backend;
use crate::sync::group::Group;

/// How many points each member puts on the ring: enough for an even spread (the load of the
/// busiest member of ten stays within about a third of the mean).
pub const POINTS_PER_MEMBER: usize = 160;

/// The most replicas a partitioner hands out per key.
pub const MAX_REPLICAS: usize = 64;

/// The hash ring of a set of members: pure, no I/O.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ring {
    /// (hash, index into `members`), sorted by hash then index.
    points: Vec<(u32, usize)>,
    members: Vec<String>,
}

impl Ring {
    /// The ring of `members` (duplicates count once).
    pub fn new<S: AsRef<str>>(members: impl IntoIterator<Item = S>) -> Ring {
        let mut members: Vec<String> = members.into_iter().map(|m| m.as_ref().to_owned()).collect();
        members.sort();
        members.dedup();
        let mut points = Vec::with_capacity(members.len() * POINTS_PER_MEMBER);
        for (idx, m) in members.iter().enumerate() {
            for i in 0..POINTS_PER_MEMBER {
                points.push((crc32fast::hash(format!("{i}{m}").as_bytes()), idx));
            }
        }
        points.sort_unstable();
        Ring { points, members }
    }

    /// The members on the ring, sorted.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// The first `replicas` distinct members clockwise from `key`'s hash (fewer if the ring has
    /// fewer members; none on an empty ring). The first is the key's primary owner.
    pub fn members_for(&self, key: impl AsRef<[u8]>, replicas: usize) -> Vec<&str> {
        let want = replicas.min(self.members.len());
        let mut out: Vec<&str> = Vec::with_capacity(want);
        if want == 0 {
            return out;
        }
        let h = crc32fast::hash(key.as_ref());
        let start = self.points.partition_point(|&(p, _)| p < h);
        for k in 0..self.points.len() {
            let (_, idx) = self.points[(start + k) % self.points.len()];
            let m = self.members[idx].as_str();
            if !out.contains(&m) {
                out.push(m);
                if out.len() == want {
                    break;
                }
            }
        }
        out
    }
}

/// A partitioner over the live members of a group (SPEC S12): `members_for(key)` names the
/// `replicas` members that own `key`, read from the group's current membership.
///
/// ```
/// use tenure::sync::{Group, Partitioner, Session, SessionOptions};
///
/// let db = tenure::Tenure::in_memory()?;
/// let (s1, s2) = (Session::new(&db, SessionOptions::default())?, Session::new(&db, SessionOptions::default())?);
/// let (g1, g2) = (Group::new(&s1, "workers"), Group::new(&s2, "workers"));
/// g1.join("w1", "")?;
/// g2.join("w2", "")?;
/// let p = Partitioner::new(&db, "workers", 1)?;
/// let owner = p.members_for("invoice-42")?;
/// assert_eq!(owner.len(), 1);
/// assert_eq!(p.members_for("invoice-42")?, owner, "stable while membership is");
/// assert_eq!(p.primary_for("invoice-42")?, Some(owner[0].clone()));
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Partitioner {
    db: Arc<dyn Backend>,
    group: String,
    replicas: usize,
}

impl Partitioner {
    /// A partitioner over group `group`, handing out `replicas` members per key (1 to
    /// [`MAX_REPLICAS`], else `InvalidArgument`).
    pub fn new<B: Backend + Clone>(db: &B, group: &str, replicas: usize) -> Result<Partitioner> {
        if replicas == 0 || replicas > MAX_REPLICAS {
            return Err(Error::invalid(format!(
                "replicas {replicas}: must be 1 to {MAX_REPLICAS}"
            )));
        }
        Ok(Partitioner {
            db: Arc::new(db.clone()),
            group: group.to_owned(),
            replicas,
        })
    }

    /// The ring of the group's live members now.
    pub fn ring(&self) -> Result<Ring> {
        let members = Group::members_dyn(&self.db, &self.group)?;
        Ok(Ring::new(members.iter().map(|m| m.id.as_str())))
    }

    /// The members owning `key` now (primary first): `replicas` of them, fewer if the group
    /// has fewer members, none if it is empty.
    pub fn members_for(&self, key: impl AsRef<[u8]>) -> Result<Vec<String>> {
        let ring = self.ring()?;
        Ok(ring
            .members_for(key, self.replicas)
            .into_iter()
            .map(str::to_owned)
            .collect())
    }

    /// The primary owner of `key` now: the first of [`members_for`](Partitioner::members_for),
    /// whatever `replicas` is; `None` if the group is empty.
    pub fn primary_for(&self, key: impl AsRef<[u8]>) -> Result<Option<String>> {
        let ring = self.ring()?;
        Ok(ring.members_for(key, 1).first().map(|&m| m.to_owned()))
    }
}
