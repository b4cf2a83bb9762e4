//! The typed rows the state machine and the store exchange: ops out of a write
//! ([`StoreOp`]), the image read on open ([`Loaded`]) in. The store alone knows how they are
//! encoded on disk (`store::codec`); the machine alone knows what they mean.

use crate::alarms::Alarm;

/// A key's value and revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Data {
    pub(crate) value: Vec<u8>,
    pub(crate) create: i64,
    pub(crate) mod_revision: i64,
    pub(crate) version: i64,
}

/// One key of the index: a value (or none: a bare name attached to a lease) and its lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) data: Option<Data>,
    /// 0 = no lease.
    pub(crate) lease: i64,
}

/// One row change in the store.
#[derive(Debug, Clone)]
pub(crate) enum StoreOp {
    PutLease {
        id: i64,
        ttl: u64,
        /// Remaining TTL at `wall_ms`; `NO_TIME` = none checkpointed (use the TTL).
        remaining: u64,
        wall_ms: i64,
    },
    DelLease(i64),
    /// A key written at its `mod_revision` (a value: kept in the history too), or a bare name
    /// attached to a lease (no value: the current row only).
    PutKey(Vec<u8>, Entry),
    /// A bare name forgotten (no value, no history).
    DelKey(Vec<u8>),
    /// A key with a value deleted at a revision: the current row goes, the history gets a
    /// tombstone.
    DelKeyAt(Vec<u8>, i64),
    /// A key with a value attached or detached (no revision moves): the current row, and the
    /// history row of its last write (reads at that revision or later see the new lease).
    LeaseKey(Vec<u8>, Entry),
    /// etcd's Compact: the history below this revision may be removed.
    Compact(i64),
    /// An alarm raised (`true`) or disarmed (SPEC E20): kept in the meta table, as etcd keeps
    /// its alarms in its backend.
    Alarm(Alarm, bool),
}

/// A persisted lease row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeaseRow {
    pub(crate) id: i64,
    pub(crate) ttl: u64,
    pub(crate) remaining: u64,
    pub(crate) wall_ms: i64,
}

/// Everything read on open.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) revision: i64,
    /// The last compaction (0: none): the history holds every revision from it on.
    pub(crate) compacted: i64,
    pub(crate) next_id: i64,
    pub(crate) leases: Vec<LeaseRow>,
    pub(crate) keys: Vec<(Vec<u8>, Entry)>,
    /// The raised alarms (SPEC E20).
    pub(crate) alarms: Vec<Alarm>,
}

impl Default for Loaded {
    /// An empty database: revision 0, the first lease ID is 1.
    fn default() -> Loaded {
        Loaded {
            revision: 0,
            compacted: 0,
            next_id: 1,
            leases: Vec::new(),
            keys: Vec::new(),
            alarms: Vec::new(),
        }
    }
}
