//! `tenure.open()` and `tenure.Tenure`, the engine handle.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use tenure::etcd::errors::refused_at;
use tenure::{Builder, Credentials, Durability, LeaseId, Recovery, Tenure, Txn, WatchOptions};

use crate::alarms::PyAlarm;
use crate::clock::PyManualClock;
use crate::convert::{
    bytes_arg, keys_arg, limit_arg, opt_int_arg, opt_secs_arg, revision_arg, seconds, secs_arg,
    timeout, ttl,
};
use crate::errors::{blocking, err, invalid};
use crate::handle::PyTenure;
use crate::iter::{PyExpiredIter, PyWatcher};
use crate::lease::PyLease;
use crate::lease::{lease_arg, opt_lease_arg};
use crate::repr::Repr;
use crate::runtime::ForkSafe;
use crate::txn::{PyCompare, PyOp};
use crate::types::{PyKeyValue, PyLeaseInfo, PySnapshotInfo, PyStorageSize, PyTxnResponse};

fn durability_arg(durability: &str, flush_interval: f64) -> PyResult<Durability> {
    match durability {
        "immediate" => Ok(Durability::Immediate),
        "buffered" => Ok(Durability::Buffered(seconds(
            flush_interval,
            "flush_interval",
        )?)),
        other => Err(invalid(format!(
            "durability must be \"immediate\" or \"buffered\", not {other:?}"
        ))),
    }
}

fn recovery_arg(recovery: &str, extend: f64) -> PyResult<Recovery> {
    let extend = seconds(extend, "extend")?;
    match recovery {
        "wall" => Ok(Recovery::Wall),
        "extend" => Ok(Recovery::Extend(extend)),
        other => Err(invalid(format!(
            "recovery must be \"wall\" or \"extend\", not {other:?}"
        ))),
    }
}

