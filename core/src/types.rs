//! Plain data types of the public API.

use std::fmt;
use std::time::Duration;

/// A lease ID: a positive 64-bit integer. `0` means "no lease" in the C and Python bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseId(i64);

impl LeaseId {
    /// Wraps a raw ID. Validity (> 0) is checked where an ID is used, not here.
    pub const fn new(id: i64) -> LeaseId {
        LeaseId(id)
    }

    /// The raw ID.
    pub const fn get(self) -> i64 {
        self.0
    }
}

impl From<i64> for LeaseId {
    fn from(id: i64) -> LeaseId {
        LeaseId(id)
    }
}

impl From<LeaseId> for i64 {
    fn from(id: LeaseId) -> i64 {
        id.0
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// When a write is acknowledged (SPEC D1–D3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// A call returns after its commit is fsynced; concurrent callers share commits. The default.
    #[default]
    Immediate,
    /// A call returns after the in-memory apply; a commit starts at least every interval. A
    /// crash never leaves a torn state and loses at most the last interval plus the commit in
    /// progress (two commits if commits take longer than the interval; SPEC D3).
    Buffered(Duration),
}

/// How much history a file-backed engine keeps on its own (SPEC K12): etcd's
/// `--auto-compaction-mode` and `--auto-compaction-retention`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoCompaction {
    /// Never compacts by itself: the history grows until [`compact`](crate::Tenure::compact).
    Off,
    /// Keeps the last this many revisions (etcd's `revision` mode), checked every second.
    Revisions(u64),
    /// Keeps the revisions of the last this long (etcd's `periodic` mode), sampled every tenth
    /// of it (at least every second, at most every hour).
    Periodic(Duration),
}

impl AutoCompaction {
    /// The default: the last [`DEFAULT_RETAINED_REVISIONS`](Self::DEFAULT_RETAINED_REVISIONS)
    /// revisions, so the file does not grow with history.
    pub const DEFAULT: AutoCompaction = AutoCompaction::Revisions(Self::DEFAULT_RETAINED_REVISIONS);
    /// Revisions kept by default.
    pub const DEFAULT_RETAINED_REVISIONS: u64 = 100_000;
}

impl Default for AutoCompaction {
    fn default() -> AutoCompaction {
        AutoCompaction::DEFAULT
    }
}

/// How deadlines are rebuilt on open (SPEC L13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recovery {
    /// Remaining TTL = last persisted remaining time minus the wall-clock time since it was
    /// persisted (a backward step counts as zero). The default.
    #[default]
    Wall,
    /// etcd's model: every lease restarts from its checkpointed remaining TTL, else its full
    /// TTL, plus this extension.
    Extend(Duration),
}

/// A lease as seen by [`Tenure::time_to_live`](crate::Tenure::time_to_live) and
/// [`Tenure::leases`](crate::Tenure::leases).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The lease.
    pub id: LeaseId,
    /// The granted TTL (after `min_ttl`).
    pub ttl: Duration,
    /// Time left until the deadline; `None` on a standby, where leases have no deadline.
    pub remaining: Option<Duration>,
    /// The attached keys, in key order.
    pub keys: Vec<Vec<u8>>,
}

/// A lease whose deadline passed, as delivered on [`Tenure::expired`](crate::Tenure::expired).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredLease {
    /// The lease.
    pub id: LeaseId,
    /// Its granted TTL.
    pub ttl: Duration,
    /// With auto revoke: the keys that were deleted with it. With manual revoke: the keys
    /// attached now, which a revoke would delete.
    pub keys: Vec<Vec<u8>>,
}

/// A key with its value and revisions (SPEC K2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// The revision of the put that created the key (kept across overwrites).
    pub create_revision: i64,
    /// The revision of the last write to the key.
    pub mod_revision: i64,
    /// Number of puts since creation: 1 after the first.
    pub version: i64,
    /// The lease the key is attached to.
    pub lease: Option<LeaseId>,
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The key was created or overwritten.
    Put,
    /// The key was deleted (explicitly, by a txn, or with its lease).
    Delete,
}

