//! `--max-snapshots` and `--max-snapshot-disk-bytes` (SPEC E16): each Snapshot stream holds a
//! full copy of the database on disk until its client has read it, so the streams in progress
//! are bounded in number and in the disk their copies hold. Over either bound a new Snapshot is
//! refused at once (`ResourceExhausted`); the ones in progress are not touched.

use std::sync::{Arc, Mutex};

use tenure::etcd::errors::EtcdError;

/// The default of `--max-snapshots`.
pub(crate) const DEFAULT_MAX_SNAPSHOTS: u32 = 4;
/// The default of `--max-snapshot-disk-bytes`: 8 GiB.
pub(crate) const DEFAULT_MAX_SNAPSHOT_DISK_BYTES: u64 = 8 << 30;

/// What the streams in progress hold.
#[derive(Debug, Default)]
struct Held {
    streams: u32,
    bytes: u64,
}

/// The bounds and what the streams in progress hold of them.
#[derive(Debug)]
pub(crate) struct SnapshotBudget {
    max_streams: u32,
    max_bytes: u64,
    /// Taken for a few additions only, never across I/O.
    held: Mutex<Held>,
}

/// One stream's share of the budget, given back when dropped (the stream ended, however).
#[derive(Debug)]
pub(crate) struct Share {
    budget: Arc<SnapshotBudget>,
    bytes: u64,
}

impl SnapshotBudget {
    pub(crate) fn new(max_streams: u32, max_bytes: u64) -> Arc<SnapshotBudget> {
        Arc::new(SnapshotBudget {
            max_streams,
            max_bytes,
            held: Mutex::new(Held::default()),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A share for a new stream whose copy should take about `estimate` bytes (the database's
    /// size), or the refusal when a bound would be passed.
    pub(crate) fn begin(self: &Arc<Self>, estimate: u64) -> Result<Share, EtcdError> {
        let mut held = self.held();
        if held.streams >= self.max_streams {
            return Err(EtcdError::TooManySnapshots);
        }
        if held.bytes.saturating_add(estimate) > self.max_bytes {
            return Err(EtcdError::SnapshotDiskFull);
        }
        held.streams += 1;
        held.bytes += estimate;
        Ok(Share {
            budget: self.clone(),
            bytes: estimate,
        })
    }

    /// Streams and bytes held now.
    #[cfg(test)]
    fn in_use(&self) -> (u32, u64) {
        let h = self.held();
        (h.streams, h.bytes)
    }
}

impl Share {
    /// Replaces the estimate by the copy's real size; refused (and the share kept as it was)
    /// when that passes the disk bound.
    pub(crate) fn settle(&mut self, bytes: u64) -> Result<(), EtcdError> {
        let mut held = self.budget.held();
        let others = held.bytes - self.bytes;
        if others.saturating_add(bytes) > self.budget.max_bytes {
            return Err(EtcdError::SnapshotDiskFull);
        }
        held.bytes = others + bytes;
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.budget.held();
        held.streams -= 1;
        held.bytes -= self.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e16_streams_past_max_snapshots_are_refused_until_one_ends() {
        let b = SnapshotBudget::new(2, 1000);
        let one = b.begin(10).unwrap();
        let _two = b.begin(10).unwrap();
        assert_eq!(b.begin(10).unwrap_err(), EtcdError::TooManySnapshots);
        drop(one);
        assert_eq!(b.in_use(), (1, 10));
        let _three = b.begin(10).unwrap();
        assert_eq!(b.in_use(), (2, 20));
    }

    #[test]
    fn e16_copies_past_the_disk_bound_are_refused() {
        let b = SnapshotBudget::new(10, 100);
        let mut one = b.begin(60).unwrap();
        assert_eq!(b.begin(41).unwrap_err(), EtcdError::SnapshotDiskFull);
        let mut two = b.begin(40).unwrap();
        // The copy came out larger than estimated: refused, nothing changed.
        assert_eq!(two.settle(41).unwrap_err(), EtcdError::SnapshotDiskFull);
        assert_eq!(b.in_use(), (2, 100));
        one.settle(30).unwrap();
        two.settle(70).unwrap();
        assert_eq!(b.in_use(), (2, 100));
        drop(one);
        drop(two);
        assert_eq!(b.in_use(), (0, 0));
    }
}