/// Opens (or creates) a database; `path=None` keeps everything in memory.
///
/// Options: `durability` "immediate" (fsync before every write returns) or "buffered"
/// (committed at least every `flush_interval` seconds); `recovery` "wall" or "extend" (every
/// lease restarts from its checkpointed remaining TTL plus `extend` seconds); `min_ttl`,
/// `checkpoint_interval`, `expired_retry_interval` in seconds; `primary`; `auto_revoke`;
/// `clock`, a `tenure.ManualClock` for tests; `quota_backend_bytes`, the file's space quota
/// (SPEC E20: a write that would reach it raises `tenure.QuotaExceeded` and a NOSPACE alarm;
/// `None`, the default: no quota); `member_id`, the member the engine's own alarms are raised
/// as. Every interval and `extend` is at most `tenure.MAX_DURATION` seconds.
///
/// `shared=True`: any number of processes of this user open the same file so and see one
/// database (no server to run). The first one owns the file (the engine runs in it) and serves
/// the others over a unix socket beside it; when the owner closes or dies another takes over
/// and every process reconnects by itself. `stats()["owner"]` says whether this process owns
/// the file; in one that does not, engine-only calls (`expired()`, `promote()`, `demote()`,
/// `checkpoint()`) raise `tenure.Unsupported` naming the call.
///
/// Raises `tenure.AlreadyOpen` if the file is open already without `shared=True` (here, in
/// another process or in `tenure serve`; the message names both ways to share it),
/// `tenure.Corrupt` for a damaged file (never written), `tenure.StorageError` (an `OSError`) if
/// it cannot be read or created, `tenure.InvalidArgument` for a bad option (`shared=True`
/// without a path).
#[pyfunction]
///
/// The interval defaults are the core's (`tenure.DEFAULT_FLUSH_INTERVAL`,
/// `DEFAULT_CHECKPOINT_INTERVAL`, `DEFAULT_EXPIRED_RETRY_INTERVAL`).
#[pyo3(signature = (
    path=None, *, durability="immediate",
    flush_interval=Builder::DEFAULT_FLUSH_INTERVAL.as_secs_f64(), recovery="wall", extend=0.0,
    min_ttl=0.0, checkpoint_interval=Builder::DEFAULT_CHECKPOINT_INTERVAL.as_secs_f64(),
    primary=true, auto_revoke=true,
    expired_retry_interval=Builder::DEFAULT_EXPIRED_RETRY_INTERVAL.as_secs_f64(), clock=None,
    shared=false, quota_backend_bytes=None, member_id=0
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn open(
    py: Python<'_>,
    path: Option<PathBuf>,
    durability: &str,
    #[pyo3(from_py_with = secs_arg)] flush_interval: f64,
    recovery: &str,
    #[pyo3(from_py_with = secs_arg)] extend: f64,
    #[pyo3(from_py_with = secs_arg)] min_ttl: f64,
    #[pyo3(from_py_with = secs_arg)] checkpoint_interval: f64,
    primary: bool,
    auto_revoke: bool,
    #[pyo3(from_py_with = secs_arg)] expired_retry_interval: f64,
    clock: Option<PyRef<'_, PyManualClock>>,
    shared: bool,
    quota_backend_bytes: Option<u64>,
    member_id: u64,
) -> PyResult<Py<PyTenure>> {
    let min_ttl = seconds(min_ttl, "min_ttl")?;
    let mut b = Tenure::builder()
        .durability(durability_arg(durability, flush_interval)?)
        .recovery(recovery_arg(recovery, extend)?)
        .min_ttl(min_ttl)
        .checkpoint_interval(seconds(checkpoint_interval, "checkpoint_interval")?)
        .expired_retry_interval(seconds(expired_retry_interval, "expired_retry_interval")?)
        .primary(primary)
        .auto_revoke(auto_revoke)
        .shared(shared)
        .quota_backend_bytes(quota_backend_bytes)
        .member_id(member_id);
    if let Some(p) = &path {
        b = b.path(p);
    }
    if let Some(c) = &clock {
        b = b.clock(c.inner.clone());
    }
    let engine = blocking(py, move || b.open())?;
    let file = path.as_ref().and_then(|p| std::fs::canonicalize(p).ok());
    let db = Py::new(
        py,
        PyTenure {
            engine: ForkSafe::new(engine),
            path,
            file,
        },
    )?;
    crate::hooks::track(py, db.bind(py))?;
    Ok(db)
}

/// Connects to an etcd v3 server (`tenure serve` or etcd) at `url` (`http://HOST:PORT` or
/// `https://HOST:PORT`, several comma-separated): the same `Tenure` API; engine-only calls raise
/// `Unsupported`, network failures `Unavailable`, a refused TLS connection or login
/// `Unauthenticated`. `timeout`: the deadline of every call, in seconds. `ca`: PEM file of the
/// CA the server's certificate must chain to (default: the system's roots); `cert` and `key`:
/// the client certificate (mutual TLS); `server_name`: the name the server's certificate must
/// carry; `user` and `password`: etcd's auth (the token is renewed when it expires).
#[pyfunction]
#[pyo3(signature = (
    url, *, timeout=5.0, ca=None, cert=None, key=None, server_name=None, user=None, password=None
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn connect(
    py: Python<'_>,
    url: &str,
    #[pyo3(from_py_with = secs_arg)] timeout: f64,
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    server_name: Option<String>,
    user: Option<String>,
    password: Option<String>,
) -> PyResult<Py<PyTenure>> {
    let b = tenure::ConnectOptions::new()
        .endpoints([url])
        .request_timeout(seconds(timeout, "timeout")?)
        .credentials(Credentials {
            ca_file: ca,
            cert_file: cert,
            key_file: key,
            server_name,
            user,
            password,
        });
    let engine = blocking(py, move || b.connect())?;
    let db = Py::new(
        py,
        PyTenure {
            engine: ForkSafe::new(engine),
            path: None,
            file: None,
        },
    )?;
    crate::hooks::track(py, db.bind(py))?;
    Ok(db)
}

