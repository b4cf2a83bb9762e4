//! SPEC P10–P13: sessions bound to their process. The test process is the owner: it serves
//! etcd's services over its engine, with binding on (or off), on a unix socket in a temporary
//! directory and on a loopback TCP port, as shared mode's owner does on its socket. Other
//! processes are this test binary run again with `TENURE_BOUND_CHILD` set (the
//! `child_process_entry` test then plays the child and returns at once otherwise): each
//! connects, holds a session and a mutex, says so on stdout (`@@HELD <token> <lease>`), and
//! is then killed, stopped, or told on stdin to end its session on purpose.
//!
//! A waiter of this process, on a connection of its own, queues on the same mutex; its
//! acquisition is the event the tests wait for (measured from the kill or stop).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::proto::{
    PbClusterServer, PbKvServer, PbLeaseServer, PbMaintenanceServer, PbWatchServer,
};
use tenure::etcd::serve::convert::Ids;
use tenure::etcd::serve::coordination::electionpb::election_server::ElectionServer;
use tenure::etcd::serve::coordination::lockpb::lock_server::LockServer;
use tenure::etcd::serve::coordination::{Elections, Lock};
use tenure::etcd::serve::service::{Cluster, Ctx, Kv, Lease};
use tenure::etcd::serve::watch::Watch;
use tenure::sync::{Mutex, Session, SessionOptions};
use tenure::{ConnectOptions, EventKind, Tenure, WaitPool, WatchOptions};
use tokio::sync::watch;

mod status_only {
    //! etcd's Maintenance service with only Status (what `connect` asks first).
    use etcd_client::proto::*;
    use tonic::{Request, Response, Status};

    pub(crate) struct StatusOnly;

    fn no() -> Status {
        Status::unimplemented("not in this test server")
    }

    #[tonic::async_trait]
    impl PbMaintenanceService for StatusOnly {
        async fn alarm(
            &self,
            _: Request<PbAlarmRequest>,
        ) -> Result<Response<PbAlarmResponse>, Status> {
            Err(no())
        }
        async fn status(
            &self,
            _: Request<PbStatusRequest>,
        ) -> Result<Response<PbStatusResponse>, Status> {
            Ok(Response::new(PbStatusResponse::default()))
        }
        async fn defragment(
            &self,
            _: Request<PbDefragmentRequest>,
        ) -> Result<Response<PbDefragmentResponse>, Status> {
            Err(no())
        }
        async fn hash(
            &self,
            _: Request<PbHashRequest>,
        ) -> Result<Response<PbHashResponse>, Status> {
            Err(no())
        }
        async fn hash_kv(
            &self,
            _: Request<PbHashKvRequest>,
        ) -> Result<Response<PbHashKvResponse>, Status> {
            Err(no())
        }
        type SnapshotStream = tokio_stream::Empty<Result<PbSnapshotResponse, Status>>;
        async fn snapshot(
            &self,
            _: Request<PbSnapshotRequest>,
        ) -> Result<Response<Self::SnapshotStream>, Status> {
            Err(no())
        }
        async fn move_leader(
            &self,
            _: Request<PbMoveLeaderRequest>,
        ) -> Result<Response<PbMoveLeaderResponse>, Status> {
            Err(no())
        }
        async fn downgrade(
            &self,
            _: Request<PbDowngradeRequest>,
        ) -> Result<Response<PbDowngradeResponse>, Status> {
            Err(no())
        }
    }
}

const CHILD_ENV: &str = "TENURE_BOUND_CHILD";
const ENDPOINT_ENV: &str = "TENURE_BOUND_ENDPOINT";
const BIND_ENV: &str = "TENURE_BOUND_BIND";
const TTL_ENV: &str = "TENURE_BOUND_TTL_SECS";
const LOCK: &str = "jobs";
/// How long a test waits for what another process does.
const WAIT: Duration = Duration::from_secs(20);

/// The owner: an engine and etcd's services over it on a unix socket and a TCP port.
struct Owner {
    rt: tokio::runtime::Runtime,
    db: Tenure,
    socket: PathBuf,
    tcp: String,
    bound_streams: Option<watch::Receiver<usize>>,
    _dir: tempfile::TempDir,
}

