//! SPEC R1–R3: `Tenure::connect` — tenure's own API over etcd v3 — against `tenure serve` and
//! against a real etcd (Debian's etcd-server), both on loopback random ports. Each test body
//! runs once per place.

mod common;

use std::time::{Duration, Instant};

use common::{next_lines, session, signal, spawn_lines, temp_db, wait_for, Etcd, Server, WAIT};
use tenure::sync::{Election, Mutex};
use tenure::{Compare, CompareOp, Error, EventKind, Op, OpResponse, Tenure, Txn, WatchOptions};
use tenure::{Next, WaitPool};

/// A server that speaks etcd v3.
enum Place {
    Serve(Server, tempfile::TempDir, std::path::PathBuf),
    Etcd(Etcd, tempfile::TempDir),
}

impl Place {
    fn serve() -> Place {
        let (dir, file) = temp_db();
        Place::Serve(Server::start(&file, &[]), dir, file)
    }

    fn etcd() -> Place {
        let dir = tempfile::tempdir().unwrap();
        Place::Etcd(Etcd::start(dir.path()), dir)
    }

    fn addr(&self) -> &str {
        match self {
            Place::Serve(s, ..) => &s.addr,
            Place::Etcd(e, _) => &e.addr,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr())
    }

    fn child(&self) -> &std::process::Child {
        match self {
            Place::Serve(s, ..) => &s.child,
            Place::Etcd(e, _) => &e.child,
        }
    }

    fn connect(&self) -> Tenure {
        Tenure::builder()
            .endpoints([self.url()])
            .request_timeout(Duration::from_secs(2))
            .connect()
            .unwrap()
    }

    /// SIGKILL; `Dead::restart` brings the same server (address, data) back.
    fn kill9(self) -> Dead {
        match self {
            Place::Serve(s, dir, file) => {
                let addr = s.addr.clone();
                s.kill9();
                Dead::Serve(addr, dir, file)
            }
            Place::Etcd(e, dir) => Dead::Etcd(e.kill9(), dir),
        }
    }
}

enum Dead {
    Serve(String, tempfile::TempDir, std::path::PathBuf),
    Etcd(common::DeadEtcd, tempfile::TempDir),
}

impl Dead {
    fn restart(self) -> Place {
        match self {
            Dead::Serve(addr, dir, file) => {
                Place::Serve(Server::start_on(&file, &addr, &[]), dir, file)
            }
            Dead::Etcd(e, dir) => Place::Etcd(e.restart(), dir),
        }
    }
}

/// Runs `body` against `tenure serve`, then against etcd.
fn both(body: impl Fn(Place)) {
    body(Place::serve());
    body(Place::etcd());
}

#[test]
fn r1_keys_txn_and_revisions_over_connect() {
    both(|p| {
        let db = p.connect();
        let r1 = db.put("svc/a", "1", None).unwrap();
        let r2 = db.put("svc/b", "2", None).unwrap();
        assert_eq!(r2, r1 + 1);
        assert_eq!(db.revision().unwrap(), r2);
        let a = db.get("svc/a").unwrap().unwrap();
        assert_eq!(
            (a.value.as_slice(), a.create_revision, a.version),
            (&b"1"[..], r1, 1)
        );
        assert!(db.get("svc/none").unwrap().is_none());
        let keys: Vec<_> = db
            .range("svc/", None)
            .unwrap()
            .into_iter()
            .map(|kv| kv.key)
            .collect();
        assert_eq!(keys, [b"svc/a".to_vec(), b"svc/b".to_vec()]);
        assert_eq!(db.range("svc/", Some(1)).unwrap().len(), 1);
        assert!(matches!(
            db.put("", "x", None),
            Err(Error::InvalidArgument(_))
        ));

        // K5: compare-and-swap, both branches, with responses.
        let cas = |expect: &str| {
            Txn::new()
                .when([Compare::value("svc/a", CompareOp::Equal, expect)])
                .then([Op::put("svc/a", "won", None), Op::get("svc/b")])
                .otherwise([Op::range("svc/", None)])
        };
        let t = db.txn(cas("1")).unwrap();
        assert!(t.succeeded);
        assert_eq!(t.revision, r2 + 1);
        assert!(
            matches!(&t.responses[..], [OpResponse::Put { revision }, OpResponse::Get(Some(b))]
            if *revision == r2 + 1 && b.value == b"2")
        );
        let t = db.txn(cas("1")).unwrap();
        assert!(!t.succeeded);
        assert_eq!(
            t.revision,
            r2 + 1,
            "a txn that wrote nothing keeps the revision"
        );
        assert!(matches!(&t.responses[..], [OpResponse::Range(kvs)] if kvs.len() == 2));

        assert!(db.delete("svc/a").unwrap());
        assert!(!db.delete("svc/a").unwrap());
        assert_eq!(db.delete_prefix("svc/").unwrap(), 1);
        assert!(db.range("svc/", None).unwrap().is_empty());
        db.close().unwrap();
        assert!(matches!(db.get("k"), Err(Error::Closed(_))));
    });
}

