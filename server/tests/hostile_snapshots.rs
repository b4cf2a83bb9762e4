//! Snapshot streams a client never reads (issue 29, items 1 and 4; SPEC E11, E16): they hold
//! no server thread and do not slow writes, their number and the disk their copies hold are
//! bounded (more are refused at once), and a stream unread for `--snapshot-read-timeout` ends,
//! giving its copy back. Raw gRPC (tonic), so the client reads exactly what the test says.
//!
//! `cargo test -p tenure-server --test hostile_snapshots -- --nocapture` prints the figures.

mod common;

use std::time::{Duration, Instant};

use common::{temp_db, Server};
use etcd_client::proto::{PbSnapshotRequest, PbSnapshotResponse};
use etcd_client::Client;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status, Streaming};

const WAIT: Duration = Duration::from_secs(60);
/// Unread Snapshot streams in the first test: more than tokio's 512 blocking threads.
const UNREAD: usize = 600;
/// Streams per connection (hyper's default bound on concurrent streams is 200).
const PER_CONNECTION: usize = 100;
/// The server's threads with every stream open, once idle blocking threads are gone (tokio
/// workers, the engine's threads, the wait pool; one per stream would be hundreds).
const MAX_THREADS: usize = 48;
/// Database bytes written first: well more than a stream's buffers (HTTP/2 window, channel),
/// so a stream that is not read stops part-way.
const DB_BYTES: usize = 512 * 1024;
/// The read timeout of the bound test: its three snapshot requests must all come within it
/// (a slow machine once took more than 1 s), and it is how long the test then waits.
const READ_TIMEOUT: &str = "3s";

/// The flood of 600 snapshots loads the machine; the bound test, which times its requests
/// against the read timeout, runs apart from it.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line")
}

/// A connection whose HTTP/2 stream window is the protocol's default (64 KiB), not hyper's
/// larger one: a stream not read stops after 64 KiB.
async fn connect(s: &Server) -> Channel {
    Endpoint::from_shared(s.url())
        .unwrap()
        .initial_stream_window_size(65_535)
        .connect()
        .await
        .unwrap()
}

/// Fills the database with `DB_BYTES` of values.
async fn fill(s: &Server) {
    let mut c = Client::connect([&s.addr], None).await.unwrap();
    for i in 0..DB_BYTES / 8192 {
        c.put(format!("fill/{i:04}"), vec![b'x'; 8192], None)
            .await
            .unwrap();
    }
}

/// Opens a Snapshot stream on `ch` (its response headers come once the copy is made) and
/// reads nothing.
async fn snapshot(ch: Channel) -> Result<Streaming<PbSnapshotResponse>, Status> {
    let mut g = tonic::client::Grpc::new(ch);
    g.ready().await.unwrap();
    let codec: tonic_prost::ProstCodec<PbSnapshotRequest, PbSnapshotResponse> =
        tonic_prost::ProstCodec::default();
    g.server_streaming(
        tonic::Request::new(PbSnapshotRequest {}),
        tonic::codegen::http::uri::PathAndQuery::from_static("/etcdserverpb.Maintenance/Snapshot"),
        codec,
    )
    .await
    .map(|r| r.into_inner())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e16_six_hundred_unread_snapshots_hold_no_thread_and_do_not_stall_writes() {
    let _alone = HEAVY.lock().await;
    let (_dir, file) = temp_db();
    let n = UNREAD.to_string();
    let s = Server::start(&file, &["--max-snapshots", &n]);
    fill(&s).await;
    let mut streams = Vec::new();
    for _ in 0..UNREAD / PER_CONNECTION {
        let ch = connect(&s).await;
        let mut opening = tokio::task::JoinSet::new();
        for _ in 0..PER_CONNECTION {
            opening.spawn(snapshot(ch.clone()));
        }
        while let Some(r) = opening.join_next().await {
            streams.push(r.unwrap().expect("a snapshot under --max-snapshots"));
        }
    }
    // Writes go on, each in a bounded time.
    let mut c = Client::connect([&s.addr], None).await.unwrap();
    let mut slowest = Duration::ZERO;
    for i in 0..100 {
        let started = Instant::now();
        tokio::time::timeout(Duration::from_secs(10), c.put(format!("w/{i}"), "v", None))
            .await
            .expect("a put within 10 s with the snapshots unread")
            .unwrap();
        slowest = slowest.max(started.elapsed());
    }
    // The blocking threads that made the copies go idle and leave; none waits on a client.
    let until = Instant::now() + WAIT;
    let mut now = threads(s.child.id());
    while now > MAX_THREADS {
        assert!(
            Instant::now() < until,
            "{now} threads with {UNREAD} unread snapshots"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        now = threads(s.child.id());
    }
    println!(
        "{UNREAD} unread snapshots of a {} KiB database: slowest of 100 puts {slowest:?}, \
         server threads {now}",
        DB_BYTES / 1024
    );
    assert!(slowest < Duration::from_secs(2), "slowest put {slowest:?}");
    drop(streams);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e16_snapshots_past_the_bound_are_refused_and_an_unread_one_ends_after_its_timeout() {
    let _alone = HEAVY.lock().await;
    let (_dir, file) = temp_db();
    let s = Server::start(
        &file,
        &[
            "--max-snapshots",
            "2",
            "--snapshot-read-timeout",
            READ_TIMEOUT,
        ],
    );
    fill(&s).await;
    let ch = connect(&s).await;
    let mut first = snapshot(ch.clone()).await.unwrap();
    let _second = snapshot(ch.clone()).await.unwrap();
    let refused = snapshot(ch.clone()).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert_eq!(
        refused.message(),
        "tenure serve: too many snapshots in progress"
    );
    // Unread for the timeout, both end and give back their places: a new snapshot is served.
    let until = Instant::now() + WAIT;
    let mut whole = loop {
        match snapshot(connect(&s).await).await {
            Ok(stream) => break stream,
            Err(e) => {
                assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
                assert!(Instant::now() < until, "still refused: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let mut bytes = 0;
    while let Some(m) = whole.message().await.unwrap() {
        bytes += m.blob.len();
    }
    assert!(bytes > DB_BYTES, "{bytes} bytes");
    // The first stream, read now: what was buffered, then the error it ended with.
    let ended = loop {
        match first.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stalled snapshot ended without an error"),
            Err(e) => break e,
        }
    };
    assert_eq!(ended.code(), Code::DeadlineExceeded);
    assert_eq!(
        ended.message(),
        "tenure serve: the snapshot was not read in time"
    );
}

#[test]
fn e16_a_snapshot_past_the_disk_bound_is_refused_and_writes_nothing() {
    let (dir, file) = temp_db();
    let s = Server::start(&file, &["--max-snapshot-disk-bytes", "4096"]);
    s.ok(&["put", "k", "v"]);
    let before = std::fs::read_dir(dir.path()).unwrap().count();
    let out = s.etcdctl(&[
        "snapshot",
        "save",
        dir.path().join("s.db").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tenure serve: the snapshots in progress hold all the disk they may"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), before);
}
