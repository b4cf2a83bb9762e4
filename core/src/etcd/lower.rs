//! The embedded [`Txn`] lowered to etcd's request *as a borrowed view*, and each answer raised
//! back to an [`OpResponse`] as it is made. The one apply algorithm (`state/apply.rs`) reads
//! every request through these views: etcd's [`TxnRequest`] as it stands, and the embedded
//! `Txn` without copying it into one (no vectors per txn, BENCHMARKS.md §10).
//!
//! The embedded ops are etcd's, seen from their side: `Op::Get` is a range of one key,
//! `Op::Range` a prefix range (`limit: Some(0)` counts only), `Op::Delete` a delete of one key
//! (that also forgets a bare attached name, L6), `Op::DeletePrefix` a delete of a prefix range.

use crate::etcd::{DeleteRangeRequest, PutRequest, RangeRequest, RequestOp};
use crate::etcd::{ResponseOp, TxnRequest};
use crate::kv::txn::{Compare, Op, OpResponse, Txn};

/// A transaction as the apply algorithm reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TxnRef<'a> {
    /// etcd's request (from `tenure serve`, or nested in one).
    Etcd(&'a TxnRequest),
    /// The embedded `Txn`.
    Embedded(&'a Txn),
}

/// One compare over etcd's `[key, range_end)` (an empty `range_end`: the key alone).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CompareRef<'a> {
    pub(crate) compare: &'a Compare,
    pub(crate) range_end: &'a [u8],
}

impl<'a> TxnRef<'a> {
    /// Whether every compare holds, by `holds`.
    pub(crate) fn all(self, mut holds: impl FnMut(CompareRef<'a>) -> bool) -> bool {
        match self {
            TxnRef::Etcd(t) => t.compare.iter().all(|c| {
                holds(CompareRef {
                    compare: &c.compare,
                    range_end: &c.range_end,
                })
            }),
            TxnRef::Embedded(t) => t.compares.iter().all(|compare| {
                holds(CompareRef {
                    compare,
                    range_end: &[],
                })
            }),
        }
    }

    /// The ops of the branch that runs when the compares held (`ok`) or did not.
    pub(crate) fn branch(self, ok: bool) -> Branch<'a> {
        match (self, ok) {
            (TxnRef::Etcd(t), true) => Branch::Etcd(&t.success),
            (TxnRef::Etcd(t), false) => Branch::Etcd(&t.failure),
            (TxnRef::Embedded(t), true) => Branch::Embedded(&t.success),
            (TxnRef::Embedded(t), false) => Branch::Embedded(&t.failure),
        }
    }
}

/// The ops of one branch (a request on its own is a branch of one op).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Branch<'a> {
    /// etcd's ops.
    Etcd(&'a [RequestOp]),
    /// The embedded ops.
    Embedded(&'a [Op]),
}

impl<'a> Branch<'a> {
    pub(crate) fn len(self) -> usize {
        match self {
            Branch::Etcd(ops) => ops.len(),
            Branch::Embedded(ops) => ops.len(),
        }
    }

    /// The ops, each seen as etcd's.
    pub(crate) fn iter(self) -> Ops<'a> {
        match self {
            Branch::Etcd(ops) => Ops::Etcd(ops.iter()),
            Branch::Embedded(ops) => Ops::Embedded(ops.iter()),
        }
    }
}

/// The iterator of [`Branch::iter`].
pub(crate) enum Ops<'a> {
    Etcd(std::slice::Iter<'a, RequestOp>),
    Embedded(std::slice::Iter<'a, Op>),
}

impl<'a> Iterator for Ops<'a> {
    type Item = OpRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<OpRef<'a>> {
        match self {
            Ops::Etcd(ops) => ops.next().map(OpRef::from),
            Ops::Embedded(ops) => ops.next().map(OpRef::from),
        }
    }
}

