//! Between etcd's protobuf messages and tenure's requests (`crate::etcd`). Errors are mapped by
//! `errors` (the core's one table).

use etcd_client::proto::{
    PbCompare, PbDeleteRequest, PbDeleteResponse, PbKeyValue, PbPutRequest, PbPutResponse,
    PbRangeRequest, PbRangeResponse, PbResponseHeader, PbResponseOp, PbTargetUnion, PbTxnOpRequest,
    PbTxnOpResponse, PbTxnRequest, PbTxnResponse,
};
use tonic::Status;

use super::errors::{self, etcd};
use crate::etcd::errors::EtcdError;
use crate::etcd::{
    DeleteRangeRequest, PutRequest, RangeCompare, RangeRequest, RangeResponse, RequestOp,
    ResponseOp, SortOrder, SortTarget, TxnRequest,
};
use crate::kv::txn::Compare;
use crate::kv::txn::CompareOp;
use crate::kv::txn::CompareTarget;
use crate::limits::{check_key, MAX_TXN_OPS};
use crate::types::KeyValue;

/// Cluster and member identity, stable for one database file.
#[derive(Debug, Clone, Copy)]
pub struct Ids {
    /// The cluster ID every response header carries.
    pub cluster: u64,
    /// This member's ID (the only member).
    pub member: u64,
}

impl Ids {
    /// Derived from the file's canonical path (FNV-1a), so a restart keeps them.
    pub fn for_path(path: &std::path::Path) -> Ids {
        let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in canon.as_os_str().as_encoded_bytes() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        // Never 0: etcd clients treat 0 as "unknown".
        Ids {
            cluster: h | 1,
            member: h.rotate_left(32) | 1,
        }
    }

    /// The response header at `revision`.
    pub fn header(&self, revision: i64) -> Option<PbResponseHeader> {
        Some(PbResponseHeader {
            cluster_id: self.cluster,
            member_id: self.member,
            revision,
            raft_term: 1,
        })
    }
}

pub(crate) fn kv(kv: KeyValue) -> PbKeyValue {
    PbKeyValue {
        key: kv.key,
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
        value: kv.value,
        lease: kv.lease.map_or(0, |l| l.get()),
    }
}

pub(crate) fn range_request(r: PbRangeRequest) -> Result<RangeRequest, Status> {
    check_key(&r.key).map_err(errors::status)?;
    let sort_order = match r.sort_order {
        0 => SortOrder::None,
        1 => SortOrder::Ascend,
        2 => SortOrder::Descend,
        _ => return Err(etcd(EtcdError::InvalidSortOption)),
    };
    let sort_target = match r.sort_target {
        0 => SortTarget::Key,
        1 => SortTarget::Version,
        2 => SortTarget::Create,
        3 => SortTarget::Mod,
        4 => SortTarget::Value,
        _ => return Err(etcd(EtcdError::InvalidSortOption)),
    };
    Ok(RangeRequest {
        key: r.key,
        range_end: r.range_end,
        limit: usize::try_from(r.limit).unwrap_or(0),
        revision: r.revision.max(0),
        sort_order,
        sort_target,
        keys_only: r.keys_only,
        count_only: r.count_only,
        min_mod_revision: r.min_mod_revision,
        max_mod_revision: r.max_mod_revision,
        min_create_revision: r.min_create_revision,
        max_create_revision: r.max_create_revision,
    })
}

pub(crate) fn put_request(p: PbPutRequest) -> Result<PutRequest, Status> {
    check_key(&p.key).map_err(errors::status)?;
    if p.ignore_value && !p.value.is_empty() {
        return Err(etcd(EtcdError::ValueProvided));
    }
    if p.ignore_lease && p.lease != 0 {
        return Err(etcd(EtcdError::LeaseProvided));
    }
    Ok(PutRequest {
        key: p.key,
        value: p.value,
        lease: p.lease,
        prev_kv: p.prev_kv,
        ignore_value: p.ignore_value,
        ignore_lease: p.ignore_lease,
    })
}

pub(crate) fn delete_request(d: PbDeleteRequest) -> Result<DeleteRangeRequest, Status> {
    check_key(&d.key).map_err(errors::status)?;
    Ok(DeleteRangeRequest {
        key: d.key,
        range_end: d.range_end,
        prev_kv: d.prev_kv,
    })
}