impl Owner {
    fn start(binding: bool) -> Owner {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("db.tenure");
        let db = Tenure::builder()
            .path(&file)
            .base_revision(1)
            .open()
            .unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (_stop, shutdown) = watch::channel(false);
        // The sender lives as long as the runtime's tasks (never shut down here).
        std::mem::forget(_stop);
        let ctx = Arc::new(Ctx {
            db: db.clone(),
            ids: Ids::for_path(&file),
            urls: Vec::new(),
            max_request_bytes: 1 << 20,
            max_watches: 100,
            shutdown,
            pool: WaitPool::new("bound-test-wait").unwrap(),
        });
        let lease = match binding {
            true => Lease::binding_sessions(ctx.clone()),
            false => Lease::new(ctx.clone()),
        };
        let bound_streams = lease.bound_streams();
        // No HTTP/2 keep-alive pings: a stopped process must not be taken for a dead one (P12).
        let router = tonic::transport::Server::builder()
            .add_service(PbKvServer::new(Kv(ctx.clone())))
            .add_service(PbLeaseServer::new(lease))
            .add_service(PbWatchServer::new(Watch(ctx.clone())))
            .add_service(PbClusterServer::new(Cluster(ctx.clone())))
            .add_service(PbMaintenanceServer::new(status_only::StatusOnly))
            .add_service(LockServer::new(Lock(ctx.clone())))
            .add_service(ElectionServer::new(Elections(ctx.clone())));
        let socket = dir.path().join("db.tenure.sock");
        let tcp = rt.block_on(async {
            let unix = tokio::net::UnixListener::bind(&socket).unwrap();
            let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = tcp.local_addr().unwrap();
            let r = router.clone();
            tokio::spawn(async move {
                let incoming = tokio_stream::wrappers::UnixListenerStream::new(unix);
                r.serve_with_incoming(incoming).await
            });
            tokio::spawn(async move {
                let incoming = tokio_stream::wrappers::TcpListenerStream::new(tcp);
                router.serve_with_incoming(incoming).await
            });
            format!("http://{addr}")
        });
        Owner {
            rt,
            db,
            socket,
            tcp,
            bound_streams,
            _dir: dir,
        }
    }

    fn endpoint(&self, over: Over) -> String {
        match over {
            Over::Unix => format!("unix:{}", self.socket.display()),
            Over::Tcp => self.tcp.clone(),
        }
    }

    /// Waits until exactly `n` bound keep-alive streams are open (their ends' revokes done).
    fn wait_bound_streams(&self, n: usize) {
        let mut rx = self.bound_streams.clone().expect("binding is on");
        self.rt
            .block_on(async { tokio::time::timeout(WAIT, rx.wait_for(|live| *live == n)).await })
            .unwrap_or_else(|_| panic!("never {n} bound streams"))
            .unwrap();
    }
}

#[derive(Debug, Clone, Copy)]
enum Over {
    Unix,
    Tcp,
}

fn connect(endpoint: &str, bind: bool) -> Tenure {
    ConnectOptions::new()
        .endpoints([endpoint])
        .bind_sessions(bind)
        .connect()
        .unwrap()
}

fn session(db: &Tenure, ttl: Duration) -> Session {
    let opts = SessionOptions {
        ttl,
        ..Default::default()
    };
    Session::new(db, opts).unwrap()
}

/// A child process holding `LOCK` through a session.
struct Holder {
    child: Child,
    stdin: ChildStdin,
    token: i64,
    lease: i64,
}

impl Holder {
    /// Starts a child playing `role` and waits until it holds the lock.
    fn start(role: &str, endpoint: &str, bind: bool, ttl: Duration) -> Holder {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_process_entry",
                "--nocapture",
                "--test-threads=1",
                "-q",
            ])
            .env(CHILD_ENV, role)
            .env(ENDPOINT_ENV, endpoint)
            .env(BIND_ENV, if bind { "1" } else { "0" })
            .env(TTL_ENV, ttl.as_secs().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let held = lines
            // libtest may have written the test's name on the same line first.
            .find_map(|l| l.ok()?.split("@@HELD ").nth(1).map(String::from))
            .expect("the child never held the lock");
        let mut parts = held.split(' ').map(|p| p.parse::<i64>().unwrap());
        let (token, lease) = (parts.next().unwrap(), parts.next().unwrap());
        // The rest of its output is not needed; reading it keeps its pipe from filling up.
        std::thread::spawn(move || lines.for_each(drop));
        Holder {
            child,
            stdin,
            token,
            lease,
        }
    }
}

