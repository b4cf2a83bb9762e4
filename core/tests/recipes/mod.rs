//! The S2-S4 tests of the mutex and the election, written once and run by two test binaries:
//! `spec_sync` over the embedded engine, `spec_sync_seam` over a backend that implements only
//! the seam (no fast paths). Each provides `backend` and `session` at its crate root.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tenure::sync::{Election, FenceGate, Leadership, Mutex, Session};
use tenure::{Error, Stop, Tenure, Wait, WaitPool};

use crate::{backend, eventually, mem, session, WAIT};

#[test]
fn s2_the_mutex_is_fifo_by_create_revision() {
    let db = mem();
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
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let g = Mutex::new(&a, "m").try_lock().unwrap();
    assert!(g.is_held());
    assert!(matches!(
        Mutex::new(&b, "m").try_lock(),
        Err(Error::Locked { .. })
    ));
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
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let _g = Mutex::new(&a, "m").lock(None).unwrap();
    let start = Instant::now();
    assert!(matches!(
        Mutex::new(&b, "m").lock(Some(Duration::from_millis(100))),
        Err(Error::Timeout { .. })
    ));
    assert!(start.elapsed() >= Duration::from_millis(100));
    assert_eq!(db.range("m/", None).unwrap().len(), 1);
}

#[test]
fn s2_a_waiter_whose_session_dies_stops_at_once_with_session_expired() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let _g = Mutex::new(&a, "m").lock(None).unwrap();
    let bb = b.clone();
    let waiter = std::thread::spawn(move || Mutex::new(&bb, "m").lock(None));
    eventually("b queued", || db.range("m/", None).unwrap().len() == 2);
    let start = Instant::now();
    db.revoke(b.lease_id()).unwrap();
    let r = waiter.join().unwrap();
    assert!(matches!(r, Err(Error::SessionExpired(_))), "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn s2_the_holder_rechecks_its_own_key_after_waiting() {
    // etcd#11051: the waiter's own key vanished while it waited (its lease was revoked at the
    // same moment its predecessor left); it must not report the lock as acquired.
    let db = mem();
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
    assert!(matches!(r, Err(Error::SessionExpired(_))), "{r:?}");
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
    let db = mem();
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
    let db = mem();
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
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let mut obs = Election::observe(&backend(&db), "svc").unwrap();
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
        Election::leader(&backend(&db), "svc")
            .unwrap()
            .unwrap()
            .value,
        b"host-a"
    );
    la.proclaim("host-a2").unwrap();
    assert_eq!(
        obs.recv_timeout(Some(WAIT)).unwrap().unwrap().value,
        b"host-a2"
    );
    la.resign().unwrap();
    let lb = candidate.join().unwrap().unwrap();
    assert!(lb.fencing_token() > la.fencing_token());
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
        Err(Error::Timeout { .. })
    ));
}

#[test]
fn s4_proclaim_after_losing_leadership_is_not_leader() {
    let db = mem();
    let a = session(&db);
    let l = Election::new(&a, "svc").campaign("x", None).unwrap();
    db.revoke(a.lease_id()).unwrap();
    assert!(matches!(l.proclaim("y"), Err(Error::NotLeader)));
    assert!(Election::leader(&backend(&db), "svc").unwrap().is_none());
}

#[test]
fn s2_a_cancelled_lock_wait_gives_up_at_once_and_withdraws() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let _g = Mutex::new(&a, "m").lock(None).unwrap();
    let cancel = Stop::new();
    let (bb, c) = (b.clone(), cancel.clone());
    let waiter = std::thread::spawn(move || Mutex::new(&bb, "m").lock(&c));
    eventually("b queued", || db.range("m/", None).unwrap().len() == 2);
    cancel.stop();
    assert!(matches!(waiter.join().unwrap(), Err(Error::Timeout { .. })));
    assert_eq!(
        db.range("m/", None).unwrap().len(),
        1,
        "the cancelled contender left the queue"
    );
    let cancel = Stop::new();
    let eb = Election::new(&b, "svc");
    let _leader = Election::new(&a, "svc").campaign("a", None).unwrap();
    let c = cancel.clone();
    let candidate =
        std::thread::spawn(move || eb.campaign("b", Wait::forever().with_stop(&c)).map(|_| ()));
    eventually("b campaigns", || db.range("svc/", None).unwrap().len() == 2);
    cancel.stop();
    assert!(matches!(
        candidate.join().unwrap(),
        Err(Error::Timeout { .. })
    ));
    assert_eq!(db.range("svc/", None).unwrap().len(), 1);
}

