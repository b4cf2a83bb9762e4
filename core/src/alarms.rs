//! Alarms (etcd's `v3alarm`) and the space quota's judgement of a write (etcd's `backendQuota`
//! and its capped applier), SPEC E20. Pure: the engine passes the file's size and persists what
//! changes.

use std::collections::BTreeSet;

/// What an alarm is about: etcd's `AlarmType` (its numbers are [`AlarmKind::etcd_number`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum AlarmKind {
    /// The database file reached its space quota: puts, txns that put and grants are refused
    /// until the alarm is disarmed.
    NoSpace,
    /// A member found its data corrupt: every write is refused until the alarm is disarmed
    /// (reads still work), as etcd does.
    Corrupt,
}

impl AlarmKind {
    /// etcd's `AlarmType` number (NOSPACE = 1, CORRUPT = 2).
    pub const fn etcd_number(self) -> i32 {
        match self {
            AlarmKind::NoSpace => 1,
            AlarmKind::Corrupt => 2,
        }
    }

    /// The kind of etcd's `AlarmType` number (`None` for NONE = 0 and unknown numbers).
    pub const fn from_etcd_number(n: i32) -> Option<AlarmKind> {
        match n {
            1 => Some(AlarmKind::NoSpace),
            2 => Some(AlarmKind::Corrupt),
            _ => None,
        }
    }

    /// etcd's name, as `etcdctl alarm list` prints it: `NOSPACE`, `CORRUPT`.
    pub const fn name(self) -> &'static str {
        match self {
            AlarmKind::NoSpace => "NOSPACE",
            AlarmKind::Corrupt => "CORRUPT",
        }
    }
}

/// A raised alarm: which member raised it (`tenure serve`'s member ID, or
/// `Builder::member_id`) and what about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Alarm {
    /// The member that raised it.
    pub member: u64,
    /// What it is about.
    pub kind: AlarmKind,
}

/// etcd's estimate of what storing a key's metadata costs (`kvOverhead`).
pub(crate) const KV_OVERHEAD: u64 = 256;
/// etcd's estimate of what storing a lease costs (`leaseOverhead`).
pub(crate) const LEASE_OVERHEAD: u64 = 64;

/// What a write would add to the file, as etcd estimates it: a put costs its key, its value
/// and [`KV_OVERHEAD`]; a grant [`LEASE_OVERHEAD`]; a txn its costlier branch's puts. 0: the
/// write only removes (a delete, a revoke, a compaction) or needs no room (a txn without puts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cost(pub(crate) u64);

impl Cost {
    /// A put of `key` and `value`.
    pub(crate) fn put(key: &[u8], value: &[u8]) -> Cost {
        Cost(KV_OVERHEAD + key.len() as u64 + value.len() as u64)
    }

    /// A grant.
    pub(crate) const GRANT: Cost = Cost(LEASE_OVERHEAD);

    /// A write that adds nothing.
    pub(crate) const NONE: Cost = Cost(0);
}

/// Why a write is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A CORRUPT alarm is raised: every write is refused.
    Corrupt,
    /// A NOSPACE alarm is raised: writes that cost something are refused.
    NoSpace,
    /// The write would take the file to its quota: refused, and NOSPACE is to be raised.
    OverQuota { file_bytes: u64, quota: u64 },
}

/// The raised alarms, in (member, kind) order; at most one per member and kind.
#[derive(Debug, Default, Clone)]
pub(crate) struct Alarms {
    raised: BTreeSet<Alarm>,
}

impl Alarms {
    /// Every raised alarm of `kind` (`None`: of every kind), in member order.
    pub(crate) fn list(&self, kind: Option<AlarmKind>) -> Vec<Alarm> {
        let mut out: Vec<Alarm> = self
            .raised
            .iter()
            .filter(|a| kind.is_none_or(|k| a.kind == k))
            .copied()
            .collect();
        out.sort_by_key(|a| (a.kind, a.member));
        out
    }

    /// Whether an alarm of `kind` is raised by any member.
    pub(crate) fn has(&self, kind: AlarmKind) -> bool {
        self.raised.iter().any(|a| a.kind == kind)
    }

    /// Raises `a`; false if it was raised already.
    pub(crate) fn raise(&mut self, a: Alarm) -> bool {
        self.raised.insert(a)
    }

    /// Disarms `a`; false if it was not raised.
    pub(crate) fn disarm(&mut self, a: Alarm) -> bool {
        self.raised.remove(&a)
    }

    /// Whether a write of `cost` may go ahead with the file at `file_bytes` and its `quota`
    /// (`None`: none, or no file): etcd's order, the raised alarms first, then
    /// `size + cost < quota`.
    pub(crate) fn admit(
        &self,
        cost: Cost,
        file_bytes: u64,
        quota: Option<u64>,
    ) -> Result<(), Refused> {
        if self.has(AlarmKind::Corrupt) {
            return Err(Refused::Corrupt);
        }
        if cost.0 == 0 {
            return Ok(());
        }
        if self.has(AlarmKind::NoSpace) {
            return Err(Refused::NoSpace);
        }
        match quota {
            Some(quota) if file_bytes.saturating_add(cost.0) >= quota => {
                Err(Refused::OverQuota { file_bytes, quota })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOSPACE: Alarm = Alarm {
        member: 7,
        kind: AlarmKind::NoSpace,
    };

    #[test]
    fn e20_a_write_that_reaches_the_quota_is_refused_and_one_that_costs_nothing_passes() {
        let a = Alarms::default();
        let put = Cost::put(b"k", b"v"); // 258
        assert_eq!(a.admit(put, 1000, Some(1259)), Ok(()));
        assert_eq!(
            a.admit(put, 1001, Some(1259)),
            Err(Refused::OverQuota {
                file_bytes: 1001,
                quota: 1259
            })
        );
        assert_eq!(a.admit(Cost::NONE, u64::MAX, Some(1)), Ok(()));
        assert_eq!(a.admit(put, u64::MAX, None), Ok(()));
    }

    #[test]
    fn e20_nospace_refuses_what_costs_and_corrupt_refuses_everything() {
        let mut a = Alarms::default();
        assert!(a.raise(NOSPACE));
        assert!(!a.raise(NOSPACE), "raised once per member and kind");
        assert_eq!(a.admit(Cost::GRANT, 0, None), Err(Refused::NoSpace));
        assert_eq!(a.admit(Cost::NONE, 0, None), Ok(()));
        let corrupt = Alarm {
            member: 1,
            kind: AlarmKind::Corrupt,
        };
        a.raise(corrupt);
        assert_eq!(a.admit(Cost::NONE, 0, None), Err(Refused::Corrupt));
        assert_eq!(a.list(None), vec![NOSPACE, corrupt]);
        assert_eq!(a.list(Some(AlarmKind::Corrupt)), vec![corrupt]);
        assert!(a.disarm(corrupt));
        assert!(!a.disarm(corrupt));
        assert!(a.disarm(NOSPACE));
        assert_eq!(a.admit(Cost::GRANT, 0, None), Ok(()));
    }

    #[test]
    fn etcd_numbers_round_trip() {
        for k in [AlarmKind::NoSpace, AlarmKind::Corrupt] {
            assert_eq!(AlarmKind::from_etcd_number(k.etcd_number()), Some(k));
        }
        assert_eq!(AlarmKind::from_etcd_number(0), None);
        assert_eq!(AlarmKind::from_etcd_number(3), None);
    }
}
