//! Crash cases of the recipes (issue 26, SPEC S7 and S8: "a holder whose session ends frees its
//! permit / its hold"): a child process holds a semaphore permit, a read lock or the write lock
//! through a file-backed engine and is killed with SIGKILL; the parent reopens the file on a
//! `ManualClock`, finds the dead holder's key still there (its lease was persisted), queues a
//! contender behind it, and frees the hold either by letting the lease run out (the clock moved
//! past the TTL) or by revoking it at once. The contender then gets it, with a higher fencing
//! token than the dead holder's.
//!
//! The child is this test binary, re-executed with `TENURE_RECIPE_CRASH_CHILD` set: the ignored
//! `recipe_crash_child_entry` test takes the hold, prints `@@HELD <lease> <token>` and idles
//! until killed.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use support::{open_file_with_clock, secs, session_ttl, WAIT};
use tenure::sync::{RwLock, Semaphore, Session};
use tenure::{Error, LeaseId, ManualClock, Tenure};

const CHILD_PATH: &str = "TENURE_RECIPE_CRASH_CHILD";
const CHILD_KIND: &str = "TENURE_RECIPE_CRASH_KIND";
/// The dead holder's lease: long enough that it cannot run out on its own between the child's
/// grant and the parent's checks (the reopen ages it by the wall time passed).
const HOLDER_TTL: u64 = 600;

/// What the child holds.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Permit,
    Read,
    Write,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Permit => "permit",
            Kind::Read => "read",
            Kind::Write => "write",
        }
    }

    fn parse(s: &str) -> Kind {
        match s {
            "permit" => Kind::Permit,
            "read" => Kind::Read,
            "write" => Kind::Write,
            other => panic!("unknown kind {other}"),
        }
    }
}

/// Takes the hold of `kind` through `s`: its fencing token, and something to keep alive.
fn take(kind: Kind, s: &Session) -> (i64, Box<dyn std::any::Any>) {
    match kind {
        Kind::Permit => {
            let g = Semaphore::new(s, "pool", 1)
                .unwrap()
                .acquire(Some(WAIT))
                .unwrap();
            (g.fencing_token(), Box::new(g))
        }
        Kind::Read => {
            let g = RwLock::new(s, "cfg").read(Some(WAIT)).unwrap();
            (g.fencing_token(), Box::new(g))
        }
        Kind::Write => {
            let g = RwLock::new(s, "cfg").write(Some(WAIT)).unwrap();
            (g.fencing_token(), Box::new(g))
        }
    }
}

/// What the next contender tries after a `kind` hold: another permit, the write lock after a
/// reader, a read lock after the writer. `Ok(token)` or the error.
fn contend(kind: Kind, s: &Session, wait: Option<std::time::Duration>) -> tenure::Result<i64> {
    match (kind, wait) {
        (Kind::Permit, Some(w)) => Semaphore::new(s, "pool", 1)?
            .acquire(Some(w))
            .map(|g| g.fencing_token()),
        (Kind::Permit, None) => Semaphore::new(s, "pool", 1)?
            .try_acquire()
            .map(|g| g.fencing_token()),
        (Kind::Read, Some(w)) => RwLock::new(s, "cfg")
            .write(Some(w))
            .map(|g| g.fencing_token()),
        (Kind::Read, None) => RwLock::new(s, "cfg").try_write().map(|g| g.fencing_token()),
        (Kind::Write, Some(w)) => RwLock::new(s, "cfg")
            .read(Some(w))
            .map(|g| g.fencing_token()),
        (Kind::Write, None) => RwLock::new(s, "cfg").try_read().map(|g| g.fencing_token()),
    }
}

