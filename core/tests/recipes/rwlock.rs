//! S8: the read-write lock, over every place the recipes run.

use std::time::Duration;

use tenure::sync::{RwLock, Session};
use tenure::Error;

use crate::{eventually, mem, session, WAIT};

fn rw(s: &Session) -> RwLock {
    RwLock::new(s, "cfg")
}

#[test]
fn s8_readers_share_and_a_writer_is_alone() {
    let db = mem();
    let (a, b, c) = (session(&db), session(&db), session(&db));
    let ra = rw(&a).read(Some(WAIT)).unwrap();
    let rb = rw(&b).try_read().unwrap();
    assert!(ra.is_held() && rb.is_held() && !ra.is_write());
    assert!(matches!(
        rw(&c).try_write(),
        Err(Error::Locked { holder, .. }) if holder == a.lease_id()
    ));
    assert!(matches!(
        rw(&c).write(Some(Duration::from_millis(100))),
        Err(Error::Timeout { .. })
    ));
    assert_eq!(
        db.range("cfg/", None).unwrap().len(),
        2,
        "refused writers left no key"
    );
    ra.release().unwrap();
    rb.release().unwrap();
    let w = rw(&c).try_write().unwrap();
    assert!(w.is_write() && w.fencing_token() > 0);
    assert!(String::from_utf8_lossy(w.key()).starts_with("cfg/write/"));
    assert!(matches!(rw(&a).try_read(), Err(Error::Locked { .. })));
    assert!(matches!(rw(&a).try_write(), Err(Error::Locked { .. })));
    w.release().unwrap();
    assert!(db.range("cfg/", None).unwrap().is_empty());
}

#[test]
fn s8_a_waiting_writer_is_not_starved_by_later_readers() {
    let db = mem();
    let (a, b, c) = (session(&db), session(&db), session(&db));
    let r1 = rw(&a).read(Some(WAIT)).unwrap();
    let bb = b.clone();
    let writer = std::thread::spawn(move || rw(&bb).write(Some(WAIT)));
    eventually("the writer waits", || {
        db.range("cfg/write/", None).unwrap().len() == 1
    });
    // A reader arriving after the waiting writer waits behind it.
    assert!(
        matches!(rw(&c).try_read(), Err(Error::Locked { holder, .. }) if holder == b.lease_id())
    );
    let released = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (cc, seen) = (c.clone(), released.clone());
    let reader = std::thread::spawn(move || {
        let g = rw(&cc).read(Some(WAIT));
        (g, seen.load(std::sync::atomic::Ordering::SeqCst))
    });
    eventually("the later reader waits", || {
        db.range("cfg/read/", None).unwrap().len() == 2
    });
    r1.release().unwrap();
    let w = writer.join().unwrap().unwrap();
    assert!(w.is_held());
    released.store(true, std::sync::atomic::Ordering::SeqCst);
    w.release().unwrap();
    let (r2, after) = reader.join().unwrap();
    assert!(r2.unwrap().is_held());
    assert!(
        after,
        "the later reader was admitted only once the writer released"
    );
}

#[test]
fn s8_a_reader_whose_session_ends_frees_the_lock_for_a_writer() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let r = rw(&a).read(Some(WAIT)).unwrap();
    let bb = b.clone();
    let writer = std::thread::spawn(move || rw(&bb).write(Some(WAIT)));
    eventually("the writer waits", || {
        db.range("cfg/", None).unwrap().len() == 2
    });
    db.revoke(a.lease_id()).unwrap(); // the reader's session ends without releasing
    let w = writer.join().unwrap().unwrap();
    assert!(w.is_held() && !r.is_held());
    assert!(matches!(r.release(), Err(Error::NotLeader)));
}