/// One op as etcd's, borrowed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum OpRef<'a> {
    /// A read.
    Read(ReadRef<'a>),
    /// etcd's put.
    Put(&'a PutRequest),
    /// The embedded put: etcd's put of `key` with no flags.
    PutKey {
        key: &'a [u8],
        value: &'a [u8],
        /// 0: none.
        lease: i64,
    },
    /// A delete.
    Delete(DeleteRef<'a>),
    /// A nested transaction (etcd's only).
    Txn(&'a TxnRequest),
}

/// A read as etcd's range.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ReadRef<'a> {
    /// etcd's range request.
    Request(&'a RangeRequest),
    /// `Op::Get`: the range of one key.
    Key(&'a [u8]),
    /// `Op::Range`: the keys with a prefix (every key for an empty one), at most `limit`.
    Prefix {
        prefix: &'a [u8],
        limit: Option<usize>,
    },
}

/// A delete as etcd's delete range.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DeleteRef<'a> {
    /// etcd's request.
    Request(&'a DeleteRangeRequest),
    /// `Op::Delete`: one key (its bare attached name too, L6), nothing returned.
    Key(&'a [u8]),
    /// `Op::DeletePrefix`: the keys with a prefix.
    Prefix(&'a [u8]),
}

impl<'a> From<&'a RequestOp> for OpRef<'a> {
    #[inline]
    fn from(op: &'a RequestOp) -> OpRef<'a> {
        match op {
            RequestOp::Range(r) => OpRef::Read(ReadRef::Request(r)),
            RequestOp::Put(p) => OpRef::Put(p),
            RequestOp::DeleteRange(d) => OpRef::Delete(DeleteRef::Request(d)),
            RequestOp::Txn(t) => OpRef::Txn(t),
        }
    }
}

impl<'a> From<&'a Op> for OpRef<'a> {
    #[inline]
    fn from(op: &'a Op) -> OpRef<'a> {
        match op {
            Op::Put { key, value, lease } => OpRef::PutKey {
                key,
                value,
                lease: lease.map_or(0, |l| l.get()),
            },
            Op::Get { key } => OpRef::Read(ReadRef::Key(key)),
            Op::Range { prefix, limit } => OpRef::Read(ReadRef::Prefix {
                prefix,
                limit: *limit,
            }),
            Op::Delete { key } => OpRef::Delete(DeleteRef::Key(key)),
            Op::DeletePrefix { prefix } => OpRef::Delete(DeleteRef::Prefix(prefix)),
        }
    }
}

/// etcd's answer to a lowered `op` in the embedded API's terms; `revision` is the one the
/// transaction writes at (a put's).
#[inline]
pub(crate) fn raise(op: OpRef<'_>, response: ResponseOp, revision: i64) -> OpResponse {
    match (op, response) {
        (OpRef::Read(ReadRef::Key(_)), ResponseOp::Range(mut r)) => OpResponse::Get(r.kvs.pop()),
        (_, ResponseOp::Range(r)) => OpResponse::Range(r.kvs),
        (OpRef::Delete(DeleteRef::Prefix(_)), ResponseOp::DeleteRange { deleted, .. }) => {
            OpResponse::DeletePrefix(u64::try_from(deleted).unwrap_or(0))
        }
        (_, ResponseOp::DeleteRange { deleted, .. }) => OpResponse::Delete(deleted > 0),
        // A put (an embedded txn nests none) is written at the transaction's revision.
        (_, ResponseOp::Put { .. } | ResponseOp::Txn { .. }) => OpResponse::Put { revision },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd::RangeResponse;
    use crate::kv::txn::CompareOp;
    use crate::types::{KeyValue, LeaseId};

    #[test]
    fn every_embedded_op_is_seen_as_its_etcd_request() {
        let t = Txn::new()
            .when([Compare::version("k", CompareOp::Equal, 0)])
            .then([
                Op::put("k", "v", Some(LeaseId::new(7))),
                Op::get("k"),
                Op::range("p/", Some(0)),
            ])
            .otherwise([Op::delete("k"), Op::delete_prefix("p/")]);
        let t = TxnRef::Embedded(&t);
        let mut seen = Vec::new();
        assert!(t.all(|c| {
            seen.push((c.compare.clone(), c.range_end.is_empty()));
            true
        }));
        assert_eq!(
            seen,
            vec![(Compare::version("k", CompareOp::Equal, 0), true)]
        );
        let success: Vec<OpRef> = t.branch(true).iter().collect();
        assert_eq!(t.branch(true).len(), 3);
        assert!(matches!(
            success[0],
            OpRef::PutKey {
                key: b"k",
                value: b"v",
                lease: 7
            }
        ));
        assert!(matches!(success[1], OpRef::Read(ReadRef::Key(b"k"))));
        assert!(matches!(
            success[2],
            OpRef::Read(ReadRef::Prefix {
                prefix: b"p/",
                limit: Some(0)
            })
        ));
        let failure: Vec<OpRef> = t.branch(false).iter().collect();
        assert!(matches!(failure[0], OpRef::Delete(DeleteRef::Key(b"k"))));
        assert!(matches!(
            failure[1],
            OpRef::Delete(DeleteRef::Prefix(b"p/"))
        ));
    }

    #[test]
    fn responses_are_raised_by_the_op_they_answer() {
        let t = Txn::new().otherwise([
            Op::delete("k"),
            Op::delete_prefix("p/"),
            Op::get("k"),
            Op::range("p/", None),
            Op::put("k", "v", None),
        ]);
        let kv = KeyValue {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            create_revision: 1,
            mod_revision: 1,
            version: 1,
            lease: None,
        };
        let answers = [
            ResponseOp::DeleteRange {
                deleted: 1,
                prev_kvs: Vec::new(),
            },
            ResponseOp::DeleteRange {
                deleted: 3,
                prev_kvs: Vec::new(),
            },
            ResponseOp::Range(RangeResponse::default()),
            ResponseOp::Range(RangeResponse {
                kvs: vec![kv.clone()],
                count: 1,
                more: false,
            }),
            ResponseOp::Put { prev_kv: None },
        ];
        let raised: Vec<OpResponse> = TxnRef::Embedded(&t)
            .branch(false)
            .iter()
            .zip(answers)
            .map(|(op, r)| raise(op, r, 9))
            .collect();
        assert_eq!(
            raised,
            vec![
                OpResponse::Delete(true),
                OpResponse::DeletePrefix(3),
                OpResponse::Get(None),
                OpResponse::Range(vec![kv]),
                OpResponse::Put { revision: 9 },
            ]
        );
    }
}