#[test]
fn r1_leases_attach_and_engine_only_calls_over_connect() {
    both(|p| {
        let db = p.connect();
        let id = db.grant(Duration::from_secs(30)).unwrap();
        db.put("l/a", "1", Some(id)).unwrap();
        db.put("l/b", "2", None).unwrap();
        assert_eq!(db.lease_of("l/a").unwrap(), Some(id));
        assert_eq!(db.renew(id).unwrap(), Duration::from_secs(30));
        let info = db.time_to_live(id).unwrap();
        assert_eq!(
            (info.ttl, info.keys.clone()),
            (Duration::from_secs(30), vec![b"l/a".to_vec()])
        );
        assert!(info.remaining.unwrap() <= Duration::from_secs(30));
        assert!(db.leases().unwrap().iter().any(|l| l.id == id));

        // L6: attach and detach keep the value (etcd's ignore_value).
        db.attach(id, &["l/b"]).unwrap();
        let b = db.get("l/b").unwrap().unwrap();
        assert_eq!((b.value.as_slice(), b.lease), (&b"2"[..], Some(id)));
        db.detach(id, &["l/b"]).unwrap();
        assert_eq!(db.get("l/b").unwrap().unwrap().lease, None);
        assert_eq!(db.get("l/b").unwrap().unwrap().value, b"2");

        // grant_with_id; errors as tenure's.
        let chosen = db.grant_with_id(0x7e57, Duration::from_secs(30)).unwrap();
        assert_eq!(chosen.get(), 0x7e57);
        assert!(matches!(
            db.grant_with_id(0x7e57, Duration::from_secs(30)),
            Err(Error::LeaseExists(_))
        ));
        assert!(matches!(
            db.grant(Duration::ZERO),
            Err(Error::InvalidArgument(_))
        ));

        // L4: revoke deletes the lease's keys.
        db.revoke(id).unwrap();
        assert!(db.get("l/a").unwrap().is_none());
        let r = db.renew(id);
        assert!(
            matches!(r, Err(Error::LeaseNotFound(l)) if l == id),
            "{r:?}"
        );
        assert!(matches!(db.time_to_live(id), Err(Error::LeaseNotFound(_))));
        assert!(matches!(
            db.attach(id, &["l/b"]),
            Err(Error::LeaseNotFound(_))
        ));

        // Engine-only calls.
        assert!(matches!(
            db.checkpoint(chosen, Duration::from_secs(1)),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            db.promote(Duration::ZERO),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(db.demote(), Err(Error::Unsupported(_))));
        assert!(
            matches!(db.expired(), Err(Error::Unsupported(m)) if m.contains("expired")),
            "SPEC R1: expired() over connect is Unsupported, naming the call"
        );
        assert_eq!(
            Error::Unsupported(String::new()).code().name(),
            "TENURE_ERR_UNSUPPORTED"
        );

        // Keep-alive renews in the background.
        let ka = db
            .keep_alive(chosen, Some(Duration::from_millis(200)))
            .unwrap();
        assert!(ka.is_alive());
        ka.stop();
    });
}

#[test]
fn r1_watch_from_a_revision_and_compacted_over_connect() {
    both(|p| {
        let db = p.connect();
        let first = db.put("w/a", "1", None).unwrap();
        db.put("w/b", "2", None).unwrap();
        db.delete("w/a").unwrap();
        let opts = WatchOptions {
            prefix: true,
            start_revision: Some(first),
            prev_kv: true,
        };
        let mut w = db.watch("w/", opts).unwrap();
        let evs: Vec<_> = (0..3).map(|_| w.recv_timeout(WAIT).unwrap()).collect();
        assert_eq!(evs[0].kv.key, b"w/a");
        assert_eq!(evs[1].kv.key, b"w/b");
        assert_eq!(evs[2].kind, EventKind::Delete);
        assert_eq!(evs[2].prev_kv.as_ref().unwrap().value, b"1");
        let next = db.put("w/c", "3", None).unwrap();
        let ev = w.recv_timeout(WAIT).unwrap();
        assert_eq!((ev.kv.key.as_slice(), ev.revision()), (&b"w/c"[..], next));

        // Compacted by another client (etcdctl): the watch call itself says so, as embedded.
        let out = common::etcdctl(p.addr(), &["compact", &next.to_string()], None);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let old = db.watch(
            "w/",
            WatchOptions {
                prefix: true,
                start_revision: Some(first),
                prev_kv: false,
            },
        );
        assert!(
            matches!(&old, Err(Error::Compacted { revision, .. }) if *revision == first),
            "{old:?}"
        );
    });
}

#[test]
fn k13_future_revision_and_compacted_come_back_as_themselves_over_connect() {
    both(|p| {
        let db = p.connect();
        db.put("h/a", "1", None).unwrap();
        let r1 = db.revision().unwrap();
        db.put("h/a", "2", None).unwrap();
        let current = db.revision().unwrap();
        // A revision above the current one: etcd's text on the wire, FutureRevision here.
        for e in [
            db.get_at("h/a", current + 5).unwrap_err(),
            db.range_at("h/", None, current + 5).unwrap_err(),
        ] {
            assert_eq!(e.code(), tenure::ErrorCode::FutureRevision, "{e:?}");
            assert!(
                matches!(e, Error::FutureRevision { requested, .. } if requested == current + 5),
                "{e:?}"
            );
        }
        assert_eq!(
            db.compact(current + 5).unwrap(),
            Err(tenure::etcd::Refusal::FutureRevision)
        );
        // Below a compaction: Compacted with the revision asked for.
        assert_eq!(db.compact_physical(current).unwrap(), Ok(current));
        let e = db.get_at("h/a", r1).unwrap_err();
        assert!(
            matches!(e, Error::Compacted { revision, .. } if revision == r1),
            "{e:?}"
        );
        assert_eq!(db.get_at("h/a", current).unwrap().unwrap().value, b"2");
    });
}

#[test]
fn r1_mutex_and_election_recipes_over_connect() {
    both(|p| {
        let (a, b) = (p.connect(), p.connect());
        let (sa, sb) = (session(&a, 10), session(&b, 10));
        let ga = Mutex::new(&sa, "jobs").lock(WAIT).unwrap();
        assert!(matches!(
            Mutex::new(&sb, "jobs").try_lock(),
            Err(Error::Locked { .. })
        ));
        let t = std::thread::spawn(move || {
            let g = Mutex::new(&sb, "jobs").lock(WAIT).unwrap();
            g.fencing_token()
        });
        let ta = ga.fencing_token();
        ga.unlock().unwrap();
        assert!(t.join().unwrap() > ta, "S3: fencing tokens increase");

        let lead = Election::new(&sa, "chief").campaign("a", WAIT).unwrap();
        assert_eq!(Election::leader(&a, "chief").unwrap().unwrap().value, b"a");
        lead.resign().unwrap();
        sa.close().unwrap();
        assert!(sa.is_done());
    });
}

#[test]
fn r2_a_tenure_mutex_and_etcdctl_lock_exclude_each_other() {
    both(|p| {
        let db = p.connect();
        let s = session(&db, 10);
        let guard = Mutex::new(&s, "shared-job").lock(WAIT).unwrap();
        // etcdctl waits while tenure holds the lock...
        let (mut ctl, rx) = spawn_lines(p.addr(), &["lock", "shared-job"]);
        assert!(
            rx.recv_timeout(Duration::from_millis(1500)).is_err(),
            "etcdctl lock got the lock while a tenure Mutex held it"
        );
        // ...and gets it once tenure unlocks; then tenure must wait.
        guard.unlock().unwrap();
        let key = next_lines(&rx, 1).remove(0);
        assert!(key.starts_with("shared-job/"), "{key}");
        assert!(matches!(
            Mutex::new(&s, "shared-job").try_lock(),
            Err(Error::Locked { .. })
        ));
        signal(&ctl, "INT");
        wait_for(&mut ctl, WAIT);
        let g = Mutex::new(&s, "shared-job").lock(WAIT).unwrap();
        assert!(g.is_held());
    });
}

#[test]
fn r2_a_tenure_election_and_etcdctl_elect_agree_on_the_leader() {
    both(|p| {
        let db = p.connect();
        let s = session(&db, 10);
        let lead = Election::new(&s, "chief")
            .campaign("tenure-node", WAIT)
            .unwrap();
        // etcdctl sees tenure's leader...
        let (mut obs, orx) = spawn_lines(p.addr(), &["elect", "-l", "chief"]);
        let seen = next_lines(&orx, 2);
        assert!(
            seen[0].starts_with("chief/") && seen[1] == "tenure-node",
            "{seen:?}"
        );
        let _ = obs.kill();
        let _ = obs.wait();
        // ...and an etcdctl candidate waits behind it, then leads once tenure resigns.
        let (mut cand, crx) = spawn_lines(p.addr(), &["elect", "chief", "ctl-node"]);
        assert!(crx.recv_timeout(Duration::from_millis(1500)).is_err());
        lead.resign().unwrap();
        assert_eq!(next_lines(&crx, 2)[1], "ctl-node");
        assert_eq!(
            Election::leader(&db, "chief").unwrap().unwrap().value,
            b"ctl-node"
        );
        signal(&cand, "INT");
        wait_for(&mut cand, WAIT);
    });
}

/// Retries `f` until it succeeds (the server coming back), failing the test after `WAIT`.
fn until_ok<T>(what: &str, f: impl Fn() -> tenure::Result<T>) -> T {
    let until = Instant::now() + WAIT;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) => assert!(Instant::now() < until, "{what}: still failing: {e}"),
        }
    }
}