fn compare(c: PbCompare) -> Result<RangeCompare, Status> {
    check_key(&c.key).map_err(errors::status)?;
    let op = match c.result {
        0 => CompareOp::Equal,
        1 => CompareOp::Greater,
        2 => CompareOp::Less,
        3 => CompareOp::NotEqual,
        n => {
            return Err(Status::invalid_argument(format!(
                "etcdserver: unknown compare result {n}"
            )))
        }
    };
    let u = c.target_union;
    let num = |f: fn(&PbTargetUnion) -> Option<i64>| u.as_ref().and_then(f).unwrap_or(0);
    let target = match c.target {
        0 => CompareTarget::Version(num(|u| match u {
            PbTargetUnion::Version(v) => Some(*v),
            _ => None,
        })),
        1 => CompareTarget::CreateRevision(num(|u| match u {
            PbTargetUnion::CreateRevision(v) => Some(*v),
            _ => None,
        })),
        2 => CompareTarget::ModRevision(num(|u| match u {
            PbTargetUnion::ModRevision(v) => Some(*v),
            _ => None,
        })),
        3 => CompareTarget::Value(match &u {
            Some(PbTargetUnion::Value(v)) => v.clone(),
            _ => Vec::new(),
        }),
        4 => CompareTarget::Lease(num(|u| match u {
            PbTargetUnion::Lease(v) => Some(*v),
            _ => None,
        })),
        n => {
            return Err(Status::invalid_argument(format!(
                "etcdserver: unknown compare target {n}"
            )))
        }
    };
    Ok(RangeCompare {
        compare: Compare {
            key: c.key,
            op,
            target,
        },
        range_end: c.range_end,
    })
}

/// Converts a txn, refusing early a level over `MAX_TXN_OPS` compares or ops per branch; the
/// budget shared down the nesting is the engine's check (`limits::check_txn_ops`, SPEC E2a).
pub(crate) fn txn_request(t: PbTxnRequest) -> Result<TxnRequest, Status> {
    if t.compare.len() > MAX_TXN_OPS
        || t.success.len() > MAX_TXN_OPS
        || t.failure.len() > MAX_TXN_OPS
    {
        return Err(etcd(EtcdError::TooManyOps));
    }
    let ops = |ops: Vec<etcd_client::proto::PbTxnRequestOp>| -> Result<Vec<RequestOp>, Status> {
        ops.into_iter()
            .map(|op| match op.request {
                Some(PbTxnOpRequest::RequestRange(r)) => Ok(RequestOp::Range(range_request(r)?)),
                Some(PbTxnOpRequest::RequestPut(p)) => Ok(RequestOp::Put(put_request(p)?)),
                Some(PbTxnOpRequest::RequestDeleteRange(d)) => {
                    Ok(RequestOp::DeleteRange(delete_request(d)?))
                }
                Some(PbTxnOpRequest::RequestTxn(t)) => Ok(RequestOp::Txn(txn_request(t)?)),
                None => Err(Status::invalid_argument("etcdserver: empty request in txn")),
            })
            .collect()
    };
    Ok(TxnRequest {
        compare: t
            .compare
            .into_iter()
            .map(compare)
            .collect::<Result<_, _>>()?,
        success: ops(t.success)?,
        failure: ops(t.failure)?,
    })
}

pub(crate) fn range_response(ids: &Ids, revision: i64, r: RangeResponse) -> PbRangeResponse {
    PbRangeResponse {
        header: ids.header(revision),
        kvs: r.kvs.into_iter().map(kv).collect(),
        more: r.more,
        count: r.count,
    }
}

pub(crate) fn put_response(ids: &Ids, revision: i64, prev_kv: Option<KeyValue>) -> PbPutResponse {
    PbPutResponse {
        header: ids.header(revision),
        prev_kv: prev_kv.map(kv),
    }
}

pub(crate) fn delete_response(
    ids: &Ids,
    revision: i64,
    deleted: i64,
    prev_kvs: Vec<KeyValue>,
) -> PbDeleteResponse {
    PbDeleteResponse {
        header: ids.header(revision),
        deleted,
        prev_kvs: prev_kvs.into_iter().map(kv).collect(),
    }
}

pub(crate) fn txn_response(
    ids: &Ids,
    revision: i64,
    succeeded: bool,
    responses: Vec<ResponseOp>,
) -> PbTxnResponse {
    PbTxnResponse {
        header: ids.header(revision),
        succeeded,
        responses: responses
            .into_iter()
            .map(|r| PbResponseOp {
                response: Some(match r {
                    ResponseOp::Range(r) => {
                        PbTxnOpResponse::ResponseRange(range_response(ids, revision, r))
                    }
                    ResponseOp::Put { prev_kv } => {
                        PbTxnOpResponse::ResponsePut(put_response(ids, revision, prev_kv))
                    }
                    ResponseOp::DeleteRange { deleted, prev_kvs } => {
                        PbTxnOpResponse::ResponseDeleteRange(delete_response(
                            ids, revision, deleted, prev_kvs,
                        ))
                    }
                    ResponseOp::Txn {
                        succeeded,
                        responses,
                    } => PbTxnOpResponse::ResponseTxn(txn_response(
                        ids, revision, succeeded, responses,
                    )),
                }),
            })
            .collect(),
    }
}
