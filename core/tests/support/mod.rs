//! Helpers shared by the test binaries: engines on a `ManualClock`, bounded waits for what
//! other threads do, and a backend that offers the recipes only the seam.
// Each test binary uses a different subset.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use tenure::sync::{sort_and_bound, Backend, RangeOptions};
use tenure::{
    Clock, KeepAlive, KeyValue, LeaseId, LeaseInfo, ManualClock, Result, Stop, Tenure, Txn,
    TxnResponse, WatchOptions, Watcher,
};

/// How long a test waits for another thread before failing.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// An in-memory engine on a manual clock.
pub(crate) fn manual() -> (Arc<ManualClock>, Tenure) {
    let clock = ManualClock::new();
    let db = Tenure::builder().clock(clock.clone()).open().unwrap();
    (clock, db)
}

/// Waits until `cond` holds (it is changed by another thread), failing after `WAIT`.
pub(crate) fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::yield_now();
    }
}

/// A receive that fails the test after `WAIT` instead of hanging it.
pub(crate) fn recv<T>(rx: &Receiver<T>) -> T {
    rx.recv_timeout(WAIT).expect("nothing received in time")
}

/// The engine seen through the recipes' seam alone: every required method forwards to the
/// engine's public API, none of the fast paths (lease loss, demotion) is offered. What an
/// etcd connection gives the recipes.
#[derive(Debug, Clone)]
pub(crate) struct SeamOnly(pub Tenure);

impl Backend for SeamOnly {
    fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        self.0.txn(txn)
    }
    fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        self.0.get(key)
    }
    fn range(&self, prefix: &[u8], opts: RangeOptions) -> Result<Vec<KeyValue>> {
        let mut kvs = self.0.range(prefix, None)?;
        sort_and_bound(&mut kvs, opts);
        Ok(kvs)
    }
    fn grant(&self, ttl: Duration) -> Result<LeaseId> {
        self.0.grant(ttl)
    }
    fn revoke(&self, id: LeaseId) -> Result<()> {
        self.0.revoke(id)
    }
    fn renew(&self, id: LeaseId) -> Result<Duration> {
        self.0.renew(id)
    }
    fn time_to_live(&self, id: LeaseId) -> Result<LeaseInfo> {
        self.0.time_to_live(id)
    }
    fn keep_alive(
        &self,
        id: LeaseId,
        interval: Option<Duration>,
        lost: &Stop,
    ) -> Result<KeepAlive> {
        Backend::keep_alive(&self.0, id, interval, lost)
    }
    fn watch(&self, key: &[u8], opts: WatchOptions) -> Result<Watcher> {
        self.0.watch(key, opts)
    }
    fn clock(&self) -> Arc<dyn Clock> {
        Backend::clock(&self.0)
    }
    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}