#[test]
fn r3_a_stopped_server_is_unavailable_within_the_deadline_then_serves_again() {
    both(|p| {
        let db = p.connect();
        db.put("k", "v", None).unwrap();
        signal(p.child(), "STOP");
        let t = Instant::now();
        let e = db.get("k").unwrap_err();
        let took = t.elapsed();
        signal(p.child(), "CONT");
        assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
        assert_eq!(e.code().name(), "TENURE_ERR_UNAVAILABLE");
        assert!(took < Duration::from_secs(4), "deadline 2 s, took {took:?}");
        let kv = until_ok("get after SIGCONT", || db.get("k"));
        assert_eq!(kv.unwrap().value, b"v");
    });
}

/// One `WaitPool` thread serves every wait of a process (Python's): a lock wait over connect
/// whose poll is stuck on a stopped server must not delay an embedded wait in the same pool
/// (the network poll runs on one of the pool's network threads).
#[test]
fn r3_a_stopped_server_never_delays_the_other_waits_of_a_wait_pool() {
    let p = Place::serve();
    let remote = Tenure::builder()
        .endpoints([p.url()])
        .request_timeout(Duration::from_secs(30))
        .connect()
        .unwrap();
    let s = session(&remote, 60);
    let pool = WaitPool::new("test-wait-pool").unwrap();
    signal(p.child(), "STOP");
    let (locked_tx, locked) = crossbeam_channel::bounded(1);
    // Its first poll puts the contender's key: an RPC the stopped server does not answer.
    pool.submit(Mutex::new(&s, "m").lock_wait(WAIT * 3), move |out| {
        let _ = locked_tx.send(out.map(|r| r.map(|g| g.fencing_token())));
    });
    let local = Tenure::in_memory().unwrap();
    let w = local.watch("k", WatchOptions::default()).unwrap();
    let (seen_tx, seen) = crossbeam_channel::bounded(1);
    pool.submit(Next::new(w, WAIT, "a watch event"), move |out| {
        let _ = seen_tx.send(out.map(|r| r.map(|ev| ev.kv.key)));
    });
    local.put("k", "v", None).unwrap();
    let t = Instant::now();
    let got = seen.recv_timeout(Duration::from_secs(5));
    let took = t.elapsed();
    signal(p.child(), "CONT");
    assert_eq!(got.unwrap().unwrap().unwrap(), b"k", "after {took:?}");
    let token = locked.recv_timeout(WAIT * 3).unwrap().unwrap().unwrap();
    assert!(token > 0);
}

