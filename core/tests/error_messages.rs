//! Errors a person can act on: each names the object it is about (which lock and which holder,
//! which database, what timed out after how long, which session, which file) and a refused TTL
//! shows the TTL given. The C and Python suites check the same messages in their languages.

mod support;

use std::time::Duration;

use support::session_on;
use tenure::sync::{Election, Mutex, RecordLock};
use tenure::{Error, Tenure};

#[test]
fn s2_locked_names_the_lock_and_its_holder() {
    let db = Tenure::in_memory().unwrap();
    let (a, b) = (session_on(&db), session_on(&db));
    let _held = Mutex::new(&a, "jobs/nightly").lock(None).unwrap();
    let e = Mutex::new(&b, "jobs/nightly").try_lock().unwrap_err();
    assert!(
        matches!(&e, Error::Locked { name, holder } if name == "jobs/nightly" && *holder == a.lease_id()),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(msg.contains("\"jobs/nightly\""), "{msg}");
    assert!(msg.contains(&format!("lease {}", a.lease_id())), "{msg}");
}

#[test]
fn s6_a_taken_record_lock_names_the_key_and_its_holder() {
    let db = Tenure::in_memory().unwrap();
    RecordLock::try_acquire(&db, "jobs/report", "a", Duration::from_secs(30)).unwrap();
    let holder = db.get("jobs/report").unwrap().unwrap().lease.unwrap();
    let e = RecordLock::try_acquire(&db, "jobs/report", "b", Duration::from_secs(30)).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Locked { .. }), "{e:?}");
    assert!(
        msg.contains("jobs/report") && msg.contains(&format!("lease {holder}")),
        "{msg}"
    );
}

#[test]
fn s2_a_lock_timeout_names_the_lock_and_how_long() {
    let db = Tenure::in_memory().unwrap();
    let (a, b) = (session_on(&db), session_on(&db));
    let _held = Mutex::new(&a, "jobs/nightly").lock(None).unwrap();
    let e = Mutex::new(&b, "jobs/nightly")
        .lock(Some(Duration::from_millis(20)))
        .unwrap_err();
    assert!(
        matches!(&e, Error::Timeout { after, .. } if *after == Duration::from_millis(20)),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "timed out after 20 ms waiting for lock \"jobs/nightly\""
    );
}

#[test]
fn s4_a_campaign_timeout_names_the_election() {
    let db = Tenure::in_memory().unwrap();
    let (a, b) = (session_on(&db), session_on(&db));
    let _leading = Election::new(&a, "svc").campaign("a", None).unwrap();
    let e = Election::new(&b, "svc")
        .campaign("b", Some(Duration::from_millis(20)))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "timed out after 20 ms waiting for leadership of \"svc\""
    );
}

#[test]
fn k6_a_watch_timeout_says_what_it_waited_for() {
    let db = Tenure::in_memory().unwrap();
    let mut w = db.watch("k", Default::default()).unwrap();
    let e = w.recv_timeout(Duration::from_millis(1500)).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "timed out after 1.5 s waiting for a watch event"
    );
}

#[test]
fn s1_a_closed_session_is_session_expired_naming_it() {
    let db = Tenure::in_memory().unwrap();
    let s = session_on(&db);
    s.close().unwrap();
    let id = s.lease_id();
    for e in [
        Mutex::new(&s, "x").lock(None).unwrap_err(),
        Mutex::new(&s, "x").try_lock().unwrap_err(),
        Election::new(&s, "svc").campaign("a", None).unwrap_err(),
    ] {
        assert!(
            matches!(e, Error::SessionExpired(got) if got == id),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("session {id} has ended")),
            "{e}"
        );
    }
}

#[test]
fn d7_closed_names_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.tenure");
    let db = Tenure::open(&path).unwrap();
    let mut w = db.watch("k", Default::default()).unwrap();
    db.close().unwrap();
    let want = format!("database {} is closed", path.display());
    for e in [db.put("k", "v", None).unwrap_err(), w.recv().unwrap_err()] {
        assert!(matches!(e, Error::Closed(_)), "{e:?}");
        assert_eq!(e.to_string(), want);
    }
    let mem = Tenure::in_memory().unwrap();
    mem.close().unwrap();
    let e = mem.grant(Duration::from_secs(1)).unwrap_err();
    assert_eq!(e.to_string(), "database (in memory) is closed");
}

#[test]
fn l2_ttl_refusals_show_the_ttl_given_in_one_wording() {
    let db = Tenure::in_memory().unwrap();
    let zero = db.grant(Duration::ZERO).unwrap_err();
    assert!(matches!(zero, Error::InvalidArgument(_)), "{zero:?}");
    assert_eq!(
        zero.to_string(),
        "invalid argument: lease TTL must be more than 0 and at most 9000000000 s, got 0 ms"
    );
    let huge = db.grant(Duration::from_secs(9_000_000_001)).unwrap_err();
    assert!(matches!(huge, Error::LeaseTtlTooLarge(_)), "{huge:?}");
    assert_eq!(
        huge.to_string(),
        "lease TTL must be more than 0 and at most 9000000000 s, got 9000000001 s"
    );
}

#[test]
fn d5_opening_a_directory_says_is_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let e = Tenure::open(dir.path()).unwrap_err();
    let Error::Storage { errno, path, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(*errno, Some(21), "EISDIR");
    assert_eq!(path.as_deref(), Some(dir.path()));
    assert!(
        e.to_string().to_lowercase().contains("is a directory"),
        "{e}"
    );
}

#[test]
fn d5_an_empty_path_is_refused_as_such() {
    let e = Tenure::open("").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(e.to_string().contains("path must not be empty"), "{e}");
}

#[test]
fn d6_a_storage_error_carries_the_os_errno_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing/app.tenure");
    let e = Tenure::open(&path).unwrap_err();
    let Error::Storage {
        errno, path: file, ..
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(*errno, Some(2), "ENOENT");
    assert_eq!(file.as_deref(), Some(path.as_path()));
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}
