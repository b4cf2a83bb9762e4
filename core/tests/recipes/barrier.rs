//! S11: the barrier and the double barrier, over the backend of the binary that runs them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tenure::sync::{Barrier, DoubleBarrier};
use tenure::Error;

use crate::{backend, eventually, mem, session, WAIT};

#[test]
fn s11_a_barrier_holds_its_waiters_until_released() {
    let db = mem();
    let b = Barrier::new(&backend(&db), "deploy");
    b.wait(None).unwrap(); // free: passes at once
    assert!(b.hold().unwrap());
    assert!(!b.hold().unwrap(), "already held");
    assert!(
        db.get("deploy").unwrap().is_some(),
        "etcd's layout: the key `name`"
    );
    assert!(matches!(
        b.wait(Duration::from_millis(50)),
        Err(Error::Timeout { .. })
    ));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let b = b.clone();
            std::thread::spawn(move || b.wait(WAIT))
        })
        .collect();
    assert!(b.is_held().unwrap());
    b.release().unwrap();
    for w in waiters {
        w.join().unwrap().unwrap();
    }
    assert!(!b.is_held().unwrap());
    b.release().unwrap(); // releasing a free barrier does nothing
}

#[test]
fn s11_a_double_barrier_lets_its_participants_in_and_out_together() {
    let db = mem();
    let n = 3;
    let (arrived, leaving) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let s = session(&db);
            let (arrived, leaving) = (arrived.clone(), leaving.clone());
            std::thread::spawn(move || {
                let b = DoubleBarrier::new(&s, "batch", n);
                arrived.fetch_add(1, Ordering::SeqCst);
                b.enter(WAIT).unwrap();
                let in_when_entered = arrived.load(Ordering::SeqCst);
                leaving.fetch_add(1, Ordering::SeqCst);
                b.leave(WAIT).unwrap();
                (in_when_entered, leaving.load(Ordering::SeqCst))
            })
        })
        .collect();
    for t in threads {
        let (arrived, left) = t.join().unwrap();
        assert_eq!(arrived, n, "entered before everyone arrived");
        assert_eq!(left, n, "left before everyone was leaving");
    }
    assert!(db.range("batch/", None).unwrap().is_empty(), "nothing left");
}

#[test]
fn s11_enter_times_out_and_withdraws_and_a_late_participant_is_refused() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let r = DoubleBarrier::new(&a, "pair", 2).enter(Duration::from_millis(100));
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    assert!(db.range("pair/waiters/", None).unwrap().is_empty());
    let only = DoubleBarrier::new(&a, "solo", 1);
    only.enter(WAIT).unwrap();
    assert!(db.get("solo/ready").unwrap().is_some());
    let late = DoubleBarrier::new(&b, "solo", 1).enter(WAIT);
    assert!(matches!(late, Err(Error::InvalidArgument(_))), "{late:?}");
    assert_eq!(db.range("solo/waiters/", None).unwrap().len(), 1);
    assert!(matches!(
        DoubleBarrier::new(&b, "solo", 1).leave(WAIT),
        Err(Error::InvalidArgument(_))
    ));
    only.leave(WAIT).unwrap();
    assert!(db.range("solo/", None).unwrap().is_empty());
}

#[test]
fn s11_a_participant_whose_session_ends_does_not_block_the_others_leave() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let bb = b.clone();
    let other = std::thread::spawn(move || DoubleBarrier::new(&bb, "crash", 2).enter(WAIT));
    eventually("b entered", || {
        db.range("crash/waiters/", None).unwrap().len() == 1
    });
    let mine = DoubleBarrier::new(&a, "crash", 2);
    mine.enter(WAIT).unwrap();
    other.join().unwrap().unwrap();
    db.revoke(b.lease_id()).unwrap(); // b dies inside the barrier
    mine.leave(WAIT).unwrap();
    assert!(db.range("crash/", None).unwrap().is_empty());
}
