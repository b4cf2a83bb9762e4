//! [`Tenure`]: the one handle users hold, over one of two backends side by side — this
//! process's [`Engine`] or (feature `remote`) an etcd v3 server through the etcd client. Every
//! public call picks its backend here, once; neither backend knows of the other.
//!
//! Calls only the engine can answer say so in their docs ("Engine-only") and fail over
//! `connect` with `Unsupported` naming the call (SPEC R1).

use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crossbeam_channel::Receiver;

use crate::alarms::Alarm;
use crate::clock::Clock;
use crate::engine::{Builder, Engine};
use crate::error::{Error, Result};
#[cfg(feature = "remote")]
use crate::etcd::client::{ConnectOptions, Remote};
use crate::etcd::{Outcome, Refusal, RequestOp, WatchStart};
use crate::kv::txn::{Txn, TxnResponse};
use crate::kv::watch::{WatchOptions, Watcher};
use crate::metrics::Metrics;
use crate::types::{
    ContentHash, ExpiredLease, FileContents, KeyValue, LeaseId, LeaseInfo, SnapshotInfo,
    SnapshotProgress, Stats, StorageSize,
};
use crate::wait::Wait;

/// A lease engine: leases, TTL keys, transactions and watches, embedded over one redb file
/// ([`open`](Tenure::open), [`Builder`]) or, feature `remote`, an etcd v3 server reached by
/// `Tenure::connect` with the same API (SPEC R1).
///
/// A `Tenure` is a cheap handle (`Clone + Send + Sync`); the engine (or connection) closes
/// when [`close`](Tenure::close) is called or the last handle is dropped.
#[derive(Clone)]
pub struct Tenure {
    backend: Arc<Backend>,
    /// Shared mode (SPEC P): the file's ownership, socket server and takeover, held by the
    /// user's handles (not by the server's own handle over the engine), closed with them.
    attachment: Option<Arc<dyn Attachment>>,
}

/// What a shared-mode handle carries beside its backend (`shared/mod.rs` implements it; this
/// seam keeps the handle below the shared-mode layer).
pub(crate) trait Attachment: Send + Sync {
    /// Whether this process owns the file now (it runs the engine).
    fn owner(&self) -> bool;
    /// The database file, as given to the builder.
    fn path(&self) -> &Path;
    /// A session of this process granted (`live`) or closed lease `id` (SPEC P: the leases
    /// whoever takes over after this process revokes).
    fn session_lease(&self, id: LeaseId, live: bool);
    /// Stops serving and waiting for a takeover, closes the engine if this process runs it and
    /// releases the file. Idempotent.
    fn close(&self) -> Result<()>;
}

/// What a handle drives.
pub(crate) enum Backend {
    /// This process's engine.
    Engine(Engine),
    /// An etcd v3 server (`tenure serve` or etcd).
    #[cfg(feature = "remote")]
    Etcd(Box<Remote>),
}

impl Drop for Backend {
    fn drop(&mut self) {
        match self {
            // The engine closes itself when dropped.
            Backend::Engine(_) => {}
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.close(),
        }
    }
}

/// A handle that does not keep its backend open (what background threads hold).
pub(crate) type WeakTenure = Weak<Backend>;

impl std::fmt::Debug for Tenure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.backend {
            Backend::Engine(e) => f.debug_tuple("Tenure").field(e).finish(),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => f.debug_tuple("Tenure").field(r).finish(),
        }
    }
}

fn lease_id(id: impl Into<LeaseId>) -> LeaseId {
    id.into()
}

#[cfg(feature = "remote")]
impl Builder {
    /// Names the etcd v3 endpoints to connect to (as [`ConnectOptions::endpoints`]): from here
    /// the chain holds a [`ConnectOptions`], so only connection options follow, ending in
    /// [`connect`](ConnectOptions::connect). Engine options set before this do not apply to a
    /// connection and are dropped. Feature `remote`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tenure::Tenure;
    ///
    /// let db = Tenure::builder().endpoints(["http://10.0.0.1:2379", "http://10.0.0.2:2379"])
    ///     .request_timeout(Duration::from_secs(5)).connect()?;
    /// # Ok::<(), tenure::Error>(())
    /// ```
    pub fn endpoints<S: AsRef<str>>(self, urls: impl IntoIterator<Item = S>) -> ConnectOptions {
        ConnectOptions::new().endpoints(urls)
    }
}