#[test]
fn r3_a_session_ends_within_its_ttl_of_the_last_renewal_when_the_server_stops() {
    both(|p| {
        let db = p.connect();
        let s = session(&db, 2);
        let guard = Mutex::new(&s, "held").lock(WAIT).unwrap();
        // The last renewal is at most now; the session must be done within its TTL of it.
        signal(p.child(), "STOP");
        let stopped = Instant::now();
        assert!(s.wait_done(Duration::from_secs(10)), "session never ended");
        let after = stopped.elapsed();
        signal(p.child(), "CONT");
        assert!(
            after <= Duration::from_millis(2100),
            "done() {after:?} after the stop (TTL 2 s)"
        );
        assert!(!guard.is_held());
    });
}

#[test]
fn r3_a_killed_and_restarted_server_serves_the_same_handle_again() {
    both(|p| {
        let db = p.connect();
        db.put("k", "v", None).unwrap();
        let dead = p.kill9();
        assert!(matches!(db.get("k"), Err(Error::Unavailable(_))));
        let _p = dead.restart();
        let kv = until_ok("get after restart", || db.get("k"));
        assert_eq!(kv.unwrap().value, b"v");
        db.put("k2", "v2", None).unwrap();
    });
}

/// The URL forms `connect` accepts, and what it says about the rest.
/// A watch the server refuses is not the network: the refusal's reason picks the error of the
/// one table (here a limit of tenure serve: InvalidArgument naming it), never `Unavailable`.
#[test]
fn r1_a_watch_the_server_refuses_is_invalid_argument_naming_why() {
    let (_dir, file) = temp_db();
    let s = Server::start(&file, &["--max-watches-per-stream", "0"]);
    let db = Tenure::builder()
        .endpoints([s.url()])
        .request_timeout(Duration::from_secs(5))
        .connect()
        .unwrap();
    let e = db.watch("k", WatchOptions::default()).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("too many watches")),
        "{e:?}"
    );
}

