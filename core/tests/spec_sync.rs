//! Tests per SPEC line S1–S6 (coordination recipes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tenure::sync::{Election, FenceGate, Mutex, RecordLock, Session, SessionOptions};
use tenure::{Error, ManualClock, Tenure};

const WAIT: Duration = Duration::from_secs(10);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn manual() -> (Arc<ManualClock>, Tenure) {
    let clock = ManualClock::new();
    let db = Tenure::builder().clock(clock.clone()).open().unwrap();
    (clock, db)
}

fn session(db: &Tenure) -> Session {
    Session::new(
        db,
        SessionOptions {
            ttl: secs(30),
            keepalive_interval: None,
        },
    )
    .unwrap()
}

/// Waits until `cond` holds (it is changed by another thread), failing after `WAIT`.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::yield_now();
    }
}

#[test]
fn s1_a_session_keeps_its_lease_alive_and_done_fires_when_it_is_lost() {
    let (clock, db) = manual();
    let s = Session::new(
        &db,
        SessionOptions {
            ttl: secs(9),
            keepalive_interval: None,
        },
    )
    .unwrap();
    for _ in 0..5 {
        let renewed = db.stats().renewed;
        clock.advance(secs(3));
        eventually("a keep-alive renew", || db.stats().renewed > renewed);
    }
    assert!(db.time_to_live(s.lease_id()).is_ok());
    assert!(!s.is_done());
    let done = s.done();
    db.revoke(s.lease_id()).unwrap();
    assert!(
        done.recv_timeout(WAIT).is_err(),
        "done disconnects when the lease is revoked"
    );
    assert!(s.is_done());
}

#[test]
fn s1_orphan_keeps_the_lease_close_revokes_and_resume_continues() {
    let (clock, db) = manual();
    let s = Session::new(
        &db,
        SessionOptions {
            ttl: secs(9),
            keepalive_interval: None,
        },
    )
    .unwrap();
    let id = s.lease_id();
    s.orphan();
    assert!(db.time_to_live(id).is_ok(), "orphan keeps the lease");
    let resumed = Session::resume(
        &db,
        id,
        SessionOptions {
            ttl: secs(9),
            keepalive_interval: None,
        },
    )
    .unwrap();
    let renewed = db.stats().renewed;
    clock.advance(secs(3));
    eventually("the resumed session renews", || {
        db.stats().renewed > renewed
    });
    resumed.close().unwrap();
    assert!(matches!(db.time_to_live(id), Err(Error::LeaseNotFound(_))));
    assert!(matches!(
        Session::resume(&db, id, SessionOptions::default()),
        Err(Error::LeaseNotFound(_))
    ));
}

#[test]
fn s1_done_fires_when_the_engine_closes_or_the_lease_expires() {
    let (clock, db) = manual();
    let s = session(&db);
    s.orphan();
    let done = s.done();
    clock.advance(secs(30));
    assert!(
        done.recv_timeout(WAIT).is_err(),
        "expired lease: done fires"
    );
    let s2 = session(&db);
    let done2 = s2.done();
    db.close().unwrap();
    assert!(
        done2.recv_timeout(WAIT).is_err(),
        "closed engine: done fires"
    );
}

#[test]
fn s2_the_mutex_is_fifo_by_create_revision() {
    let (_c, db) = manual();
    let (a, b, c) = (session(&db), session(&db), session(&db));
    let ga = Mutex::new(&a, "jobs").lock(Some(WAIT)).unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let spawn = |s: Session, name: &'static str| {
        let order = order.clone();
        std::thread::spawn(move || {
            let g = Mutex::new(&s, "jobs").lock(Some(WAIT)).unwrap();
            order.lock().unwrap().push(name);
            let token = g.fencing_token();
            g.unlock().unwrap();
            token
        })
    };
    let tb = spawn(b.clone(), "b");
    eventually("b queued", || db.range("jobs/", None).unwrap().len() == 2);
    let tc = spawn(c.clone(), "c");
    eventually("c queued", || db.range("jobs/", None).unwrap().len() == 3);
    let ta = ga.fencing_token();
    ga.unlock().unwrap();
    let (tb, tc) = (tb.join().unwrap(), tc.join().unwrap());
    assert_eq!(*order.lock().unwrap(), vec!["b", "c"]);
    assert!(
        ta < tb && tb < tc,
        "fencing tokens strictly increase: {ta} {tb} {tc}"
    );
}

