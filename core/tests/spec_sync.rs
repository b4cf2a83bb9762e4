//! Tests per SPEC line S1–S6 (coordination recipes).

mod recipes;
mod support;

use std::sync::Arc;
use std::time::Duration;

use support::{eventually, manual, mem, secs, session_ttl, ttl_options, WAIT};
use tenure::sync::{RecordLock, Session, SessionOptions};
use tenure::{Error, Tenure};

/// The recipes run over the engine itself (fast paths included).
fn backend(db: &Tenure) -> Tenure {
    db.clone()
}

fn session(db: &Tenure) -> Session {
    support::session_on(&backend(db))
}

/// Driven by the engine's `ManualClock` or its counters: not run against `tenure serve` or
/// etcd.
mod embedded_only {
    use super::*;

    #[test]
    fn s1_a_session_keeps_its_lease_alive_and_done_fires_when_it_is_lost() {
        let (clock, db) = manual();
        let s = session_ttl(&db, secs(9));
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
        let s = session_ttl(&db, secs(9));
        let id = s.lease_id();
        s.orphan();
        assert!(db.time_to_live(id).is_ok(), "orphan keeps the lease");
        let resumed = Session::resume(&db, id, ttl_options(secs(9))).unwrap();
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
    fn s1_an_attached_session_never_renews_its_lease_and_done_fires_when_it_expires() {
        let (clock, db) = manual();
        let renewing = session_ttl(&db, secs(9));
        let id = db.grant(secs(9)).unwrap();
        let attached = Session::attach(&db, id).unwrap();
        let done = attached.done();
        for _ in 0..2 {
            let renewed = db.stats().renewed;
            clock.advance(secs(3));
            eventually("the other session renews", || db.stats().renewed > renewed);
            assert!(!attached.is_done());
        }
        clock.advance(secs(3));
        assert!(
            done.recv_timeout(WAIT).is_err(),
            "no one renewed the attached lease: it expired after its TTL"
        );
        assert!(matches!(db.time_to_live(id), Err(Error::LeaseNotFound(_))));
        assert!(!renewing.is_done());
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
    fn s6_record_lock_succeeds_only_for_the_current_owner() {
        let (clock, db) = manual();
        let t1 = RecordLock::try_acquire(&db, "lock/x", "alice", secs(10)).unwrap();
        assert!(matches!(
            RecordLock::try_acquire(&db, "lock/x", "bob", secs(10)),
            Err(Error::Locked { .. })
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
        let rx = db.expired().unwrap();
        clock.advance(secs(10));
        rx.recv_timeout(WAIT).unwrap();
        assert!(
            RecordLock::try_acquire(&db, "lock/x", "carol", secs(10)).is_ok(),
            "an expired hold frees the record"
        );
    }
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
                stop.wait(None);
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
    fn s5_spawn_leads_until_stopped_and_join_reports_the_end() {
        let db = mem();
        let (cbs, rx) = reporting();
        let e = Arc::new(LeaderElector::new(&db, cfg("a", true), cbs).unwrap());
        let run = e.spawn(None).unwrap();
        assert_eq!(rx.recv_timeout(WAIT).unwrap(), "new:a");
        assert!(rx.recv_timeout(WAIT).unwrap().starts_with("started:"));
        assert!(
            run.join(Duration::from_millis(20)).is_none(),
            "still leading"
        );
        assert!(
            matches!(e.spawn(None), Err(Error::InvalidArgument(_))),
            "once"
        );
        run.stop();
        assert!(matches!(run.join(WAIT), Some(Ok(()))));
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["returned", "stopped"]);
        assert!(
            matches!(run.join(None), Some(Ok(()))),
            "the same answer again"
        );
        assert!(!e.is_leader());
    }

    #[test]
    fn s5_inconsistent_configs_are_invalid_arguments() {
        let db = mem();
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

    /// An elector whose `on_started_leading` is slow to stop: after its stop is raised it goes
    /// on working for up to `linger` (ending early if another leader starts meanwhile, which
    /// would be an overlap). Reports "start:<id>" and "return:<id>" to `log`.
    fn lingering(
        db: &Tenure,
        id: &'static str,
        linger: Duration,
        active: &Arc<std::sync::atomic::AtomicI32>,
        log: &Arc<std::sync::Mutex<Vec<String>>>,
        starts: (
            crossbeam_channel::Sender<&'static str>,
            Receiver<&'static str>,
        ),
    ) -> Arc<LeaderElector> {
        use std::sync::atomic::Ordering::SeqCst;
        let (active, log) = (active.clone(), log.clone());
        let cbs = ElectorCallbacks {
            on_started_leading: Box::new(move |_token, stop: Stop| {
                log.lock()
                    .unwrap()
                    .push(format!("start:{id}:{}", active.fetch_add(1, SeqCst)));
                let _ = starts.0.send(id);
                stop.wait(None);
                // Still working after the stop: another leader starting now is an overlap.
                let until = std::time::Instant::now() + linger;
                while let Ok(who) = starts.1.recv_deadline(until) {
                    if who != id {
                        break;
                    }
                }
                active.fetch_sub(1, SeqCst);
                log.lock().unwrap().push(format!("return:{id}"));
            }),
            on_stopped_leading: Box::new(|| {}),
            on_new_leader: Box::new(|_| {}),
        };
        let c = ElectorConfig {
            lease_duration: secs(3),
            renew_deadline: secs(2),
            retry_period: Duration::from_millis(200),
            ..cfg(id, true)
        };
        Arc::new(LeaderElector::new(db, c, cbs).unwrap())
    }

    #[test]
    fn s5_release_on_cancel_never_overlaps_two_leaders_callbacks() {
        let db = mem();
        let active = Arc::new(std::sync::atomic::AtomicI32::new(0));
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (starts_tx, starts_rx) = unbounded();
        let linger = Duration::from_secs(1);
        let a = lingering(
            &db,
            "a",
            linger,
            &active,
            &log,
            (starts_tx.clone(), starts_rx.clone()),
        );
        let run_a = a.spawn(None).unwrap();
        eventually("a leads", || a.is_leader());
        let b = lingering(&db, "b", linger, &active, &log, (starts_tx, starts_rx));
        let run_b = b.spawn(None).unwrap();
        eventually("b sees a", || b.leader().as_deref() == Some("a"));
        run_a.stop();
        // b's callback runs on b's callback thread, after b counts as leader.
        eventually("b's callback started", || log.lock().unwrap().len() >= 3);
        assert!(matches!(run_a.join(WAIT), Some(Ok(()))));
        let seen = log.lock().unwrap().clone();
        assert_eq!(
            seen[..3],
            ["start:a:0", "return:a", "start:b:0"],
            "b started only after a's callback returned, with no other leader at work"
        );
        run_b.stop();
        assert!(matches!(run_b.join(WAIT), Some(Ok(()))));
    }

    /// Driven by the engine's `ManualClock`: not run against `tenure serve` or etcd.
    mod embedded_only {
        use super::*;

        #[test]
        fn s5_release_on_cancel_waits_for_the_callback_at_most_the_lease_duration() {
            let (clock, db) = manual();
            let (hold_tx, hold_rx) = unbounded::<()>();
            let cbs = ElectorCallbacks {
                // Ignores its stop until the test lets it go.
                on_started_leading: Box::new(move |_, _| {
                    let _ = hold_rx.recv();
                }),
                on_stopped_leading: Box::new(|| {}),
                on_new_leader: Box::new(|_| {}),
            };
            let a = Arc::new(LeaderElector::new(&db, cfg("a", true), cbs).unwrap());
            let run_a = a.spawn(None).unwrap();
            eventually("a leads", || a.is_leader());
            let lease = field(&record(&db).1, 0);
            run_a.stop();
            eventually("a stepped down", || !a.is_leader());
            assert!(
                db.time_to_live(tenure::LeaseId::new(lease)).is_ok(),
                "not released while the callback runs"
            );
            clock.advance(secs(10));
            eventually("released after the lease duration", || {
                db.time_to_live(tenure::LeaseId::new(lease)).is_err()
            });
            drop(hold_tx);
            assert!(matches!(run_a.join(WAIT), Some(Ok(()))));
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
}
