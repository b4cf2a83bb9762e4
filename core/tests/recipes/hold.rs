//! S9: bounded holds of the mutex (`lock_delay`, `max_hold`), over every place the recipes run.
//! Where time matters the embedded tests move a `ManualClock`; over `tenure serve` and etcd the
//! durations are short and the tests measure them.

use std::time::{Duration, Instant};

use crossbeam_channel::TryRecvError;
use tenure::sync::{Mutex, MutexOptions, Session};
use tenure::Error;

use crate::support::{place, Place};
use crate::{eventually, mem, session, WAIT};

/// Waits until b's entry is in the queue and, embedded, until b has looked at the queue and
/// watches the entry ahead (its own entry's watch and its predecessor's: two more watchers), so
/// the holder's end cannot fall between b's put and b's first look: an in-memory engine keeps
/// no history to read that look at b's own revision. Remote places keep history (SPEC S9).
fn until_b_watches(db: &tenure::Tenure, watchers_before: u64) {
    let embedded = matches!(place(), Place::Embedded);
    eventually("b waits", || {
        db.range("m/", None).unwrap().len() == 2
            && (!embedded || db.stats().watchers >= watchers_before + 2)
    });
}

fn bounded(s: &Session, lock_delay: Option<Duration>, max_hold: Option<Duration>) -> Mutex {
    let opts = MutexOptions {
        lock_delay,
        max_hold,
    };
    Mutex::with_options(s, "m", opts).unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn s9_lock_delay_holds_the_lock_back_after_the_holders_session_ends_involuntarily() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let ga = Mutex::new(&a, "m").lock(Some(WAIT)).unwrap();
    let bb = b.clone();
    let watchers = db.stats().watchers;
    let waiter = std::thread::spawn(move || {
        let g = bounded(&bb, Some(ms(400)), None).lock(Some(WAIT)).unwrap();
        (Instant::now(), g)
    });
    until_b_watches(&db, watchers);
    let ended = Instant::now();
    db.revoke(a.lease_id()).unwrap(); // a's session ends without unlocking
    let (took, gb) = waiter.join().unwrap();
    assert!(
        took - ended >= ms(400),
        "b took the lock {:?} after a's session ended",
        took - ended
    );
    assert!(gb.is_held() && gb.fencing_token() > ga.fencing_token());
}

#[test]
fn s9_a_voluntary_unlock_never_delays_even_when_the_session_ends_right_after() {
    let db = mem();
    for marked in [true, false] {
        let (a, b) = (session(&db), session(&db));
        // A holder with a lock_delay marks its unlock; one without leaves its lease behind it.
        let holder = if marked {
            bounded(&a, Some(Duration::from_secs(3600)), None)
        } else {
            Mutex::new(&a, "m")
        };
        let ga = holder.lock(Some(WAIT)).unwrap();
        let bb = b.clone();
        let watchers = db.stats().watchers;
        let waiter = std::thread::spawn(move || {
            // An hour's delay: taking the lock within WAIT proves there was none.
            bounded(&bb, Some(Duration::from_secs(3600)), None).lock(Some(WAIT))
        });
        until_b_watches(&db, watchers);
        ga.unlock().unwrap();
        if marked {
            a.close().unwrap(); // at once: the mark still says "released"
        }
        let gb = waiter.join().unwrap().unwrap();
        assert!(gb.is_held(), "marked={marked}");
        gb.unlock().unwrap();
        let _ = a.close();
    }
}

#[test]
fn s9_max_hold_raises_done_then_releases_while_the_session_lives() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let start = Instant::now();
    let ga = bounded(&a, None, Some(ms(300))).lock(Some(WAIT)).unwrap();
    let done = ga.done();
    assert_eq!(
        done.recv_timeout(WAIT),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected),
        "done is raised when max_hold runs out"
    );
    assert!(start.elapsed() >= ms(300));
    assert!(!ga.is_held());
    let gb = Mutex::new(&b, "m").lock(Some(WAIT)).unwrap();
    assert!(gb.fencing_token() > ga.fencing_token());
    assert!(!a.is_done(), "the session is still alive");
    assert!(matches!(ga.unlock(), Err(Error::NotLeader)));
}