#[test]
fn s2_s4_nested_lock_and_election_names_do_not_interfere() {
    // Reliability defect 7: `jobs/nightly`'s holder blocked `jobs`, and the leader of `svc/eu`
    // was reported as the leader of `svc`.
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let _nightly = Mutex::new(&a, "jobs/nightly").lock(None).unwrap();
    let jobs = Mutex::new(&b, "jobs").try_lock().expect("jobs is free");
    assert!(jobs.is_held());
    let outer = Mutex::new(&a, "jobs").lock(Duration::from_millis(50));
    assert!(matches!(outer, Err(Error::Timeout { .. })), "{outer:?}");
    let _eu = Election::new(&a, "svc/eu").campaign("eu", None).unwrap();
    assert_eq!(Election::leader(&backend(&db), "svc").unwrap(), None);
    let mut obs = Election::observe(&backend(&db), "svc").unwrap();
    assert_eq!(obs.recv_timeout(WAIT).unwrap(), None);
    let svc = Election::new(&b, "svc").campaign("top", WAIT).unwrap();
    assert_eq!(
        Election::leader(&backend(&db), "svc")
            .unwrap()
            .map(|kv| kv.value),
        Some(b"top".to_vec())
    );
    assert_eq!(
        obs.recv_timeout(WAIT).unwrap().map(|kv| kv.value),
        Some(b"top".to_vec())
    );
    assert!(svc.fencing_token() > 0);
}

#[test]
fn s2_a_mutex_is_not_reentrant_per_session() {
    // Reliability defect 8: threads sharing one session were all inside the critical section
    // with the same fencing token. A second acquisition through the same session is refused
    // while the first is held or being acquired; once released, the session may lock again.
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let m = Mutex::new(&a, "m");
    let g = m.lock(None).unwrap();
    let again = Mutex::new(&a, "m").lock(Duration::from_millis(10));
    assert!(matches!(again, Err(Error::InvalidArgument(_))), "{again:?}");
    assert!(matches!(m.try_lock(), Err(Error::InvalidArgument(_))));
    assert!(g.is_held(), "the refused attempt left the holder alone");
    // Four threads sharing a session, each holding what it got until all have tried: exactly
    // one is inside, the others are refused.
    let all_tried = Arc::new(std::sync::Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (bb, all_tried) = (b.clone(), all_tried.clone());
            std::thread::spawn(move || {
                let r = Mutex::new(&bb, "n").lock(WAIT);
                all_tried.wait();
                r.map(|g| g.fencing_token())
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Ok(_) | Err(Error::InvalidArgument(_)))),
        "{results:?}"
    );
    let token = g.fencing_token();
    g.unlock().unwrap();
    let g2 = m.lock(None).unwrap();
    assert!(g2.fencing_token() > token);
}

#[test]
fn s2_s4_huge_lock_and_campaign_timeouts_saturate() {
    // Reliability defect 9: `Instant::now() + timeout` overflowed and panicked.
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let huge = Duration::from_secs(u64::MAX);
    let g = Mutex::new(&a, "m").lock(huge).unwrap();
    let l = Election::new(&a, "e").campaign("a", huge).unwrap();
    let cancel = Stop::new();
    let c = cancel.clone();
    let bb = b.clone();
    let waiter = std::thread::spawn(move || {
        Mutex::new(&bb, "m").lock(Wait::timeout(Duration::MAX).with_stop(&c))
    });
    eventually("b queued", || db.range("m/", None).unwrap().len() == 2);
    cancel.stop();
    assert!(matches!(waiter.join().unwrap(), Err(Error::Timeout { .. })));
    let mut obs = Election::observe(&backend(&db), "e").unwrap();
    assert!(obs.recv_timeout(huge).unwrap().is_some());
    drop((g, l));
}

