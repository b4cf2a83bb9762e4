//! The engine's etcd-shaped entry points (SPEC E2): [`Tenure::execute`] for one etcd request,
//! etcd's Compact, and watches over etcd's key ranges. What `tenure serve` calls.

use crate::error::{Error, Result};
use crate::etcd::{Outcome, Refusal, RequestOp, ResponseOp, WatchStart};
use crate::kv::range::KeyRange;
use crate::kv::watch::WatchOptions;
use crate::Tenure;

impl Tenure {
    /// Runs one etcd-shaped request (SPEC E2): a read returns only durable state (E8), a write
    /// returns once durable, like every write.
    pub fn execute(&self, op: &RequestOp) -> Result<Outcome> {
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

    /// A read-only request answered at once if everything it could see is durable; `Ok(None)`
    /// if it would have to wait for a commit, or if the request may write (then use
    /// [`execute`](Self::execute)).
    pub fn try_execute_read(&self, op: &RequestOp) -> Result<Option<Outcome>> {
        if op.writes() {
            return Ok(None);
        }
        self.try_read_durable(|m| m.execute_read(op))?.transpose()
    }

    /// etcd's Compact: drops the watch history up to `revision`. `Ok(Err(..))` for a revision
    /// above the current one or at or below an earlier compaction.
    /// Over `connect` it is the server's Compact.
    pub fn compact(&self, revision: i64) -> Result<std::result::Result<i64, Refusal>> {
        #[cfg(feature = "remote")]
        if let Some(r) = self.remote() {
            return r.compact(revision);
        }
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

    /// Watches the keys of `[key, range_end)` with etcd's conventions for `range_end`
    /// (`opts.prefix` is ignored).
    pub fn watch_range(
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
