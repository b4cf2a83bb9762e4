//! SPEC P14–P17: a `connect` client goes on by itself when its server is killed and another
//! serves the same socket from the same file (what a shared-mode takeover looks like to a
//! non-owner): `tenure serve FILE --listen unix:PATH` killed with SIGKILL and started again.

mod common;

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{session, temp_db, Etcd, Server, WAIT};
use etcd_client::proto::*;
use tenure::sync::{Election, Mutex, Queue};
use tenure::{Compare, CompareOp, Error, EventKind, Op, Tenure, Txn, WatchOptions};

/// How the client reaches the server.
#[derive(Clone, Copy)]
enum Via {
    Unix,
    Tcp,
}

/// A `tenure serve` on one file, one unix socket and one TCP address, that can be killed and
/// started again on all three.
struct Restartable {
    _dir: tempfile::TempDir,
    file: PathBuf,
    sock: PathBuf,
    addr: String,
    server: Option<Server>,
}

impl Restartable {
    fn start() -> Restartable {
        let (dir, file) = temp_db();
        let sock = dir.path().join("db.sock");
        let server = Server::start(&file, &["--listen", &unix(&sock)]);
        Restartable {
            _dir: dir,
            addr: server.addr.clone(),
            file,
            sock,
            server: Some(server),
        }
    }

    fn url(&self, via: Via) -> String {
        match via {
            Via::Unix => unix(&self.sock),
            Via::Tcp => format!("http://{}", self.addr),
        }
    }

    fn connect(&self, via: Via, timeout: Duration) -> Tenure {
        Tenure::builder()
            .endpoints([self.url(via)])
            .request_timeout(timeout)
            .connect()
            .unwrap()
    }

    /// SIGKILL, and waits until the process is gone.
    fn kill9(&mut self) {
        self.server.take().expect("running").kill9();
    }

    /// Starts the server again on the same file, socket and address (the stale socket of the
    /// killed one is replaced).
    fn restart(&mut self) {
        assert!(self.server.is_none(), "still running");
        let s = Server::start_on(&self.file, &self.addr, &["--listen", &unix(&self.sock)]);
        self.server = Some(s);
    }
}

fn unix(sock: &std::path::Path) -> String {
    format!("unix:{}", sock.display())
}

fn prefix() -> WatchOptions {
    WatchOptions {
        prefix: true,
        ..WatchOptions::default()
    }
}

/// Puts `w/NNNN` for `n` in `range` on `db`, each exactly once. A put whose answer was lost
/// (the server died with it in flight: it may or may not have been applied) is `Unavailable`
/// (P14); the application then puts again only if the key is still absent, until that is
/// answered.
fn write_each_once(db: &Tenure, range: std::ops::Range<u32>) {
    for n in range {
        let key = format!("w/{n:04}");
        if db.put(&key, n.to_string(), None).is_ok() {
            continue;
        }
        let until = Instant::now() + WAIT;
        loop {
            let again = Txn::new()
                .when([Compare::create_revision(&key, CompareOp::Equal, 0)])
                .then([Op::put(&key, n.to_string(), None)]);
            match db.txn(again) {
                Ok(_) => break,
                Err(Error::Unavailable(e)) => assert!(Instant::now() < until, "{key}: {e}"),
                Err(e) => panic!("{key}: {e:?}"),
            }
        }
    }
}

/// A watcher sees every event of a writer that runs across a kill and restart exactly once,
/// in order: the stream is created again after the last delivered event. `connect` makes a
/// handle to the server; `kill_and_restart` does what it says.
fn a_watch_sees_every_event_once_across_a_restart(
    connect: impl Fn() -> Tenure,
    kill_and_restart: impl FnOnce(),
) {
    let watching = connect();
    let writing = connect();
    let mut w = watching.watch("w/", prefix()).unwrap();
    let (written_tx, written) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        write_each_once(&writing, 0..30);
        written_tx.send(()).unwrap();
        // Runs on while the server is killed and started again.
        write_each_once(&writing, 30..90);
        writing
    });
    let mut seen = Vec::new();
    let mut next = |seen: &mut Vec<(Vec<u8>, i64)>| {
        let ev = w.recv_timeout(WAIT).unwrap();
        assert_eq!(ev.kind, EventKind::Put);
        seen.push((ev.kv.key.clone(), ev.revision()));
        ev
    };
    written.recv_timeout(WAIT).unwrap();
    while seen.len() < 30 {
        next(&mut seen);
    }
    kill_and_restart();
    let writing = writer.join().unwrap();
    // A last write after the writer's: nothing may come between, nor after it.
    writing.put("w/zz", "end", None).unwrap();
    while next(&mut seen).kv.key != b"w/zz" {}
    let keys: Vec<String> = seen
        .iter()
        .map(|(k, _)| String::from_utf8(k.clone()).unwrap())
        .collect();
    let mut expected: Vec<String> = (0..90).map(|n| format!("w/{n:04}")).collect();
    expected.push("w/zz".into());
    assert_eq!(keys, expected, "every event once, in order");
    assert!(
        seen.windows(2).all(|p| p[0].1 < p[1].1),
        "revisions increase: {seen:?}"
    );
    assert!(w.try_recv().unwrap().is_none(), "nothing repeated");
}