impl PyTenure {
    /// `op` (attach, detach) on a lease and one key or an iterable of keys, without the GIL.
    fn on_keys(
        &self,
        py: Python<'_>,
        lease: &Bound<'_, PyAny>,
        keys: &Bound<'_, PyAny>,
        op: impl FnOnce(&Tenure, i64, &[Vec<u8>]) -> tenure::Result<()> + Send,
    ) -> PyResult<()> {
        let id = lease_arg(lease)?;
        let keys = keys_arg(keys)?;
        let e = self.engine()?;
        blocking(py, || op(e, id, &keys))
    }
}

#[pymethods]
impl PyTenure {
    // ---- leases -------------------------------------------------------------------------------

    /// Grants a lease of `ttl` seconds (a float; raised to the engine's `min_ttl`), with a
    /// fresh ID or the given `id`; returns the `Lease`. Raises `tenure.InvalidArgument` for a
    /// TTL that is not positive and finite, `tenure.LeaseTtlTooLarge` above the maximum,
    /// `tenure.LeaseExists` if `id` is taken, `tenure.NotPrimary` on a standby. Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    #[pyo3(signature = (ttl=10.0, id=None))]
    fn grant(
        slf: &Bound<'_, Self>,
        #[pyo3(from_py_with = secs_arg)] ttl: f64,
        id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyLease> {
        let py = slf.py();
        let this = slf.get();
        let ttl = self::ttl(ttl)?;
        let id = id.filter(|i| !i.is_none()).map(lease_arg).transpose()?;
        let e = this.engine()?;
        let granted = blocking(py, || e.grant_lease(id.map(LeaseId::new), ttl))?;
        Ok(PyLease {
            id: granted.id.get(),
            ttl: granted.ttl,
            db: slf.clone().unbind(),
        })
    }

    /// Revokes a lease and deletes its keys in one durable write. Raises
    /// `tenure.LeaseNotFound` if there is no such lease. Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    fn revoke(&self, py: Python<'_>, lease: &Bound<'_, PyAny>) -> PyResult<()> {
        self.revoke_id(py, lease_arg(lease)?)
    }

    /// Renews a lease (deadline = now + TTL); returns its TTL in seconds. Raises
    /// `tenure.LeaseNotFound` if it is gone (expired or revoked), `tenure.NotPrimary` on a
    /// standby.
    fn renew(&self, py: Python<'_>, lease: &Bound<'_, PyAny>) -> PyResult<f64> {
        self.renew_id(py, lease_arg(lease)?)
    }

    /// A lease's TTL, remaining time (seconds) and attached keys. Raises
    /// `tenure.LeaseNotFound` if there is no such lease.
    fn time_to_live(&self, py: Python<'_>, lease: &Bound<'_, PyAny>) -> PyResult<PyLeaseInfo> {
        self.time_to_live_id(py, lease_arg(lease)?)
    }