#[test]
fn s9_bounded_hold_options_must_be_positive_and_bounded() {
    let db = mem();
    let a = session(&db);
    for (opts, named) in [
        (
            MutexOptions {
                lock_delay: Some(Duration::ZERO),
                max_hold: None,
            },
            "lock_delay",
        ),
        (
            MutexOptions {
                lock_delay: None,
                max_hold: Some(Duration::MAX),
            },
            "max_hold",
        ),
    ] {
        match Mutex::with_options(&a, "m", opts) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(named), "{m}"),
            other => panic!("{other:?}"),
        }
    }
    assert!(db.range("m/", None).unwrap().is_empty());
}

/// On the engine's `ManualClock`: the delay and the bound counted exactly.
mod embedded_only {
    use super::*;
    use crate::support::{manual, secs, session_ttl};
    use tenure::sync::Pollable;

    /// Polls `w` until `cond` holds of it, failing after `WAIT`.
    fn poll_until<P: Pollable>(w: &mut P, what: &str, cond: impl Fn(&P) -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            assert!(w.poll().unwrap().is_none(), "{what}: over too early");
            if cond(w) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out waiting for: {what}");
            std::thread::yield_now();
        }
    }

    #[test]
    fn s9_lock_delay_after_an_expired_lease_counts_on_the_engine_clock() {
        let (clock, db) = manual();
        let a = session_ttl(&crate::backend(&db), secs(9));
        let b = session_ttl(&crate::backend(&db), secs(60));
        let ga = Mutex::new(&a, "m").lock(Some(WAIT)).unwrap();
        let mut w = bounded(&b, Some(secs(5)), None).lock_wait(WAIT);
        assert!(w.poll().unwrap().is_none(), "b waits behind a");
        a.orphan(); // a stops renewing: its lease expires
        clock.advance(secs(9));
        poll_until(&mut w, "b sits out the delay", |w| {
            w.delayed_until().is_some()
        });
        let due = w.delayed_until().unwrap();
        assert!(due >= secs(9) + secs(5), "{due:?}");
        clock.advance(secs(5) - ms(1));
        assert!(w.poll().unwrap().is_none(), "not before the delay is over");
        clock.advance(ms(1));
        let gb = w.poll().unwrap().expect("taken once the delay is over");
        assert!(gb.fencing_token() > ga.fencing_token());
    }

    #[test]
    fn s9_a_max_hold_end_counts_as_involuntary_for_a_lock_delay() {
        let (clock, db) = manual();
        let a = session_ttl(&crate::backend(&db), secs(60));
        let b = session_ttl(&crate::backend(&db), secs(60));
        let ga = bounded(&a, None, Some(secs(10))).lock(Some(WAIT)).unwrap();
        let done = ga.done();
        let mut w = bounded(&b, Some(secs(3)), None).lock_wait(WAIT);
        assert!(w.poll().unwrap().is_none(), "b waits behind a");
        clock.advance(secs(10) - ms(1));
        assert!(ga.is_held(), "held until max_hold is over");
        assert_eq!(done.try_recv(), Err(TryRecvError::Empty));
        clock.advance(ms(1));
        assert!(done.recv_timeout(WAIT).is_err(), "done is raised");
        poll_until(&mut w, "b sits out the delay", |w| {
            w.delayed_until().is_some()
        });
        assert!(!ga.is_held());
        clock.advance(secs(3));
        let gb = w.poll().unwrap().expect("taken once the delay is over");
        assert!(gb.fencing_token() > ga.fencing_token());
        assert!(!a.is_done(), "max_hold ends the hold, not the session");
    }
}
