//! Fault injection (SPEC D6): switches that make writes or fsyncs of the database file or its
//! log fail, the redb backend that obeys them, and the fsync count they keep.

use std::fmt;
use std::ops::Bound;
use std::result::Result as StdResult;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

use crate::metrics::{Histogram, HistogramSnapshot};

/// Switches that make the storage layer fail, for testing SPEC D6. Cloning shares the switches.
/// Each switch covers the database file (redb), its write-ahead log, or both.
#[derive(Clone, Default)]
pub struct StorageFaults {
    inner: Arc<FaultSwitches>,
}

/// Fault targets (bits of the switches).
pub(super) const DB: u8 = 1;
pub(crate) const LOG: u8 = 2;

struct FaultSwitches {
    fail_writes: AtomicU8,
    fail_syncs: AtomicU8,
    /// Syncs that wait (polling) until the switch is off: a disk that stalls, not one that fails.
    stall_syncs: AtomicU8,
    /// fsyncs that reached a file (`Stats::fsyncs`).
    syncs: AtomicU64,
    /// How long they took (`Metrics::fsync_duration`).
    sync_duration: Histogram,
}

impl Default for FaultSwitches {
    fn default() -> FaultSwitches {
        FaultSwitches {
            fail_writes: AtomicU8::new(0),
            fail_syncs: AtomicU8::new(0),
            stall_syncs: AtomicU8::new(0),
            syncs: AtomicU64::new(0),
            sync_duration: Histogram::latency(),
        }
    }
}

impl fmt::Debug for StorageFaults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageFaults")
            .field(
                "fail_writes",
                &self.inner.fail_writes.load(Ordering::SeqCst),
            )
            .field("fail_syncs", &self.inner.fail_syncs.load(Ordering::SeqCst))
            .finish()
    }
}

impl StorageFaults {
    /// No faults armed.
    pub fn new() -> StorageFaults {
        StorageFaults::default()
    }

    fn set(switch: &AtomicU8, target: u8, on: bool) {
        if on {
            switch.fetch_or(target, Ordering::SeqCst);
        } else {
            switch.fetch_and(!target, Ordering::SeqCst);
        }
    }

    /// While on, every write to the database file and its log fails with an I/O error.
    pub fn fail_writes(&self, on: bool) {
        Self::set(&self.inner.fail_writes, DB | LOG, on);
    }

    /// While on, every fsync of the database file and its log fails with an I/O error.
    pub fn fail_syncs(&self, on: bool) {
        Self::set(&self.inner.fail_syncs, DB | LOG, on);
    }

    /// While on, every write to the write-ahead log fails (the database file is spared).
    pub fn fail_log_writes(&self, on: bool) {
        Self::set(&self.inner.fail_writes, LOG, on);
    }

    /// While on, every fsync of the write-ahead log fails (the database file is spared).
    pub fn fail_log_syncs(&self, on: bool) {
        Self::set(&self.inner.fail_syncs, LOG, on);
    }

    /// While on, every write to the database file fails (the log is spared): with a log,
    /// this hits the checkpoints that bring the database file up to date.
    pub fn fail_db_writes(&self, on: bool) {
        Self::set(&self.inner.fail_writes, DB, on);
    }

    /// While on, every fsync of the database file fails (the log is spared).
    pub fn fail_db_syncs(&self, on: bool) {
        Self::set(&self.inner.fail_syncs, DB, on);
    }

    /// While on, every sync of the database file and its log waits until it is turned off (a
    /// stalled disk: commits stop finishing, nothing fails).
    pub fn stall_syncs(&self, on: bool) {
        Self::set(&self.inner.stall_syncs, DB | LOG, on);
    }

    /// Holds a sync of `target` while its stall switch is on. A poll, not a condition variable:
    /// only fault tests turn it on, and it keeps the switches lock-free.
    pub(crate) fn wait_while_stalled(&self, target: u8) {
        while self.inner.stall_syncs.load(Ordering::SeqCst) & target != 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    pub(crate) fn fails_write(&self, target: u8) -> bool {
        self.inner.fail_writes.load(Ordering::SeqCst) & target != 0
    }

    pub(crate) fn fails_sync(&self, target: u8) -> bool {
        self.inner.fail_syncs.load(Ordering::SeqCst) & target != 0
    }

    /// Counts an fsync that began at `started` and has just returned.
    pub(crate) fn count_sync(&self, started: Instant) {
        self.inner.syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync_duration.record_duration(started.elapsed());
    }
}

/// A `FileBackend` with injectable faults.
#[derive(Debug)]
pub(super) struct FaultyBackend {
    pub(super) file: FileBackend,
    pub(super) faults: StorageFaults,
}

pub(crate) fn injected() -> std::io::Error {
    std::io::Error::other("injected storage fault")
}

impl StorageBackend for FaultyBackend {
    fn len(&self) -> std::result::Result<u64, std::io::Error> {
        self.file.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::result::Result<(), std::io::Error> {
        self.file.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::result::Result<(), std::io::Error> {
        if self.faults.fails_write(DB) {
            return Err(injected());
        }
        self.file.set_len(len)
    }
    fn sync_data(&self) -> std::result::Result<(), std::io::Error> {
        self.faults.wait_while_stalled(DB);
        if self.faults.fails_sync(DB) {
            return Err(injected());
        }
        let started = Instant::now();
        self.file.sync_data()?;
        self.faults.count_sync(started);
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::result::Result<(), std::io::Error> {
        if self.faults.fails_write(DB) {
            return Err(injected());
        }
        self.file.write(offset, data)
    }
    fn close(&self) -> std::result::Result<(), std::io::Error> {
        self.file.close()
    }
    fn unlock_range(&self, s: Bound<u64>, e: Bound<u64>) -> std::result::Result<(), BackendError> {
        self.file.unlock_range(s, e)
    }
    delegate_locks!(file);
}

/// Counts the fsyncs of one open store (shared with its backend).
#[derive(Clone, Default)]
pub(crate) struct SyncCounter(pub(super) StorageFaults);

impl SyncCounter {
    pub(crate) fn get(&self) -> u64 {
        self.0.inner.syncs.load(Ordering::Relaxed)
    }

    pub(crate) fn durations(&self) -> HistogramSnapshot {
        self.0.inner.sync_duration.snapshot()
    }
}