/// The child: holds, says so, and idles until the parent kills it.
#[test]
#[ignore = "child process of the recipe crash tests; run by them"]
fn recipe_crash_child_entry() {
    let (Ok(path), Ok(kind)) = (std::env::var(CHILD_PATH), std::env::var(CHILD_KIND)) else {
        return; // not started by a parent test: nothing to do
    };
    let db = Tenure::open(&path).unwrap();
    let s = session_ttl(&db, secs(HOLDER_TTL));
    let (token, _held) = take(Kind::parse(&kind), &s);
    let mut out = std::io::stdout().lock();
    writeln!(out, "@@HELD {} {token}", s.lease_id().get()).unwrap();
    out.flush().unwrap();
    drop(out);
    loop {
        // Idle until SIGKILL: nothing here synchronises with the parent.
        std::thread::park();
    }
}

/// Runs the child holding `kind` on the file at `path`, kills it with SIGKILL once it holds,
/// and returns its lease and fencing token.
fn hold_and_kill(path: &Path, kind: Kind) -> (LeaseId, i64) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "recipe_crash_child_entry",
            "--nocapture",
            "-q",
        ])
        .env(CHILD_PATH, path)
        .env(CHILD_KIND, kind.name())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let held = loop {
        match lines.next() {
            Some(Ok(l)) if l.starts_with("@@HELD ") => break l,
            Some(Ok(_)) => continue,
            other => {
                let _ = child.kill();
                panic!("the child ended before holding: {other:?}");
            }
        }
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let mut parts = held.split_whitespace().skip(1);
    let lease: i64 = parts.next().unwrap().parse().unwrap();
    let token: i64 = parts.next().unwrap().parse().unwrap();
    (LeaseId::new(lease), token)
}

/// How the dead holder's lease is ended.
#[derive(Debug, Clone, Copy)]
enum Freed {
    /// Its TTL runs out on the engine's clock.
    AfterTtl,
    /// Someone revokes it at once.
    Revoked,
}

fn killed_holder_frees_its_hold(kind: Kind, freed: Freed) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let (lease, dead_token) = hold_and_kill(&path, kind);

    let clock = ManualClock::new();
    let db: Tenure = open_file_with_clock(&path, &clock);
    assert!(
        db.time_to_live(lease).is_ok(),
        "{kind:?}: the dead holder's lease survived the kill"
    );
    let s = session_ttl(&db, secs(10 * HOLDER_TTL));
    assert!(
        matches!(contend(kind, &s, None), Err(Error::Locked { holder, .. }) if holder == lease),
        "{kind:?}: still held by the killed child"
    );
    let waiter = {
        let s = s.clone();
        std::thread::spawn(move || contend(kind, &s, Some(WAIT)))
    };
    match freed {
        Freed::AfterTtl => clock.advance(secs(HOLDER_TTL)),
        Freed::Revoked => db.revoke(lease).unwrap(),
    }
    let token = waiter
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{kind:?} {freed:?}: {e}"));
    assert!(
        token > dead_token,
        "{kind:?} {freed:?}: {token} after the dead holder's {dead_token}"
    );
    assert!(matches!(
        db.time_to_live(lease),
        Err(Error::LeaseNotFound(_))
    ));
}

#[test]
fn s7_a_permit_holder_killed_with_sigkill_frees_its_permit_after_its_ttl() {
    killed_holder_frees_its_hold(Kind::Permit, Freed::AfterTtl);
}

#[test]
fn s7_a_permit_holder_killed_with_sigkill_frees_its_permit_at_once_when_revoked() {
    killed_holder_frees_its_hold(Kind::Permit, Freed::Revoked);
}

#[test]
fn s8_a_reader_killed_with_sigkill_frees_the_lock_for_a_writer_after_its_ttl() {
    killed_holder_frees_its_hold(Kind::Read, Freed::AfterTtl);
}

#[test]
fn s8_a_reader_killed_with_sigkill_frees_the_lock_at_once_when_revoked() {
    killed_holder_frees_its_hold(Kind::Read, Freed::Revoked);
}

#[test]
fn s8_a_writer_killed_with_sigkill_frees_the_lock_for_a_reader_after_its_ttl() {
    killed_holder_frees_its_hold(Kind::Write, Freed::AfterTtl);
}

#[test]
fn s8_a_writer_killed_with_sigkill_frees_the_lock_at_once_when_revoked() {
    killed_holder_frees_its_hold(Kind::Write, Freed::Revoked);
}
