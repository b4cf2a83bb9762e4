//! Resources and bad arguments: watchers cost what they queue and vanish when dropped (K6, S2,
//! S4), every option is checked where it enters (InvalidArgument), and a background thread that
//! dies poisons the engine instead of silently dropping acknowledged work (D3, D6).

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tenure::limits::MAX_KEEPALIVE_INTERVAL;
use tenure::sync::{Election, Mutex, Session, SessionOptions};
use tenure::{
    Clock, Durability, Error, ManualClock, Recovery, Tenure, WatchOptions, MAX_DURATION,
    MAX_WATCH_EVENTS,
};

/// Resident memory of this process, in MiB (Linux).
fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb / 1024
}

#[test]
fn k6_a_watcher_queue_grows_on_demand_instead_of_being_reserved() {
    let db = Tenure::in_memory().unwrap();
    let before = rss_mib();
    let watchers: Vec<_> = (0..300)
        .map(|i| db.watch(format!("k{i}"), WatchOptions::default()).unwrap())
        .collect();
    let grown = rss_mib().saturating_sub(before);
    // Reserving the default 10 000-event queue up front cost ~1.9 MB per watcher (~560 MiB
    // here); queues that grow on demand cost a few hundred bytes each when idle.
    assert!(grown < 64, "300 idle watchers took {grown} MiB");
    assert_eq!(db.stats().watchers, 300);
    drop(watchers);
}

#[test]
fn k6_a_dropped_watcher_is_gone_at_once() {
    let db = Tenure::in_memory().unwrap();
    for _ in 0..300 {
        drop(db.watch("k", WatchOptions::default()).unwrap());
    }
    // No write to "k" happened: the watchers must not wait for one to be forgotten.
    assert_eq!(db.stats().watchers, 0);
    let w = db.watch("k", WatchOptions::default()).unwrap();
    assert_eq!(db.stats().watchers, 1);
    drop(w);
    assert_eq!(db.stats().watchers, 0);
}

#[test]
fn s2_s4_a_timed_out_lock_or_campaign_leaves_nothing_behind() {
    let db = Tenure::in_memory().unwrap();
    let holder = Session::new(&db, SessionOptions::default()).unwrap();
    let waiter = Session::new(&db, SessionOptions::default()).unwrap();
    let _held = Mutex::new(&holder, "jobs").lock(None).unwrap();
    let _leader = Election::new(&holder, "svc").campaign("a", None).unwrap();
    let keys = db.stats().keys;
    for _ in 0..50 {
        let m = Mutex::new(&waiter, "jobs");
        assert!(matches!(
            m.lock(Some(Duration::from_millis(1))),
            Err(Error::Timeout { .. })
        ));
        let e = Election::new(&waiter, "svc");
        assert!(matches!(
            e.campaign("b", Some(Duration::from_millis(1))),
            Err(Error::Timeout { .. })
        ));
    }
    assert_eq!(db.stats().watchers, 0, "timed-out waits left watchers");
    assert_eq!(db.stats().keys, keys, "timed-out waits left keys");
}

#[test]
fn d3_a_huge_flush_interval_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.tenure");
    let huge = Duration::from_secs_f64(1e19);
    let r = Tenure::builder()
        .path(&path)
        .durability(Durability::Buffered(huge))
        .open();
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // The largest accepted interval works: writes are flushed on close, not lost.
    let db = Tenure::builder()
        .path(&path)
        .durability(Durability::Buffered(MAX_DURATION))
        .open()
        .unwrap();
    db.put("k", "v", None).unwrap();
    db.close().unwrap();
    assert!(support::open_file(&path).get("k").unwrap().is_some());
}

#[test]
fn d5_every_duration_option_is_bounded_at_open() {
    let too_long = MAX_DURATION + Duration::from_secs(1);
    let builders = [
        Tenure::builder().checkpoint_interval(too_long),
        Tenure::builder().expired_retry_interval(too_long),
        Tenure::builder().min_ttl(too_long),
        Tenure::builder().recovery(Recovery::Extend(Duration::MAX)),
        Tenure::builder().durability(Durability::Buffered(Duration::MAX)),
        Tenure::builder().checkpoint_interval(Duration::ZERO),
    ];
    for b in builders {
        let what = format!("{b:?}");
        assert!(
            matches!(b.open(), Err(Error::InvalidArgument(_))),
            "{what} was accepted"
        );
    }
}

