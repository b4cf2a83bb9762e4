//! The effects of in-memory writes, waiting for their commit: storage operations, watch events
//! and expired-lease notices, all in apply (= revision) order.

use crate::rows::StoreOp;
use crate::types::{Event, ExpiredLease};

/// Effects accumulated under the state lock and handed to the committer as a whole.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Whether storage ops are recorded at all (false in memory).
    pub(crate) persist: bool,
    /// Whether watch events are recorded (false when no watcher and no history is kept).
    pub(crate) record_events: bool,
    pub(crate) ops: Vec<StoreOp>,
    pub(crate) events: Vec<Event>,
    pub(crate) expired: Vec<Vec<ExpiredLease>>,
    /// Leases removed (revoked or expired) by these writes, recorded only while `track_gone`
    /// (someone waits on a lease). Drained by the engine right after each write; not committed.
    pub(crate) gone: Vec<i64>,
    pub(crate) track_gone: bool,
    /// A write attached or detached a key with a value (`StoreOp::LeaseKey`): a past read must
    /// then see the file updated (it moves no revision). Taken by the engine after each write.
    pub(crate) relabeled: bool,
}

impl Batch {
    pub(crate) fn new(persist: bool, record_events: bool) -> Batch {
        Batch {
            persist,
            record_events,
            ..Batch::default()
        }
    }

    #[inline]
    pub(crate) fn op(&mut self, op: impl FnOnce() -> StoreOp) {
        if self.persist {
            self.ops.push(op());
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.events.is_empty() && self.expired.is_empty()
    }

    /// Moves the contents out, keeping this batch's buffers' capacity where it can.
    pub(crate) fn take(&mut self) -> Batch {
        Batch {
            persist: self.persist,
            record_events: self.record_events,
            ops: std::mem::take(&mut self.ops),
            events: std::mem::take(&mut self.events),
            expired: std::mem::take(&mut self.expired),
            gone: Vec::new(),
            track_gone: false,
            relabeled: false,
        }
    }
}