#[cfg(feature = "remote")]
impl ConnectOptions {
    /// Connects to the etcd v3 server at the [`endpoints`](ConnectOptions::endpoints)
    /// (`tenure serve` or an etcd cluster): the same handle and API as an embedded engine
    /// (SPEC R1); engine-only calls fail with `Unsupported`, network failures with
    /// `Unavailable` (R3), a server that cannot be trusted or does not accept these
    /// credentials with `Unauthenticated` (R4, R5).
    pub fn connect(self) -> Result<Tenure> {
        let remote = self.open_remote()?;
        Ok(Tenure::over(Backend::Etcd(Box::new(remote))))
    }
}

impl Tenure {
    pub(crate) fn over(backend: Backend) -> Tenure {
        Tenure {
            backend: Arc::new(backend),
            attachment: None,
        }
    }

    /// This handle, carrying a shared-mode `attachment` (closed with the last such handle).
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(crate) fn attached(self, attachment: Arc<dyn Attachment>) -> Tenure {
        Tenure {
            backend: self.backend,
            attachment: Some(attachment),
        }
    }

    /// A handle over the same backend without the attachment (what the shared-mode server
    /// holds, so that it never keeps the user's handles' attachment alive).
    #[cfg_attr(not(feature = "serve"), allow(dead_code))]
    pub(crate) fn bare(&self) -> Tenure {
        Tenure {
            backend: self.backend.clone(),
            attachment: None,
        }
    }

    /// Records a session lease of this process in shared mode (a no-op otherwise).
    pub(crate) fn session_lease(&self, id: LeaseId, live: bool) {
        if let Some(a) = &self.attachment {
            a.session_lease(id, live);
        }
    }

