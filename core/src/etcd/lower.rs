//! The embedded [`Txn`] lowered to etcd's [`TxnRequest`], and etcd's answer raised back to a
//! [`TxnResponse`]: the embedded API's face over the one apply algorithm (`LeaseKv::txn`).

use std::ops::Bound;

use crate::etcd::{DeleteRangeRequest, PutRequest, RangeCompare, RangeRequest, RequestOp};
use crate::etcd::{ResponseOp, TxnRequest};
use crate::kv::index::prefix_end;
use crate::kv::txn::{Op, OpResponse, Txn, TxnResponse};

/// etcd's `[key, range_end)` for every key starting with `prefix`: `"\0"` ends a range at no
/// key, and `["\0", "\0")` is every key (no key is empty).
fn prefix_range(prefix: Vec<u8>) -> (Vec<u8>, Vec<u8>) {
    match prefix_end(&prefix) {
        Bound::Excluded(end) => (prefix, end),
        _ if prefix.is_empty() => (vec![0], vec![0]),
        _ => (prefix, vec![0]),
    }
}

fn lower_op(op: Op) -> RequestOp {
    match op {
        Op::Put { key, value, lease } => RequestOp::Put(PutRequest {
            key,
            value,
            lease: lease.map_or(0, |l| l.get()),
            ..PutRequest::default()
        }),
        Op::Get { key } => RequestOp::Range(RangeRequest {
            key,
            ..RangeRequest::default()
        }),
        Op::Delete { key } => RequestOp::DeleteRange(DeleteRangeRequest {
            key,
            range_end: Vec::new(),
            prev_kv: false,
        }),
        Op::DeletePrefix { prefix } => {
            let (key, range_end) = prefix_range(prefix);
            RequestOp::DeleteRange(DeleteRangeRequest {
                key,
                range_end,
                prev_kv: false,
            })
        }
        Op::Range { prefix, limit } => {
            let (key, range_end) = prefix_range(prefix);
            RequestOp::Range(RangeRequest {
                key,
                range_end,
                // etcd's limit 0 is "no limit"; tenure's is no key, which only counting gives.
                limit: limit.unwrap_or(0),
                count_only: limit == Some(0),
                ..RangeRequest::default()
            })
        }
    }
}

impl Txn {
    /// The same transaction as etcd's request (its keys and values moved, not copied).
    pub(crate) fn lower(self) -> TxnRequest {
        TxnRequest {
            compare: self
                .compares
                .into_iter()
                .map(|compare| RangeCompare {
                    compare,
                    range_end: Vec::new(),
                })
                .collect(),
            success: self.success.into_iter().map(lower_op).collect(),
            failure: self.failure.into_iter().map(lower_op).collect(),
        }
    }
}

/// The answer to a lowered `req`, in the embedded API's terms: the branch that ran (`succeeded`)
/// gives one response per op; `revision` is the store's after the transaction.
pub(crate) fn raise(
    req: &TxnRequest,
    succeeded: bool,
    revision: i64,
    responses: Vec<ResponseOp>,
) -> TxnResponse {
    let branch = if succeeded {
        &req.success
    } else {
        &req.failure
    };
    // A lowered op names one key when its range end is empty (get, delete), else a prefix.
    let one_key = |op: &RequestOp| match op {
        RequestOp::Range(r) => r.range_end.is_empty(),
        RequestOp::DeleteRange(d) => d.range_end.is_empty(),
        RequestOp::Put(_) | RequestOp::Txn(_) => true,
    };
    let responses = branch
        .iter()
        .zip(responses)
        .map(|(op, r)| match r {
            ResponseOp::Range(r) if one_key(op) => OpResponse::Get(r.kvs.into_iter().next()),
            ResponseOp::Range(r) => OpResponse::Range(r.kvs),
            ResponseOp::DeleteRange { deleted, .. } if one_key(op) => {
                OpResponse::Delete(deleted > 0)
            }
            ResponseOp::DeleteRange { deleted, .. } => {
                OpResponse::DeletePrefix(u64::try_from(deleted).unwrap_or(0))
            }
            // A put (a lowered txn nests none) is written at the transaction's revision.
            ResponseOp::Put { .. } | ResponseOp::Txn { .. } => OpResponse::Put { revision },
        })
        .collect();
    TxnResponse {
        succeeded,
        revision,
        responses,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::txn::{Compare, CompareOp};
    use crate::types::LeaseId;

    #[test]
    fn prefixes_become_etcds_ranges() {
        assert_eq!(
            prefix_range(b"a/".to_vec()),
            (b"a/".to_vec(), b"a0".to_vec())
        );
        assert_eq!(
            prefix_range(b"a\xff".to_vec()),
            (b"a\xff".to_vec(), b"b".to_vec())
        );
        assert_eq!(prefix_range(b"\xff".to_vec()), (b"\xff".to_vec(), vec![0]));
        assert_eq!(prefix_range(Vec::new()), (vec![0], vec![0]));
    }

    #[test]
    fn every_op_is_lowered_to_its_etcd_request() {
        let t = Txn::new()
            .when([Compare::version("k", CompareOp::Equal, 0)])
            .then([
                Op::put("k", "v", Some(LeaseId::new(7))),
                Op::get("k"),
                Op::range("p/", Some(0)),
            ])
            .otherwise([Op::delete("k"), Op::delete_prefix("p/")]);
        let req = t.lower();
        assert_eq!(
            req.compare[0].compare,
            Compare::version("k", CompareOp::Equal, 0)
        );
        assert!(req.compare[0].range_end.is_empty());
        assert!(matches!(&req.success[0], RequestOp::Put(p) if p.lease == 7 && p.value == b"v"));
        assert!(matches!(&req.success[1], RequestOp::Range(r) if r.range_end.is_empty()));
        assert!(
            matches!(&req.success[2], RequestOp::Range(r) if r.count_only && r.range_end == b"p0")
        );
        assert!(matches!(&req.failure[0], RequestOp::DeleteRange(d) if d.range_end.is_empty()));
        assert!(matches!(&req.failure[1], RequestOp::DeleteRange(d) if d.range_end == b"p0"));
    }

    #[test]
    fn responses_are_raised_by_the_op_they_answer() {
        let req = Txn::new()
            .otherwise([Op::delete("k"), Op::delete_prefix("p/"), Op::get("k")])
            .lower();
        let r = raise(
            &req,
            false,
            9,
            vec![
                ResponseOp::DeleteRange {
                    deleted: 1,
                    prev_kvs: Vec::new(),
                },
                ResponseOp::DeleteRange {
                    deleted: 3,
                    prev_kvs: Vec::new(),
                },
                ResponseOp::Range(Default::default()),
            ],
        );
        assert_eq!(
            r,
            TxnResponse {
                succeeded: false,
                revision: 9,
                responses: vec![
                    OpResponse::Delete(true),
                    OpResponse::DeletePrefix(3),
                    OpResponse::Get(None)
                ],
            }
        );
    }
}
