//! /work/shared/API.md's Rust section, one call each: outside checks compile against these
//! names, so a rename fails here first. Known deviations from API.md's shorthand: reads that
//! can meet a closed engine (`leases`, `lease_of`, `is_primary`, `revision`) return `Result`,
//! and `expired()` returns `Result<Receiver<…>>` (`Unsupported` over `connect`, SPEC R1);
//! `Leadership::token()` is `fencing_token()` since main's f8115b2 (one name for tokens).

use std::sync::Arc;
use std::time::Duration;

use tenure::sync::{
    Election, ElectorCallbacks, ElectorConfig, FenceGate, LeaderElector, Mutex, RecordLock,
    Session, SessionOptions, Stop,
};
use tenure::{
    Compare, CompareOp, Durability, Error, EventKind, ExpiredLease, KeyValue, LeaseId, LeaseInfo,
    ManualClock, Op, Recovery, Tenure, Txn, WatchOptions,
};

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn api_md_open_and_builder_options() -> tenure::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    let db = Tenure::open(dir.path().join("app.tenure"))?;
    db.close()?;
    let db = Tenure::in_memory()?;
    assert!(db.path().is_none());
    let clock = ManualClock::new();
    let db2 = Tenure::builder()
        .path(dir.path().join("b.tenure"))
        .durability(Durability::Immediate)
        .recovery(Recovery::Wall)
        .clock(clock.clone())
        .min_ttl(SECOND)
        .checkpoint_interval(5 * SECOND)
        .expired_retry_interval(3 * SECOND)
        .primary(true)
        .auto_revoke(true)
        .open()?;
    assert!(db2.is_primary()?);
    let db3 = Tenure::builder()
        .in_memory()
        .durability(Durability::Buffered(Duration::from_millis(10)))
        .recovery(Recovery::Extend(SECOND))
        .open()?;
    assert!(db3.path().is_none());
    fn shares<T: Clone + Send + Sync>(_: &T) {}
    shares(&db);
    Ok(())
}

#[test]
fn api_md_leases_and_expiry() -> tenure::Result<()> {
    let clock = ManualClock::new();
    let db = Tenure::builder().clock(clock.clone()).open()?;
    let id: LeaseId = db.grant(10 * SECOND)?;
    let chosen = db.grant_with_id(LeaseId::from(42), 10 * SECOND)?;
    assert_eq!(chosen.get(), 42);
    assert_eq!(format!("{chosen}"), "42");
    assert_eq!(db.renew(id)?, 10 * SECOND);
    let info: LeaseInfo = db.time_to_live(id)?;
    let LeaseInfo {
        id: info_id,
        ttl,
        remaining,
        keys,
    } = info;
    assert_eq!((info_id, ttl, keys.len()), (id, 10 * SECOND, 0));
    assert!(remaining.is_some());
    assert_eq!(db.leases()?.len(), 2);
    db.put("k", "v", None)?;
    db.attach(id, &["k"])?;
    assert_eq!(db.lease_of("k")?, Some(id));
    db.detach(id, &["k"])?;
    assert_eq!(db.lease_of("k")?, None);
    db.checkpoint(id, 5 * SECOND)?;
    db.demote()?;
    assert!(!db.is_primary()?);
    db.promote(Duration::ZERO)?;
    assert!(db.is_primary()?);
    db.revoke(chosen)?;

    let rx = db.expired()?;
    db.attach(id, &["k"])?;
    clock.advance(11 * SECOND);
    let batch: Vec<ExpiredLease> = rx.recv_timeout(10 * SECOND).expect("a batch");
    let ExpiredLease {
        id: gone,
        ttl,
        keys,
    } = &batch[0];
    assert_eq!((*gone, *ttl), (id, 10 * SECOND));
    assert_eq!(keys, &[b"k".to_vec()]);
    Ok(())
}