#[test]
fn k6_every_size_option_is_bounded_at_open() {
    for n in [usize::MAX, 1 << 40, MAX_WATCH_EVENTS + 1] {
        for b in [
            Tenure::builder().watch_queue(n),
            Tenure::builder().watch_history(n),
        ] {
            assert!(
                matches!(b.open(), Err(Error::InvalidArgument(_))),
                "{n} accepted"
            );
        }
    }
    // The largest accepted sizes cost nothing until events are queued.
    let db = Tenure::builder()
        .watch_queue(MAX_WATCH_EVENTS)
        .watch_history(MAX_WATCH_EVENTS)
        .open()
        .unwrap();
    let mut w = db.watch("k", WatchOptions::default()).unwrap();
    db.put("k", "v", None).unwrap();
    assert_eq!(w.recv().unwrap().kv.value, b"v");
}

/// A clock that panics once armed: a background thread that uses it dies.
struct PanickingClock {
    inner: std::sync::Arc<ManualClock>,
    armed: AtomicBool,
}

impl Clock for PanickingClock {
    fn now(&self) -> Duration {
        if self.armed.load(Ordering::SeqCst) {
            panic!("clock failure (injected)");
        }
        self.inner.now()
    }
    fn wall_ms(&self) -> i64 {
        self.inner.wall_ms()
    }
    fn instant_at(&self, t: Duration) -> Option<std::time::Instant> {
        self.inner.instant_at(t)
    }
    fn subscribe(&self, waker: std::sync::Weak<tenure::Waker>) {
        self.inner.subscribe(waker)
    }
}

#[test]
fn d6_a_dead_background_thread_poisons_the_engine_instead_of_dropping_work() {
    let clock = std::sync::Arc::new(PanickingClock {
        inner: ManualClock::new(),
        armed: AtomicBool::new(false),
    });
    let dir = tempfile::tempdir().unwrap();
    let db = Tenure::builder()
        .path(dir.path().join("db.tenure"))
        .clock(clock.clone())
        .open()
        .unwrap();
    db.put("before", "1", None).unwrap();
    clock.armed.store(true, Ordering::SeqCst);
    // Wakes the expiry thread, which dies; the compactor, whose policy tick reads the clock
    // too, may die first. The death is reported, not swallowed: writes fail with Storage
    // naming the thread.
    clock.inner.advance(Duration::from_secs(1));
    let failed = (0..2000).find_map(|_| match db.put("after", "2", None) {
        Err(e) => Some(e),
        Ok(_) => {
            std::thread::sleep(Duration::from_millis(5));
            None
        }
    });
    match failed {
        Some(e @ Error::Storage { .. }) => {
            let m = e.to_string();
            assert!(
                ["expiry", "compactor"]
                    .iter()
                    .any(|t| m.contains(&format!("the {t} thread died"))),
                "{m}"
            );
        }
        other => panic!("expected Storage, got {other:?}"),
    }
    clock.armed.store(false, Ordering::SeqCst);
    assert!(db.get("before").unwrap().is_some(), "reads keep working");
    let _ = db.close(); // returns (no hang)
}

#[test]
fn s1_the_longest_keepalive_interval_saturates_instead_of_panicking() {
    let (clock, db) = support::manual();
    let lease = db.grant(Duration::from_secs(10)).unwrap();
    let k = db.keep_alive(lease, Some(MAX_KEEPALIVE_INTERVAL)).unwrap();
    clock.advance(Duration::from_secs(5));
    assert!(k.is_alive());
    k.stop();
}

#[test]
fn s1_a_keepalive_interval_above_the_bound_is_an_invalid_argument_naming_it() {
    let db = Tenure::in_memory().unwrap();
    let lease = db.grant(Duration::from_secs(10)).unwrap();
    let leases = db.leases().unwrap().len();
    for too_long in [
        MAX_KEEPALIVE_INTERVAL + Duration::from_nanos(1),
        Duration::MAX,
    ] {
        let opts = SessionOptions {
            keepalive_interval: Some(too_long),
            ..Default::default()
        };
        for e in [
            db.keep_alive(lease, Some(too_long)).unwrap_err(),
            Session::new(&db, opts.clone()).unwrap_err(),
            Session::resume(&db, lease, opts).unwrap_err(),
        ] {
            let m = e.to_string();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
            assert!(
                m.contains("keepalive_interval") && m.contains("9000000000 s"),
                "{m}"
            );
        }
    }
    assert_eq!(db.leases().unwrap().len(), leases, "nothing granted");
}

