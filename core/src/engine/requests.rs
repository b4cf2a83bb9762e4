//! The engine's etcd-shaped entry points (SPEC E2): [`Tenure::execute`] for one etcd request,
//! etcd's Compact, and watches over etcd's key ranges. What `tenure serve` calls.

use super::Engine;
use crate::error::{Error, Result};
use crate::etcd::errors::EtcdError;
use crate::etcd::{Outcome, Refusal, RequestOp, ResponseOp, WatchStart};
use crate::kv::range::{KeyRange, RangeRequest, RangeResponse};
use crate::kv::watch::WatchOptions;
use crate::types::KeyValue;

impl Engine {
    /// [`Tenure::execute`](crate::Tenure::execute), for this engine.
    pub(crate) fn execute(&self, op: &RequestOp) -> Result<Outcome> {
        if let RequestOp::Range(r) = op {
            if r.revision != 0 {
                return self.range_request(r);
            }
        }
        if !op.writes() {
            return self.read_durable(|m| m.execute_read(op))?;
        }
        let out = self.write_with(|m, b| m.execute(op, b))?;
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
        if op.writes() || matches!(op, RequestOp::Range(r) if r.revision != 0) {
            return Ok(None);
        }
        self.try_read_durable(|m| m.execute_read(op))?.transpose()
    }

    /// One etcd range at its revision: the present from memory, a past revision from the store.
    fn range_request(&self, r: &RangeRequest) -> Result<Outcome> {
        let (current, compacted) = self.read_durable(|m| (m.kv.revision, m.kv.compacted))?;
        if r.revision > current {
            return Ok(Outcome::Refused(Refusal::FutureRevision));
        }
        if r.revision < compacted {
            return Ok(Outcome::Refused(Refusal::Compacted));
        }
        if !r.is_past(current) {
            return self.read_durable(|m| m.execute_read(&RequestOp::Range(r.clone())))?;
        }
        let response = self.read_past(r)?;
        Ok(Outcome::Done {
            revision: current,
            response: ResponseOp::Range(response),
        })
    }

    /// A range at a past revision, read from the store's history.
    fn read_past(&self, r: &RangeRequest) -> Result<RangeResponse> {
        let _ = r;
        Err(refused(Refusal::Compacted, self.compacted_revision()?))
    }

    /// [`Tenure::get_at`](crate::Tenure::get_at), for this engine.
    pub(crate) fn get_at(&self, key: &[u8], revision: i64) -> Result<Option<KeyValue>> {
        crate::limits::check_key(key)?;
        let r = RangeRequest {
            revision,
            ..RangeRequest::new(key, b"")
        };
        Ok(self.range_at_request(&r)?.kvs.into_iter().next())
    }

    /// [`Tenure::range_at`](crate::Tenure::range_at), for this engine.
    pub(crate) fn range_at(
        &self,
        prefix: &[u8],
        limit: Option<usize>,
        revision: i64,
    ) -> Result<Vec<KeyValue>> {
        if limit == Some(0) {
            return Ok(Vec::new());
        }
        let r = RangeRequest {
            revision,
            limit: limit.unwrap_or(0),
            ..RangeRequest::prefix(prefix)
        };
        Ok(self.range_at_request(&r)?.kvs)
    }

    fn range_at_request(&self, r: &RangeRequest) -> Result<RangeResponse> {
        match self.range_request(r)? {
            Outcome::Done {
                response: ResponseOp::Range(out),
                ..
            } => Ok(out),
            Outcome::Refused(why) => Err(refused(why, self.compacted_revision()?)),
            other => Err(Error::storage(format!(
                "internal: a range was answered {other:?}"
            ))),
        }
    }

    /// [`Tenure::compacted_revision`](crate::Tenure::compacted_revision), for this engine.
    pub(crate) fn compacted_revision(&self) -> Result<i64> {
        self.read_durable(|m| m.kv.compacted)
    }

    /// [`Tenure::compact`](crate::Tenure::compact), for this engine.
    pub(crate) fn compact(&self, revision: i64) -> Result<std::result::Result<i64, Refusal>> {
        let done = self.write_with(|m, b| Ok(m.compact(revision, b)))?;
        if done.is_ok() {
            // The watch history keeps `revision` itself: a watch may start there (etcd).
            self.with_hub(|hub, _| {
                hub.compact(revision - 1);
                Ok(())
            })?;
        }
        Ok(done)
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

/// The error of a refused read at a revision (`compacted`: the first revision still kept).
fn refused(why: Refusal, compacted: i64) -> Error {
    match why {
        Refusal::Compacted => Error::Compacted {
            revision: compacted,
            reason: EtcdError::Compacted.text().to_owned(),
        },
        other => EtcdError::of_refusal(other).error(None),
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
