//! Helpers shared by the test binaries: engines on a `ManualClock`, bounded waits for what
//! other threads do, a backend that offers the recipes only the seam, and the place the
//! backend-neutral tests run in; `model` is the reference model of the engine's observable state.
//!
//! One suite, three places (SPEC R1): `mem()` is an in-memory engine, or, with
//! `TENURE_TEST_BACKEND=serve|etcd` and `TENURE_TEST_URL`, a `Tenure::connect` to that server,
//! emptied first (every key deleted, every lease revoked). `tests/backends/run.py` starts
//! `tenure serve` and etcd and runs these binaries against each, one test at a time
//! (`--test-threads=1`: the tests share the server) and skipping `embedded_only::`: the tests
//! that need the engine itself (a `ManualClock`, files, checkpoints, promote, stats counters)
//! live in a module of that name in each file. The helpers that make an embedded engine
//! (`manual`, `open_file`...) refuse to run against a server, so a misplaced test fails
//! instead of silently testing the engine twice.
// Each test binary uses a different subset.
#![allow(dead_code)]

pub(crate) mod model;

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use tenure::sync::{Backend, RangeOptions, Session, SessionOptions};
use tenure::{
    Builder, Clock, Event, EventKind, KeepAlive, KeyValue, LeaseId, LeaseInfo, ManualClock, Result,
    Stop, Tenure, Txn, TxnResponse, WatchOptions, Watcher,
};

/// Where `mem()` engines live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    Embedded,
    /// `tenure serve` or etcd: the backend's name and its URL.
    Remote(String, String),
}

/// The place named by `TENURE_TEST_BACKEND` (default `embedded`) and `TENURE_TEST_URL`.
pub(crate) fn place() -> &'static Place {
    static PLACE: OnceLock<Place> = OnceLock::new();
    PLACE.get_or_init(|| {
        let name = std::env::var("TENURE_TEST_BACKEND").unwrap_or_default();
        match name.as_str() {
            "" | "embedded" => Place::Embedded,
            "serve" | "etcd" => {
                let url = std::env::var("TENURE_TEST_URL")
                    .unwrap_or_else(|_| panic!("TENURE_TEST_BACKEND={name} needs TENURE_TEST_URL"));
                Place::Remote(name, url)
            }
            other => panic!("TENURE_TEST_BACKEND={other}: expected embedded, serve or etcd"),
        }
    })
}

/// Guards the helpers that make an embedded engine: such tests belong in `embedded_only`.
fn embedded_only(what: &str) {
    if let Place::Remote(name, _) = place() {
        panic!("{what} makes an embedded engine: a test using it belongs in `mod embedded_only` (backend {name})");
    }
}

#[cfg(feature = "remote")]
fn connect_emptied(url: &str) -> Tenure {
    let db = tenure::ConnectOptions::new()
        .endpoints([url])
        .request_timeout(Duration::from_secs(10))
        .connect()
        .unwrap_or_else(|e| panic!("connect {url}: {e}"));
    db.delete_prefix("").expect("empty the server");
    for l in db.leases().expect("list the leases") {
        match db.revoke(l.id) {
            Ok(()) | Err(tenure::Error::LeaseNotFound(_)) => {}
            Err(e) => panic!("revoke {:?}: {e}", l.id),
        }
    }
    db
}

#[cfg(not(feature = "remote"))]
fn connect_emptied(url: &str) -> Tenure {
    panic!("{url}: this test binary was built without tenure's feature `remote`")
}

/// How long a test waits for another thread before failing.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// An in-memory engine on a manual clock.
pub(crate) fn manual() -> (Arc<ManualClock>, Tenure) {
    manual_with(|b| b)
}