fn over_tenure_serve(via: Via) {
    let srv = std::cell::RefCell::new(Restartable::start());
    let connect = || srv.borrow().connect(via, Duration::from_secs(10));
    a_watch_sees_every_event_once_across_a_restart(connect, || {
        let mut s = srv.borrow_mut();
        s.kill9();
        s.restart();
    });
}

#[test]
fn p15_a_watch_sees_every_event_once_across_a_restart_over_a_unix_socket() {
    over_tenure_serve(Via::Unix);
}

#[test]
fn p15_a_watch_sees_every_event_once_across_a_restart_over_tcp() {
    over_tenure_serve(Via::Tcp);
}

/// The same against a real etcd killed and restarted (its history is on disk too).
#[test]
fn p15_a_watch_sees_every_event_once_across_a_restart_of_etcd() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = std::cell::RefCell::new(Some(Etcd::start(dir.path())));
    let url = etcd.borrow().as_ref().unwrap().url();
    let connect = || {
        Tenure::builder()
            .endpoints([&url])
            .request_timeout(Duration::from_secs(15))
            .connect()
            .unwrap()
    };
    a_watch_sees_every_event_once_across_a_restart(connect, || {
        let dead = etcd.borrow_mut().take().unwrap().kill9();
        *etcd.borrow_mut() = Some(dead.restart());
    });
}

/// A watch whose next revision was compacted while it was away ends with `Compacted`.
#[test]
fn p15_a_watch_resumed_past_a_compaction_ends_compacted() {
    let mut srv = Restartable::start();
    let db = srv.connect(Via::Unix, Duration::from_secs(10));
    let mut w = db.watch("c/k", WatchOptions::default()).unwrap();
    let rev = db.put("c/k", "1", None).unwrap();
    assert_eq!(w.recv_timeout(WAIT).unwrap().revision(), rev);
    let mut other = 0;
    for n in 0..3 {
        other = db.put("c/other", n.to_string(), None).unwrap();
    }
    srv.kill9();
    // Compacted while no server runs: the file opened in process.
    {
        let file = Tenure::open(&srv.file).unwrap();
        file.compact(other).unwrap().unwrap();
        file.close().unwrap();
    }
    srv.restart();
    let e = w.recv_timeout(WAIT).unwrap_err();
    assert!(matches!(e, Error::Compacted { .. }), "{e:?}");
}

/// A session keeps its lease and its lock across a restart: its keep-alive resumes within
/// the TTL.
#[test]
fn p16_a_session_keeps_its_lease_and_its_lock_across_a_restart() {
    let mut srv = Restartable::start();
    let db = srv.connect(Via::Unix, Duration::from_secs(5));
    let s = session(&db, 4);
    let held = Mutex::new(&s, "held");
    let guard = held.lock(WAIT).unwrap();
    let token = guard.fencing_token();
    srv.kill9();
    srv.restart();
    // Two TTLs after the restart: a lease whose keep-alive had not resumed would be gone.
    assert!(!s.wait_done(Duration::from_secs(8)), "the session ended");
    assert!(guard.is_held());
    let info = db.time_to_live(s.lease_id()).unwrap();
    assert_eq!(info.keys, [held.key().to_vec()]);
    let kv = db.get(held.key()).unwrap().unwrap();
    assert_eq!(kv.create_revision, token, "the same key, not a new one");
    let other = srv.connect(Via::Unix, Duration::from_secs(5));
    let e = Mutex::new(&session(&other, 5), "held")
        .try_lock()
        .unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e:?}");
    guard.unlock().unwrap();
}