#[test]
fn s5_huge_elector_durations_are_invalid_arguments_not_an_overflow() {
    let cfg = tenure::sync::ElectorConfig {
        name: "svc".into(),
        identity: "me".into(),
        lease_duration: Duration::MAX,
        renew_deadline: Duration::MAX - Duration::from_nanos(1),
        retry_period: Duration::MAX / 2,
        release_on_cancel: false,
    };
    assert!(matches!(cfg.validate(), Err(Error::InvalidArgument(_))));
}

mod txn_op_budget {
    use tenure::etcd::{PutRequest, RangeRequest, RequestOp, TxnRequest};
    use tenure::limits::{MAX_TXN_OPS, TOO_MANY_TXN_OPS};
    use tenure::{Error, Tenure};

    fn put(key: String) -> RequestOp {
        RequestOp::Put(PutRequest {
            key: key.into_bytes(),
            value: b"v".to_vec(),
            ..PutRequest::default()
        })
    }

    fn range(key: String) -> RequestOp {
        RequestOp::Range(RangeRequest {
            key: key.into_bytes(),
            ..RangeRequest::default()
        })
    }

    fn txn(success: Vec<RequestOp>) -> RequestOp {
        RequestOp::Txn(TxnRequest {
            success,
            ..TxnRequest::default()
        })
    }

    /// `width` nested txns of `width` ops each (`op(i, j)`), under one txn: etcd 3.4 accepts it
    /// while `width <= 64` (each nested level gets what the top level left, 128 - width).
    fn fan(width: usize, op: fn(String) -> RequestOp) -> RequestOp {
        txn((0..width)
            .map(|i| txn((0..width).map(|j| op(format!("k/{i}/{j}"))).collect()))
            .collect())
    }

    fn assert_too_many(db: &Tenure, op: &RequestOp, what: &str) {
        match db.execute(op) {
            Err(Error::InvalidArgument(m)) => assert_eq!(m, TOO_MANY_TXN_OPS, "{what}"),
            Err(e) => panic!("{what}: expected too many operations, got {e}"),
            Ok(_) => panic!("{what}: expected too many operations, it ran"),
        }
    }

    #[test]
    fn e2a_nested_txns_share_one_op_budget_for_writes_and_reads() {
        let db = Tenure::in_memory().unwrap();
        let before = db.revision().unwrap();
        // 64 x 64 = 4 096 puts, which etcd 3.4 applies.
        assert_too_many(&db, &fan(64, put), "64 nested txns of 64 puts");
        assert_eq!(db.revision().unwrap(), before, "nothing was written");
        assert!(db.range("k/", None).unwrap().is_empty());
        // The same with ranges: a read-only txn is held to the same budget.
        assert_too_many(&db, &fan(64, range), "64 nested txns of 64 ranges");
        // A chain deeper than the budget: each level is one operation of its parent.
        let mut chain = txn(vec![put("deep".into())]);
        for _ in 0..MAX_TXN_OPS {
            chain = txn(vec![chain]);
        }
        assert_too_many(&db, &chain, "a chain of 129 levels");
        assert!(db.get("deep").unwrap().is_none());
    }

    #[test]
    fn e2a_a_txn_within_the_budget_over_all_its_levels_runs() {
        let db = Tenure::in_memory().unwrap();
        // 2 at the top (a put and a nested txn) + 126 below = 128.
        let nested = txn((0..MAX_TXN_OPS - 2)
            .map(|j| put(format!("n/{j}")))
            .collect());
        let top = txn(vec![put("top".into()), nested]);
        db.execute(&top).unwrap();
        assert_eq!(db.range("n/", None).unwrap().len(), MAX_TXN_OPS - 2);
        // One more below is over.
        let nested = txn((0..MAX_TXN_OPS - 1)
            .map(|j| put(format!("m/{j}")))
            .collect());
        assert_too_many(&db, &txn(vec![put("top2".into()), nested]), "129 in all");
        // A flat txn of 128 ops per branch (etcd counts the largest branch, not their sum).
        let flat = RequestOp::Txn(TxnRequest {
            success: (0..MAX_TXN_OPS).map(|j| put(format!("f/{j}"))).collect(),
            failure: (0..MAX_TXN_OPS).map(|j| put(format!("g/{j}"))).collect(),
            ..TxnRequest::default()
        });
        db.execute(&flat).unwrap();
        assert_eq!(db.range("f/", None).unwrap().len(), MAX_TXN_OPS);
    }
}