/// One change seen by a [`Watcher`](crate::Watcher) (SPEC K6).
///
/// For a delete, `kv` carries the key and the deleting revision in `mod_revision`, with an empty
/// value and zero create revision and version, as etcd reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// The key-value after the change.
    pub kv: KeyValue,
    /// The key-value before the change, when the watch asked for it and the key existed.
    pub prev_kv: Option<KeyValue>,
}

impl Event {
    /// The revision of the write that made this event.
    pub fn revision(&self) -> i64 {
        self.kv.mod_revision
    }
}

/// Counters and gauges of an engine (SPEC L15).
///
/// `repr(C)`: it is also the C API's `tenure_stats` (one field list for both), so fields are
/// only ever appended, never reordered or removed.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Leases granted since open.
    pub granted: u64,
    /// Leases revoked by a call since open.
    pub revoked: u64,
    /// Successful renews since open.
    pub renewed: u64,
    /// Leases that reached their deadline since open (revoked by the engine, or delivered for a
    /// manual revoke; a redelivery is not counted again).
    pub expired: u64,
    /// Live leases now.
    pub leases: u64,
    /// Live keys now.
    pub keys: u64,
    /// The current store revision.
    pub revision: i64,
    /// Storage commits since open.
    pub commits: u64,
    /// Storage fsyncs since open.
    pub fsyncs: u64,
    /// Expired-lease batches dropped because no one drained the expired-lease queue (it was full).
    pub expired_dropped: u64,
    /// Watchers currently registered.
    pub watchers: u64,
    /// Whether this handle drives the engine itself: true for an embedded engine (and the
    /// owner in shared mode, SPEC P), false over `connect` and in a shared-mode process that
    /// does not own the file.
    pub owner: bool,
}

/// What [`Tenure::snapshot`](crate::Tenure::snapshot) wrote (SPEC D8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SnapshotInfo {
    /// The store revision the copy holds: every write up to it, none after.
    pub revision: i64,
    /// The copy's size in bytes.
    pub bytes: u64,
    /// Keys in the copy.
    pub keys: u64,
    /// Leases in the copy.
    pub leases: u64,
}

/// How far a snapshot is: rows (keys and leases) copied out of `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SnapshotProgress {
    /// Rows copied so far.
    pub done: u64,
    /// Rows the snapshot copies in all.
    pub total: u64,
}

/// Checksums of a database's logical contents at one revision (SPEC D9): equal for equal
/// contents, whatever the file's layout, and stable across restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ContentHash {
    /// The store revision hashed.
    pub revision: i64,
    /// CRC-32C of every key with a value: key, value, create and mod revision, version, lease.
    pub kv: u32,
    /// CRC-32C of `kv`'s fields for every key (bare lease attachments too), every lease (ID and
    /// granted TTL), the revision and the next lease ID.
    pub all: u32,
}

/// The database file's size and how much of it holds live data (SPEC D10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StorageSize {
    /// The file's length in bytes.
    pub file_bytes: u64,
    /// Bytes in pages the database uses; the rest is free space a
    /// [`defragment`](crate::Tenure::defragment) gives back.
    pub in_use_bytes: u64,
}

/// What a database file holds, read in place without writing it
/// ([`Tenure::read_file`](crate::Tenure::read_file)): offline inspection (SPEC E10).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileContents {
    /// The store revision.
    pub revision: i64,
    /// Every lease, by ID; `remaining` is the remaining TTL persisted with it (as of its last
    /// checkpoint, else its TTL): nothing counts down in a file no engine has open.
    pub leases: Vec<LeaseInfo>,
    /// Every live key, in key order.
    pub keys: Vec<KeyValue>,
}

impl FileContents {
    /// The counts a [`Stats`] reports (the engine's counters are 0).
    pub fn stats(&self) -> Stats {
        Stats {
            revision: self.revision,
            keys: self.keys.len() as u64,
            leases: self.leases.len() as u64,
            ..Stats::default()
        }
    }
}