/// A lock wait, a campaign and a dequeue waiting across a restart go on, and each acquires
/// when its turn comes, with no second entry in the queue.
#[test]
fn p17_waits_in_progress_continue_across_a_restart() {
    let mut srv = Restartable::start();
    let holder = srv.connect(Via::Unix, Duration::from_secs(5));
    let a = session(&holder, 10);
    let lock = Mutex::new(&a, "m").lock(WAIT).unwrap();
    let leader = Election::new(&a, "e").campaign("a", WAIT).unwrap();
    let mut in_m = holder.watch("m/", prefix()).unwrap();
    let mut in_e = holder.watch("e/", prefix()).unwrap();

    let waiter = srv.connect(Via::Unix, Duration::from_secs(5));
    let b = session(&waiter, 10);
    let (b_lock, b_camp) = (Mutex::new(&b, "m"), Election::new(&b, "e"));
    let b_queue = Queue::new(&waiter, "q");
    let locking = std::thread::spawn(move || b_lock.lock(WAIT));
    let campaigning = std::thread::spawn(move || b_camp.campaign("b", WAIT));
    let dequeuing = std::thread::spawn(move || b_queue.dequeue(WAIT));
    // b's entries are in the queues (seen put) before the server dies.
    assert_eq!(in_m.recv_timeout(WAIT).unwrap().kind, EventKind::Put);
    assert_eq!(in_e.recv_timeout(WAIT).unwrap().kind, EventKind::Put);

    srv.kill9();
    srv.restart();
    // A write the client sends as the dead server's connection resets may have been sent, so
    // it fails Unavailable rather than being repeated (P14); a read is repeated, and once it
    // is answered the client is on the new server's connection.
    holder.get("q").unwrap();
    Queue::new(&holder, "q").enqueue("job").unwrap();
    assert_eq!(dequeuing.join().unwrap().unwrap(), b"job");
    let token = lock.fencing_token();
    lock.unlock().unwrap();
    let b_lock = locking.join().unwrap().unwrap();
    assert!(b_lock.fencing_token() > token);
    leader.resign().unwrap();
    let _b_leads = campaigning.join().unwrap().unwrap();
    let mine = |p: &str| format!("{p}{:x}", b.lease_id().get()).into_bytes();
    for p in ["m/", "e/"] {
        let keys: Vec<Vec<u8>> = holder
            .range(p, None)
            .unwrap()
            .into_iter()
            .map(|kv| kv.key)
            .collect();
        assert_eq!(keys, [mine(p)], "{p}: b's one entry");
    }
}

/// A put issued while no server runs waits, and succeeds once the server is back.
#[test]
fn p14_a_put_issued_during_the_gap_succeeds_once_the_server_is_back() {
    let mut srv = Restartable::start();
    let db = srv.connect(Via::Unix, Duration::from_secs(10));
    db.put("before", "1", None).unwrap();
    srv.kill9();
    let (issued_tx, issued) = mpsc::channel();
    let putting = std::thread::spawn(move || {
        issued_tx.send(()).unwrap();
        let out = db.put("during", "2", None);
        (db, out)
    });
    issued.recv_timeout(WAIT).unwrap();
    srv.restart();
    let (db, out) = putting.join().unwrap();
    let rev = out.unwrap();
    let kv = db.get("during").unwrap().unwrap();
    assert_eq!((kv.value, kv.mod_revision), (b"2".to_vec(), rev));
}

/// With no server coming back, a call, a put and a watch each end with `Unavailable` once
/// the request timeout has passed, not before.
#[test]
fn p14_with_no_server_coming_back_calls_and_watches_end_unavailable_after_the_timeout() {
    let timeout = Duration::from_millis(400);
    let mut srv = Restartable::start();
    let db = srv.connect(Via::Unix, timeout);
    let mut w = db.watch("k", WatchOptions::default()).unwrap();
    srv.kill9();
    let t = Instant::now();
    let e = db.get("k").unwrap_err();
    let took = t.elapsed();
    assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
    assert!(
        took >= timeout - Duration::from_millis(110) && took < timeout + Duration::from_secs(2),
        "{took:?}"
    );
    let t = Instant::now();
    let e = db.put("k", "v", None).unwrap_err();
    assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
    assert!(
        t.elapsed() >= timeout - Duration::from_millis(110),
        "{:?}",
        t.elapsed()
    );
    let e = w.recv_timeout(WAIT).unwrap_err();
    assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
}