#[test]
fn s2_s4_one_wait_pool_serves_many_lock_and_campaign_waits_and_withdraws_what_it_drops() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let n = 50;
    let names: Vec<String> = (0..n).map(|i| format!("pool/{i}")).collect();
    let held: Vec<_> = names
        .iter()
        .map(|m| Mutex::new(&a, m).lock(None).unwrap())
        .collect();
    let _leading = Election::new(&a, "svc").campaign("a", None).unwrap();
    let pool = WaitPool::new("test-wait-pool").unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    for (i, m) in names.iter().enumerate() {
        let tx = tx.clone();
        pool.submit(Mutex::new(&b, m).lock_wait(WAIT), move |r| {
            let _ = tx.send((i, r.unwrap()));
        });
    }
    let cancel = Stop::new();
    let (ctx, crx) = crossbeam_channel::bounded(1);
    let campaign = Election::new(&b, "svc").campaign_wait("b", Wait::forever().with_stop(&cancel));
    pool.submit(campaign, move |r| {
        let _ = ctx.send(r.unwrap().map(|l| l.fencing_token()));
    });
    eventually("every waiter queued", || {
        db.range("pool/", None).unwrap().len() == 2 * n
            && db.range("svc/", None).unwrap().len() == 2
    });
    assert_eq!(pool.pending(), n + 1);
    cancel.stop();
    assert!(matches!(
        crx.recv_timeout(WAIT).unwrap(),
        Err(Error::Timeout { .. })
    ));
    assert_eq!(
        db.range("svc/", None).unwrap().len(),
        1,
        "the cancelled candidacy is withdrawn"
    );
    let tokens: Vec<i64> = held.iter().map(|g| g.fencing_token()).collect();
    drop(held);
    let mut got: Vec<_> = (0..n).map(|_| rx.recv_timeout(WAIT).unwrap()).collect();
    got.sort_by_key(|(i, _)| *i);
    for ((i, g), before) in got.iter().zip(&tokens) {
        let g = g.as_ref().unwrap_or_else(|e| panic!("lock {i}: {e}"));
        assert!(g.is_held() && g.fencing_token() > *before);
    }
    assert_eq!(pool.pending(), 0);
    // A wait still pending when the pool is dropped withdraws its key; its callback never runs.
    let _last = Mutex::new(&a, "last").lock(None).unwrap();
    let (ltx, lrx) = crossbeam_channel::bounded(1);
    pool.submit(Mutex::new(&b, "last").lock_wait(None), move |r| {
        let _ = ltx.send(r.is_ok());
    });
    eventually("the last waiter queued", || {
        db.range("last/", None).unwrap().len() == 2
    });
    drop(pool);
    assert_eq!(db.range("last/", None).unwrap().len(), 1);
    assert!(lrx.try_recv().is_err());
}

#[test]
fn s1_s2_an_attached_session_locks_on_a_lease_it_does_not_own_and_leaves_the_lease() {
    let db = mem();
    let owner = session(&db);
    let id = owner.lease_id();
    let attached = Session::attach(&backend(&db), id).unwrap();
    assert_eq!(attached.lease_id(), id);
    let g = Mutex::new(&attached, "m").lock(Some(WAIT)).unwrap();
    let (key, token) = g.keep();
    drop(attached);
    assert!(db.time_to_live(id).is_ok(), "dropping it leaves the lease");
    assert_eq!(db.get(&key).unwrap().unwrap().create_revision, token);
    owner.close().unwrap();
    assert!(
        db.get(&key).unwrap().is_none(),
        "the key went with the lease"
    );
    assert!(matches!(
        Session::attach(&backend(&db), id),
        Err(Error::LeaseNotFound(_))
    ));
}

#[test]
fn s4_a_resumed_leadership_proclaims_and_resigns_only_while_it_leads() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let won = Election::new(&a, "svc").campaign("one", None).unwrap();
    let (key, rev) = (won.key().to_vec(), won.fencing_token());
    let resumed = Leadership::resume(&backend(&db), &key, rev, a.lease_id());
    resumed.proclaim("two").unwrap();
    let leader = Election::leader(&backend(&db), "svc").unwrap().unwrap();
    assert_eq!(
        (leader.value, leader.lease),
        (b"two".to_vec(), Some(a.lease_id()))
    );
    let stale = Leadership::resume(&backend(&db), &key, rev - 1, a.lease_id());
    assert!(matches!(stale.proclaim("stale"), Err(Error::NotLeader)));
    stale.resign().unwrap();
    assert_eq!(
        Election::leader(&backend(&db), "svc")
            .unwrap()
            .unwrap()
            .value,
        b"two",
        "a stale leadership's resign removes nothing"
    );
    resumed.resign().unwrap();
    assert!(Election::leader(&backend(&db), "svc").unwrap().is_none());
    let next = Election::new(&b, "svc")
        .campaign("three", Some(WAIT))
        .unwrap();
    assert!(next.fencing_token() > rev);
    assert!(matches!(resumed.proclaim("late"), Err(Error::NotLeader)));
}

// The semaphore and the read-write lock (S7–S8), bounded holds of the mutex (S9).
mod hold;
mod rwlock;
mod semaphore;
// queues (S10).
mod queue;
// barriers (S11).
mod barrier;
// groups and the partitioner (S12).
mod group;