    /// Every live lease, soonest deadline first.
    fn leases<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let e = self.engine()?;
        let list = blocking(py, || e.leases())?;
        PyList::new(py, list.into_iter().map(PyLeaseInfo))
    }

    /// Attaches one key or an iterable of keys to a lease (a key attached elsewhere moves).
    /// Raises `tenure.LeaseNotFound` if there is no such lease. Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    fn attach(
        &self,
        py: Python<'_>,
        lease: &Bound<'_, PyAny>,
        keys: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.on_keys(py, lease, keys, |e, id, keys| e.attach(id, keys))
    }

    /// Detaches one key or an iterable of keys from a lease (they then live on). Raises
    /// `tenure.LeaseNotFound` if there is no such lease. Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    fn detach(
        &self,
        py: Python<'_>,
        lease: &Bound<'_, PyAny>,
        keys: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.on_keys(py, lease, keys, |e, id, keys| e.detach(id, keys))
    }

    /// The ID of the lease a key is attached to, or `None`.
    fn lease_of(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
        let key = bytes_arg(key, "key")?;
        let e = self.engine()?;
        blocking(py, || Ok(e.lease_of(&key)?.map(LeaseId::get)))
    }

    /// Records a remaining TTL (seconds) used by the next promote or reopen, durably. Raises
    /// `tenure.LeaseNotFound` if there is no such lease. Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    fn checkpoint(
        &self,
        py: Python<'_>,
        lease: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = secs_arg)] remaining: f64,
    ) -> PyResult<()> {
        let id = lease_arg(lease)?;
        let remaining = seconds(remaining, "remaining")?;
        let e = self.engine()?;
        blocking(py, || e.checkpoint(id, remaining))
    }

    /// Becomes primary: every deadline = now + `extend` seconds + (checkpointed remaining, else
    /// TTL). Raises `tenure.InvalidArgument` for a negative `extend`. Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    #[pyo3(signature = (extend=0.0))]
    fn promote(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = secs_arg)] extend: f64,
    ) -> PyResult<()> {
        let extend = seconds(extend, "extend")?;
        let e = self.engine()?;
        blocking(py, || e.promote(extend))
    }

    /// Becomes standby: no lease expires and renew raises `NotPrimary`.
    fn demote(&self, py: Python<'_>) -> PyResult<()> {
        let e = self.engine()?;
        blocking(py, || e.demote())
    }

    /// Whether this engine is the primary.
    #[getter]
    fn is_primary(&self, py: Python<'_>) -> PyResult<bool> {
        let e = self.engine()?;
        blocking(py, || e.is_primary())
    }

    /// An iterator of expired-lease batches (`list[ExpiredLease]`). `next()` waits with the
    /// GIL released, at most `timeout` seconds (then `tenure.Timeout`); it stops when the
    /// engine closes. Ctrl-C interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn expired(
        slf: &Bound<'_, Self>,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<PyExpiredIter> {
        let py = slf.py();
        let timeout = self::timeout(timeout)?;
        let e = slf.get().open_engine(py)?;
        let rx = blocking(py, || e.expired())?;
        Ok(PyExpiredIter::new(slf.clone().unbind(), rx, timeout))
    }

    // ---- keys ---------------------------------------------------------------------------------

    /// Puts `key = value` (`str` or `bytes`), attached to `lease` (or detached); returns the
    /// new revision. Raises `tenure.LeaseNotFound` if `lease` is gone,
    /// `tenure.InvalidArgument` for an empty key. Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    #[pyo3(signature = (key, value, lease=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        lease: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i64> {
        let key = bytes_arg(key, "key")?;
        let value = bytes_arg(value, "value")?;
        let lease = opt_lease_arg(lease)?;
        let e = self.engine()?;
        blocking(py, || e.put(&key, &value, lease))
    }

    /// The key's value and revisions, or `None`. With `revision`, the key as it was at that
    /// revision (value, revisions, version and lease of then), as etcd answers a read at a
    /// revision: `tenure.Compacted` below the compaction point (its `compact_revision` tells
    /// the point), `tenure.FutureRevision` (etcd's "required revision is a future revision")
    /// above the current one.
    #[pyo3(signature = (key, revision=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = opt_int_arg)] revision: Option<i64>,
    ) -> PyResult<Option<PyKeyValue>> {
        let key = bytes_arg(key, "key")?;
        let revision = revision_arg(revision)?;
        let e = self.engine()?;
        let kv = match revision {
            None => blocking(py, || e.get(&key))?,
            Some(rev) => blocking(py, || e.get_at(&key, rev))?,
        };
        Ok(kv.map(PyKeyValue))
    }

    /// Keys starting with `prefix`, in key order, at most `limit`. With `revision`, the keys
    /// as they were at that revision; errors as `get`.
    #[pyo3(signature = (prefix, limit=None, revision=None))]
    fn range<'py>(
        &self,
        py: Python<'py>,
        prefix: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = opt_int_arg)] limit: Option<i64>,
        #[pyo3(from_py_with = opt_int_arg)] revision: Option<i64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let prefix = bytes_arg(prefix, "prefix")?;
        let limit = limit_arg(limit)?;
        let revision = revision_arg(revision)?;
        let e = self.engine()?;
        let kvs = match revision {
            None => blocking(py, || e.range(&prefix, limit))?,
            Some(rev) => blocking(py, || e.range_at(&prefix, limit, rev))?,
        };
        PyList::new(py, kvs.into_iter().map(PyKeyValue))
    }

    /// etcd's Compact: drops the history below `revision`; `revision` itself stays readable.
    /// The rows it frees are removed in the background; `physical=True` returns once they are
    /// (etcd's physical compaction). Raises `tenure.Compacted` at or below an earlier
    /// compaction, `tenure.FutureRevision` above the current revision, `tenure.InvalidArgument`
    /// below 1. Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed`
    /// after close.
    #[pyo3(signature = (revision, physical=false))]
    fn compact(&self, py: Python<'_>, revision: i64, physical: bool) -> PyResult<()> {
        if revision < 1 {
            return Err(invalid(format!(
                "compaction revision {revision} is below 1"
            )));
        }
        let e = self.engine()?;
        blocking(py, || {
            let done = match physical {
                true => e.compact_physical(revision)?,
                false => e.compact(revision)?,
            };
            done.map(|_| ()).map_err(|refusal| {
                let current = e.revision().unwrap_or(0);
                let compacted = e.compacted_revision().unwrap_or(0);
                refused_at(refusal, revision, current, compacted)
            })
        })
    }

    /// Deletes a key; returns whether it existed. Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = bytes_arg(key, "key")?;
        let e = self.engine()?;
        blocking(py, || e.delete(&key))
    }

    /// Deletes every key starting with `prefix`; returns how many. Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    fn delete_prefix(&self, py: Python<'_>, prefix: &Bound<'_, PyAny>) -> PyResult<u64> {
        let prefix = bytes_arg(prefix, "prefix")?;
        let e = self.engine()?;
        blocking(py, || e.delete_prefix(&prefix))
    }

    /// The current store revision.
    #[getter]
    fn revision(&self, py: Python<'_>) -> PyResult<i64> {
        let e = self.engine()?;
        blocking(py, || e.revision())
    }

    /// Runs a transaction: if every `compare` holds, the `success` operations, else the
    /// `failure` ones; atomically, at one revision. Build the parts with `tenure.txn`. Raises
    /// `tenure.LeaseNotFound` if a put names a lease that does not exist (nothing is applied).
    /// Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    #[pyo3(signature = (compare=None, success=None, failure=None))]
    fn txn(
        &self,
        py: Python<'_>,
        compare: Option<&Bound<'_, PyAny>>,
        success: Option<&Bound<'_, PyAny>>,
        failure: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTxnResponse> {
        let mut t = Txn::new();
        if let Some(c) = compare {
            for item in c.try_iter()? {
                let item = item?;
                let cmp = item.cast::<PyCompare>().map_err(|_| {
                    pyo3::exceptions::PyTypeError::new_err(
                        "compare items must be tenure.txn comparisons, e.g. tenure.txn.version(k) == 0",
                    )
                })?;
                t.compares.push(cmp.get().0.clone());
            }
        }
        for (branch, ops) in [(&mut t.success, success), (&mut t.failure, failure)] {
            if let Some(ops) = ops {
                for item in ops.try_iter()? {
                    let item = item?;
                    let op = item.cast::<PyOp>().map_err(|_| {
                        pyo3::exceptions::PyTypeError::new_err(
                            "operations must be made by tenure.txn.put/get/delete/delete_prefix/range",
                        )
                    })?;
                    branch.push(op.get().0.clone());
                }
            }
        }
        let e = self.engine()?;
        let r = blocking(py, || e.txn(t))?;
        PyTxnResponse::new(py, r)
    }

    /// Watches a key (or every key under a prefix) from now or from `start_revision`.
    /// Returns an iterator of `Event`s that is also a context manager (exit cancels it);
    /// `next()` waits with the GIL released, at most `timeout` seconds (then `tenure.Timeout`),
    /// and stops when the watch is cancelled or the engine closes.
    #[pyo3(signature = (key, prefix=false, start_revision=None, prev_kv=false, timeout=None))]
    fn watch(
        slf: &Bound<'_, Self>,
        key: &Bound<'_, PyAny>,
        prefix: bool,
        #[pyo3(from_py_with = opt_int_arg)] start_revision: Option<i64>,
        prev_kv: bool,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<PyWatcher> {
        let py = slf.py();
        let key = bytes_arg(key, "key")?;
        let timeout = self::timeout(timeout)?;
        let opts = WatchOptions {
            prefix,
            start_revision,
            prev_kv,
        };
        let e = slf.get().engine()?;
        let w = blocking(py, || e.watch(&key, opts))?;
        Ok(PyWatcher::new(slf.clone().unbind(), w, timeout))
    }

    // ---- coordination (sync.rs) ---------------------------------------------------------------

    /// A session (SPEC S1): a lease of `ttl` seconds renewed by a native thread every
    /// `keepalive_interval` seconds (default TTL/3). A context manager whose exit revokes it.
    /// Raises `tenure.InvalidArgument` for a TTL or interval that is not positive, or an interval
    /// above `tenure.MAX_KEEPALIVE_INTERVAL`. Writes: `tenure.StorageError` if the file cannot be written, `tenure.Closed` after close.
    #[pyo3(signature = (ttl=10.0, keepalive_interval=None))]
    fn session(
        slf: &Bound<'_, Self>,
        #[pyo3(from_py_with = secs_arg)] ttl: f64,
        #[pyo3(from_py_with = opt_secs_arg)] keepalive_interval: Option<f64>,
    ) -> PyResult<crate::sync::PySession> {
        crate::sync::PySession::open(slf, ttl, keepalive_interval)
    }

    /// Resumes a session on an existing lease (a `Lease` or an int ID) and renews it again,
    /// every `keepalive_interval` seconds (default TTL/3; at most `tenure.MAX_KEEPALIVE_INTERVAL`,
    /// else `tenure.InvalidArgument`). Raises `tenure.LeaseNotFound` if the lease is gone,
    /// `tenure.Closed` after close.
    #[pyo3(signature = (lease, keepalive_interval=None))]
    fn resume_session(
        slf: &Bound<'_, Self>,
        lease: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = opt_secs_arg)] keepalive_interval: Option<f64>,
    ) -> PyResult<crate::sync::PySession> {
        crate::sync::PySession::resume_on(slf, lease, keepalive_interval)
    }

    // queues (S10).
    /// The FIFO queue `name` (SPEC S10; etcd's `recipe.Queue` layout): see `tenure.Queue`.
    fn queue(slf: &Bound<'_, Self>, name: &str) -> PyResult<crate::sync::PyQueue> {
        Ok(crate::sync::new_queue(slf.get().engine()?, name))
    }

    /// The priority queue `name` (SPEC S10; etcd's `recipe.PriorityQueue` layout): see
    /// `tenure.PriorityQueue`.
    fn priority_queue(slf: &Bound<'_, Self>, name: &str) -> PyResult<crate::sync::PyPriorityQueue> {
        Ok(crate::sync::new_priority_queue(slf.get().engine()?, name))
    }

    /// The barrier `name` (SPEC S11; etcd's `recipe.Barrier` layout): see `tenure.Barrier`.
    fn barrier(slf: &Bound<'_, Self>, name: &str) -> PyResult<crate::sync::PyBarrier> {
        Ok(crate::sync::new_barrier(slf.get().engine()?, name))
    }

    /// The live members of group `name` (SPEC S12) as `{id: capabilities}`, in ID order.
    fn group_members<'py>(
        slf: &Bound<'py, Self>,
        name: &str,
    ) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        crate::sync::group_members(slf.py(), slf.get().engine()?, name)
    }

    /// Follows the joins and leaves of group `name` from now on: see `tenure.GroupWatch`.
    fn watch_group(slf: &Bound<'_, Self>, name: &str) -> PyResult<crate::sync::PyGroupWatch> {
        crate::sync::watch_group(slf.py(), slf.get().engine()?, name)
    }

    /// A partitioner over the live members of `group`, `replicas` (1–64) members per key:
    /// see `tenure.Partitioner`.
    #[pyo3(signature = (group, replicas=1))]
    fn partitioner(
        slf: &Bound<'_, Self>,
        group: &str,
        replicas: i64,
    ) -> PyResult<crate::sync::PyPartitioner> {
        crate::sync::new_partitioner(slf.get().engine()?, group, replicas)
    }

    /// The current leader of election `name` (its key-value), or `None`.
    fn election_leader(slf: &Bound<'_, Self>, name: &str) -> PyResult<Option<PyKeyValue>> {
        crate::sync::election_leader(slf, name)
    }

    /// Follows the leadership of election `name`: an iterator of `KeyValue | None` (see
    /// `tenure.Observer`); `next()` waits at most `timeout` seconds.
    #[pyo3(signature = (name, timeout=None))]
    fn observe_election(
        slf: &Bound<'_, Self>,
        name: &str,
        #[pyo3(from_py_with = opt_secs_arg)] timeout: Option<f64>,
    ) -> PyResult<crate::sync::PyObserver> {
        crate::sync::observe_election(slf, name, timeout)
    }

    // ---- alarms and the space quota (SPEC E20, E25) ---------------------------------------------

    /// The raised alarms (etcd's Alarm GET), in (kind, member) order: NOSPACE once a write
    /// reached the space quota, or any raised with `raise_alarm`. Kept in the file across
    /// reopens. Over `connect`, the server's.
    fn alarms(&self, py: Python<'_>) -> PyResult<Vec<PyAlarm>> {
        let e = self.engine()?;
        let alarms = blocking(py, || e.alarms())?;
        Ok(alarms.into_iter().map(PyAlarm).collect())
    }

    /// Raises `alarm` (etcd's Alarm ACTIVATE): NOSPACE refuses puts, txns that put and grants
    /// with `tenure.QuotaExceeded`; CORRUPT refuses every write with `tenure.Unavailable`.
    /// Durable on return; `False` if it was raised already.
    fn raise_alarm(&self, py: Python<'_>, alarm: PyRef<'_, PyAlarm>) -> PyResult<bool> {
        let (e, alarm) = (self.engine()?, alarm.0);
        blocking(py, || e.raise_alarm(alarm))
    }

    /// Disarms `alarm` (etcd's Alarm DEACTIVATE): writes are let in again once no alarm of its
    /// kind is left. A NOSPACE alarm comes back at the next write that would reach the quota:
    /// compact (`physical=True`) and `defragment()` first. Durable on return; `False` if it was
    /// not raised.
    fn disarm_alarm(&self, py: Python<'_>, alarm: PyRef<'_, PyAlarm>) -> PyResult<bool> {
        let (e, alarm) = (self.engine()?, alarm.0);
        blocking(py, || e.disarm_alarm(alarm))
    }

    /// The member ID the engine raises its own alarms as (`open(..., member_id=)`). Raises
    /// `Unsupported` over `connect`.
    #[getter]
    fn member_id(&self) -> PyResult<u64> {
        self.engine()?.member_id().map_err(err)
    }

    /// The file's space quota in bytes (`open(..., quota_backend_bytes=)`), `None` if none.
    /// Raises `Unsupported` over `connect`.
    #[getter]
    fn quota_backend_bytes(&self) -> PyResult<Option<u64>> {
        self.engine()?.quota_backend_bytes().map_err(err)
    }

    /// The file's length and the bytes in use. Raises `InvalidArgument` in memory,
    /// `Unsupported` over `connect`.
    fn storage_size(&self, py: Python<'_>) -> PyResult<PyStorageSize> {
        let e = self.engine()?;
        Ok(PyStorageSize(blocking(py, || e.storage_size())?))
    }

    /// Gives the file's free pages back to the filesystem and returns the new size. Commits
    /// wait meanwhile; `StorageError` while a snapshot is reading the file. Raises as
    /// `storage_size()`.
    fn defragment(&self, py: Python<'_>) -> PyResult<PyStorageSize> {
        let e = self.engine()?;
        Ok(PyStorageSize(blocking(py, || e.defragment())?))
    }

    // ---- engine -------------------------------------------------------------------------------

    /// `stats()` and the engine's histograms (SPEC L16: expiry lateness, commit and fsync
    /// durations, writes per commit) in Prometheus' text format,
    /// with the space quota and the NOSPACE alarm (SPEC E24).
    fn metrics_text(&self, py: Python<'_>) -> PyResult<String> {
        let e = self.engine()?;
        blocking(py, || Ok(e.metrics().to_prometheus()))
    }

    /// Counters and gauges: granted, revoked, renewed, expired, leases, keys, revision, commits,
    /// fsyncs, expired_dropped, watchers; and owner (a bool): whether this process runs the
    /// engine (always in a plain `open`; in `shared=True` mode, whether it owns the file; never
    /// over `connect`). Still readable after close.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let e = self.engine()?;
        let s = blocking(py, || Ok(e.stats()))?;
        let d = PyDict::new(py);
        d.set_item("granted", s.granted)?;
        d.set_item("revoked", s.revoked)?;
        d.set_item("renewed", s.renewed)?;
        d.set_item("expired", s.expired)?;
        d.set_item("leases", s.leases)?;
        d.set_item("keys", s.keys)?;
        d.set_item("revision", s.revision)?;
        d.set_item("commits", s.commits)?;
        d.set_item("fsyncs", s.fsyncs)?;
        d.set_item("expired_dropped", s.expired_dropped)?;
        d.set_item("watchers", s.watchers)?;
        d.set_item("owner", s.owner)?;
        Ok(d)
    }

    /// Writes a consistent copy of the database as of one revision to `path` while other
    /// threads keep writing: built under a temporary name beside `path`, fsynced and renamed
    /// into place, so a crash or a full disk never leaves a partial file there. The copy opens
    /// with `tenure.open` and holds exactly the keys and leases as of `SnapshotInfo.revision`,
    /// each lease's remaining TTL as of the snapshot. `progress(done, total)` (rows copied) is
    /// called every few thousand rows and at the end; an exception it raises stops further
    /// calls and is raised once the snapshot is complete. Raises `InvalidArgument` in memory or
    /// for the database's own file, `StorageError` naming `path` when it cannot be written.
    #[pyo3(signature = (path, progress=None))]
    fn snapshot(
        &self,
        py: Python<'_>,
        path: PathBuf,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<PySnapshotInfo> {
        let e = self.engine()?;
        let mut raised: Option<PyErr> = None;
        let info = blocking(py, || {
            e.snapshot_with_progress(&path, |p| {
                if let (Some(f), None) = (&progress, &raised) {
                    raised = Python::attach(|py| f.call1(py, (p.done, p.total)).err());
                }
            })
        })?;
        match raised {
            Some(err) => Err(err),
            None => Ok(PySnapshotInfo(info)),
        }
    }

    /// Whether the handle is closed (always true in a process forked after it was opened).
    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        match self.engine() {
            Ok(e) => blocking(py, || Ok(e.is_closed())),
            Err(_) => Ok(true),
        }
    }

    /// The database file, or `None` in memory.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.path.clone()
    }

    /// Checkpoints, flushes and closes the database. Idempotent; every later call raises
    /// `tenure.Closed`. In a forked child it only forgets the inherited engine.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        match self.engine() {
            Ok(e) => blocking(py, || e.close()),
            Err(_) => Ok(()),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        Repr::new(py, "Tenure")
            .field("path", self.path.as_ref().map(|p| p.display().to_string()))
            .field("closed", self.closed(py).unwrap_or(true))
            .finish()
    }
}