/// A waiter on `LOCK`, queued behind the holder before this returns; it sends the instant it
/// acquired the lock and its fencing token.
struct Waiter {
    acquired: std::sync::mpsc::Receiver<(Instant, i64)>,
}

impl Waiter {
    fn queue(owner: &Owner, endpoint: &str) -> Waiter {
        let watch_all = WatchOptions {
            prefix: true,
            ..Default::default()
        };
        let mut puts = owner.db.watch(format!("{LOCK}/"), watch_all).unwrap();
        let db = connect(endpoint, true);
        let (tx, acquired) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let s = session(&db, Duration::from_secs(60));
            let guard = Mutex::new(&s, LOCK).lock(WAIT * 2).unwrap();
            let _ = tx.send((Instant::now(), guard.fencing_token()));
            // Held until the test ends.
            std::thread::park();
        });
        // Its entry in the queue is its put under the lock's prefix.
        let ev = puts.recv_timeout(WAIT).unwrap();
        assert_eq!(ev.kind, EventKind::Put);
        Waiter { acquired }
    }

    fn acquired(&self) -> (Instant, i64) {
        self.acquired
            .recv_timeout(WAIT * 2)
            .expect("the waiter never acquired the lock")
    }
}

/// The child side: returns at once unless this process was started as a child.
#[test]
fn child_process_entry() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let endpoint = std::env::var(ENDPOINT_ENV).unwrap();
    let bind = std::env::var(BIND_ENV).unwrap() == "1";
    let ttl = Duration::from_secs(std::env::var(TTL_ENV).unwrap().parse().unwrap());
    let db = connect(&endpoint, bind);
    let s = session(&db, ttl);
    let guard = Mutex::new(&s, LOCK).lock(WAIT).unwrap();
    let token = guard.fencing_token();
    // Kept past this scope: the lock is released only by the lease's end.
    let _ = guard.keep();
    let mut out = std::io::stdout();
    writeln!(out, "@@HELD {token} {}", s.lease_id().get()).unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    match role.as_str() {
        // Killed or stopped by the parent while it waits here.
        "hold" => {}
        // Ends without closing anything (the connection closes at exit).
        "exit" => std::process::exit(0),
        // Keeps its lease on purpose, then exits normally.
        "keep" => {
            s.orphan();
            drop(s);
            db.close().unwrap();
        }
        other => panic!("unknown role {other}"),
    }
}

/// A holder killed with SIGKILL (or exiting) while a waiter queues: the time from the kill to
/// the waiter's acquisition, and both tokens.
fn lock_freed_by_death(
    owner: &Owner,
    role: &str,
    over: Over,
    bind: bool,
    ttl: Duration,
) -> Duration {
    let endpoint = owner.endpoint(over);
    let mut holder = Holder::start(role, &endpoint, bind, ttl);
    let waiter = Waiter::queue(owner, &endpoint);
    let died = Instant::now();
    match role {
        "hold" => holder.child.kill().unwrap(),
        _ => writeln!(holder.stdin, "go").unwrap(),
    }
    let (acquired, token) = waiter.acquired();
    let took = acquired.duration_since(died);
    let _ = holder.child.wait();
    assert!(
        token > holder.token,
        "a lock freed by a death carries a new, larger token: {token} after {}",
        holder.token
    );
    assert!(
        owner.db.time_to_live(holder.lease).is_err(),
        "the dead holder's lease is gone"
    );
    took
}

#[test]
fn p10_a_killed_process_s_lock_is_taken_within_100_ms_over_a_unix_socket() {
    let owner = Owner::start(true);
    let took = lock_freed_by_death(&owner, "hold", Over::Unix, true, Duration::from_secs(60));
    eprintln!("unix: kill -9 → waiter holds the lock in {took:?}");
    assert!(took < Duration::from_millis(100), "{took:?}");
    owner.wait_bound_streams(1); // the waiter's own
}

#[test]
fn p10_a_killed_process_s_lock_is_taken_within_100_ms_over_tcp() {
    let owner = Owner::start(true);
    let took = lock_freed_by_death(&owner, "hold", Over::Tcp, true, Duration::from_secs(60));
    eprintln!("tcp: kill -9 → waiter holds the lock in {took:?}");
    assert!(took < Duration::from_millis(100), "{took:?}");
}

#[test]
fn p10_a_process_that_exits_without_closing_its_session_frees_its_lock_at_once() {
    let owner = Owner::start(true);
    let took = lock_freed_by_death(&owner, "exit", Over::Unix, true, Duration::from_secs(60));
    assert!(took < Duration::from_secs(1), "{took:?}, not its 60 s TTL");
}

