//! SPEC E22, E23, E26 and E27: bounded requests applied on an async worker await their commit
//! without a thread, a write waiting for a stalled disk holds no worker, a small range answers
//! without the blocking pool, and a watch event reaches the response stream without a task.
#![cfg(feature = "serve")]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use etcd_client::proto::{
    PbClusterService, PbKvService, PbLeaseGrantRequest, PbLeaseService, PbLeaseTimeToLiveRequest,
    PbMemberListRequest, PbPutRequest, PbRangeRequest, PbWatchRequest, PbWatchRequestUnion,
};
use tenure::etcd::serve::convert::Ids;
use tenure::etcd::serve::service::{Cluster, Ctx, Kv, Lease};
use tenure::etcd::serve::watch::responses;
use tenure::etcd::{DeleteRangeRequest, Outcome, PutRequest, RangeRequest, RequestOp};
use tenure::limits::{INLINE_RANGE_BYTES, INLINE_RANGE_KEYS};
use tenure::{Durability, Error, StorageFaults, Tenure, WaitPool};
use tokio_stream::StreamExt;
use tonic::Request;

fn put(key: &str, value: &str) -> RequestOp {
    RequestOp::Put(PutRequest {
        key: key.into(),
        value: value.into(),
        ..PutRequest::default()
    })
}

fn open(dir: &std::path::Path, faults: &StorageFaults) -> Tenure {
    Tenure::builder()
        .path(dir.join("db"))
        .durability(Durability::Immediate)
        .storage_faults(faults.clone())
        .open()
        .unwrap()
}

/// Lets the disk move again however the test ends, so closing the engine never hangs.
struct Unstall(StorageFaults);

impl Drop for Unstall {
    fn drop(&mut self) {
        self.0.stall_syncs(false);
    }
}

/// Polls `fut` once, with a waker that does nothing.
fn poll_once<F: Future + ?Sized>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn e22_a_bounded_write_answers_once_its_commit_ends() {
    let dir = tempfile::tempdir().unwrap();
    let faults = StorageFaults::new();
    let db = open(dir.path(), &faults);
    faults.stall_syncs(true);
    let unstall = Unstall(faults.clone());
    let applied = db
        .execute_applied(&put("a", "1"))
        .unwrap()
        .expect("a put is bounded");
    assert!(applied.waits());
    // Applied in memory at once, durable only once the stalled sync returns.
    assert_eq!(db.revision().unwrap(), 1);
    let mut answer = pin!(applied.durable());
    assert!(
        poll_once(answer.as_mut()).is_pending(),
        "answered before its commit"
    );
    assert_eq!(db.durable_revision(), 0);
    drop(unstall);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    match rt.block_on(answer) {
        Ok(Outcome::Done { revision: 1, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(db.durable_revision(), 1);
    // A read of durable state needs no wait.
    let read = RequestOp::Range(RangeRequest::new("a", ""));
    let applied = db.execute_applied(&read).unwrap().expect("a small read");
    assert!(!applied.waits());
}

#[test]
fn e22_a_request_of_unbounded_work_is_left_to_a_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), &StorageFaults::new());
    // More keys than a range answered inline may hold (E26).
    for i in 0..=INLINE_RANGE_KEYS {
        db.put(format!("a{i:03}"), "v", None).unwrap();
    }
    let prefix_delete = RequestOp::DeleteRange(DeleteRangeRequest {
        key: "a".into(),
        range_end: "b".into(),
        ..DeleteRangeRequest::default()
    });
    let large_read = RequestOp::Range(RangeRequest::new("a", "b"));
    let past_read = RequestOp::Range(RangeRequest {
        revision: 1,
        ..RangeRequest::new("a", "")
    });
    for op in [prefix_delete, large_read, past_read] {
        assert!(db.execute_applied(&op).unwrap().is_none(), "{op:?}");
    }
    let one_key = RequestOp::DeleteRange(DeleteRangeRequest {
        key: "a".into(),
        ..DeleteRangeRequest::default()
    });
    assert!(db.execute_applied(&one_key).unwrap().is_some());
}

