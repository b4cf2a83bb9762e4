//! Between etcd-client's types and tenure's.

use std::time::Duration;

use etcd_client as etcd;

use crate::error::Result;
use crate::kv::txn::{Compare, CompareOp, CompareTarget, Op, OpResponse};
use crate::types::{Event, EventKind, KeyValue, LeaseId};

pub(super) fn kv(k: &etcd::KeyValue) -> KeyValue {
    KeyValue {
        key: k.key().to_vec(),
        value: k.value().to_vec(),
        create_revision: k.create_revision(),
        mod_revision: k.mod_revision(),
        version: k.version(),
        lease: (k.lease() != 0).then(|| LeaseId::new(k.lease())),
    }
}

pub(super) fn secs(ttl: i64) -> Duration {
    Duration::from_secs(ttl.max(0) as u64)
}

/// A TTL in etcd's whole seconds, rounded up.
pub(super) fn ttl_secs(ttl: Duration) -> Result<i64> {
    crate::limits::check_ttl(ttl)?;
    Ok(ttl.as_secs() as i64 + i64::from(ttl.subsec_nanos() > 0))
}

pub(super) fn compare(c: &Compare) -> etcd::Compare {
    let op = match c.op {
        CompareOp::Equal => etcd::CompareOp::Equal,
        CompareOp::NotEqual => etcd::CompareOp::NotEqual,
        CompareOp::Less => etcd::CompareOp::Less,
        CompareOp::Greater => etcd::CompareOp::Greater,
    };
    let key = c.key.clone();
    match &c.target {
        CompareTarget::Value(v) => etcd::Compare::value(key, op, v.clone()),
        CompareTarget::Version(v) => etcd::Compare::version(key, op, *v),
        CompareTarget::CreateRevision(r) => etcd::Compare::create_revision(key, op, *r),
        CompareTarget::ModRevision(r) => etcd::Compare::mod_revision(key, op, *r),
        CompareTarget::Lease(l) => etcd::Compare::lease(key, op, *l),
    }
}

pub(super) fn txn_op(op: &Op) -> etcd::TxnOp {
    match op {
        Op::Put { key, value, lease } => {
            let opts = lease.map(|l| etcd::PutOptions::new().with_lease(l.get()));
            etcd::TxnOp::put(key.clone(), value.clone(), opts)
        }
        Op::Get { key } => etcd::TxnOp::get(key.clone(), None),
        Op::Delete { key } => etcd::TxnOp::delete(key.clone(), None),
        Op::DeletePrefix { prefix } => etcd::TxnOp::delete(
            prefix.clone(),
            Some(etcd::DeleteOptions::new().with_prefix()),
        ),
        Op::Range { prefix, limit } => {
            let mut o = etcd::GetOptions::new().with_prefix();
            if let Some(n) = limit {
                o = o.with_limit(i64::try_from(*n).unwrap_or(i64::MAX));
            }
            etcd::TxnOp::get(prefix.clone(), Some(o))
        }
    }
}

pub(super) fn op_response(op: &Op, r: &etcd::TxnOpResponse, revision: i64) -> OpResponse {
    match (op, r) {
        (Op::Get { .. }, etcd::TxnOpResponse::Get(g)) => OpResponse::Get(g.kvs().first().map(kv)),
        // etcd reads limit 0 as "no limit"; tenure's limit 0 is no key.
        (Op::Range { limit: Some(0), .. }, etcd::TxnOpResponse::Get(_)) => {
            OpResponse::Range(Vec::new())
        }
        (Op::Range { .. }, etcd::TxnOpResponse::Get(g)) => {
            OpResponse::Range(g.kvs().iter().map(kv).collect())
        }
        (Op::Delete { .. }, etcd::TxnOpResponse::Delete(d)) => OpResponse::Delete(d.deleted() > 0),
        (Op::DeletePrefix { .. }, etcd::TxnOpResponse::Delete(d)) => {
            OpResponse::DeletePrefix(d.deleted().max(0) as u64)
        }
        _ => OpResponse::Put { revision },
    }
}

pub(super) fn event(e: &etcd::Event) -> Option<Event> {
    let kind = match e.event_type() {
        etcd::EventType::Put => EventKind::Put,
        etcd::EventType::Delete => EventKind::Delete,
    };
    Some(Event {
        kind,
        kv: kv(e.kv()?),
        prev_kv: e.prev_kv().map(kv),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_round_up_to_whole_seconds_and_back_never_below_zero() {
        assert_eq!(ttl_secs(Duration::from_millis(1)).unwrap(), 1);
        assert_eq!(ttl_secs(Duration::from_secs(10)).unwrap(), 10);
        assert_eq!(ttl_secs(Duration::from_millis(10_001)).unwrap(), 11);
        assert!(
            ttl_secs(Duration::ZERO).is_err(),
            "L2 holds over connect too"
        );
        assert_eq!(secs(-1), Duration::ZERO);
        assert_eq!(secs(3), Duration::from_secs(3));
    }
}
