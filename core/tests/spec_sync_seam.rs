//! The S2-S4 mutex and election tests over a backend that implements only the recipes' seam
//! (no lease-loss or demotion fast path): the recipes need nothing else.

mod recipes;
mod support;

use std::time::Duration;
use support::{eventually, mem, SeamOnly, WAIT};

use tenure::sync::{Election, Mutex, RwLock, Semaphore, Session};
use tenure::{Error, Tenure};

fn backend(db: &Tenure) -> SeamOnly {
    SeamOnly::new(db)
}

fn session(db: &Tenure) -> Session {
    support::session_on(&backend(db))
}

// ---- an entry whose answer was lost (SPEC P17) ----------------------------------------------

/// The keys under `prefix` of `session`'s lease.
fn entries_of(db: &Tenure, prefix: &str, session: &Session) -> Vec<tenure::KeyValue> {
    let mut kvs = db.range(prefix, None).unwrap();
    kvs.retain(|kv| kv.lease == Some(session.lease_id()));
    kvs
}

#[test]
fn p17_a_lock_whose_entry_answer_was_lost_waits_on_that_entry_and_withdraws_it_on_failure() {
    let db = mem();
    let lossy = SeamOnly::new(&db);
    let holder = session(&db);
    let held = Mutex::new(&holder, "jobs").lock(WAIT).unwrap();
    let s = support::session_on(&lossy);
    lossy.lose_next(1);
    // The put of the entry is applied, its answer lost: the wait goes on (here to its end),
    // and its failure withdraws the entry, which would otherwise block the queue.
    let err = Mutex::new(&s, "jobs")
        .lock(Duration::from_millis(50))
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert_eq!(entries_of(&db, "jobs/", &s), vec![]);
    drop(held);
    lossy.lose_next(1);
    let g = Mutex::new(&s, "jobs").lock(WAIT).unwrap();
    let mine = entries_of(&db, "jobs/", &s);
    assert_eq!(mine.len(), 1, "one key of the lease");
    assert_eq!(mine[0].create_revision, g.fencing_token());
}

#[test]
fn p17_a_campaign_a_semaphore_and_a_rwlock_whose_entry_answer_was_lost_enter_once() {
    let db = mem();
    let lossy = SeamOnly::new(&db);
    let s = support::session_on(&lossy);
    lossy.lose_next(1);
    let led = Election::new(&s, "leader").campaign("me", WAIT).unwrap();
    let mine = entries_of(&db, "leader/", &s);
    assert_eq!(mine.len(), 1, "one key of the lease");
    assert_eq!(mine[0].value, b"me");
    assert_eq!(mine[0].create_revision, led.fencing_token());

    lossy.lose_next(1);
    let permit = Semaphore::new(&s, "pool", 2)
        .unwrap()
        .acquire(WAIT)
        .unwrap();
    let mine = entries_of(&db, "pool/", &s);
    assert_eq!(mine.len(), 1, "one key of the lease");
    drop(permit);
    assert_eq!(entries_of(&db, "pool/", &s), vec![], "released");

    lossy.lose_next(1);
    let write = RwLock::new(&s, "doc").write(WAIT).unwrap();
    assert_eq!(entries_of(&db, "doc/", &s).len(), 1, "one key of the lease");
    drop(write);
    assert_eq!(entries_of(&db, "doc/", &s), vec![], "released");
}
