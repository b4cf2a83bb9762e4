//! The space quota and the alarms at the engine's door (SPEC E20): what a write costs, the
//! refusal, and NOSPACE raised (kept in the file, committed with the refusal) when a write
//! would take the file to its quota, as etcd's quota and capped applier do.

use std::sync::atomic::Ordering;

use super::Shared;
use crate::alarms::{Alarm, AlarmKind, Cost, Refused};
use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::etcd::errors::EtcdError;
use crate::etcd::{RequestOp, TxnRequest};
use crate::kv::txn::{Op, Txn};
use crate::state::LeaseKv;

/// Lets a write of `cost` go ahead, or refuses it: a CORRUPT alarm refuses every write, a
/// NOSPACE alarm those that cost something, and a write that would take the file to its quota
/// is refused and raises NOSPACE (appended to `b`: the engine commits it with nothing else).
pub(super) fn admit(s: &Shared, lease_kv: &mut LeaseKv, b: &mut Batch, cost: Cost) -> Result<()> {
    // In memory there is no file to fill.
    let quota = s.cfg.quota.filter(|_| s.cfg.persist);
    let file_bytes = s.file_bytes.load(Ordering::Relaxed);
    match lease_kv.alarms.admit(cost, file_bytes, quota) {
        Ok(()) => Ok(()),
        // etcd answers every write with "corrupt cluster" until the alarm is disarmed.
        Err(Refused::Corrupt) => Err(Error::Unavailable(
            EtcdError::CorruptCluster.text().to_owned(),
        )),
        Err(Refused::NoSpace) => Err(Error::QuotaExceeded(
            "a NOSPACE alarm is raised: compact, defragment and disarm it to write again".into(),
        )),
        Err(Refused::OverQuota { file_bytes, quota }) => {
            let alarm = Alarm {
                member: s.cfg.member,
                kind: AlarmKind::NoSpace,
            };
            lease_kv.set_alarm(alarm, true, b);
            Err(Error::QuotaExceeded(format!(
                "the file holds {file_bytes} bytes and a write of about {} more would reach \
                 its quota of {quota}; a NOSPACE alarm is raised: compact, defragment and \
                 disarm it to write again",
                cost.0
            )))
        }
    }
}

/// What an etcd request costs (etcd's `Cost`: a put its key, value and overhead; a txn its
/// costlier branch). Unlike etcd 3.4, the puts of a nested txn count too: a NOSPACE alarm
/// would otherwise let them through.
pub(super) fn of_request(op: &RequestOp) -> Cost {
    match op {
        RequestOp::Put(p) => Cost::put(&p.key, &p.value),
        RequestOp::Txn(t) => of_txn_request(t),
        RequestOp::Range(_) | RequestOp::DeleteRange(_) => Cost::NONE,
    }
}

fn of_txn_request(t: &TxnRequest) -> Cost {
    let branch = |ops: &[RequestOp]| ops.iter().map(|op| of_request(op).0).sum::<u64>();
    Cost(branch(&t.success).max(branch(&t.failure)))
}

/// What an embedded txn costs: its costlier branch's puts.
pub(super) fn of_txn(t: &Txn) -> Cost {
    let branch = |ops: &[Op]| {
        ops.iter()
            .map(|op| match op {
                Op::Put { key, value, .. } => Cost::put(key, value).0,
                _ => 0,
            })
            .sum::<u64>()
    };
    Cost(branch(&t.success).max(branch(&t.failure)))
}

/// What attaching or detaching `keys` costs: over etcd each is a put that keeps the value.
pub(super) fn of_relabel<K: AsRef<[u8]>>(keys: &[K]) -> Cost {
    Cost(keys.iter().map(|k| Cost::put(k.as_ref(), b"").0).sum())
}

/// Reads the file's length into `Shared::file_bytes` after redb changed it: what the quota
/// judges (etcd: the backend's size), kept in an atomic so a write never stats the file.
pub(super) fn note_file_bytes(s: &Shared) {
    if let Some(path) = &s.path {
        if let Ok(m) = std::fs::metadata(path) {
            s.file_bytes.store(m.len(), Ordering::Relaxed);
        }
    }
}