/// An in-memory engine on a manual clock, with `options` set on its builder (a standby, manual
/// revoke, a `min_ttl`...).
pub(crate) fn manual_with(options: impl FnOnce(Builder) -> Builder) -> (Arc<ManualClock>, Tenure) {
    embedded_only("manual()");
    let clock = ManualClock::new();
    let db = options(Tenure::builder().clock(clock.clone()))
        .open()
        .unwrap();
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

/// A session's options: a lease of `ttl`, renewed at the default interval (a third of it).
pub(crate) fn ttl_options(ttl: Duration) -> SessionOptions {
    SessionOptions {
        ttl,
        keepalive_interval: None,
    }
}

/// A session with a lease of `ttl` on `backend`.
pub(crate) fn session_ttl<B: Backend + Clone>(backend: &B, ttl: Duration) -> Session {
    Session::new(backend, ttl_options(ttl)).unwrap()
}

/// A session with a 30 s lease on `backend`.
pub(crate) fn session_on<B: Backend + Clone>(backend: &B) -> Session {
    session_ttl(backend, secs(30))
}

/// The engine seen through the recipes' seam alone: every required method forwards to the
/// engine's public API, none of the fast paths (lease loss, demotion) is offered. What an
/// etcd connection gives the recipes. [`lose_next`](SeamOnly::lose_next) makes it lose answers
/// as a dying server does.
#[derive(Debug, Clone)]
pub(crate) struct SeamOnly(pub Tenure, pub Arc<std::sync::atomic::AtomicUsize>);

impl SeamOnly {
    pub(crate) fn new(db: &Tenure) -> SeamOnly {
        SeamOnly(db.clone(), Arc::default())
    }

    /// The next `n` transactions are applied, then answered `Unavailable`, as when a server
    /// dies between applying a request and answering it (SPEC P14: the client cannot know
    /// whether it was applied).
    pub(crate) fn lose_next(&self, n: usize) {
        self.1.store(n, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Backend for SeamOnly {
    fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        use std::sync::atomic::Ordering::SeqCst;
        let r = self.0.txn(txn)?;
        if self
            .1
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(tenure::Error::Unavailable("the answer was lost".into()));
        }
        Ok(r)
    }
    fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        self.0.get(key)
    }
    fn range(&self, prefix: &[u8], opts: RangeOptions) -> Result<Vec<KeyValue>> {
        Backend::range(&self.0, prefix, opts)
    }
    fn range_at(
        &self,
        prefix: &[u8],
        opts: RangeOptions,
        revision: i64,
    ) -> Result<Option<Vec<KeyValue>>> {
        Backend::range_at(&self.0, prefix, opts, revision)
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

// ---- keys and watches (spec_keys, spec_watch) ----------------------------------------------

/// A lease TTL for tests that never let it run out.
pub(crate) const TTL: Duration = Duration::from_secs(10);

/// A fresh, empty engine where the tests run: in memory, or the server emptied.
pub(crate) fn mem() -> Tenure {
    match place() {
        Place::Embedded => Tenure::in_memory().expect("in-memory engine"),
        Place::Remote(_, url) => connect_emptied(url),
    }
}

pub(crate) fn open_file(path: &Path) -> Tenure {
    embedded_only("open_file()");
    Tenure::open(path).expect("open the database file")
}

pub(crate) fn open_file_with_clock(path: &Path, clock: &Arc<ManualClock>) -> Tenure {
    embedded_only("open_file_with_clock()");
    Tenure::builder()
        .path(path)
        .clock(clock.clone())
        .open()
        .expect("open the database file")
}

pub(crate) fn watch(db: &Tenure, key: &str, prefix: bool, prev_kv: bool) -> Watcher {
    db.watch(
        key,
        WatchOptions {
            prefix,
            start_revision: None,
            prev_kv,
        },
    )
    .expect("watch")
}

pub(crate) fn watch_from(
    db: &Tenure,
    key: impl AsRef<[u8]>,
    prefix: bool,
    start: i64,
) -> tenure::Result<Watcher> {
    db.watch(
        key,
        WatchOptions {
            prefix,
            start_revision: Some(start),
            prev_kv: false,
        },
    )
}

/// The next event, failing the test if none arrives within `WAIT`.
pub(crate) fn next(w: &mut Watcher) -> Event {
    match w.recv_timeout(WAIT) {
        Ok(ev) => ev,
        Err(e) => panic!("expected an event, got {e:?}"),
    }
}

/// Asserts that the next events are `expected`, in order (each within `WAIT`).
pub(crate) fn assert_next(w: &mut Watcher, expected: impl IntoIterator<Item = Event>) {
    for (i, e) in expected.into_iter().enumerate() {
        assert_eq!(next(w), e, "event {i} of the expected sequence");
    }
}

/// Asserts that no event is ready. Only meaningful where every event of a returned write is
/// already delivered (Immediate durability, or an in-memory engine); over a connection it sees
/// only the events that have arrived (an extra event still in flight passes unnoticed there: the
/// embedded run checks idleness in full).
pub(crate) fn assert_idle(w: &mut Watcher) {
    let ev = w.try_recv().expect("watcher still open");
    assert!(ev.is_none(), "unexpected event {ev:?}");
}

pub(crate) fn put_event(
    key: &[u8],
    value: &[u8],
    create: i64,
    modr: i64,
    version: i64,
    lease: Option<LeaseId>,
) -> Event {
    Event {
        kind: EventKind::Put,
        kv: kv(key, value, create, modr, version, lease),
        prev_kv: None,
    }
}

/// A DELETE event as etcd reports it: the key and the deleting revision, nothing else.
pub(crate) fn delete_event(key: &[u8], rev: i64) -> Event {
    Event {
        kind: EventKind::Delete,
        kv: KeyValue {
            key: key.to_vec(),
            mod_revision: rev,
            ..KeyValue::default()
        },
        prev_kv: None,
    }
}

pub(crate) fn kv(
    key: &[u8],
    value: &[u8],
    create: i64,
    modr: i64,
    version: i64,
    lease: Option<LeaseId>,
) -> KeyValue {
    KeyValue {
        key: key.to_vec(),
        value: value.to_vec(),
        create_revision: create,
        mod_revision: modr,
        version,
        lease,
    }
}

pub(crate) fn keys_of(kvs: &[KeyValue]) -> Vec<Vec<u8>> {
    kvs.iter().map(|kv| kv.key.clone()).collect()
}

pub(crate) fn bytes(keys: &[&str]) -> Vec<Vec<u8>> {
    keys.iter().map(|k| k.as_bytes().to_vec()).collect()
}
