//! The engine's etcd-shaped entry points (SPEC E2): [`Tenure::execute`] for one etcd request,
//! etcd's Compact, and watches over etcd's key ranges. What `tenure serve` calls.

use super::Engine;
use crate::error::{Error, Result};
use crate::etcd::{Outcome, Refusal, RequestOp, ResponseOp, WatchStart};
use crate::kv::range::KeyRange;
use crate::kv::watch::WatchOptions;

impl Engine {
    /// [`Tenure::execute`](crate::Tenure::execute), for this engine.
    pub(crate) fn execute(&self, op: &RequestOp) -> Result<Outcome> {
        if !op.writes() {
            return self.read_durable(|lease_kv| lease_kv.execute_read(op))?;
        }
        let out = self.write_with(|lease_kv, b| lease_kv.execute(op, b))?;
        if let Outcome::Done { response, .. } = &out {
            if !wrote(response) {
                // It only read (a failed compare, an empty delete): what it read must be durable.
                self.read_durable(|_| ())?;
            }
        }
        Ok(out)
    }

    /// [`Tenure::try_execute_read`](crate::Tenure::try_execute_read), for this engine.
    pub(crate) fn try_execute_read(&self, op: &RequestOp) -> Result<Option<Outcome>> {
        if op.writes() {
            return Ok(None);
        }
        self.try_read_durable(|lease_kv| lease_kv.execute_read(op))?
            .transpose()
    }

    /// [`Tenure::compact`](crate::Tenure::compact), for this engine.
    pub(crate) fn compact(&self, revision: i64) -> Result<std::result::Result<i64, Refusal>> {
        self.with_hub(|hub, current| {
            Ok(if revision > current {
                Err(Refusal::FutureRevision)
            } else if revision <= hub.compacted() {
                Err(Refusal::Compacted)
            } else {
                hub.compact(revision);
                Ok(current)
            })
        })
    }

    /// [`Tenure::watch_range`](crate::Tenure::watch_range), for this engine.
    pub(crate) fn watch_range(
        &self,
        key: impl AsRef<[u8]>,
        range_end: impl AsRef<[u8]>,
        opts: WatchOptions,
    ) -> Result<WatchStart> {
        let range = KeyRange::new(key.as_ref(), range_end.as_ref());
        self.with_hub(|hub, current| match hub.register(range, &opts, current) {
            Ok(w) => Ok(WatchStart::Started(w)),
            Err(Error::Compacted { .. }) => Ok(WatchStart::Compacted(hub.floor(current))),
            Err(e) => Err(e),
        })
    }
}

fn wrote(r: &ResponseOp) -> bool {
    match r {
        ResponseOp::Range(_) => false,
        ResponseOp::Put { .. } => true,
        ResponseOp::DeleteRange { deleted, .. } => *deleted > 0,
        ResponseOp::Txn { responses, .. } => responses.iter().any(wrote),
    }
}