/// The services' context over `db`, and the sender that would shut them down.
fn ctx(db: &Tenure, dir: &std::path::Path) -> (tokio::sync::watch::Sender<bool>, Arc<Ctx>) {
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let ctx = Arc::new(Ctx {
        db: db.clone(),
        ids: Ids::for_path(&dir.join("db")),
        urls: Vec::new(),
        max_request_bytes: 1 << 20,
        max_watches: 100,
        shutdown,
        pool: WaitPool::new("test-wait").unwrap(),
    });
    (stop, ctx)
}

fn prefix_range(prefix: &str) -> Request<PbRangeRequest> {
    let mut end = prefix.as_bytes().to_vec();
    *end.last_mut().unwrap() += 1;
    Request::new(PbRangeRequest {
        key: prefix.as_bytes().to_vec(),
        range_end: end,
        ..PbRangeRequest::default()
    })
}

#[test]
fn e26_a_small_range_answers_on_the_worker_and_a_large_one_on_the_blocking_pool() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), &StorageFaults::new());
    for i in 0..10 {
        db.put(format!("small/{i}"), "v", None).unwrap();
    }
    for i in 0..=INLINE_RANGE_KEYS {
        db.put(format!("many/{i:03}"), "v", None).unwrap();
    }
    // Few keys, but more bytes than an inline answer copies.
    for i in 0..2 {
        db.put(format!("big/{i}"), vec![b'x'; INLINE_RANGE_BYTES / 2], None)
            .unwrap();
    }
    // A blocking pool of one thread, held until the test lets it go: a request that needs the
    // pool cannot answer meanwhile; one that answers on the worker does, at its first poll.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let (_stop, ctx) = ctx(&db, dir.path());
    rt.block_on(async {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let holder = tokio::task::spawn_blocking(move || held.recv());
        let kv = Kv(ctx.clone());
        let mut small = kv.range(prefix_range("small/"));
        match poll_once(small.as_mut()) {
            Poll::Ready(Ok(r)) => {
                let r = r.into_inner();
                assert_eq!((r.kvs.len(), r.count), (10, 10));
            }
            Poll::Ready(Err(e)) => panic!("{e}"),
            Poll::Pending => panic!("a 10-key range waited for the (held) blocking pool"),
        }
        let mut many = kv.range(prefix_range("many/"));
        let mut big = kv.range(prefix_range("big/"));
        assert!(
            poll_once(many.as_mut()).is_pending(),
            "a range over INLINE_RANGE_KEYS keys answered without the blocking pool"
        );
        assert!(
            poll_once(big.as_mut()).is_pending(),
            "a range over INLINE_RANGE_BYTES answered without the blocking pool"
        );
        release.send(()).unwrap();
        holder.await.unwrap().unwrap();
        let many = many.await.unwrap().into_inner();
        assert_eq!(many.kvs.len(), INLINE_RANGE_KEYS + 1);
        let big = big.await.unwrap().into_inner();
        assert_eq!(big.kvs.len(), 2);
    });
}

#[test]
fn e27_a_watch_event_is_given_by_the_response_streams_own_poll() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), &StorageFaults::new());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (_stop, ctx) = ctx(&db, dir.path());
    rt.block_on(async {
        let mut create = PbWatchRequest {
            request_union: Some(PbWatchRequestUnion::CreateRequest(Default::default())),
        };
        if let Some(PbWatchRequestUnion::CreateRequest(c)) = &mut create.request_union {
            c.key = b"w/".to_vec();
            c.range_end = b"w0".to_vec();
        }
        let mut out = responses(ctx.clone(), tokio_stream::iter([Ok(create)]));
        let created = out.next().await.unwrap().unwrap();
        assert!(created.created && !created.canceled);
        // From here on this single-threaded runtime runs no other task: the test never yields
        // to it. The event must come from polling the response stream itself.
        db.put("w/1", "v", None).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let resp = loop {
            match out
                .as_mut()
                .poll_next(&mut Context::from_waker(Waker::noop()))
            {
                Poll::Ready(r) => break r.unwrap().unwrap(),
                Poll::Pending => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the event needs another task to run"
                    );
                    std::thread::yield_now();
                }
            }
        };
        assert_eq!(resp.watch_id, created.watch_id);
        let kv = resp.events[0].kv.as_ref().unwrap();
        assert_eq!(
            (kv.key.as_slice(), kv.value.as_slice()),
            (&b"w/1"[..], &b"v"[..])
        );
    });
}

