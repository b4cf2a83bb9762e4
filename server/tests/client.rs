//! SPEC E2–E9 checked with the Rust `etcd-client` crate (and raw gRPC where the crate cannot
//! express a request), a client nobody here wrote.

mod common;

use std::time::Duration;

use common::{next_lines, spawn_lines, temp_db, Server, WAIT};
use etcd_client::proto::{
    PbLeaseKeepAliveRequest, PbLeaseKeepAliveResponse, PbRangeRequest, PbRangeResponse,
};
use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, WatchOptions,
};

async fn client(s: &Server) -> Client {
    Client::connect([s.url()], None).await.unwrap()
}

fn message(e: etcd_client::Error) -> String {
    match e {
        etcd_client::Error::GRpcStatus(s) => s.message().to_string(),
        other => other.to_string(),
    }
}

/// How long a waiter that must not get through is watched, once it is queued.
const NOT_YET: Duration = Duration::from_millis(500);

/// Waits (`WAIT` at most) until `prefix` holds `n` keys: a waiter has queued its key.
async fn wait_for_keys(c: &mut Client, prefix: &str, n: i64) {
    let until = tokio::time::Instant::now() + WAIT;
    loop {
        let got = c
            .get(
                prefix,
                Some(GetOptions::new().with_prefix().with_count_only()),
            )
            .await
            .unwrap()
            .count();
        if got >= n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{prefix}: {got} keys, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn e2_kv_put_options_sorted_ranges_nested_txn_and_compact() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let mut c = client(&s).await;
    let r = c.put("a", "1", None).await.unwrap();
    assert_eq!(
        r.header().unwrap().revision(),
        2,
        "an empty store is at 1, as in etcd"
    );
    assert!(r.header().unwrap().member_id() != 0 && r.header().unwrap().raft_term() == 1);
    c.put("b", "3", None).await.unwrap();
    let r = c
        .put("a", "2", Some(PutOptions::new().with_prev_key()))
        .await
        .unwrap();
    assert_eq!(r.prev_key().unwrap().value(), b"1");
    let got = c
        .get(
            "",
            Some(
                GetOptions::new()
                    .with_all_keys()
                    .with_sort(SortTarget::Value, SortOrder::Descend),
            ),
        )
        .await
        .unwrap();
    let keys: Vec<&[u8]> = got.kvs().iter().map(|kv| kv.key()).collect();
    assert_eq!(keys, [&b"b"[..], b"a"]);
    assert_eq!(got.kvs()[1].version(), 2);
    // A nested txn: the outer compare holds, the inner one fails; one revision for it all.
    let inner = Txn::new()
        .when([Compare::value("b", CompareOp::Equal, "nope")])
        .and_then([TxnOp::put("never", "x", None)])
        .or_else([TxnOp::put("inner", "else", None), TxnOp::get("a", None)]);
    let outer = Txn::new()
        .when([Compare::version("a", CompareOp::Equal, 2)])
        .and_then([TxnOp::put("outer", "yes", None), TxnOp::txn(inner)]);
    let t = c.txn(outer).await.unwrap();
    assert!(t.succeeded());
    assert_eq!(
        t.header().unwrap().revision(),
        5,
        "a txn's header revision is the one it wrote"
    );
    assert_eq!(
        c.get("inner", None).await.unwrap().kvs()[0].mod_revision(),
        5
    );
    assert!(c.get("never", None).await.unwrap().kvs().is_empty());
    let d = c
        .delete("a", Some(etcd_client::DeleteOptions::new().with_prev_key()))
        .await
        .unwrap();
    assert_eq!((d.deleted(), d.prev_kvs()[0].value()), (1, &b"2"[..]));
    c.compact(3, None).await.unwrap();
    let again = c.compact(3, None).await.unwrap_err();
    assert_eq!(
        message(again),
        "etcdserver: mvcc: required revision has been compacted"
    );
    let future = c.compact(99, None).await.unwrap_err();
    assert_eq!(
        message(future),
        "etcdserver: mvcc: required revision is a future revision"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn e4_many_watches_on_one_stream_cancel_progress_and_compacted_start() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let mut c = client(&s).await;
    c.put("old", "0", None).await.unwrap(); // revision 2
    let mut w = c
        .watch(
            "x/",
            Some(WatchOptions::new().with_prefix().with_prev_key()),
        )
        .await
        .unwrap();
    let created = w.message().await.unwrap().unwrap();
    assert!(created.created());
    let first = created.watch_id();
    w.watch(
        "y",
        Some(WatchOptions::new().with_filters([etcd_client::WatchFilterType::NoPut])),
    )
    .await
    .unwrap();
    let created = w.message().await.unwrap().unwrap();
    assert!(created.created() && created.watch_id() != first);
    let second = created.watch_id();
    c.put("x/1", "a", None).await.unwrap();
    c.put("y", "b", None).await.unwrap(); // filtered: NOPUT
    c.delete("y", None).await.unwrap();
    // Order is promised per watch (E4), not across the watches of one stream.
    let mut evs = [
        w.message().await.unwrap().unwrap(),
        w.message().await.unwrap().unwrap(),
    ];
    evs.sort_by_key(|ev| ev.watch_id() != first);
    assert_eq!(
        (evs[0].watch_id(), evs[0].events()[0].kv().unwrap().key()),
        (first, &b"x/1"[..])
    );
    assert_eq!(evs[1].watch_id(), second);
    assert_eq!(evs[1].events().len(), 1);
    assert_eq!(evs[1].events()[0].event_type(), EventType::Delete);
    // Progress: no events, the header revision says everything up to it was sent.
    w.request_progress().await.unwrap();
    let p = w.message().await.unwrap().unwrap();
    assert!(p.events().is_empty() && !p.created() && !p.canceled());
    assert_eq!((p.watch_id(), p.header().unwrap().revision()), (-1, 5));
    w.cancel(first).await.unwrap();
    let canceled = w.message().await.unwrap().unwrap();
    assert!(canceled.canceled() && canceled.watch_id() == first);
    c.put("x/2", "gone", None).await.unwrap();
    c.put("y", "b", None).await.unwrap();
    c.delete("y", None).await.unwrap();
    let ev = w.message().await.unwrap().unwrap();
    assert_eq!(
        ev.watch_id(),
        second,
        "the canceled watch sends nothing more"
    );
    // From an old revision still in the history: replayed.
    let mut old = c
        .watch("old", Some(WatchOptions::new().with_start_revision(2)))
        .await
        .unwrap();
    assert!(old.message().await.unwrap().unwrap().created());
    let replay = old.message().await.unwrap().unwrap();
    assert_eq!(replay.events()[0].kv().unwrap().mod_revision(), 2);
    // Restart (K11): the history is on disk, the same start replays; below a compaction, etcd's
    // compacted response with the compaction revision.
    drop((w, old, c));
    assert_eq!(s.terminate().code(), Some(0));
    let s = Server::start(&db, &[]);
    let mut c = client(&s).await;
    let mut again = c
        .watch("old", Some(WatchOptions::new().with_start_revision(2)))
        .await
        .unwrap();
    assert!(again.message().await.unwrap().unwrap().created());
    let replay = again.message().await.unwrap().unwrap();
    assert_eq!(replay.events()[0].kv().unwrap().mod_revision(), 2);
    c.compact(3, None).await.unwrap();
    let mut w = c
        .watch("old", Some(WatchOptions::new().with_start_revision(2)))
        .await
        .unwrap();
    let mut compacted = None;
    while let Some(m) = w.message().await.unwrap() {
        if m.canceled() {
            compacted = Some(m);
            break;
        }
    }
    let m = compacted.expect("a canceled response");
    assert_eq!(m.compact_revision(), 3);
    assert_eq!(
        m.cancel_reason(),
        "etcdserver: mvcc: required revision has been compacted"
    );
}

/// Raw gRPC, for what the crate cannot send (many leases on one keep-alive stream, bad enums).
async fn raw(s: &Server) -> tonic::client::Grpc<tonic::transport::Channel> {
    let ch = tonic::transport::Endpoint::from_shared(s.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    tonic::client::Grpc::new(ch)
}

#[tokio::test(flavor = "multi_thread")]
async fn e3_many_leases_on_one_keep_alive_stream_and_ttl_0_once_gone() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let mut c = client(&s).await;
    let a = c.lease_grant(30, None).await.unwrap().id();
    let b = c.lease_grant(60, None).await.unwrap().id();
    let ttl = c
        .lease_time_to_live(
            a,
            Some(etcd_client::LeaseTimeToLiveOptions::new().with_keys()),
        )
        .await
        .unwrap();
    assert_eq!(ttl.granted_ttl(), 30);
    assert!(ttl.ttl() > 25 && ttl.ttl() <= 30);
    c.lease_revoke(b).await.unwrap();
    let mut g = raw(&s).await;
    g.ready().await.unwrap();
    let reqs = tokio_stream::iter([a, b, 424242].map(|id| PbLeaseKeepAliveRequest { id }));
    let path =
        tonic::codegen::http::uri::PathAndQuery::from_static("/etcdserverpb.Lease/LeaseKeepAlive");
    let codec: tonic_prost::ProstCodec<PbLeaseKeepAliveRequest, PbLeaseKeepAliveResponse> =
        tonic_prost::ProstCodec::default();
    let mut out = g
        .streaming::<_, _, PbLeaseKeepAliveResponse, _>(tonic::Request::new(reqs), path, codec)
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    for _ in 0..3 {
        let r = tokio::time::timeout(WAIT, out.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        got.push((r.id, r.ttl));
    }
    assert_eq!(got, [(a, 30), (b, 0), (424242, 0)]);
    let leases = c.leases().await.unwrap();
    assert_eq!(
        leases.leases().iter().map(|l| l.id()).collect::<Vec<_>>(),
        [a]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn e7_bad_input_gets_etcds_errors_and_writes_nothing() {
    let (_dir, db) = temp_db();
    let s = Server::start(
        &db,
        &[
            "--max-request-bytes",
            "100000",
            "--max-watches-per-stream",
            "8",
        ],
    );
    let mut c = client(&s).await;
    let big = vec![b'x'; 150_000];
    let e = c.put("big", big, None).await.unwrap_err();
    assert_eq!(message(e), "etcdserver: request is too large");
    c.put("fits", vec![b'x'; 90_000], None).await.unwrap();
    let e = c
        .put("k", "v", Some(PutOptions::new().with_lease(777)))
        .await
        .unwrap_err();
    assert_eq!(message(e), "etcdserver: requested lease not found");
    let e = c.put("", "v", None).await.unwrap_err();
    assert_eq!(message(e), "etcdserver: key is not provided");
    let e = c
        .put("k", "v", Some(PutOptions::new().with_ignore_value()))
        .await
        .unwrap_err();
    assert_eq!(message(e), "etcdserver: value is provided");
    let e = c
        .put("nokey", "", Some(PutOptions::new().with_ignore_value()))
        .await
        .unwrap_err();
    assert_eq!(message(e), "etcdserver: key not found");
    let many: Vec<TxnOp> = (0..129)
        .map(|i| TxnOp::put(format!("t{i}"), "v", None))
        .collect();
    let e = c.txn(Txn::new().and_then(many)).await.unwrap_err();
    assert_eq!(message(e), "etcdserver: too many operations in txn request");
    let dup = Txn::new().and_then([TxnOp::put("d", "1", None), TxnOp::put("d", "2", None)]);
    assert_eq!(
        message(c.txn(dup).await.unwrap_err()),
        "etcdserver: duplicate key given in txn request"
    );
    let e = c.lease_revoke(555).await.unwrap_err();
    assert_eq!(message(e), "etcdserver: requested lease not found");
    let e = c.lease_grant(9_000_000_001, None).await.unwrap_err();
    assert_eq!(message(e), "etcdserver: too large lease TTL");
    // A sort order no etcd version defines.
    let mut g = raw(&s).await;
    g.ready().await.unwrap();
    let bad = PbRangeRequest {
        key: b"k".to_vec(),
        sort_order: 9,
        ..PbRangeRequest::default()
    };
    let e = g
        .unary::<PbRangeRequest, PbRangeResponse, _>(
            tonic::Request::new(bad),
            tonic::codegen::http::uri::PathAndQuery::from_static("/etcdserverpb.KV/Range"),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    // Too many watches on one stream: the extra one is refused, the others keep working.
    let mut w = c.watch("w0", None).await.unwrap();
    for i in 1..10 {
        w.watch(format!("w{i}"), None).await.unwrap();
    }
    let mut refused = 0;
    for _ in 0..10 {
        let m = w.message().await.unwrap().unwrap();
        if m.canceled() {
            refused += 1;
            assert!(
                m.cancel_reason().contains("too many watches"),
                "{}",
                m.cancel_reason()
            );
        }
    }
    assert_eq!(refused, 2);
    // Nothing above was written: only "fits" exists.
    let all = c
        .get("", Some(GetOptions::new().with_all_keys().with_keys_only()))
        .await
        .unwrap();
    assert_eq!(
        all.kvs().iter().map(|kv| kv.key()).collect::<Vec<_>>(),
        [&b"fits"[..]]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn e7_many_concurrent_clients_each_see_their_writes() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let mut tasks = Vec::new();
    for t in 0..32 {
        let url = s.url();
        tasks.push(tokio::spawn(async move {
            let mut c = Client::connect([url], None).await.unwrap();
            let mut revs = Vec::new();
            for i in 0..25 {
                let r = c.put(format!("c/{t}/{i}"), "v", None).await.unwrap();
                revs.push(r.header().unwrap().revision());
                let got = c.get(format!("c/{t}/{i}"), None).await.unwrap();
                assert_eq!(
                    got.kvs().len(),
                    1,
                    "a client reads its own acknowledged write"
                );
            }
            revs
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 800, "every put got its own revision");
    let mut c = client(&s).await;
    let n = c
        .get(
            "c/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap();
    assert_eq!(n.count(), 800);
}

#[tokio::test(flavor = "multi_thread")]
async fn e7_a_client_killed_mid_stream_leaves_the_server_serving() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    // The first write (revision 2) is replayed to the watch: its first lines show the stream is
    // open. The keep-alive prints a line per renewal, the first at once.
    s.ok(&["put", "k", "before"]);
    let lease = s.ok(&["lease", "grant", "60"]);
    let id = lease.split_whitespace().nth(1).unwrap().to_string();
    for (args, first) in [
        (vec!["watch", "k", "--prefix", "--rev", "2"], "PUT"),
        (
            vec!["lease", "keep-alive", id.as_str()],
            "keepalived with TTL(60)",
        ),
    ] {
        let (mut child, rx) = spawn_lines(&s.addr, &args);
        let line = next_lines(&rx, 1).remove(0);
        assert!(line.contains(first), "{args:?}: {line}");
        common::signal(&child, "KILL");
        let _ = child.wait();
    }
    let mut c = client(&s).await;
    c.put("k", "after", None).await.unwrap();
    assert_eq!(c.get("k", None).await.unwrap().kvs()[0].value(), b"after");
    drop(c);
    assert_eq!(
        s.terminate().code(),
        Some(0),
        "no stream left behind blocks shutdown"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn e8_sigkill_and_restart_loses_no_acknowledged_write() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let url = s.url();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let writer = tokio::spawn(async move {
        let mut c = Client::connect([url], None).await.unwrap();
        for i in 0.. {
            match c.put(format!("ack/{i:06}"), "v", None).await {
                Ok(_) => {
                    if tx.send(i).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    });
    let mut acked = Vec::new();
    while acked.len() < 200 {
        acked.push(
            tokio::time::timeout(WAIT, rx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    s.kill9();
    let _ = writer.await;
    while let Ok(i) = rx.try_recv() {
        acked.push(i);
    }
    let s = Server::start(&db, &[]);
    let mut c = client(&s).await;
    let got = c
        .get(
            "ack/",
            Some(GetOptions::new().with_prefix().with_keys_only()),
        )
        .await
        .unwrap();
    let keys: std::collections::HashSet<String> = got
        .kvs()
        .iter()
        .map(|kv| String::from_utf8(kv.key().to_vec()).unwrap())
        .collect();
    for i in &acked {
        assert!(
            keys.contains(&format!("ack/{i:06}")),
            "acknowledged write {i} lost"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn e5_lock_service_excludes_the_next_holder_and_etcdctl_until_unlock() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let mut c = client(&s).await;
    let l1 = c.lease_grant(60, None).await.unwrap().id();
    let l2 = c.lease_grant(60, None).await.unwrap().id();
    let held = c
        .lock("job", Some(etcd_client::LockOptions::new().with_lease(l1)))
        .await
        .unwrap();
    let key1 = held.key().to_vec();
    assert_eq!(
        key1,
        format!("job/{l1:x}").into_bytes(),
        "etcd's key layout"
    );
    let mut c2 = client(&s).await;
    let mut second = tokio::spawn(async move {
        c2.lock("job", Some(etcd_client::LockOptions::new().with_lease(l2)))
            .await
            .unwrap()
            .key()
            .to_vec()
    });
    // etcdctl (Go's concurrency.Mutex over plain KV) waits behind the lock service too.
    let (mut ctl, ctl_rx) = spawn_lines(&s.addr, &["lock", "job"]);
    // Both waiters queued their keys behind the holder's.
    wait_for_keys(&mut c, "job/", 3).await;
    // Neither gets the lock while the first holds it (a bounded wait for what must not happen).
    assert!(
        tokio::time::timeout(NOT_YET, &mut second).await.is_err(),
        "a second holder got the lock while the first held it"
    );
    assert!(
        ctl_rx.try_recv().is_err(),
        "etcdctl got the lock while the lock service held it"
    );
    c.unlock(key1).await.unwrap();
    let key2 = tokio::time::timeout(WAIT, second).await.unwrap().unwrap();
    assert_eq!(key2, format!("job/{l2:x}").into_bytes());
    c.unlock(key2).await.unwrap();
    let got = ctl_rx
        .recv_timeout(WAIT)
        .expect("etcdctl lock after both unlocks");
    assert!(got.starts_with("job/"), "{got}");
    common::signal(&ctl, "INT");
    let _ = ctl.wait();
    let e = c
        .lock("job", Some(etcd_client::LockOptions::new().with_lease(999)))
        .await
        .unwrap_err();
    assert_eq!(message(e), "etcdserver: requested lease not found");
}

#[tokio::test(flavor = "multi_thread")]
async fn e5_election_campaign_proclaim_observe_leader_resign() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let mut c = client(&s).await;
    let l1 = c.lease_grant(60, None).await.unwrap().id();
    let l2 = c.lease_grant(60, None).await.unwrap().id();
    let e = c.leader("chief").await.unwrap_err();
    assert_eq!(message(e), "election: no leader");
    let won = c.campaign("chief", "one", l1).await.unwrap();
    let leader = won.leader().unwrap().clone();
    assert_eq!(leader.key(), format!("chief/{l1:x}").as_bytes());
    let mut obs = c.observe("chief").await.unwrap();
    let first = tokio::time::timeout(WAIT, obs.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.kv().unwrap().value(), b"one");
    c.proclaim(
        "two",
        Some(etcd_client::ProclaimOptions::new().with_leader(leader.clone())),
    )
    .await
    .unwrap();
    let next = tokio::time::timeout(WAIT, obs.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(next.kv().unwrap().value(), b"two");
    let mut c2 = client(&s).await;
    let mut second = tokio::spawn(async move { c2.campaign("chief", "three", l2).await.unwrap() });
    // The second candidate's key is queued behind the leader's.
    wait_for_keys(&mut c, "chief/", 2).await;
    assert!(
        tokio::time::timeout(NOT_YET, &mut second).await.is_err(),
        "two leaders at once"
    );
    // etcdctl agrees on the leader.
    let ctl = s.ok(&[
        "get",
        "chief/",
        "--prefix",
        "--sort-by",
        "CREATE",
        "--limit",
        "1",
    ]);
    assert_eq!(ctl.lines().nth(1), Some("two"));
    c.resign(Some(
        etcd_client::ResignOptions::new().with_leader(leader.clone()),
    ))
    .await
    .unwrap();
    let won2 = tokio::time::timeout(WAIT, second).await.unwrap().unwrap();
    assert_eq!(
        won2.leader().unwrap().key(),
        format!("chief/{l2:x}").as_bytes()
    );
    assert_eq!(
        c.leader("chief").await.unwrap().kv().unwrap().value(),
        b"three"
    );
    let stale = c
        .proclaim(
            "late",
            Some(etcd_client::ProclaimOptions::new().with_leader(leader)),
        )
        .await;
    assert_eq!(message(stale.unwrap_err()), "election: not leader");
    let next = tokio::time::timeout(WAIT, obs.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(next.kv().unwrap().value(), b"three");
}

#[tokio::test(flavor = "multi_thread")]
async fn e4_a_watcher_that_never_reads_is_canceled_and_writers_never_wait_for_it() {
    use etcd_client::proto::{PbWatchRequest, PbWatchRequestUnion, PbWatchResponse};
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let mut g = raw(&s).await;
    g.ready().await.unwrap();
    let (req_tx, req_rx) = tokio::sync::mpsc::channel::<PbWatchRequest>(4);
    // The crate's own watch reads for us; this raw stream reads only when told to.
    let mut create = PbWatchRequest {
        request_union: Some(PbWatchRequestUnion::CreateRequest(Default::default())),
    };
    if let Some(PbWatchRequestUnion::CreateRequest(c)) = &mut create.request_union {
        c.key = b"slow/".to_vec();
        c.range_end = b"slow0".to_vec();
    }
    req_tx.send(create).await.unwrap();
    let codec: tonic_prost::ProstCodec<PbWatchRequest, PbWatchResponse> =
        tonic_prost::ProstCodec::default();
    let mut out = g
        .streaming(
            tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(req_rx)),
            tonic::codegen::http::uri::PathAndQuery::from_static("/etcdserverpb.Watch/Watch"),
            codec,
        )
        .await
        .unwrap()
        .into_inner();
    assert!(out.message().await.unwrap().unwrap().created);
    // Stop reading; write far more events than the server buffers for one watcher.
    let mut c = client(&s).await;
    let started = std::time::Instant::now();
    for t in 0..320 {
        // 1 KiB values: far more than HTTP/2 flow-control windows and queues hold.
        let puts: Vec<TxnOp> = (0..128)
            .map(|i| TxnOp::put(format!("slow/{t}/{i}"), vec![b'v'; 1024], None))
            .collect();
        c.txn(Txn::new().and_then(puts)).await.unwrap();
    }
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "writers waited for the slow watcher"
    );
    // Reading again: events up to a point, then the cancel with where to resume.
    let mut last = 0;
    let canceled = loop {
        let m = tokio::time::timeout(WAIT, out.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if m.canceled {
            break m;
        }
        last = m
            .events
            .last()
            .and_then(|e| e.kv.as_ref())
            .map_or(last, |kv| kv.mod_revision);
    };
    assert!(
        canceled.cancel_reason.contains("fell more than"),
        "{}",
        canceled.cancel_reason
    );
    assert!(
        canceled.compact_revision > last,
        "resume point {} after the last delivered {last}",
        canceled.compact_revision
    );
    drop(req_tx);
    assert_eq!(
        c.get(
            "slow/",
            Some(GetOptions::new().with_prefix().with_count_only())
        )
        .await
        .unwrap()
        .count(),
        320 * 128
    );
}