#[test]
fn p11_a_process_that_keeps_its_lease_and_exits_leaves_it_alive() {
    let owner = Owner::start(true);
    for over in [Over::Unix, Over::Tcp] {
        let mut holder =
            Holder::start("keep", &owner.endpoint(over), true, Duration::from_secs(60));
        writeln!(holder.stdin, "go").unwrap();
        assert!(holder.child.wait().unwrap().success());
        // Its stream's end has been handled (and revoked nothing).
        owner.wait_bound_streams(0);
        let info = owner.db.time_to_live(holder.lease).unwrap();
        assert!(
            info.remaining.unwrap() > Duration::from_secs(30),
            "{over:?}: {info:?}"
        );
        assert_eq!(info.keys.len(), 1, "{over:?}: the lock key stays with it");
        owner.db.revoke(holder.lease).unwrap();
    }
}

#[test]
fn p11_close_revokes_then_ends_the_stream_and_orphan_only_ends_it() {
    let owner = Owner::start(true);
    for over in [Over::Unix, Over::Tcp] {
        let db = connect(&owner.endpoint(over), true);
        let closed = session(&db, Duration::from_secs(60));
        let kept = session(&db, Duration::from_secs(60));
        owner.wait_bound_streams(2);
        closed.close().unwrap();
        assert!(
            owner.db.time_to_live(closed.lease_id()).is_err(),
            "{over:?}"
        );
        kept.orphan();
        owner.wait_bound_streams(0);
        assert!(owner.db.time_to_live(kept.lease_id()).is_ok(), "{over:?}");
        // The connection closing now revokes nothing: no stream is bound any more. (Closing
        // it is what the process's end does; the owner sees the leases it has left.)
        db.close().unwrap();
        let left: Vec<_> = owner.db.leases().unwrap().iter().map(|l| l.id).collect();
        assert_eq!(left, [kept.lease_id()], "{over:?}");
        owner.db.revoke(kept.lease_id()).unwrap();
    }
}

#[test]
fn p12_a_stopped_process_keeps_its_lease_until_its_ttl() {
    let owner = Owner::start(true);
    let ttl = Duration::from_secs(2);
    let endpoint = owner.endpoint(Over::Unix);
    let mut holder = Holder::start("hold", &endpoint, true, ttl);
    let waiter = Waiter::queue(&owner, &endpoint);
    let pid = holder.child.id().to_string();
    let status = Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    assert!(status.success());
    let stopped = Instant::now();
    let (acquired, token) = waiter.acquired();
    let took = acquired.duration_since(stopped);
    // Renewed at most a third of the TTL before the stop, it lives at least 2/3 of the TTL on.
    assert!(
        took >= ttl * 2 / 3 - Duration::from_millis(50),
        "{took:?}: revoked early"
    );
    assert!(took < ttl + Duration::from_secs(2), "{took:?}");
    assert!(token > holder.token);
    assert!(owner.db.time_to_live(holder.lease).is_err(), "expired");
    holder.child.kill().unwrap();
    let _ = holder.child.wait();
    // Its stream broke when it was killed; revoking an expired lease is no error.
    owner.wait_bound_streams(1);
}

#[test]
fn p13_without_bind_sessions_a_killed_client_s_lease_lives_until_its_ttl() {
    let owner = Owner::start(true);
    let ttl = Duration::from_secs(2);
    let took = lock_freed_by_death(&owner, "hold", Over::Unix, false, ttl);
    assert!(
        took >= ttl * 2 / 3 - Duration::from_millis(50),
        "{took:?}: revoked early"
    );
}

#[test]
fn p13_a_server_without_binding_ignores_the_mark() {
    let owner = Owner::start(false);
    assert!(owner.bound_streams.is_none());
    let ttl = Duration::from_secs(2);
    let took = lock_freed_by_death(&owner, "hold", Over::Unix, true, ttl);
    assert!(
        took >= ttl * 2 / 3 - Duration::from_millis(50),
        "{took:?}: revoked early"
    );
}

#[test]
fn p13_bind_sessions_refuses_a_tls_endpoint() {
    let e = ConnectOptions::new()
        .endpoints(["https://127.0.0.1:1"])
        .bind_sessions(true)
        .connect()
        .unwrap_err();
    assert!(e.to_string().contains("bind_sessions"), "{e}");
}