type Request<T> = tonic::Request<T>;
type Reply<T> = Result<tonic::Response<T>, tonic::Status>;
type Responses<T> =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<T, tonic::Status>> + Send>>;

/// A Watch service whose first stream ends before it answers anything (a server shutting down
/// as the watch opens: a shared file's owner exiting) and whose later streams create the watch.
struct EndsTheFirstStream {
    opened: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

#[tonic::async_trait]
impl PbWatchService for EndsTheFirstStream {
    type WatchStream = Responses<PbWatchResponse>;

    async fn watch(
        &self,
        _: Request<tonic::Streaming<PbWatchRequest>>,
    ) -> Reply<Self::WatchStream> {
        use std::sync::atomic::Ordering;
        if self.opened.fetch_add(1, Ordering::SeqCst) == 0 {
            return Ok(tonic::Response::new(Box::pin(tokio_stream::empty())));
        }
        let created = PbWatchResponse {
            header: Some(PbResponseHeader {
                revision: 7,
                ..Default::default()
            }),
            watch_id: 1,
            created: true,
            ..Default::default()
        };
        let open = tokio_stream::StreamExt::chain(
            tokio_stream::once(Ok(created)),
            tokio_stream::pending(),
        );
        Ok(tonic::Response::new(Box::pin(open)))
    }
}

/// Status only (what `connect` asks first); the test needs nothing else of Maintenance.
struct StatusOnly;

fn not_here() -> tonic::Status {
    tonic::Status::unimplemented("not served by this test's server")
}

#[tonic::async_trait]
impl PbMaintenanceService for StatusOnly {
    async fn alarm(&self, _: Request<PbAlarmRequest>) -> Reply<PbAlarmResponse> {
        Err(not_here())
    }

    async fn status(&self, _: Request<PbStatusRequest>) -> Reply<PbStatusResponse> {
        Ok(tonic::Response::new(PbStatusResponse {
            header: Some(PbResponseHeader {
                revision: 7,
                ..Default::default()
            }),
            version: "3.5.0".into(),
            ..Default::default()
        }))
    }

    async fn defragment(&self, _: Request<PbDefragmentRequest>) -> Reply<PbDefragmentResponse> {
        Err(not_here())
    }

    async fn hash(&self, _: Request<PbHashRequest>) -> Reply<PbHashResponse> {
        Err(not_here())
    }

    async fn hash_kv(&self, _: Request<PbHashKvRequest>) -> Reply<PbHashKvResponse> {
        Err(not_here())
    }

    type SnapshotStream = Responses<PbSnapshotResponse>;

    async fn snapshot(&self, _: Request<PbSnapshotRequest>) -> Reply<Self::SnapshotStream> {
        Err(not_here())
    }

    async fn move_leader(&self, _: Request<PbMoveLeaderRequest>) -> Reply<PbMoveLeaderResponse> {
        Err(not_here())
    }

    async fn downgrade(&self, _: Request<PbDowngradeRequest>) -> Reply<PbDowngradeResponse> {
        Err(not_here())
    }
}

/// SPEC P15: a watch whose stream ends before the server created it is opened again within
/// the request timeout (as a broken stream is resumed), not failed at once.
#[test]
fn p15_a_watch_whose_stream_ends_before_it_is_created_is_opened_again() {
    let opened = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let service = EndsTheFirstStream {
        opened: opened.clone(),
    };
    rt.spawn(
        tonic::transport::Server::builder()
            .add_service(PbWatchServer::new(service))
            .add_service(PbMaintenanceServer::new(StatusOnly))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let db = Tenure::builder()
        .endpoints([format!("http://{addr}")])
        .request_timeout(Duration::from_secs(10))
        .connect()
        .unwrap();
    let w = db.watch("k", WatchOptions::default());
    assert!(w.is_ok(), "{:?}", w.err());
    assert_eq!(opened.load(std::sync::atomic::Ordering::SeqCst), 2);
    // This server has no KV service: a read is Unsupported at once, saying why.
    let t = Instant::now();
    match db.get("k") {
        Err(Error::Unsupported(m)) => assert!(m.contains("does not implement"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}