#[test]
fn api_md_keys_txn_watch_stats() -> tenure::Result<()> {
    let db = Tenure::in_memory()?;
    let mut w = db.watch(
        "svc/",
        WatchOptions {
            prefix: true,
            start_revision: None,
            prev_kv: true,
        },
    )?;
    let rev: i64 = db.put("svc/a", b"1", None)?;
    assert_eq!(db.revision()?, rev);
    let kv: KeyValue = db.get("svc/a")?.expect("present");
    let KeyValue {
        key,
        value,
        create_revision,
        mod_revision,
        version,
        lease,
    } = kv;
    assert_eq!((key, value), (b"svc/a".to_vec(), b"1".to_vec()));
    assert_eq!(
        (create_revision, mod_revision, version, lease),
        (rev, rev, 1, None)
    );
    assert_eq!(db.range("svc/", Some(10))?.len(), 1);
    let r = db.txn(
        Txn::new()
            .when([Compare::version("svc/b", CompareOp::Equal, 0)])
            .then([Op::put("svc/b", "2", None)])
            .otherwise([Op::get("svc/b")]),
    )?;
    assert!(r.succeeded);
    assert!(db.delete("svc/a")?);
    assert_eq!(db.delete_prefix("svc/")?, 1);
    let first = w.next().expect("an event")?;
    assert_eq!(first.kind, EventKind::Put);
    assert!(first.prev_kv.is_none());
    assert_eq!(first.kv.key, b"svc/a");
    let stats = db.stats();
    assert_eq!(stats.keys, 0);
    db.close()?;
    assert!(matches!(db.get("svc/a"), Err(Error::Closed(_))));
    Ok(())
}

#[test]
fn api_md_sync_names() -> tenure::Result<()> {
    let db = Tenure::in_memory()?;
    let opts = SessionOptions::default();
    let session = Session::new(&db, opts.clone())?;
    let again = Session::resume(&db, session.lease_id(), opts)?;
    assert_eq!(again.lease_id(), session.lease_id());
    assert!(session.done().try_recv().is_err());
    again.orphan();

    let guard = Mutex::new(&session, "jobs/1").lock(SECOND)?;
    assert!(guard.is_held());
    assert!(guard.fencing_token() > 0);
    assert!(matches!(
        Mutex::new(&session, "jobs/2").try_lock()?.unlock(),
        Ok(())
    ));
    guard.unlock()?;

    let leadership = Election::new(&session, "svc").campaign("host-a", SECOND)?;
    assert!(leadership.fencing_token() > 0);
    leadership.proclaim("host-a2")?;
    let leader = Election::leader(&db, "svc")?.expect("a leader");
    assert_eq!(leader.value, b"host-a2");
    let _observer = Election::observe(&db, "svc")?;
    leadership.resign()?;

    let gate = FenceGate::new();
    gate.admit(2)?;
    assert!(matches!(gate.admit(1), Err(Error::StaleToken { .. })));

    RecordLock::try_acquire(&db, "rec", "me", 10 * SECOND)?;
    RecordLock::refresh(&db, "rec", "me")?;
    RecordLock::release(&db, "rec", "me")?;
    session.close()?;

    // The elector stops itself once it leads: run returns when the token is raised.
    let stop = Stop::new();
    let stop_on_lead = stop.clone();
    let cfg = ElectorConfig {
        name: "elector".into(),
        identity: "me".into(),
        lease_duration: ElectorConfig::DEFAULT_LEASE_DURATION,
        renew_deadline: ElectorConfig::DEFAULT_RENEW_DEADLINE,
        retry_period: ElectorConfig::DEFAULT_RETRY_PERIOD,
        release_on_cancel: true,
    };
    let led = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let led_in = led.clone();
    let callbacks = ElectorCallbacks {
        on_started_leading: Box::new(move |token, _| {
            led_in.store(token, std::sync::atomic::Ordering::SeqCst);
            stop_on_lead.stop();
        }),
        on_stopped_leading: Box::new(|| {}),
        on_new_leader: Box::new(|_| {}),
    };
    let elector = LeaderElector::new(&db, cfg, callbacks)?;
    elector.run(&stop)?;
    assert!(led.load(std::sync::atomic::Ordering::SeqCst) > 0);
    assert!(!elector.is_leader());
    Ok(())
}

/// The API.md chains over `connect`, compiled (an unreachable address: no server needed).
#[cfg(feature = "remote")]
#[test]
fn api_md_connect_chains() {
    let e = Tenure::builder()
        .endpoints(["http://127.0.0.1:1", "http://127.0.0.1:2"])
        .request_timeout(Duration::from_millis(200))
        .connect()
        .expect_err("nothing listens on ports 1 and 2");
    assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
    let e = Tenure::connect("http://127.0.0.1:1").expect_err("nothing listens on port 1");
    assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
}
