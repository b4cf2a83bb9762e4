//! The seam the recipes run over: only what etcd's `concurrency` package uses of its client
//! (txn with compares on revisions, range with create-revision order and bound, get, watch,
//! grant/revoke/renew/keep-alive/time-to-live). The embedded engine implements it; so can an
//! etcd connection. What the embedded engine does better enters through the same trait as an
//! optional fast path (`lease_lost`, `demotion`); without it the recipes still work, only
//! slower to notice a lost lease.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::handle::{Backend as Drives, Tenure};
use crate::keepalive::KeepAlive;
use crate::kv::txn::{Txn, TxnResponse};
use crate::kv::watch::{WatchOptions, Watcher};
use crate::types::{KeyValue, LeaseId, LeaseInfo};
use crate::wait::Stop;

// The read the recipes make is the key layer's (the etcd client speaks it too).
pub use crate::kv::range::{sort_and_bound, CreateOrder, RangeOptions};

/// What the coordination recipes need from a store of leases and keys. See the module docs.
///
/// Implementations are cheap handles (`Clone`); the recipes keep them in an `Arc<dyn Backend>`.
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// A compare-and-swap transaction.
    fn txn(&self, txn: Txn) -> Result<TxnResponse>;
    /// One key.
    fn get(&self, key: &[u8]) -> Result<Option<KeyValue>>;
    /// Keys under `prefix`, ordered and bounded by `opts`.
    fn range(&self, prefix: &[u8], opts: RangeOptions) -> Result<Vec<KeyValue>>;
    /// Like [`range`](Backend::range), as the store was at `revision`; `Ok(None)` where the
    /// backend keeps no history (the default), or none back to `revision` any more.
    fn range_at(
        &self,
        prefix: &[u8],
        opts: RangeOptions,
        revision: i64,
    ) -> Result<Option<Vec<KeyValue>>> {
        let _ = (prefix, opts, revision);
        Ok(None)
    }
    /// A new lease; its TTL may be raised to the backend's minimum.
    fn grant(&self, ttl: Duration) -> Result<LeaseId>;
    /// Revokes a lease and deletes its keys.
    fn revoke(&self, id: LeaseId) -> Result<()>;
    /// Renews a lease once; returns its TTL.
    fn renew(&self, id: LeaseId) -> Result<Duration>;
    /// A lease's TTL, remaining time and keys; `LeaseNotFound` once it is gone.
    fn time_to_live(&self, id: LeaseId) -> Result<LeaseInfo>;
    /// Renews `id` in the background (default interval: a third of its TTL). When a renew finds
    /// the lease gone (or the backend closed), `lost` is raised.
    fn keep_alive(&self, id: LeaseId, interval: Option<Duration>, lost: &Stop)
        -> Result<KeepAlive>;
    /// Watches a key (or a prefix, per `opts`).
    fn watch(&self, key: &[u8], opts: WatchOptions) -> Result<Watcher>;
    /// The time source keep-alives and the leader elector sleep on.
    fn clock(&self) -> Arc<dyn Clock>;
    /// Whether the backend has been closed (a lost lease is then reported as `Closed`).
    fn is_closed(&self) -> bool;
    /// The `Closed` error of this backend, naming it (the embedded engine: its database).
    fn closed_error(&self) -> Error {
        Error::Closed("the backend".into())
    }

    /// Fast path: raise `lost` as soon as lease `id` is removed (revoked, expired, closed).
    /// `None`: not supported, the keep-alive alone notices. `Some(Err(LeaseNotFound))` if it
    /// is already gone.
    fn lease_lost(&self, _id: LeaseId, _lost: &Stop) -> Option<Result<()>> {
        None
    }

    /// Fast path: a receiver that disconnects at the next demotion of this engine, so waits
    /// end with `NotPrimary` (SPEC L9). `None`: the backend has no demotion.
    fn demotion(&self) -> Option<Receiver<()>> {
        None
    }

    /// Whether a call may wait on the network (then a [`WaitPool`](crate::WaitPool) polls the
    /// recipes' waits on threads of their own). Only a backend that knows it answers from
    /// memory or a local file says `false`.
    fn over_network(&self) -> bool {
        true
    }

    /// A session of this process started (`live`) or closed on lease `id`: in shared mode the
    /// process that takes the file over after this one revokes the leases recorded (SPEC P6).
    /// The default records nothing.
    fn session_lease(&self, _id: LeaseId, _live: bool) {}
}

impl Backend for Tenure {
    fn session_lease(&self, id: LeaseId, live: bool) {
        Tenure::session_lease(self, id, live);
    }

    fn over_network(&self) -> bool {
        match self.backend() {
            Drives::Engine(_) => false,
            #[cfg(feature = "remote")]
            Drives::Etcd(_) => true,
        }
    }

    fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        Tenure::txn(self, txn)
    }

    fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        Tenure::get(self, key)
    }

    fn range(&self, prefix: &[u8], opts: RangeOptions) -> Result<Vec<KeyValue>> {
        match self.backend() {
            Drives::Engine(e) => {
                let mut kvs = e.range(prefix, None)?;
                sort_and_bound(&mut kvs, opts);
                Ok(kvs)
            }
            #[cfg(feature = "remote")]
            Drives::Etcd(r) => r.range(prefix, None, Some(opts)),
        }
    }

    fn range_at(
        &self,
        prefix: &[u8],
        opts: RangeOptions,
        revision: i64,
    ) -> Result<Option<Vec<KeyValue>>> {
        match Tenure::range_at(self, prefix, None, revision) {
            Ok(mut kvs) => {
                sort_and_bound(&mut kvs, opts);
                Ok(Some(kvs))
            }
            Err(Error::Compacted { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn grant(&self, ttl: Duration) -> Result<LeaseId> {
        Tenure::grant(self, ttl)
    }

    fn revoke(&self, id: LeaseId) -> Result<()> {
        Tenure::revoke(self, id)
    }

    fn renew(&self, id: LeaseId) -> Result<Duration> {
        Tenure::renew(self, id)
    }

    fn time_to_live(&self, id: LeaseId) -> Result<LeaseInfo> {
        Tenure::time_to_live(self, id)
    }

    fn keep_alive(
        &self,
        id: LeaseId,
        interval: Option<Duration>,
        lost: &Stop,
    ) -> Result<KeepAlive> {
        Tenure::keep_alive_reporting(self, id, interval, Some(lost.clone()))
    }

    fn watch(&self, key: &[u8], opts: WatchOptions) -> Result<Watcher> {
        Tenure::watch(self, key, opts)
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Tenure::clock(self)
    }

    fn is_closed(&self) -> bool {
        Tenure::is_closed(self)
    }

    fn closed_error(&self) -> Error {
        Tenure::closed_error(self)
    }

    fn lease_lost(&self, id: LeaseId, lost: &Stop) -> Option<Result<()>> {
        match self.backend() {
            Drives::Engine(e) => Some(e.lease_gone(id, lost)),
            #[cfg(feature = "remote")]
            Drives::Etcd(_) => None,
        }
    }

    fn demotion(&self) -> Option<Receiver<()>> {
        match self.backend() {
            Drives::Engine(e) => Some(e.demotion()),
            #[cfg(feature = "remote")]
            Drives::Etcd(_) => None,
        }
    }
}
