//! S7: the counting semaphore, over every place the recipes run.

use std::sync::Arc;
use std::time::Duration;

use tenure::sync::{Semaphore, Session};
use tenure::Error;

use crate::{eventually, mem, session, WAIT};

fn sem(s: &Session, permits: usize) -> Semaphore {
    Semaphore::new(s, "pool", permits).unwrap()
}

#[test]
fn s7_semaphore_admits_up_to_its_permits_and_try_acquire_is_locked_when_full() {
    let db = mem();
    let (a, b, c) = (session(&db), session(&db), session(&db));
    let ga = sem(&a, 2).try_acquire().unwrap();
    let gb = sem(&b, 2).acquire(Some(WAIT)).unwrap();
    assert!(ga.is_held() && gb.is_held());
    assert!(gb.fencing_token() > ga.fencing_token());
    assert!(matches!(
        sem(&c, 2).try_acquire(),
        Err(Error::Locked { holder, .. }) if holder == a.lease_id()
    ));
    assert_eq!(
        db.range("pool/", None).unwrap().len(),
        2,
        "the refused try_acquire left no key"
    );
    ga.release().unwrap();
    let gc = sem(&c, 2).try_acquire().unwrap();
    assert!(gc.fencing_token() > gb.fencing_token());
    assert!(
        matches!(sem(&c, 2).try_acquire(), Err(Error::InvalidArgument(_))),
        "a session holds a semaphore at most once"
    );
}

#[test]
fn s7_semaphore_waiters_are_admitted_in_fifo_order() {
    let db = mem();
    let [a, b, c, d] = [(); 4].map(|_| session(&db));
    let ga = sem(&a, 2).acquire(Some(WAIT)).unwrap();
    let gb = sem(&b, 2).acquire(Some(WAIT)).unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let spawn = |s: Session, name: &'static str| {
        let order = order.clone();
        std::thread::spawn(move || {
            let g = sem(&s, 2).acquire(Some(WAIT)).unwrap();
            order.lock().unwrap().push(name);
            g
        })
    };
    let tc = spawn(c.clone(), "c");
    eventually("c waits", || db.range("pool/", None).unwrap().len() == 3);
    let td = spawn(d.clone(), "d");
    eventually("d waits", || db.range("pool/", None).unwrap().len() == 4);
    ga.release().unwrap();
    let gc = tc.join().unwrap();
    assert_eq!(
        *order.lock().unwrap(),
        ["c"],
        "one permit freed: the first waiter only"
    );
    gb.release().unwrap();
    let gd = td.join().unwrap();
    assert_eq!(*order.lock().unwrap(), ["c", "d"]);
    assert!(gc.fencing_token() < gd.fencing_token());
}

#[test]
fn s7_a_holder_whose_session_ends_frees_its_permit() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let ga = sem(&a, 1).acquire(Some(WAIT)).unwrap();
    let bb = b.clone();
    let waiter = std::thread::spawn(move || sem(&bb, 1).acquire(Some(WAIT)));
    eventually("b waits", || db.range("pool/", None).unwrap().len() == 2);
    db.revoke(a.lease_id()).unwrap(); // a's session ends without releasing
    let gb = waiter.join().unwrap().unwrap();
    assert!(gb.is_held());
    assert!(!ga.is_held());
    assert!(matches!(ga.release(), Err(Error::NotLeader)));
}

#[test]
fn s7_a_permit_count_that_differs_from_the_holders_is_an_invalid_argument_naming_both() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let _ga = sem(&a, 2).acquire(Some(WAIT)).unwrap();
    for r in [sem(&b, 3).try_acquire(), sem(&b, 3).acquire(Some(WAIT))] {
        match r {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains("has 2 permits") && m.contains("not 3"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        db.range("pool/", None).unwrap().len(),
        1,
        "nothing left behind"
    );
    assert!(matches!(
        Semaphore::new(&b, "pool", 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        Semaphore::new(&b, "pool", Semaphore::MAX_PERMITS + 1),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn s7_acquire_times_out_and_withdraws_and_a_dead_waiter_stops_at_once() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let _ga = sem(&a, 1).acquire(Some(WAIT)).unwrap();
    assert!(matches!(
        sem(&b, 1).acquire(Some(Duration::from_millis(100))),
        Err(Error::Timeout { .. })
    ));
    assert_eq!(
        db.range("pool/", None).unwrap().len(),
        1,
        "the waiter withdrew"
    );
    let bb = b.clone();
    let waiter = std::thread::spawn(move || sem(&bb, 1).acquire(None));
    eventually("b waits", || db.range("pool/", None).unwrap().len() == 2);
    db.revoke(b.lease_id()).unwrap();
    assert!(matches!(
        waiter.join().unwrap(),
        Err(Error::SessionExpired(_))
    ));
}