#[test]
fn r1_connect_urls_several_endpoints_and_bad_urls() {
    let p = Place::serve();
    let both_urls = format!("{},{}", p.url(), p.url());
    let db = Tenure::connect(&both_urls).unwrap();
    db.put("k", "v", None).unwrap();
    let mixed = format!("{},unix:/tmp/x.sock", p.url());
    for bad in [
        "",
        "127.0.0.1:2379",
        "ftp://h:1",
        "https://h:1/x",
        "unix:",
        &mixed,
    ] {
        assert!(
            matches!(Tenure::connect(bad), Err(Error::InvalidArgument(_))),
            "{bad}"
        );
    }
    let port = common::free_port();
    for dead in [
        format!("http://127.0.0.1:{port}"),
        format!("https://127.0.0.1:{port}"),
    ] {
        let t = Instant::now();
        let e = Tenure::builder()
            .endpoints([dead])
            .request_timeout(Duration::from_secs(1))
            .connect()
            .unwrap_err();
        assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}

/// R1: `unix:PATH` and `unix://PATH` reach a `tenure serve` listening on that socket: keys,
/// leases and a watch over it; a socket nobody serves is `Unavailable` within the deadline.
#[test]
fn r1_connect_over_a_unix_socket() {
    let (dir, file) = temp_db();
    let sock = dir.path().join("serve.sock");
    let s = Server::start(&file, &["--listen", &format!("unix:{}", sock.display())]);
    for url in [
        format!("unix:{}", sock.display()),
        format!("unix://{}", sock.display()),
    ] {
        let db = Tenure::connect(&url).unwrap();
        let lease = db.grant(Duration::from_secs(30)).unwrap();
        let mut w = db
            .watch(
                "u/",
                WatchOptions {
                    prefix: true,
                    ..WatchOptions::default()
                },
            )
            .unwrap();
        let rev = db.put("u/k", &url, Some(lease)).unwrap();
        let kv = db.get("u/k").unwrap().unwrap();
        assert_eq!(
            (kv.value, kv.mod_revision, kv.lease),
            (url.clone().into_bytes(), rev, Some(lease))
        );
        let ev = w.recv_timeout(WAIT).unwrap();
        assert_eq!((ev.kind, ev.revision()), (EventKind::Put, rev));
        db.revoke(lease).unwrap();
        assert!(db.get("u/k").unwrap().is_none());
        assert_eq!(w.recv_timeout(WAIT).unwrap().kind, EventKind::Delete);
    }
    // The same server over TCP sees what the socket wrote.
    assert!(Tenure::connect(&s.url()).unwrap().revision().unwrap() > 0);
    drop(s);

    let t = Instant::now();
    let e = Tenure::builder()
        .endpoints([format!("unix:{}", dir.path().join("nobody.sock").display())])
        .request_timeout(Duration::from_secs(1))
        .connect()
        .unwrap_err();
    assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
}
