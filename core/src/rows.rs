//! The typed rows the state machine and the store exchange: ops out of a write
//! ([`StoreOp`]), the image read on open ([`Loaded`]) in. The store alone knows how they are
//! encoded on disk (`store::codec`); the machine alone knows what they mean.

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
    PutKey(Vec<u8>, Entry),
    DelKey(Vec<u8>),
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
    pub(crate) next_id: i64,
    pub(crate) leases: Vec<LeaseRow>,
    pub(crate) keys: Vec<(Vec<u8>, Entry)>,
}

impl Default for Loaded {
    /// An empty database: revision 0, the first lease ID is 1.
    fn default() -> Loaded {
        Loaded {
            revision: 0,
            next_id: 1,
            leases: Vec::new(),
            keys: Vec::new(),
        }
    }
}