#[test]
fn s2_try_lock_is_locked_while_held_and_leaves_no_key() {
    let (_c, db) = manual();
    let (a, b) = (session(&db), session(&db));
    let g = Mutex::new(&a, "m").try_lock().unwrap();
    assert!(g.is_held());
    assert!(matches!(Mutex::new(&b, "m").try_lock(), Err(Error::Locked)));
    assert_eq!(
        db.range("m/", None).unwrap().len(),
        1,
        "the failed try_lock removed its key"
    );
    drop(g);
    assert!(
        Mutex::new(&b, "m").try_lock().is_ok(),
        "dropping the guard unlocks"
    );
}

#[test]
fn s2_lock_times_out_and_withdraws() {
    let (_c, db) = manual();
    let (a, b) = (session(&db), session(&db));
    let _g = Mutex::new(&a, "m").lock(None).unwrap();
    let start = Instant::now();
    assert!(matches!(
        Mutex::new(&b, "m").lock(Some(Duration::from_millis(100))),
        Err(Error::Timeout)
    ));
    assert!(start.elapsed() >= Duration::from_millis(100));
    assert_eq!(db.range("m/", None).unwrap().len(), 1);
}

#[test]
fn s2_a_waiter_whose_session_dies_stops_at_once_with_session_expired() {
    let (_c, db) = manual();
    let (a, b) = (session(&db), session(&db));
    let _g = Mutex::new(&a, "m").lock(None).unwrap();
    let bb = b.clone();
    let waiter = std::thread::spawn(move || Mutex::new(&bb, "m").lock(None));
    eventually("b queued", || db.range("m/", None).unwrap().len() == 2);
    let start = Instant::now();
    db.revoke(b.lease_id()).unwrap();
    let r = waiter.join().unwrap();
    assert!(matches!(r, Err(Error::SessionExpired)), "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn s2_the_holder_rechecks_its_own_key_after_waiting() {
    // etcd#11051: the waiter's own key vanished while it waited (its lease was revoked at the
    // same moment its predecessor left); it must not report the lock as acquired.
    let (_c, db) = manual();
    let (a, b) = (session(&db), session(&db));
    let ga = Mutex::new(&a, "m").lock(None).unwrap();
    let mb = Mutex::new(&b, "m");
    let key_b = mb.key().to_vec();
    let waiter = std::thread::spawn(move || mb.lock(None));
    eventually("b queued", || db.get(&key_b).unwrap().is_some());
    db.txn(tenure::Txn::new().then([tenure::Op::delete(&key_b), tenure::Op::delete(ga_key(&db))]))
        .unwrap();
    std::mem::forget(ga);
    let r = waiter.join().unwrap();
    assert!(matches!(r, Err(Error::SessionExpired)), "{r:?}");
}

fn ga_key(db: &Tenure) -> Vec<u8> {
    db.range("m/", None)
        .unwrap()
        .into_iter()
        .min_by_key(|kv| kv.create_revision)
        .unwrap()
        .key
}

#[test]
fn s2_unlock_deletes_only_its_own_acquisition() {
    let (_c, db) = manual();
    let s = session(&db);
    let m = Mutex::new(&s, "m");
    let old = m.lock(None).unwrap();
    db.delete(m.key()).unwrap(); // the acquisition is lost...
    let new = m.lock(None).unwrap(); // ...and the same session acquires again
    assert_ne!(old.fencing_token(), new.fencing_token());
    assert!(!old.is_held());
    assert!(matches!(old.unlock(), Err(Error::NotLeader)));
    assert!(
        new.is_held(),
        "the stale guard's unlock left the new acquisition alone (etcd#22082)"
    );
}

#[test]
fn s3_fencing_tokens_increase_and_the_gate_rejects_a_stale_one() {
    let (_c, db) = manual();
    let (a, b) = (session(&db), session(&db));
    let gate = FenceGate::new();
    let g1 = Mutex::new(&a, "res").lock(None).unwrap();
    let t1 = g1.fencing_token();
    gate.admit(t1).unwrap();
    drop(g1);
    let g2 = Mutex::new(&b, "res").lock(None).unwrap();
    let t2 = g2.fencing_token();
    assert!(t2 > t1);
    gate.admit(t2).unwrap();
    gate.admit(t2).unwrap();
    assert!(
        matches!(gate.admit(t1), Err(Error::StaleToken { token, highest }) if token == t1 && highest == t2)
    );
    assert_eq!(gate.highest(), t2);
}

#[test]
fn s4_campaign_blocks_until_leader_and_observe_reports_every_change() {
    let (_c, db) = manual();
    let (a, b) = (session(&db), session(&db));
    let mut obs = Election::observe(&db, "svc").unwrap();
    assert_eq!(
        obs.recv_timeout(Some(WAIT)).unwrap(),
        None,
        "first: no leader"
    );
    let la = Election::new(&a, "svc")
        .campaign("host-a", Some(WAIT))
        .unwrap();
    assert_eq!(
        obs.recv_timeout(Some(WAIT)).unwrap().unwrap().value,
        b"host-a"
    );
    let eb = Election::new(&b, "svc");
    let candidate = std::thread::spawn(move || eb.campaign("host-b", Some(WAIT)));
    eventually("b is a candidate", || {
        db.range("svc/", None).unwrap().len() == 2
    });
    assert_eq!(
        Election::leader(&db, "svc").unwrap().unwrap().value,
        b"host-a"
    );
    la.proclaim("host-a2").unwrap();
    assert_eq!(
        obs.recv_timeout(Some(WAIT)).unwrap().unwrap().value,
        b"host-a2"
    );
    la.resign().unwrap();
    let lb = candidate.join().unwrap().unwrap();
    assert!(lb.token() > la.token());
    assert_eq!(
        obs.recv_timeout(Some(WAIT)).unwrap().unwrap().value,
        b"host-b"
    );
    lb.resign().unwrap();
    assert_eq!(
        obs.recv_timeout(Some(WAIT)).unwrap(),
        None,
        "reports 'no leader'"
    );
    assert!(matches!(
        obs.recv_timeout(Some(Duration::from_millis(50))),
        Err(Error::Timeout)
    ));
}

#[test]
fn s4_proclaim_after_losing_leadership_is_not_leader() {
    let (_c, db) = manual();
    let a = session(&db);
    let l = Election::new(&a, "svc").campaign("x", None).unwrap();
    db.revoke(a.lease_id()).unwrap();
    assert!(matches!(l.proclaim("y"), Err(Error::NotLeader)));
    assert!(Election::leader(&db, "svc").unwrap().is_none());
}

#[test]
fn s6_record_lock_succeeds_only_for_the_current_owner() {
    let (clock, db) = manual();
    let t1 = RecordLock::try_acquire(&db, "lock/x", "alice", secs(10)).unwrap();
    assert!(matches!(
        RecordLock::try_acquire(&db, "lock/x", "bob", secs(10)),
        Err(Error::Locked)
    ));
    assert!(matches!(
        RecordLock::refresh(&db, "lock/x", "bob"),
        Err(Error::NotLeader)
    ));
    assert!(matches!(
        RecordLock::release(&db, "lock/x", "bob"),
        Err(Error::NotLeader)
    ));
    clock.advance(secs(8));
    RecordLock::refresh(&db, "lock/x", "alice").unwrap();
    clock.advance(secs(8));
    assert!(
        db.get("lock/x").unwrap().is_some(),
        "refresh extended the hold"
    );
    RecordLock::release(&db, "lock/x", "alice").unwrap();
    assert!(db.get("lock/x").unwrap().is_none());
    assert_eq!(db.stats().leases, 0, "release revoked the lease");
    let t2 = RecordLock::try_acquire(&db, "lock/x", "bob", secs(10)).unwrap();
    assert!(t2 > t1);
    let rx = db.expired();
    clock.advance(secs(10));
    rx.recv_timeout(WAIT).unwrap();
    assert!(
        RecordLock::try_acquire(&db, "lock/x", "carol", secs(10)).is_ok(),
        "an expired hold frees the record"
    );
}

mod elector {
    use super::*;
    use crossbeam_channel::{unbounded, Receiver};
    use tenure::sync::{ElectorCallbacks, ElectorConfig, LeaderElector, Stop};

    fn cfg(id: &str, release_on_cancel: bool) -> ElectorConfig {
        ElectorConfig {
            name: "leader/svc".into(),
            identity: id.into(),
            lease_duration: secs(10),
            renew_deadline: secs(5),
            retry_period: secs(2),
            release_on_cancel,
        }
    }

    /// Callbacks that report to a channel: "new:<id>", "started:<token>", "returned", "stopped".
    fn reporting() -> (ElectorCallbacks, Receiver<String>) {
        let (tx, rx) = unbounded();
        let (t1, t2, t3) = (tx.clone(), tx.clone(), tx);
        let cbs = ElectorCallbacks {
            on_started_leading: Box::new(move |token, stop: Stop| {
                t1.send(format!("started:{token}")).unwrap();
                stop.wait();
                t1.send("returned".into()).unwrap();
            }),
            on_stopped_leading: Box::new(move || t2.send("stopped".into()).unwrap()),
            on_new_leader: Box::new(move |id| t3.send(format!("new:{id}")).unwrap()),
        };
        (cbs, rx)
    }

    fn start(
        db: &Tenure,
        c: ElectorConfig,
    ) -> (
        Arc<LeaderElector>,
        Stop,
        std::thread::JoinHandle<tenure::Result<()>>,
        Receiver<String>,
    ) {
        let (cbs, rx) = reporting();
        let e = Arc::new(LeaderElector::new(db, c, cbs).unwrap());
        let stop = Stop::new();
        let (e2, s2) = (e.clone(), stop.clone());
        let h = std::thread::spawn(move || e2.run(&s2));
        (e, stop, h, rx)
    }

    fn record(db: &Tenure) -> (i64, String) {
        let kv = db.get("leader/svc").unwrap().unwrap();
        let s = String::from_utf8(kv.value).unwrap();
        (kv.mod_revision, s)
    }

    fn field(rec: &str, i: usize) -> i64 {
        rec.split(' ').nth(i).unwrap().parse().unwrap()
    }

    #[test]
    fn s5_inconsistent_configs_are_invalid_arguments() {
        let (_c, db) = manual();
        let ok = cfg("a", true);
        assert!(ok.validate().is_ok());
        let bad = [
            ElectorConfig {
                identity: String::new(),
                ..ok.clone()
            },
            ElectorConfig {
                lease_duration: secs(5),
                ..ok.clone()
            },
            ElectorConfig {
                renew_deadline: Duration::from_millis(2400),
                ..ok.clone()
            },
            ElectorConfig {
                renew_deadline: secs(9),
                ..ok.clone()
            },
            ElectorConfig {
                retry_period: Duration::ZERO,
                ..ok.clone()
            },
        ];
        for c in bad {
            let (cbs, _rx) = reporting();
            assert!(
                matches!(
                    LeaderElector::new(&db, c.clone(), cbs),
                    Err(Error::InvalidArgument(_))
                ),
                "{c:?}"
            );
        }
    }

    #[test]
    fn s5_one_leader_and_failover_only_after_the_engine_expires_its_lease() {
        let (clock, db) = manual();
        let (a, stop_a, ha, rx_a) = start(&db, cfg("a", false));
        assert_eq!(rx_a.recv_timeout(WAIT).unwrap(), "new:a");
        let token_a: i64 = rx_a.recv_timeout(WAIT).unwrap()["started:".len()..]
            .parse()
            .unwrap();
        assert!(a.is_leader());
        let (b, stop_b, hb, rx_b) = start(&db, cfg("b", false));
        assert_eq!(rx_b.recv_timeout(WAIT).unwrap(), "new:a");
        for _ in 0..5 {
            let (rev, _) = record(&db);
            clock.advance(secs(2));
            eventually("a renews", || record(&db).0 > rev);
            assert!(!b.is_leader(), "b must not lead while a renews");
        }
        assert_eq!(b.leader().as_deref(), Some("a"));
        let (_, rec) = record(&db);
        let last_renew = field(&rec, 2);
        stop_a.stop();
        ha.join().unwrap().unwrap();
        assert_eq!(rx_a.recv_timeout(WAIT).unwrap(), "returned");
        assert_eq!(rx_a.recv_timeout(WAIT).unwrap(), "stopped");
        let mut started = None;
        for _ in 0..40 {
            clock.advance(secs(1));
            if let Ok(m) = rx_b.recv_timeout(Duration::from_millis(100)) {
                started = Some(m);
                break;
            }
        }
        let m = started.expect("b never took over");
        assert_eq!(m, "new:b");
        let token_b: i64 = rx_b.recv_timeout(WAIT).unwrap()["started:".len()..]
            .parse()
            .unwrap();
        assert!(token_b > token_a);
        let (_, rec) = record(&db);
        assert!(rec.ends_with(" b"), "{rec}");
        assert!(
            field(&rec, 1) - last_renew >= 10_000,
            "took over before a's lease expired: {rec}"
        );
        assert_eq!(field(&rec, 3), 1, "one leader transition");
        stop_b.stop();
        hb.join().unwrap().unwrap();
    }

    #[test]
    fn s5_release_on_cancel_frees_leadership_at_once_and_callbacks_are_ordered() {
        let (clock, db) = manual();
        let (_a, stop_a, ha, rx_a) = start(&db, cfg("a", true));
        assert_eq!(rx_a.recv_timeout(WAIT).unwrap(), "new:a");
        assert!(rx_a.recv_timeout(WAIT).unwrap().starts_with("started:"));
        let (b, stop_b, hb, rx_b) = start(&db, cfg("b", true));
        assert_eq!(rx_b.recv_timeout(WAIT).unwrap(), "new:a");
        let released_at = field(&record(&db).1, 2);
        stop_a.stop();
        ha.join().unwrap().unwrap();
        let order: Vec<String> = rx_a.try_iter().collect();
        assert_eq!(
            order,
            vec!["returned", "stopped"],
            "stopped only after started returned"
        );
        for _ in 0..10 {
            clock.advance(secs(1));
            if b.is_leader() {
                break;
            }
            let _ = rx_b.recv_timeout(Duration::from_millis(100));
        }
        eventually("b leads", || b.is_leader());
        let rec = record(&db).1;
        assert!(
            field(&rec, 1) - released_at < 10_000,
            "released at once, not after expiry: {rec}"
        );
        stop_b.stop();
        hb.join().unwrap().unwrap();
    }
}

#[test]
fn s2_a_cancelled_lock_wait_gives_up_at_once_and_withdraws() {
    let (_c, db) = manual();
    let (a, b) = (session(&db), session(&db));
    let _g = Mutex::new(&a, "m").lock(None).unwrap();
    let (cancel_tx, cancel_rx) = crossbeam_channel::bounded::<()>(0);
    let bb = b.clone();
    let waiter =
        std::thread::spawn(move || Mutex::new(&bb, "m").lock_with_cancel(None, &cancel_rx));
    eventually("b queued", || db.range("m/", None).unwrap().len() == 2);
    drop(cancel_tx);
    assert!(matches!(waiter.join().unwrap(), Err(Error::Timeout)));
    assert_eq!(
        db.range("m/", None).unwrap().len(),
        1,
        "the cancelled contender left the queue"
    );
    let (cancel_tx, cancel_rx) = crossbeam_channel::bounded::<()>(0);
    let eb = Election::new(&b, "svc");
    let _leader = Election::new(&a, "svc").campaign("a", None).unwrap();
    let candidate =
        std::thread::spawn(move || eb.campaign_with_cancel("b", None, &cancel_rx).map(|_| ()));
    eventually("b campaigns", || db.range("svc/", None).unwrap().len() == 2);
    drop(cancel_tx);
    assert!(matches!(candidate.join().unwrap(), Err(Error::Timeout)));
    assert_eq!(db.range("svc/", None).unwrap().len(), 1);
}