    /// Opens (or creates) the database at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Tenure> {
        Builder::default().path(path).open()
    }

    /// An engine that keeps everything in memory.
    pub fn in_memory() -> Result<Tenure> {
        Builder::default().open()
    }

    /// Every option of an embedded engine, with defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Connects to an etcd v3 server (`tenure serve` or etcd): `http://HOST:PORT`, several
    /// comma-separated, or `unix:PATH`. More options: [`ConnectOptions`]. Feature `remote`.
    #[cfg(feature = "remote")]
    pub fn connect(url: &str) -> Result<Tenure> {
        ConnectOptions::new().endpoints([url]).connect()
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The embedded engine, or `Unsupported` naming `call` over `connect`.
    #[cfg_attr(not(feature = "remote"), allow(unused_variables))]
    pub(crate) fn engine(&self, call: &str) -> Result<&Engine> {
        match &*self.backend {
            Backend::Engine(e) => Ok(e),
            #[cfg(feature = "remote")]
            Backend::Etcd(_) => Err(Error::Unsupported(match &self.attachment {
                // A non-owner that took the file over keeps its handle over the socket.
                Some(a) if a.owner() => format!(
                    "{call} needs the embedded engine, and this handle reaches {} through its \
                     socket (shared mode: this process took the file over after opening it)",
                    a.path().display()
                ),
                Some(a) => format!(
                    "{call} needs the embedded engine, and this process does not run it: \
                     another process owns {} (shared mode)",
                    a.path().display()
                ),
                None => format!("{call} needs the embedded engine"),
            })),
        }
    }

    pub(crate) fn downgrade(&self) -> WeakTenure {
        Arc::downgrade(&self.backend)
    }

    pub(crate) fn upgrade(weak: &WeakTenure) -> Option<Tenure> {
        weak.upgrade().map(|backend| Tenure {
            backend,
            attachment: None,
        })
    }

    /// The time source keep-alives and recipes sleep on.
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        match self.backend() {
            Backend::Engine(e) => e.clock(),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.clock(),
        }
    }

    /// The `Closed` error of this handle (it names the database).
    pub(crate) fn closed_error(&self) -> Error {
        match self.backend() {
            Backend::Engine(e) => e.closed_error(),
            #[cfg(feature = "remote")]
            Backend::Etcd(_) => Error::Closed("(etcd connection)".into()),
        }
    }

    /// One renew for a keep-alive: over `connect` its deadline is at most `limit`.
    #[cfg_attr(not(feature = "remote"), allow(unused_variables))]
    pub(crate) fn renew_within(&self, id: LeaseId, limit: Duration) -> Result<()> {
        match self.backend() {
            Backend::Engine(e) => e.renew(id).map(|_| ()),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.renew(id, Some(limit)).map(|_| ()),
        }
    }

    /// The revision up to which every event has been handed to the watchers: everything up to
    /// it is committed (SPEC E4 progress notifications). Over `connect`: the server's
    /// revision, else the last one seen.
    pub fn durable_revision(&self) -> i64 {
        match self.backend() {
            Backend::Engine(e) => e.durable_revision(),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.revision_or_last(),
        }
    }

    /// A barrier: returns once the database file itself holds every write applied before the
    /// call. With the write-ahead log (the default) acknowledged writes are durable in the log
    /// and reach the file in the background; whatever reads the file of an open engine (a
    /// snapshot, a backup, a copy) calls this first. In memory there is nothing to do; after a
    /// storage failure it fails with that failure (D6). Engine-only.
    pub fn flush_to_file(&self) -> Result<()> {
        self.engine("flush_to_file")?.flush_to_file()
    }

    // ---- leases -------------------------------------------------------------------------------

    /// Grants a lease with a fresh ID (SPEC L1–L3).
    pub fn grant(&self, ttl: Duration) -> Result<LeaseId> {
        match self.backend() {
            Backend::Engine(e) => e.grant(ttl),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.grant(None, ttl).map(|l| l.id),
        }
    }

    /// Grants a lease with a chosen ID; `LeaseExists` if it is live, `InvalidArgument` if ≤ 0.
    pub fn grant_with_id(&self, id: impl Into<LeaseId>, ttl: Duration) -> Result<LeaseId> {
        let id = lease_id(id);
        match self.backend() {
            Backend::Engine(e) => e.grant_with_id(id, ttl),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.grant(Some(id), ttl).map(|l| l.id),
        }
    }

    /// Grants a lease (with `id`, else a fresh ID) and reports what was granted: its ID and
    /// effective TTL (raised to `min_ttl`), as [`time_to_live`](Tenure::time_to_live) would.
    pub fn grant_lease(&self, id: Option<LeaseId>, ttl: Duration) -> Result<LeaseInfo> {
        match self.backend() {
            Backend::Engine(e) => e.grant_lease(id, ttl),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.grant(id, ttl),
        }
    }

    /// Revokes a lease and deletes its keys in one durable write (SPEC L4).
    pub fn revoke(&self, id: impl Into<LeaseId>) -> Result<()> {
        let id = lease_id(id);
        match self.backend() {
            Backend::Engine(e) => e.revoke(id),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.revoke(id),
        }
    }

    /// Renews a lease: deadline = now + TTL; returns the TTL (SPEC L5). Writes nothing to disk.
    #[inline]
    pub fn renew(&self, id: impl Into<LeaseId>) -> Result<Duration> {
        let id = lease_id(id);
        match self.backend() {
            Backend::Engine(e) => e.renew(id),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.renew(id, None),
        }
    }

    /// The lease's TTL, remaining time and keys (SPEC L7).
    pub fn time_to_live(&self, id: impl Into<LeaseId>) -> Result<LeaseInfo> {
        let id = lease_id(id);
        match self.backend() {
            Backend::Engine(e) => e.time_to_live(id),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.time_to_live(id),
        }
    }

    /// Every live lease, in ascending order of remaining time (SPEC L7); `Closed` once closed.
    pub fn leases(&self) -> Result<Vec<LeaseInfo>> {
        match self.backend() {
            Backend::Engine(e) => e.leases(),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.leases(),
        }
    }

    /// Attaches keys to a lease; a key attached elsewhere moves (SPEC L6).
    pub fn attach<K: AsRef<[u8]>>(&self, id: impl Into<LeaseId>, keys: &[K]) -> Result<()> {
        let id = lease_id(id);
        match self.backend() {
            Backend::Engine(e) => e.attach(id, keys),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.attach(id, keys, true),
        }
    }

    /// Detaches keys from a lease (SPEC L6).
    pub fn detach<K: AsRef<[u8]>>(&self, id: impl Into<LeaseId>, keys: &[K]) -> Result<()> {
        let id = lease_id(id);
        match self.backend() {
            Backend::Engine(e) => e.detach(id, keys),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.attach(id, keys, false),
        }
    }

    /// The lease a key is attached to, `None` if detached or absent (SPEC L6); `Closed` once
    /// closed.
    pub fn lease_of(&self, key: impl AsRef<[u8]>) -> Result<Option<LeaseId>> {
        match self.backend() {
            Backend::Engine(e) => e.lease_of(key),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.get(key.as_ref()).map(|kv| kv.and_then(|kv| kv.lease)),
        }
    }

    /// Records a remaining TTL for the next promote or reopen, durably (SPEC L8). Engine-only.
    pub fn checkpoint(&self, id: impl Into<LeaseId>, remaining: Duration) -> Result<()> {
        self.engine("checkpoint")?.checkpoint(id, remaining)
    }

    /// Becomes primary: every deadline = now + extend + (checkpointed remaining, else TTL).
    /// Engine-only.
    pub fn promote(&self, extend: Duration) -> Result<()> {
        self.engine("promote")?.promote(extend)
    }

    /// Becomes standby: no lease expires, renew fails with `NotPrimary`, and everything
    /// blocked waiting on a lease (lock and campaign waits) is woken with `NotPrimary` (SPEC
    /// L9). Engine-only.
    pub fn demote(&self) -> Result<()> {
        self.engine("demote")?.demote()
    }

    /// Whether this engine is the primary (a connection always is); `Closed` once closed.
    pub fn is_primary(&self) -> Result<bool> {
        match self.backend() {
            Backend::Engine(e) => e.is_primary(),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) if r.is_closed() => Err(self.closed_error()),
            #[cfg(feature = "remote")]
            Backend::Etcd(_) => Ok(true),
        }
    }

    /// Batches of expired leases (SPEC L11, L12). Every receiver shares one queue: each batch
    /// goes to one of them. The channel disconnects when the engine closes. Engine-only: an
    /// etcd server tells no client which leases expired (SPEC R1), so over `connect` this is
    /// `Unsupported` rather than a channel that never delivers.
    pub fn expired(&self) -> Result<Receiver<Vec<ExpiredLease>>> {
        Ok(self.engine("expired")?.expired())
    }

    /// The next batch of [`expired`](Tenure::expired), waiting as long as `wait` allows:
    /// `Timeout` if none came by then (or its stop token was raised), `Closed` once the engine
    /// is closed. Engine-only.
    pub fn next_expired(&self, wait: impl Into<Wait>) -> Result<Vec<ExpiredLease>> {
        self.engine("next_expired")?.next_expired(wait)
    }

    // ---- keys ---------------------------------------------------------------------------------

    /// Puts a key, attached to `lease` or detached; returns the new revision (SPEC K1).
    pub fn put(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        lease: Option<LeaseId>,
    ) -> Result<i64> {
        match self.backend() {
            Backend::Engine(e) => e.put(key, value, lease),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.put(key.as_ref(), value.as_ref(), lease),
        }
    }

    /// The key's value and revisions, or `None` (SPEC K2).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<KeyValue>> {
        match self.backend() {
            Backend::Engine(e) => e.get(key),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.get(key.as_ref()),
        }
    }

    /// Keys starting with `prefix`, in key order, at most `limit` (SPEC K2).
    pub fn range(&self, prefix: impl AsRef<[u8]>, limit: Option<usize>) -> Result<Vec<KeyValue>> {
        match self.backend() {
            Backend::Engine(e) => e.range(prefix, limit),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.range(prefix.as_ref(), limit, None),
        }
    }

    /// The key as it was at `revision` (0: the current one), as etcd answers a read at a
    /// revision: its value, create and mod revisions, version and lease then, or `None` if it
    /// did not exist then (SPEC K9). `Compacted` below the compaction point (with its
    /// `compact_revision`); a revision above the current one is `FutureRevision` (etcd's
    /// "required revision is a future revision").
    pub fn get_at(&self, key: impl AsRef<[u8]>, revision: i64) -> Result<Option<KeyValue>> {
        match self.backend() {
            Backend::Engine(e) => e.get_at(key.as_ref(), revision),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.get_at(key.as_ref(), revision),
        }
    }

    /// [`range`](Tenure::range) as it was at `revision` (0: the current one); errors as
    /// [`get_at`](Tenure::get_at) (SPEC K9).
    pub fn range_at(
        &self,
        prefix: impl AsRef<[u8]>,
        limit: Option<usize>,
        revision: i64,
    ) -> Result<Vec<KeyValue>> {
        match self.backend() {
            Backend::Engine(e) => e.range_at(prefix.as_ref(), limit, revision),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.range_at(prefix.as_ref(), limit, None, revision),
        }
    }

    /// The revision of the last compaction (0: none): reads and watches from it on are
    /// answered, those below it are `Compacted` (SPEC K10). Engine-only (etcd has no call that
    /// tells it).
    pub fn compacted_revision(&self) -> Result<i64> {
        self.engine("compacted_revision")?.compacted_revision()
    }

    /// Deletes a key; returns whether it existed (SPEC K3).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        match self.backend() {
            Backend::Engine(e) => e.delete(key),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.delete(key.as_ref(), false).map(|n| n > 0),
        }
    }

    /// Deletes every key starting with `prefix`; returns how many (SPEC K3).
    pub fn delete_prefix(&self, prefix: impl AsRef<[u8]>) -> Result<u64> {
        match self.backend() {
            Backend::Engine(e) => e.delete_prefix(prefix),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.delete(prefix.as_ref(), true),
        }
    }

    /// The current store revision (SPEC K4); `Closed` once closed.
    pub fn revision(&self) -> Result<i64> {
        match self.backend() {
            Backend::Engine(e) => e.revision(),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.revision(),
        }
    }

    /// Runs a compare-and-swap transaction (SPEC K5).
    pub fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        match self.backend() {
            Backend::Engine(e) => e.txn(txn),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.txn(&txn),
        }
    }

    /// Watches a key or prefix (SPEC K6).
    pub fn watch(&self, key: impl AsRef<[u8]>, opts: WatchOptions) -> Result<Watcher> {
        match self.backend() {
            Backend::Engine(e) => e.watch(key, opts),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.watch(key.as_ref(), &opts),
        }
    }

    // ---- etcd-shaped entry points (what `tenure serve` calls) ----------------------------------

    /// Runs one etcd-shaped request (SPEC E2): a read returns only durable state (E8), a write
    /// returns once durable, like every write. Engine-only.
    pub fn execute(&self, op: &RequestOp) -> Result<Outcome> {
        self.engine("execute")?.execute(op)
    }

    /// [`execute`](Tenure::execute) for a read, answered inline when every write it could
    /// reflect is durable; `Ok(None)` when it would have to wait for a commit, or if the request
    /// may write (then use [`execute`](Tenure::execute)). Engine-only.
    pub fn try_execute_read(&self, op: &RequestOp) -> Result<Option<Outcome>> {
        self.engine("try_execute_read")?.try_execute_read(op)
    }

    /// [`execute`](Tenure::execute) without holding a thread for the commit: applies a request
    /// whose work is bounded ([`RequestOp::is_bounded`]) and returns at once; its answer is
    /// given by awaiting [`Applied::durable`](crate::Applied::durable), which the end of the
    /// commit that covers it completes (SPEC E22); a range without a small limit is taken too
    /// when, under the engine's lock, it holds at most
    /// [`INLINE_RANGE_KEYS`](crate::limits::INLINE_RANGE_KEYS) keys and
    /// [`INLINE_RANGE_BYTES`](crate::limits::INLINE_RANGE_BYTES) bytes (E26). `Ok(None)` for a
    /// request that must run on a thread (unbounded, a larger range, or reading at a
    /// revision): use [`execute`](Tenure::execute) there.
    /// Engine-only. Feature `serve`.
    #[cfg(feature = "serve")]
    pub fn execute_applied(
        &self,
        op: &RequestOp,
    ) -> Result<Option<crate::engine::Applied<Outcome>>> {
        self.engine("execute_applied")?.execute_applied(op)
    }

    /// [`grant_lease`](Tenure::grant_lease) without holding a thread for the commit, as
    /// [`execute_applied`](Tenure::execute_applied): the lease's ID and the revision at the
    /// grant, once durable. Engine-only. Feature `serve`.
    #[cfg(feature = "serve")]
    pub fn grant_applied(
        &self,
        id: Option<LeaseId>,
        ttl: Duration,
    ) -> Result<crate::engine::Applied<(LeaseId, i64)>> {
        Ok(self.engine("grant_applied")?.grant_applied(id, ttl))
    }

    /// Returns once the last compaction is carried out on the file (its rows removed; etcd's
    /// `physical` Compact), instead of in the background (SPEC K10). Engine-only.
    pub fn wait_compacted(&self) -> Result<()> {
        self.engine("wait_compacted")?.wait_compacted()
    }

    /// etcd's HashKV: [`ContentHash::kv`](crate::ContentHash::kv) of the key space as it was at
    /// `revision` (0: the current one) and the revision hashed; errors as
    /// [`get_at`](Tenure::get_at) (SPEC E11). Engine-only.
    pub fn hash_kv(&self, revision: i64) -> Result<(u32, i64)> {
        self.engine("hash_kv")?.hash_kv(revision)
    }

    /// etcd's Compact: drops the history below `revision` (`revision` itself stays readable);
    /// the rows it frees are removed in the background (SPEC K10). `Ok(Err(..))` for a
    /// revision above the current one or at or below an earlier compaction. Over `connect` it
    /// is the server's Compact.
    pub fn compact(&self, revision: i64) -> Result<std::result::Result<i64, Refusal>> {
        match self.backend() {
            Backend::Engine(e) => e.compact(revision),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.compact(revision, false),
        }
    }

    /// [`compact`](Tenure::compact) that returns once the rows it frees are removed from the
    /// file (etcd's Compact with `physical`; [`wait_compacted`](Tenure::wait_compacted) after
    /// it), so a `defragment` then returns their space (SPEC K10). Over `connect` it is the
    /// server's physical Compact.
    pub fn compact_physical(&self, revision: i64) -> Result<std::result::Result<i64, Refusal>> {
        match self.backend() {
            Backend::Engine(e) => {
                let done = e.compact(revision)?;
                if done.is_ok() {
                    e.wait_compacted()?;
                }
                Ok(done)
            }
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.compact(revision, true),
        }
    }

    /// Watches the keys of `[key, range_end)` with etcd's conventions for `range_end`
    /// (`opts.prefix` is ignored). Engine-only.
    pub fn watch_range(
        &self,
        key: impl AsRef<[u8]>,
        range_end: impl AsRef<[u8]>,
        opts: WatchOptions,
    ) -> Result<WatchStart> {
        self.engine("watch_range")?
            .watch_range(key, range_end, opts)
    }

    // ---- the file -----------------------------------------------------------------------------

    /// What the database file at `path` holds (its revision and live keys and leases; the
    /// engine's counters are 0), read in place without opening an engine: the file is opened
    /// read-only and never written, so a file no one may write (or one another process has
    /// open) can be read. `len`: only that many leading bytes are the database (a saved
    /// snapshot's checksum follows them). The log beside a database is not replayed: for a
    /// database file, use [`read_file`](Tenure::read_file).
    ///
    /// `Corrupt` for a damaged file or one whose writer was killed (redb would repair it);
    /// `Storage` naming the file when it cannot be read.
    pub fn file_stats(path: impl AsRef<Path>, len: Option<u64>) -> Result<Stats> {
        Engine::file_stats(path, len)
    }

    /// Everything the database file at `path` holds, read in place without opening an engine
    /// and without writing anything (SPEC E10): the file and its write-ahead log are opened
    /// read-only, so a file with mode 0444 in a read-only directory can be read, and nothing
    /// expires. A file whose writer was killed is repaired, and the records of its log that the
    /// file lacks replayed, in memory only: every acknowledged write is seen.
    ///
    /// `AlreadyOpen` while an engine has the file open (and an engine that opens the file during
    /// the read gets `AlreadyOpen`); `Corrupt` for a damaged file or log;
    /// `Storage` naming the file when it cannot be read.
    pub fn read_file(path: impl AsRef<Path>) -> Result<FileContents> {
        Engine::read_file(path)
    }

    /// The keys of `[key, range_end)` (etcd's conventions for `range_end`: empty for `key`
    /// alone) as they were at `revision` (0: the file's current one) in the database file at
    /// `path`, read in place as [`read_file`](Tenure::read_file) reads, without opening an
    /// engine (SPEC E10, K9: `tenure get FILE KEY --rev N`): under the file's lock for the whole
    /// read, so `AlreadyOpen` while an engine has it open (and an engine opening it during the
    /// read gets `AlreadyOpen`); the log's records replayed in memory; nothing written.
    /// `Compacted` below the file's compaction, `FutureRevision` above its revision.
    pub fn read_file_range_at(
        path: impl AsRef<Path>,
        key: impl AsRef<[u8]>,
        range_end: impl AsRef<[u8]>,
        revision: i64,
    ) -> Result<Vec<KeyValue>> {
        if revision < 0 {
            return Err(Error::invalid(format!(
                "revision {revision} is negative (0: the current one)"
            )));
        }
        let range = crate::kv::range::KeyRange::new(key.as_ref(), range_end.as_ref());
        crate::store::range_at_in_place(path.as_ref(), &range, revision)
    }

    /// Copies the database file at `path` (one no engine has open) to `dest` as a snapshot
    /// would (SPEC D8, E12: `tenure snapshot FILE OUT`), reading it in place as
    /// [`read_file`](Tenure::read_file) does: `path` and its log are never written, and what
    /// the log holds is in the copy.
    pub fn copy_file(path: impl AsRef<Path>, dest: impl AsRef<Path>) -> Result<SnapshotInfo> {
        Engine::copy_file(path, dest)
    }

    /// Writes a consistent copy of the database, as of one revision, to `dest` while writes go
    /// on (SPEC D8). The copy is built under a temporary name in `dest`'s directory, fsynced and
    /// renamed over `dest`: a crash or a full disk never leaves a partial file at `dest`, and the
    /// source is only read. It opens as a tenure database holding exactly the keys and leases
    /// as of [`SnapshotInfo::revision`]; each lease's remaining TTL is recorded as of the
    /// snapshot and counts down from then on when the copy is opened (SPEC L13). Engine-only.
    ///
    /// `InvalidArgument` for an in-memory engine or when `dest` is the database's own file;
    /// `Storage` naming `dest` when it cannot be written.
    pub fn snapshot(&self, dest: impl AsRef<Path>) -> Result<SnapshotInfo> {
        self.engine("snapshot")?.snapshot(dest)
    }

    /// [`snapshot`](Tenure::snapshot), calling `progress` every few thousand rows copied and
    /// once at the end (`done == total`). Engine-only.
    pub fn snapshot_with_progress(
        &self,
        dest: impl AsRef<Path>,
        progress: impl FnMut(SnapshotProgress),
    ) -> Result<SnapshotInfo> {
        self.engine("snapshot_with_progress")?
            .snapshot_with_progress(dest, progress)
    }

    /// A snapshot (as [`snapshot`](Tenure::snapshot)) in a file no name points to, open for
    /// reading from its start: for sending it on (Maintenance.Snapshot of `tenure serve`). It is
    /// built beside the database under the engine's temporary name
    /// (`.NAME.streamed-snapshot-PID-N`, [`temp_beside`](crate::temp_beside)) and unlinked once
    /// opened; a kill before that leaves the temporary, which the next call removes (I-O3).
    /// Engine-only.
    ///
    /// `InvalidArgument` for an in-memory engine; `Storage` when the copy cannot be written.
    pub fn snapshot_unlinked(&self) -> Result<(std::fs::File, SnapshotInfo)> {
        self.engine("snapshot_unlinked")?.snapshot_unlinked()
    }

    /// Checksums of the logical contents at the current durable revision (SPEC D9): equal for
    /// equal contents, stable across restarts and snapshots. Engine-only.
    pub fn content_hash(&self) -> Result<ContentHash> {
        self.engine("content_hash")?.content_hash()
    }

    /// The file's size and the bytes in use (SPEC D10). Engine-only.
    pub fn storage_size(&self) -> Result<StorageSize> {
        self.engine("storage_size")?.storage_size()
    }

    /// Gives the file's free pages back to the filesystem (SPEC D10) and returns the new size.
    /// Commits wait meanwhile (writes still apply in memory); `Storage` while a snapshot or
    /// a hash is reading the file. Engine-only.
    pub fn defragment(&self) -> Result<StorageSize> {
        self.engine("defragment")?.defragment()
    }

    // ---- alarms (SPEC E20) ----------------------------------------------------------------------

    /// Every raised alarm (etcd's Alarm GET), in (kind, member) order: NOSPACE once a write
    /// reached the space quota ([`Builder::quota_backend_bytes`]), or any alarm raised with
    /// [`raise_alarm`](Tenure::raise_alarm). Alarms are kept in the file across reopens. Over
    /// `connect`, the server's.
    pub fn alarms(&self) -> Result<Vec<Alarm>> {
        match self.backend() {
            Backend::Engine(e) => e.alarms(),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.alarms(),
        }
    }

    /// Raises `alarm` (etcd's Alarm ACTIVATE): NOSPACE refuses puts, txns that put and grants
    /// with [`Error::QuotaExceeded`]; CORRUPT refuses every write with `Unavailable` ("etcdserver:
    /// corrupt cluster"). Durable on return; false if it was raised already.
    pub fn raise_alarm(&self, alarm: Alarm) -> Result<bool> {
        match self.backend() {
            Backend::Engine(e) => e.set_alarm(alarm, true),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.set_alarm(alarm, true),
        }
    }

    /// Disarms `alarm` (etcd's Alarm DEACTIVATE, `etcdctl alarm disarm`): writes are let in
    /// again once no alarm of its kind is left. A NOSPACE alarm comes back at the next write
    /// that would reach the quota: compact and [`defragment`](Tenure::defragment) first.
    /// Durable on return; false if it was not raised.
    pub fn disarm_alarm(&self, alarm: Alarm) -> Result<bool> {
        match self.backend() {
            Backend::Engine(e) => e.set_alarm(alarm, false),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.set_alarm(alarm, false),
        }
    }

    /// The member ID this engine raises its own alarms as ([`Builder::member_id`]).
    /// Engine-only.
    pub fn member_id(&self) -> Result<u64> {
        Ok(self.engine("member_id")?.member_id())
    }

    /// The space quota of the file in bytes ([`Builder::quota_backend_bytes`]), if any.
    /// Engine-only.
    pub fn quota_backend_bytes(&self) -> Result<Option<u64>> {
        Ok(self.engine("quota_backend_bytes")?.quota_backend_bytes())
    }

    // ---- the handle ---------------------------------------------------------------------------

    /// Counters and gauges (SPEC L15). Still readable after close. Over `connect`: what the
    /// server can tell (revision, live keys and leases), the engine's counters 0.
    pub fn stats(&self) -> Stats {
        let mut s = match self.backend() {
            Backend::Engine(e) => e.stats(),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.stats(),
        };
        if let Some(a) = &self.attachment {
            s.owner = a.owner();
        }
        s
    }

    /// [`stats`](Self::stats) and the engine's histograms: expiry lateness, commit and fsync
    /// durations, writes per group commit (SPEC L16); [`Metrics::to_prometheus`] writes them
    /// in Prometheus' text format, with the quota and the raised alarms (SPEC E24). Over
    /// `connect` the histograms are empty and the quota 0; the alarms are the server's.
    pub fn metrics(&self) -> Metrics {
        let mut m = match self.backend() {
            Backend::Engine(e) => e.metrics(),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => Metrics {
                stats: r.stats(),
                alarms: r.alarms().unwrap_or_default(),
                ..Metrics::default()
            },
        };
        if let Some(a) = &self.attachment {
            m.stats.owner = a.owner();
        }
        m
    }

    /// The database file, as given to the builder (in shared mode too, owner or not); `None`
    /// in memory and over `connect`.
    pub fn path(&self) -> Option<&Path> {
        if let Some(a) = &self.attachment {
            return Some(a.path());
        }
        match self.backend() {
            Backend::Engine(e) => e.path(),
            #[cfg(feature = "remote")]
            Backend::Etcd(_) => None,
        }
    }

    /// Whether [`close`](Tenure::close) has run.
    pub fn is_closed(&self) -> bool {
        match self.backend() {
            Backend::Engine(e) => e.is_closed(),
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => r.is_closed(),
        }
    }

    /// Checkpoints renewed leases, flushes everything pending, stops the threads and releases
    /// the file (over `connect`: ends the connection). Idempotent; later calls on any handle
    /// fail with `Closed` (SPEC D7).
    /// In shared mode: stops serving the other processes (one of them takes over) or waiting
    /// to take over, closes the engine if this process runs it and releases the file.
    pub fn close(&self) -> Result<()> {
        match self.backend() {
            Backend::Engine(e) => {
                // The attachment stops the socket before the engine closes (the others then
                // see the owner gone, not a closed database) and releases the file after.
                let shared = self.attachment.as_ref().map_or(Ok(()), |a| a.close());
                let closed = e.close();
                shared.and(closed)
            }
            #[cfg(feature = "remote")]
            Backend::Etcd(r) => {
                r.close();
                self.attachment.as_ref().map_or(Ok(()), |a| a.close())
            }
        }
    }
}