#[test]
fn e22_a_failed_commit_fails_the_waiting_answer() {
    let dir = tempfile::tempdir().unwrap();
    let faults = StorageFaults::new();
    let db = open(dir.path(), &faults);
    faults.fail_syncs(true);
    let applied = db.execute_applied(&put("a", "lost")).unwrap().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    match rt.block_on(applied.durable()) {
        Err(Error::Storage { .. }) => {}
        other => panic!("a write whose commit failed was answered {other:?}"),
    }
    // And a read after it does not see it (E8), inline or not.
    let read = RequestOp::Range(RangeRequest::new("a", ""));
    match db.execute_applied(&read) {
        Err(Error::Storage { .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn e23_writes_waiting_for_a_stalled_disk_hold_no_worker() {
    let dir = tempfile::tempdir().unwrap();
    let faults = StorageFaults::new();
    let db = open(dir.path(), &faults);
    // One worker: a write that held it while its sync stalls would starve every other request.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let ctx = Arc::new(Ctx {
        db: db.clone(),
        ids: Ids::for_path(&dir.path().join("db")),
        urls: Vec::new(),
        max_request_bytes: 1 << 20,
        max_watches: 100,
        shutdown,
        pool: WaitPool::new("test-wait").unwrap(),
    });
    rt.block_on(async {
        let lease = Lease::new(ctx.clone())
            .lease_grant(Request::new(PbLeaseGrantRequest { ttl: 60, id: 0 }))
            .await
            .unwrap()
            .into_inner()
            .id;
        faults.stall_syncs(true);
        let unstall = Unstall(faults.clone());
        let writes: Vec<_> = (0..4)
            .map(|i| {
                let kv = Kv(ctx.clone());
                tokio::spawn(async move {
                    let req = PbPutRequest {
                        key: format!("k{i}").into_bytes(),
                        value: b"v".to_vec(),
                        ..PbPutRequest::default()
                    };
                    kv.put(Request::new(req)).await
                })
            })
            .collect();
        // Each write is applied on the worker, then waits for the stalled commit.
        while db.revision().unwrap() < 4 {
            tokio::task::yield_now().await;
        }
        let read = {
            let kv = Kv(ctx.clone());
            tokio::spawn(async move {
                let req = PbRangeRequest {
                    key: b"k0".to_vec(),
                    ..PbRangeRequest::default()
                };
                kv.range(Request::new(req)).await
            })
        };
        // Requests that need no commit are answered meanwhile, on the same worker.
        let ttl = Lease::new(ctx.clone())
            .lease_time_to_live(Request::new(PbLeaseTimeToLiveRequest {
                id: lease,
                keys: false,
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(ttl.granted_ttl, 60);
        let members = Cluster(ctx.clone())
            .member_list(Request::new(PbMemberListRequest::default()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(members.members.len(), 1);
        assert_eq!(db.durable_revision(), 0, "the disk was stalled");
        assert!(writes.iter().all(|w| !w.is_finished()));
        // The read waits for the writes it could see (E8).
        assert!(!read.is_finished());
        drop(unstall);
        let mut revisions = Vec::new();
        for w in writes {
            let resp = w.await.unwrap().unwrap().into_inner();
            revisions.push(resp.header.unwrap().revision);
        }
        revisions.sort_unstable();
        assert_eq!(revisions, [1, 2, 3, 4]);
        let got = read.await.unwrap().unwrap().into_inner();
        assert_eq!(got.kvs[0].value, b"v");
        assert!(db.durable_revision() >= 4);
    });
}
