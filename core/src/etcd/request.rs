//! etcd's request and response vocabulary (SPEC E2): Put, DeleteRange and Txn with etcd's
//! options (prev_kv, ignore_value, ignore_lease, key ranges, compares over ranges, nested txns),
//! and what the engine answers. `tenure serve` maps etcd's KV service to these, and the embedded
//! [`Txn`](crate::Txn) is lowered to them: one apply algorithm serves both.

use crate::kv::range::{RangeRequest, RangeResponse};
use crate::kv::txn::Compare;
use crate::kv::watch::Watcher;
use crate::types::KeyValue;

/// An etcd `PutRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PutRequest {
    /// The key (non-empty).
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// The lease to attach to (0 = none: detaches).
    pub lease: i64,
    /// Return the previous key-value.
    pub prev_kv: bool,
    /// Keep the current value (the key must exist).
    pub ignore_value: bool,
    /// Keep the current lease (the key must exist).
    pub ignore_lease: bool,
}

/// An etcd `DeleteRangeRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct DeleteRangeRequest {
    /// The first key.
    pub key: Vec<u8>,
    /// etcd's `range_end` (see [`RangeRequest::range_end`]).
    pub range_end: Vec<u8>,
    /// Return the deleted key-values.
    pub prev_kv: bool,
}

/// A compare over every key of `[key, range_end)` (all must hold; an empty range compares as a
/// missing key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RangeCompare {
    /// The compare, on its first key.
    pub compare: Compare,
    /// etcd's `range_end` (empty: the key alone).
    pub range_end: Vec<u8>,
}

/// An etcd `TxnRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TxnRequest {
    /// Conditions, all of which must hold.
    pub compare: Vec<RangeCompare>,
    /// Operations when they hold.
    pub success: Vec<RequestOp>,
    /// Operations otherwise.
    pub failure: Vec<RequestOp>,
}

impl crate::limits::TxnShape for TxnRequest {
    fn level_ops(&self) -> usize {
        self.compare
            .len()
            .max(self.success.len())
            .max(self.failure.len())
    }

    fn nested(&self) -> impl Iterator<Item = &TxnRequest> {
        self.success
            .iter()
            .chain(&self.failure)
            .filter_map(|op| match op {
                RequestOp::Txn(t) => Some(t),
                _ => None,
            })
    }
}

/// One operation of a [`TxnRequest`], or a request on its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RequestOp {
    /// A read.
    Range(RangeRequest),
    /// A put.
    Put(PutRequest),
    /// A delete over a range.
    DeleteRange(DeleteRangeRequest),
    /// A nested transaction.
    Txn(TxnRequest),
}

/// What one [`RequestOp`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseOp {
    /// A read.
    Range(RangeResponse),
    /// A put, with the previous key-value if asked for.
    Put {
        /// The key-value before the put.
        prev_kv: Option<KeyValue>,
    },
    /// A delete.
    DeleteRange {
        /// How many keys were deleted.
        deleted: i64,
        /// The deleted key-values if asked for.
        prev_kvs: Vec<KeyValue>,
    },
    /// A nested transaction.
    Txn {
        /// Whether its compares held.
        succeeded: bool,
        /// One response per operation of the branch that ran.
        responses: Vec<ResponseOp>,
    },
}

/// Why etcd would refuse a request although nothing is wrong with the engine: these map to
/// etcd's own error codes and texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// `ignore_value` / `ignore_lease` on a key that does not exist.
    KeyNotFound,
    /// A read at a revision above the current one.
    FutureRevision,
    /// A read at a revision below the current one (no older state is kept).
    Compacted,
    /// Two puts of one key, or a put and a delete of one key, in one transaction branch.
    DuplicateKey,
}

/// The outcome of [`Tenure::execute`](crate::Tenure::execute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Applied (and durable, for a write): the store revision after it, and its response.
    Done {
        /// The revision after the request (the one it wrote, if it wrote).
        revision: i64,
        /// What it did.
        response: ResponseOp,
    },
    /// Refused; nothing changed.
    Refused(Refusal),
}

impl RequestOp {
    /// Whether the request may write (reads go through the read path).
    pub fn writes(&self) -> bool {
        match self {
            RequestOp::Range(_) => false,
            RequestOp::Put(_) | RequestOp::DeleteRange(_) => true,
            RequestOp::Txn(t) => t.success.iter().chain(&t.failure).any(RequestOp::writes),
        }
    }

    /// A small read (SPEC E2b): its answer is bounded (one key, or a limit of at most
    /// [`SMALL_RANGE_LIMIT`](crate::limits::SMALL_RANGE_LIMIT); a txn of such reads, itself
    /// bounded by the op budget). Cheap enough to answer inline, under the state lock.
    pub fn is_small_read(&self) -> bool {
        match self {
            RequestOp::Range(r) => {
                r.range_end.is_empty() || (1..=crate::limits::SMALL_RANGE_LIMIT).contains(&r.limit)
            }
            RequestOp::Txn(t) => t.success.iter().chain(&t.failure).all(Self::is_small_read),
            RequestOp::Put(_) | RequestOp::DeleteRange(_) => false,
        }
    }

    /// Whether its work under the engine's lock is bounded (SPEC E22): a put, a delete of one
    /// key, a small read (E2b), or a txn of these (itself bounded by the op budget, E2a). Such
    /// a request may be applied on an async worker (`Tenure::execute_applied`, feature `serve`).
    pub fn is_bounded(&self) -> bool {
        match self {
            RequestOp::Range(_) => self.is_small_read(),
            RequestOp::Put(_) => true,
            RequestOp::DeleteRange(d) => d.range_end.is_empty(),
            RequestOp::Txn(t) => t.success.iter().chain(&t.failure).all(Self::is_bounded),
        }
    }
}

/// Where a [`Tenure::watch_range`](crate::Tenure::watch_range) starts.
#[derive(Debug)]
pub enum WatchStart {
    /// Registered: events after the engine's current revision, or from the start revision.
    Started(Watcher),
    /// The start revision is older than the retained history; the oldest revision a watch
    /// can start from is given (etcd's `compact_revision`).
    Compacted(i64),
}
