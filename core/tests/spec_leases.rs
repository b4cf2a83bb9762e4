//! One or more tests per SPEC line L1–L15, named after it, including where leases meet keys
//! (L4, L6, L11). Time is driven by `ManualClock`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

mod support;

use support::{
    assert_idle, assert_next, bytes, delete_event, keys_of, kv, manual, manual_with, mem, next,
    open_file, open_file_with_clock, secs, watch, TTL, WAIT,
};
use tenure::{
    Builder, Durability, Error, EventKind, ExpiredLease, LeaseId, ManualClock, Op, Recovery,
    Tenure, Txn,
};

fn file_builder(dir: &tempfile::TempDir, clock: &Arc<ManualClock>) -> Builder {
    Tenure::builder()
        .path(dir.path().join("db.tenure"))
        .clock(clock.clone())
}

/// Receives expired batches until `n` leases have arrived.
fn recv_expired(
    rx: &crossbeam_channel::Receiver<Vec<ExpiredLease>>,
    n: usize,
) -> Vec<ExpiredLease> {
    let mut out = Vec::new();
    while out.len() < n {
        out.extend(
            rx.recv_timeout(WAIT)
                .expect("expired leases were not delivered"),
        );
    }
    out
}

#[test]
fn l1_grant_with_id_uses_it_and_refuses_existing_or_non_positive_ids() {
    let db = mem();
    assert_eq!(db.grant_with_id(42, secs(5)).unwrap(), LeaseId::new(42));
    assert!(matches!(db.grant_with_id(42, secs(5)), Err(Error::LeaseExists(id)) if id.get() == 42));
    assert!(matches!(
        db.grant_with_id(0, secs(5)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        db.grant_with_id(-7, secs(5)),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.leases().unwrap().len(), 1);
}

#[test]
fn l4_revoke_deletes_keys_and_lease_in_one_revision_and_unknown_is_not_found() {
    let db = mem();
    let l = db.grant(secs(60)).unwrap();
    db.put("b", "2", Some(l)).unwrap();
    db.put("a", "1", Some(l)).unwrap();
    db.put("c", "3", None).unwrap();
    let before = db.revision().unwrap();
    let mut w = db
        .watch(
            "",
            tenure::WatchOptions {
                prefix: true,
                ..Default::default()
            },
        )
        .unwrap();
    db.revoke(l).unwrap();
    assert_eq!(
        db.revision().unwrap(),
        before + 1,
        "one revoke is one revision"
    );
    assert!(db.get("a").unwrap().is_none() && db.get("b").unwrap().is_none());
    assert!(db.get("c").unwrap().is_some());
    let evs: Vec<_> = (0..2).map(|_| w.recv_timeout(WAIT).unwrap()).collect();
    assert_eq!(evs[0].kv.key, b"a");
    assert_eq!(evs[1].kv.key, b"b");
    assert!(evs
        .iter()
        .all(|e| e.kind == tenure::EventKind::Delete && e.revision() == before + 1));
    assert!(matches!(db.revoke(l), Err(Error::LeaseNotFound(id)) if id == l));
    assert!(matches!(db.revoke(999), Err(Error::LeaseNotFound(_))));
}

#[test]
fn l6_put_attaches_put_without_lease_detaches_and_delete_detaches() {
    let db = mem();
    let l = db.grant(secs(60)).unwrap();
    db.put("k", "v", Some(l)).unwrap();
    assert_eq!(db.lease_of("k").unwrap(), Some(l));
    db.put("k", "v2", None).unwrap();
    assert_eq!(db.lease_of("k").unwrap(), None);
    assert!(db.time_to_live(l).unwrap().keys.is_empty());
    db.put("k", "v3", Some(l)).unwrap();
    db.delete("k").unwrap();
    assert_eq!(db.lease_of("k").unwrap(), None);
    assert!(db.time_to_live(l).unwrap().keys.is_empty());
}

/// Attach racing a writer that deletes and puts its key back: each attach either attaches or
/// (over connect, where a key needs a value) is refused as `Unsupported` naming the key, as
/// the attach itself saw it; never `Unavailable`, which means the network.
#[test]
fn l6_attach_racing_a_delete_and_put_of_its_key_is_attached_or_unsupported() {
    let db = mem();
    let l = db.grant(secs(60)).unwrap();
    db.put("race/k", "v", None).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                db.delete("race/k").unwrap();
                db.put("race/k", "v", None).unwrap();
            }
        });
        for _ in 0..200 {
            match db.attach(l, &["race/k"]) {
                Ok(()) => {}
                Err(Error::Unsupported(m)) => assert!(m.contains("race/k"), "{m}"),
                Err(e) => {
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    panic!("attach during a delete and put: {e:?}");
                }
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}

// ---- L4 / L6 / L11 with keys ----------------------------------------------------------------

#[test]
fn l6_put_with_a_lease_attaches_put_without_detaches_delete_detaches() {
    let db = mem();
    let l = db.grant(TTL).unwrap();
    db.put("k", "1", Some(l)).unwrap();
    assert_eq!(db.lease_of("k").unwrap(), Some(l));
    assert_eq!(db.get("k").unwrap().unwrap().lease, Some(l));
    assert_eq!(db.time_to_live(l).unwrap().keys, bytes(&["k"]));

    db.put("k", "2", None).unwrap();
    assert_eq!(db.lease_of("k").unwrap(), None);
    assert_eq!(db.get("k").unwrap().unwrap().lease, None);
    assert!(db.time_to_live(l).unwrap().keys.is_empty());

    db.put("k", "3", Some(l)).unwrap();
    assert!(db.delete("k").unwrap());
    assert_eq!(db.lease_of("k").unwrap(), None);
    assert!(db.time_to_live(l).unwrap().keys.is_empty());

    // A key re-created without the lease is not deleted by its revoke.
    db.put("k", "4", None).unwrap();
    db.put("j", "x", Some(l)).unwrap();
    db.txn(Txn::new().then([Op::delete("j")])).unwrap();
    assert!(
        db.time_to_live(l).unwrap().keys.is_empty(),
        "a txn delete detaches too"
    );
    db.put("p/1", "x", Some(l)).unwrap();
    db.put("p/2", "x", Some(l)).unwrap();
    assert_eq!(db.delete_prefix("p/").unwrap(), 2);
    assert!(
        db.time_to_live(l).unwrap().keys.is_empty(),
        "delete_prefix detaches too"
    );
    assert_eq!(db.lease_of("p/1").unwrap(), None);
    db.revoke(l).unwrap();
    assert_eq!(db.get("k").unwrap().unwrap().value, b"4");
}

/// Tests of the embedded engine itself (a `ManualClock`, files, checkpoints, promote,
/// the engine's counters): not run against `tenure serve` or etcd.
mod embedded_only {
    use super::*;

    #[test]
    fn l1_auto_ids_are_positive_and_never_reused_across_revokes_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let db = file_builder(&dir, &clock).open().unwrap();
        let a = db.grant(secs(10)).unwrap();
        let b = db.grant(secs(10)).unwrap();
        assert!(a.get() > 0 && b.get() > a.get());
        db.revoke(b).unwrap();
        db.grant_with_id(100, secs(10)).unwrap();
        db.revoke(100).unwrap();
        db.close().unwrap();
        let db = file_builder(&dir, &clock).open().unwrap();
        let c = db.grant(secs(10)).unwrap();
        assert!(
            c.get() > 100,
            "an ID used before (even explicitly, even revoked) is never reallocated: {c}"
        );
    }

    #[test]
    fn l2_zero_ttl_is_invalid_huge_ttl_is_too_large_and_min_ttl_raises() {
        let (_clock, db) = manual_with(|b| b.min_ttl(secs(5)));
        assert!(matches!(
            db.grant(Duration::ZERO),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            db.grant(Duration::from_secs(9_000_000_001)),
            Err(Error::LeaseTtlTooLarge(_))
        ));
        assert!(
            db.grant(Duration::from_secs(9_000_000_000)).is_ok(),
            "the maximum itself is allowed"
        );
        let l = db.grant(Duration::from_millis(1)).unwrap();
        assert_eq!(db.time_to_live(l).unwrap().ttl, secs(5));
        assert_eq!(db.renew(l).unwrap(), secs(5));
    }

    #[test]
    fn l3_grant_on_a_primary_sets_the_deadline_to_now_plus_ttl() {
        let (clock, db) = manual();
        clock.advance(secs(100));
        let l = db.grant(secs(10)).unwrap();
        assert_eq!(db.time_to_live(l).unwrap().remaining, Some(secs(10)));
        clock.advance(secs(4));
        assert_eq!(db.time_to_live(l).unwrap().remaining, Some(secs(6)));
        let rx = db.expired().unwrap();
        clock.advance(secs(6));
        assert_eq!(recv_expired(&rx, 1)[0].id, l);
    }

    #[test]
    fn l3_grant_on_a_standby_has_no_deadline_until_promote() {
        let (clock, db) = manual_with(|b| b.primary(false));
        let l = db.grant(secs(10)).unwrap();
        assert_eq!(db.time_to_live(l).unwrap().remaining, None);
        let rx = db.expired().unwrap();
        clock.advance(secs(1000));
        assert!(
            db.time_to_live(l).is_ok(),
            "a standby never expires a lease"
        );
        db.promote(Duration::ZERO).unwrap();
        assert_eq!(db.time_to_live(l).unwrap().remaining, Some(secs(10)));
        clock.advance(secs(10));
        assert_eq!(recv_expired(&rx, 1)[0].id, l);
    }

    #[test]
    fn l4_revoke_works_on_a_standby() {
        let (_clock, db) = manual_with(|b| b.primary(false));
        let l = db.grant(secs(5)).unwrap();
        db.revoke(l).unwrap();
        assert!(db.leases().unwrap().is_empty());
    }

    #[test]
    fn l5_renew_resets_the_deadline_returns_the_ttl_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let db = file_builder(&dir, &clock).open().unwrap();
        let l = db.grant(secs(10)).unwrap();
        clock.advance(secs(7));
        let commits = db.stats().commits;
        assert_eq!(db.renew(l).unwrap(), secs(10));
        assert_eq!(db.time_to_live(l).unwrap().remaining, Some(secs(10)));
        assert_eq!(db.stats().commits, commits, "renew must not write");
        assert_eq!(db.stats().renewed, 1);
    }

    #[test]
    fn l5_renew_on_a_standby_is_not_primary_and_unknown_is_not_found() {
        let (_clock, db) = manual_with(|b| b.primary(false));
        let l = db.grant(secs(10)).unwrap();
        assert!(matches!(db.renew(l), Err(Error::NotPrimary)));
        db.promote(Duration::ZERO).unwrap();
        assert!(matches!(db.renew(12345), Err(Error::LeaseNotFound(_))));
        db.revoke(l).unwrap();
        assert!(matches!(db.renew(l), Err(Error::LeaseNotFound(_))));
    }

    #[test]
    fn l5_renew_never_revives_an_expired_lease() {
        // Auto revoke: past its deadline the lease is gone for renew, even before the expiry
        // thread has revoked it.
        let (clock, db) = manual();
        let l = db.grant(secs(10)).unwrap();
        clock.advance(secs(10));
        assert!(matches!(db.renew(l), Err(Error::LeaseNotFound(id)) if id == l));
        // Manual revoke: held for the application, renew says LeaseExpired (etcd#14758).
        let (clock, db) = manual_with(|b| b.auto_revoke(false));
        let l = db.grant(secs(10)).unwrap();
        let rx = db.expired().unwrap();
        clock.advance(secs(11));
        assert!(matches!(db.renew(l), Err(Error::LeaseExpired(id)) if id == l));
        recv_expired(&rx, 1);
        assert!(matches!(db.renew(l), Err(Error::LeaseExpired(_))));
        assert!(
            db.time_to_live(l).is_ok(),
            "still held until the application revokes it"
        );
    }

    #[test]
    fn l5_renew_clears_the_checkpointed_remaining_ttl() {
        let (_clock, db) = manual();
        let l = db.grant(secs(100)).unwrap();
        db.checkpoint(l, secs(5)).unwrap();
        db.renew(l).unwrap();
        db.demote().unwrap();
        db.promote(Duration::ZERO).unwrap();
        assert_eq!(
            db.time_to_live(l).unwrap().remaining,
            Some(secs(100)),
            "promote used the TTL, not the stale checkpoint"
        );
    }

    #[test]
    fn l6_attach_detach_move_and_lease_of() {
        let (_c, db) = manual();
        let a = db.grant(secs(60)).unwrap();
        let b = db.grant(secs(60)).unwrap();
        db.attach(a, &["k1", "k2"]).unwrap();
        assert_eq!(db.lease_of("k1").unwrap(), Some(a));
        assert_eq!(
            db.time_to_live(a).unwrap().keys,
            vec![b"k1".to_vec(), b"k2".to_vec()]
        );
        db.attach(b, &["k1"]).unwrap();
        assert_eq!(
            db.lease_of("k1").unwrap(),
            Some(b),
            "attaching a key owned by another lease moves it"
        );
        assert_eq!(db.time_to_live(a).unwrap().keys, vec![b"k2".to_vec()]);
        db.detach(a, &["k2"]).unwrap();
        assert_eq!(db.lease_of("k2").unwrap(), None);
        assert!(matches!(
            db.attach(777, &["k3"]),
            Err(Error::LeaseNotFound(_))
        ));
        assert_eq!(
            db.lease_of("k3").unwrap(),
            None,
            "a failed attach changes nothing"
        );
        assert!(matches!(
            db.detach(777, &["k1"]),
            Err(Error::LeaseNotFound(_))
        ));
        assert_eq!(db.lease_of("k1").unwrap(), Some(b));
    }

    #[test]
    fn l7_time_to_live_and_leases_in_ascending_order_of_remaining_time() {
        let (clock, db) = manual();
        let long = db.grant(secs(30)).unwrap();
        let short = db.grant(secs(10)).unwrap();
        let mid = db.grant(secs(20)).unwrap();
        clock.advance(secs(2));
        let info = db.time_to_live(mid).unwrap();
        assert_eq!((info.ttl, info.remaining), (secs(20), Some(secs(18))));
        let order: Vec<_> = db.leases().unwrap().iter().map(|i| i.id).collect();
        assert_eq!(order, vec![short, mid, long]);
        assert!(matches!(
            db.time_to_live(4242),
            Err(Error::LeaseNotFound(_))
        ));
    }

    #[test]
    fn l8_checkpoint_is_persisted_does_not_move_the_deadline_and_is_used_by_promote() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let db = file_builder(&dir, &clock).open().unwrap();
        let l = db.grant(secs(100)).unwrap();
        db.checkpoint(l, secs(30)).unwrap();
        assert_eq!(
            db.time_to_live(l).unwrap().remaining,
            Some(secs(100)),
            "deadline unchanged"
        );
        db.demote().unwrap();
        db.promote(Duration::ZERO).unwrap();
        assert_eq!(db.time_to_live(l).unwrap().remaining, Some(secs(30)));
        db.close().unwrap();
        let db = file_builder(&dir, &clock)
            .recovery(Recovery::Extend(Duration::ZERO))
            .open()
            .unwrap();
        assert_eq!(
            db.time_to_live(l).unwrap().remaining,
            Some(secs(30)),
            "the checkpoint was persisted"
        );
        assert!(matches!(
            db.checkpoint(999, secs(1)),
            Err(Error::LeaseNotFound(_))
        ));
    }

    #[test]
    fn l8_renewed_leases_are_checkpointed_in_one_write_every_interval_and_on_close() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let db = file_builder(&dir, &clock)
            .checkpoint_interval(secs(5))
            .open()
            .unwrap();
        let a = db.grant(secs(100)).unwrap();
        let b = db.grant(secs(100)).unwrap();
        // Renewed before the first tick is due: the expiry thread has no tick to run until the
        // clock reaches 5 s, so the renews cannot race a checkpoint of their own.
        db.renew(a).unwrap();
        db.renew(b).unwrap();
        let commits = db.stats().commits;
        clock.advance(secs(5)); // checkpoint tick: a and b have 95 s left
        let deadline = std::time::Instant::now() + WAIT;
        while db.stats().commits == commits {
            assert!(
                std::time::Instant::now() < deadline,
                "no checkpoint commit happened"
            );
            std::thread::yield_now();
        }
        assert_eq!(
            db.stats().commits,
            commits + 1,
            "both leases in one batched write"
        );
        clock.advance(secs(10)); // a and b: 85 s left
        db.renew(a).unwrap(); // a: 100 s left; only persisted by the close checkpoint
        db.close().unwrap();
        // Reopen in extend(0) mode: each lease restarts from its persisted remaining TTL.
        let db = file_builder(&dir, &clock)
            .recovery(Recovery::Extend(Duration::ZERO))
            .open()
            .unwrap();
        assert_eq!(db.time_to_live(a).unwrap().remaining, Some(secs(100)));
        assert_eq!(db.time_to_live(b).unwrap().remaining, Some(secs(95)));
    }

    #[test]
    fn l9_promote_sets_deadlines_to_now_plus_extend_plus_ttl() {
        let (clock, db) = manual_with(|b| b.primary(false));
        let a = db.grant(secs(10)).unwrap();
        let b = db.grant(secs(20)).unwrap();
        db.checkpoint(b, secs(3)).unwrap();
        assert!(!db.is_primary().unwrap());
        clock.advance(secs(500));
        db.promote(secs(7)).unwrap();
        assert!(db.is_primary().unwrap());
        assert_eq!(db.time_to_live(a).unwrap().remaining, Some(secs(17)));
        assert_eq!(db.time_to_live(b).unwrap().remaining, Some(secs(10)));
    }

    #[test]
    fn l9_demote_stops_expiry_and_renew() {
        let (clock, db) = manual();
        let l = db.grant(secs(10)).unwrap();
        db.demote().unwrap();
        assert!(!db.is_primary().unwrap());
        assert!(matches!(db.renew(l), Err(Error::NotPrimary)));
        clock.advance(secs(100));
        let rx = db.expired().unwrap();
        assert!(rx.try_recv().is_err());
        assert!(db.time_to_live(l).is_ok(), "no lease expires on a standby");
        assert_eq!(db.time_to_live(l).unwrap().remaining, None);
    }

    #[test]
    fn l10_only_a_primary_expires_and_the_earliest_deadline_goes_first() {
        let (clock, db) = manual();
        let rx = db.expired().unwrap();
        let late = db.grant(secs(30)).unwrap();
        let early = db.grant(secs(10)).unwrap();
        clock.advance(secs(10));
        let got = recv_expired(&rx, 1);
        assert_eq!(got[0].id, early);
        assert!(db.time_to_live(late).is_ok());
        clock.advance(secs(20));
        assert_eq!(recv_expired(&rx, 1)[0].id, late);
    }

    #[test]
    fn l10_the_expiry_thread_wakes_for_an_earlier_deadline_in_real_time() {
        // Real clock, generous bound: the thread sleeps until the 1 h deadline; a new 50 ms lease
        // must wake it (a polling or unwoken sleeper would miss the bound).
        let db = Tenure::in_memory().unwrap();
        let rx = db.expired().unwrap();
        db.grant(Duration::from_secs(3600)).unwrap();
        std::thread::yield_now();
        let start = std::time::Instant::now();
        let short = db.grant(Duration::from_millis(50)).unwrap();
        let got = recv_expired(&rx, 1);
        assert_eq!(got[0].id, short);
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(50), "expired early: {took:?}");
        assert!(took < Duration::from_secs(5), "expired late: {took:?}");
    }

    #[test]
    fn l11_auto_revoke_delivers_each_expired_lease_with_ttl_and_deleted_keys() {
        let (clock, db) = manual();
        let rx = db.expired().unwrap();
        let l = db.grant(secs(5)).unwrap();
        db.put("x/1", "a", Some(l)).unwrap();
        db.put("x/2", "b", Some(l)).unwrap();
        let other = db.grant(secs(5)).unwrap();
        let rev = db.revision().unwrap();
        clock.advance(secs(5));
        let mut got = recv_expired(&rx, 2);
        got.sort_by_key(|e| e.id);
        assert_eq!(
            got[0],
            ExpiredLease {
                id: l,
                ttl: secs(5),
                keys: vec![b"x/1".to_vec(), b"x/2".to_vec()]
            }
        );
        assert_eq!(got[1].id, other);
        assert!(db.get("x/1").unwrap().is_none() && db.get("x/2").unwrap().is_none());
        assert!(db.leases().unwrap().is_empty());
        assert_eq!(
            db.revision().unwrap(),
            rev + 1,
            "one batch of expiries is one write"
        );
        assert_eq!(db.stats().expired, 2);
    }

    #[test]
    fn l12_manual_revoke_redelivers_until_revoked_even_with_no_listener() {
        let (clock, db) = manual_with(|b| b.auto_revoke(false).expired_retry_interval(secs(3)));
        let l = db.grant(secs(5)).unwrap();
        db.put("k", "v", Some(l)).unwrap();
        clock.advance(secs(5));
        // Nobody listened to the first delivery; drain it (it may have been queued) and look for
        // the redelivery, which proves the lease was not forgotten.
        let rx = db.expired().unwrap();
        let first = recv_expired(&rx, 1);
        assert_eq!(first[0].keys, vec![b"k".to_vec()]);
        assert!(
            db.get("k").unwrap().is_some(),
            "manual mode deletes nothing by itself"
        );
        clock.advance(secs(3));
        assert_eq!(
            recv_expired(&rx, 1)[0].id,
            l,
            "redelivered after the retry interval"
        );
        db.revoke(l).unwrap();
        assert!(db.get("k").unwrap().is_none());
        clock.advance(secs(10));
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "a revoked lease is not redelivered"
        );
        assert_eq!(db.stats().expired, 1, "a redelivery is not counted twice");
    }

    #[test]
    fn l13_wall_recovery_subtracts_wall_time_since_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let db = file_builder(&dir, &clock).open().unwrap();
        let l = db.grant(secs(100)).unwrap();
        let k = db.grant(secs(10)).unwrap();
        db.put("gone", "x", Some(k)).unwrap();
        db.close().unwrap();
        clock.advance(secs(30)); // the process is "down" for 30 s of wall time
        let db = file_builder(&dir, &clock).open().unwrap();
        let rx = db.expired().unwrap();
        assert_eq!(db.time_to_live(l).unwrap().remaining, Some(secs(70)));
        let got = recv_expired(&rx, 1);
        assert_eq!(
            got[0].id, k,
            "a lease already past its deadline expires right after open"
        );
        assert_eq!(got[0].keys, vec![b"gone".to_vec()]);
        assert!(db.get("gone").unwrap().is_none());
    }

    #[test]
    fn l13_wall_recovery_counts_a_backward_clock_step_as_zero() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let db = file_builder(&dir, &clock).open().unwrap();
        let l = db.grant(secs(100)).unwrap();
        db.close().unwrap();
        clock.step_wall(-3_600_000);
        let db = file_builder(&dir, &clock).open().unwrap();
        assert_eq!(db.time_to_live(l).unwrap().remaining, Some(secs(100)));
    }

    #[test]
    fn l13_extend_recovery_restarts_from_checkpoint_else_ttl_plus_extend() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let db = file_builder(&dir, &clock).open().unwrap();
        let a = db.grant(secs(100)).unwrap();
        let b = db.grant(secs(100)).unwrap();
        db.checkpoint(b, secs(40)).unwrap();
        db.put("k", "v", Some(a)).unwrap();
        db.close().unwrap();
        clock.advance(secs(1000));
        let db = file_builder(&dir, &clock)
            .recovery(Recovery::Extend(secs(2)))
            .open()
            .unwrap();
        assert_eq!(db.time_to_live(a).unwrap().remaining, Some(secs(102)));
        assert_eq!(db.time_to_live(b).unwrap().remaining, Some(secs(42)));
        assert_eq!(
            db.lease_of("k").unwrap(),
            Some(a),
            "keys come back attached"
        );
    }

    #[test]
    fn l14_a_wall_clock_jump_moves_no_deadline() {
        let (clock, db) = manual();
        let rx = db.expired().unwrap();
        let l = db.grant(secs(10)).unwrap();
        clock.step_wall(3_600_000);
        clock.step_wall(-7_200_000);
        assert_eq!(db.time_to_live(l).unwrap().remaining, Some(secs(10)));
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        clock.advance(secs(10));
        assert_eq!(recv_expired(&rx, 1)[0].id, l);
    }

    #[test]
    fn l14_a_keep_alive_is_driven_by_the_manual_clock() {
        let (clock, db) = manual();
        let l = db.grant(secs(9)).unwrap();
        let ka = db.keep_alive(l, None).unwrap();
        for _ in 0..10 {
            let renewed = db.stats().renewed;
            clock.advance(secs(3));
            let deadline = std::time::Instant::now() + WAIT;
            while db.stats().renewed == renewed {
                assert!(
                    std::time::Instant::now() < deadline,
                    "keep-alive did not renew"
                );
                std::thread::yield_now();
            }
        }
        assert!(ka.is_alive());
        assert!(
            db.time_to_live(l).is_ok(),
            "30 s on a 9 s lease: kept alive"
        );
        ka.stop();
        let rx = db.expired().unwrap();
        clock.advance(secs(9));
        assert_eq!(recv_expired(&rx, 1)[0].id, l);
    }

    #[test]
    fn l15_stats_count_grants_revokes_renews_expiries_and_gauges() {
        let (clock, db) = manual();
        let rx = db.expired().unwrap();
        let a = db.grant(secs(5)).unwrap();
        let b = db.grant(secs(50)).unwrap();
        let c = db.grant(secs(50)).unwrap();
        db.put("k", "v", Some(b)).unwrap();
        db.renew(b).unwrap();
        db.renew(b).unwrap();
        db.revoke(c).unwrap();
        clock.advance(secs(5));
        recv_expired(&rx, 1);
        let s = db.stats();
        assert_eq!((s.granted, s.revoked, s.renewed, s.expired), (3, 1, 2, 1));
        assert_eq!((s.leases, s.keys), (1, 1));
        assert_eq!(s.revision, db.revision().unwrap());
        assert_eq!(s.commits, 0, "in memory nothing is committed");
        let _ = a;
    }

    #[test]
    fn l15_stats_count_commits_and_fsyncs_on_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let db = file_builder(&dir, &clock)
            .durability(Durability::Immediate)
            .open()
            .unwrap();
        db.grant(secs(5)).unwrap();
        db.put("k", "v", None).unwrap();
        let s = db.stats();
        assert_eq!(s.commits, 2, "two immediate writes, two commits");
        assert_eq!(s.fsyncs, 2);
    }

    #[test]
    fn l16_an_expiry_lands_in_the_lateness_histogram() {
        let (clock, db) = manual();
        let rx = db.expired().unwrap();
        db.grant(secs(5)).unwrap();
        assert_eq!(db.metrics().expiry_lateness.count, 0);
        // Found due 300 ms after its deadline (the manual clock jumps past it).
        clock.advance(Duration::from_millis(5300));
        recv_expired(&rx, 1);
        let h = db.metrics().expiry_lateness;
        assert_eq!(h.count, 1);
        assert!((h.sum - 0.3).abs() < 1e-9, "{}", h.sum);
        let bucket = h.bounds.iter().position(|&b| b >= 0.3).unwrap();
        assert_eq!(h.bounds[bucket], 0.5);
        assert_eq!(h.counts[bucket], 1);
        let text = db.metrics().to_prometheus();
        assert!(
            text.contains("tenure_expiry_lateness_seconds_bucket{le=\"0.5\"} 1\n")
                && text.contains("tenure_expiry_lateness_seconds_bucket{le=\"0.25\"} 0\n")
                && text.contains("tenure_leases_expired_total 1\n"),
            "{text}"
        );
    }

    #[test]
    fn l16_commits_land_in_the_commit_and_fsync_histograms() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let db = file_builder(&dir, &clock)
            .durability(Durability::Immediate)
            .open()
            .unwrap();
        let before = db.metrics();
        db.put("k", "v", None).unwrap();
        db.put("k", "w", None).unwrap();
        let m = db.metrics();
        assert_eq!(m.commit_duration.count - before.commit_duration.count, 2);
        assert_eq!(m.commit_writes.count - before.commit_writes.count, 2);
        // A lone writer's commit carries its one write.
        assert_eq!(
            m.commit_writes.counts[0] - before.commit_writes.counts[0],
            2
        );
        assert_eq!(m.fsync_duration.count - before.fsync_duration.count, 2);
        assert!(m.fsync_duration.sum > before.fsync_duration.sum);
        assert_eq!(m.stats.commits, db.stats().commits);
    }

    #[test]
    fn l9_demote_wakes_everything_blocked_waiting_on_a_lease() {
        use tenure::sync::{Election, Mutex, Session, SessionOptions};
        let (_clock, db) = manual();
        let opts = || SessionOptions {
            ttl: secs(60),
            keepalive_interval: None,
        };
        let (a, b, c) = (
            Session::new(&db, opts()).unwrap(),
            Session::new(&db, opts()).unwrap(),
            Session::new(&db, opts()).unwrap(),
        );
        let _held = Mutex::new(&a, "m").lock(None).unwrap();
        let _leader = Election::new(&a, "e").campaign("a", None).unwrap();
        let locker = std::thread::spawn(move || Mutex::new(&b, "m").lock(None).map(drop));
        let campaigner =
            std::thread::spawn(move || Election::new(&c, "e").campaign("c", None).map(drop));
        let deadline = std::time::Instant::now() + WAIT;
        while db.range("m/", None).unwrap().len() < 2 || db.range("e/", None).unwrap().len() < 2 {
            assert!(std::time::Instant::now() < deadline, "waiters never queued");
            std::thread::yield_now();
        }
        db.demote().unwrap();
        assert!(matches!(locker.join().unwrap(), Err(Error::NotPrimary)));
        assert!(matches!(campaigner.join().unwrap(), Err(Error::NotPrimary)));
        assert_eq!(
            db.range("m/", None).unwrap().len(),
            1,
            "the woken waiter withdrew"
        );
    }

    #[test]
    fn l11_next_expired_waits_with_the_wait_vocabulary() {
        let (clock, db) = manual();
        assert!(matches!(
            db.next_expired(Duration::from_millis(10)),
            Err(Error::Timeout { .. })
        ));
        let stop = tenure::Stop::new();
        stop.stop();
        assert!(matches!(db.next_expired(&stop), Err(Error::Timeout { .. })));
        let l = db.grant(secs(5)).unwrap();
        clock.advance(secs(5));
        let batch = db.next_expired(Duration::from_secs(10)).unwrap();
        assert_eq!(batch[0].id, l);
        db.close().unwrap();
        assert!(matches!(db.next_expired(None), Err(Error::Closed(_))));
    }

    // ---- L4 / L6 / L11 with keys ------------------------------------------------------------

    #[test]
    fn l4_revoke_deletes_every_attached_key_and_the_lease_at_one_revision() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("revoke.tenure");
        let db = open_file(&path);
        let l = db.grant(TTL).unwrap();
        let keep = db.grant(TTL).unwrap();
        for k in ["s/c", "s/a", "s/b"] {
            db.put(k, format!("{k}!"), Some(l)).unwrap(); // 1..=3
        }
        db.put("s/free", "v", None).unwrap(); // 4
        db.put("s/kept", "v", Some(keep)).unwrap(); // 5
        db.attach(l, &["s/bare"]).unwrap(); // attached name without a value: no event
        let mut w = watch(&db, "s/", true, true);

        db.revoke(l).unwrap();
        assert_eq!(db.revision().unwrap(), 6);
        for (k, create) in [("s/a", 2), ("s/b", 3), ("s/c", 1)] {
            let ev = next(&mut w);
            assert_eq!(
                ev.kv,
                delete_event(k.as_bytes(), 6).kv,
                "one DELETE per key, in key order"
            );
            assert_eq!(
                ev.prev_kv,
                Some(kv(
                    k.as_bytes(),
                    format!("{k}!").as_bytes(),
                    create,
                    create,
                    1,
                    Some(l)
                ))
            );
        }
        assert_idle(&mut w);
        assert!(matches!(db.time_to_live(l), Err(Error::LeaseNotFound(id)) if id == l));
        assert_eq!(
            keys_of(&db.range("s/", None).unwrap()),
            bytes(&["s/free", "s/kept"])
        );
        assert_eq!(db.lease_of("s/bare").unwrap(), None);
        assert_eq!(db.lease_of("s/kept").unwrap(), Some(keep));
        assert_eq!(db.stats().revoked, 1);

        assert!(matches!(db.revoke(l), Err(Error::LeaseNotFound(id)) if id == l));
        assert!(matches!(db.revoke(9999i64), Err(Error::LeaseNotFound(_))));
        assert_eq!(
            db.revision().unwrap(),
            6,
            "a failed revoke takes no revision"
        );
        assert_idle(&mut w);

        db.close().unwrap();
        let db = open_file(&path);
        assert_eq!(db.revision().unwrap(), 6);
        assert!(matches!(db.time_to_live(l), Err(Error::LeaseNotFound(_))));
        assert_eq!(
            keys_of(&db.range("s/", None).unwrap()),
            bytes(&["s/free", "s/kept"])
        );
        assert_eq!(db.time_to_live(keep).unwrap().keys, bytes(&["s/kept"]));
    }

    #[test]
    fn l6_attaching_a_key_attached_elsewhere_moves_it() {
        let db = mem();
        let l1 = db.grant(TTL).unwrap();
        let l2 = db.grant(TTL).unwrap();
        db.put("k", "v", Some(l1)).unwrap();
        db.put("m", "v", Some(l1)).unwrap();
        let rev = db.revision().unwrap();

        db.attach(l2, &["k"]).unwrap();
        assert_eq!(db.lease_of("k").unwrap(), Some(l2));
        assert_eq!(
            db.get("k").unwrap(),
            Some(kv(b"k", b"v", 1, 1, 1, Some(l2)))
        );
        assert_eq!(db.time_to_live(l1).unwrap().keys, bytes(&["m"]));
        assert_eq!(db.time_to_live(l2).unwrap().keys, bytes(&["k"]));
        assert_eq!(
            db.revision().unwrap(),
            rev,
            "attach does not change the value or revisions"
        );

        // A put with the other lease moves it back.
        db.put("k", "w", Some(l1)).unwrap();
        assert_eq!(db.time_to_live(l1).unwrap().keys, bytes(&["k", "m"]));
        assert!(db.time_to_live(l2).unwrap().keys.is_empty());

        // Attach to an unknown lease: LeaseNotFound, nothing changes.
        assert!(
            matches!(db.attach(777i64, &["k", "new"]), Err(Error::LeaseNotFound(id)) if id.get() == 777)
        );
        assert_eq!(db.lease_of("k").unwrap(), Some(l1));
        assert_eq!(db.lease_of("new").unwrap(), None);
        // Detach from an unknown lease: LeaseNotFound, never fatal.
        assert!(matches!(
            db.detach(777i64, &["k"]),
            Err(Error::LeaseNotFound(_))
        ));
        assert_eq!(db.lease_of("k").unwrap(), Some(l1));
        // Detaching from the wrong lease leaves the key where it is.
        db.detach(l2, &["k"]).unwrap();
        assert_eq!(db.lease_of("k").unwrap(), Some(l1));

        // Revoking the lease a key moved away from leaves it alone.
        db.attach(l2, &["k"]).unwrap();
        db.revoke(l1).unwrap();
        assert!(db.get("k").unwrap().is_some());
        assert!(db.get("m").unwrap().is_none());
        db.detach(l2, &["k"]).unwrap();
        assert_eq!(db.lease_of("k").unwrap(), None);
        db.revoke(l2).unwrap();
        assert!(
            db.get("k").unwrap().is_some(),
            "a detached key outlives the lease"
        );
    }

    #[test]
    fn l11_expiry_deletes_attached_keys_in_one_write_with_delete_events() {
        let clock = ManualClock::new();
        let db = Tenure::builder().clock(clock.clone()).open().unwrap();
        let short1 = db.grant(Duration::from_secs(5)).unwrap();
        let short2 = db.grant(Duration::from_secs(5)).unwrap();
        let long = db.grant(Duration::from_secs(100)).unwrap();
        db.put("e/1b", "v", Some(short1)).unwrap(); // 1
        db.put("e/1a", "v", Some(short1)).unwrap(); // 2
        db.put("e/2a", "v", Some(short2)).unwrap(); // 3
        db.put("e/long", "v", Some(long)).unwrap(); // 4
        db.put("e/free", "v", None).unwrap(); // 5
        let expired = db.expired().unwrap();
        let mut w = watch(&db, "e/", true, false);

        clock.advance(Duration::from_secs(4));
        db.put("e/sync", "v", None).unwrap(); // 6: nothing has expired before its deadline
        assert_eq!(next(&mut w).kv.key, b"e/sync");
        assert!(expired.try_recv().is_err());

        clock.advance(Duration::from_secs(2));
        let mut batch = expired.recv_timeout(WAIT).expect("expired batch");
        batch.sort_by_key(|e| e.id);
        assert_eq!(batch.len(), 2, "{batch:?}");
        assert_eq!(
            (batch[0].id, batch[0].ttl, &batch[0].keys),
            (short1, Duration::from_secs(5), &bytes(&["e/1a", "e/1b"]))
        );
        assert_eq!((batch[1].id, &batch[1].keys), (short2, &bytes(&["e/2a"])));

        assert_eq!(
            db.revision().unwrap(),
            7,
            "both leases and their keys went in one write"
        );
        let mut deleted = BTreeSet::new();
        for _ in 0..3 {
            let ev = next(&mut w);
            assert_eq!(ev.kind, EventKind::Delete);
            assert_eq!(ev.kv.mod_revision, 7);
            deleted.insert(ev.kv.key);
        }
        assert_eq!(
            deleted,
            bytes(&["e/1a", "e/1b", "e/2a"]).into_iter().collect()
        );
        assert_idle(&mut w);
        assert_eq!(
            keys_of(&db.range("e/", None).unwrap()),
            bytes(&["e/free", "e/long", "e/sync"])
        );
        assert!(matches!(
            db.time_to_live(short1),
            Err(Error::LeaseNotFound(_))
        ));
        assert_eq!(db.time_to_live(long).unwrap().keys, bytes(&["e/long"]));
        assert_eq!(db.stats().expired, 2);
    }

    #[test]
    fn l11_expiry_of_one_lease_sends_its_key_deletes_in_key_order() {
        let clock = ManualClock::new();
        let db = Tenure::builder().clock(clock.clone()).open().unwrap();
        let l = db.grant(Duration::from_secs(1)).unwrap();
        for k in ["z", "b", "m", "a"] {
            db.put(k, "v", Some(l)).unwrap();
        }
        let mut w = watch(&db, "", true, true);
        let expired = db.expired().unwrap();
        clock.advance(Duration::from_secs(1));
        let batch = expired.recv_timeout(WAIT).unwrap();
        assert_eq!(batch[0].keys, bytes(&["a", "b", "m", "z"]));
        for k in ["a", "b", "m", "z"] {
            let ev = next(&mut w);
            assert_eq!(ev.kv, delete_event(k.as_bytes(), 5).kv);
            assert_eq!(ev.prev_kv.unwrap().lease, Some(l));
        }
        assert_idle(&mut w);
    }

    #[test]
    fn l6_lease_key_index_is_rebuilt_on_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.tenure");
        let clock = ManualClock::new();
        let (l1, l2) = {
            let db = open_file_with_clock(&path, &clock);
            let l1 = db.grant(Duration::from_secs(100)).unwrap();
            let l2 = db.grant(Duration::from_secs(50)).unwrap();
            db.put("a", "1", Some(l1)).unwrap();
            db.put("b", "2", Some(l1)).unwrap();
            db.put("c", "3", Some(l2)).unwrap();
            db.put("d", "4", Some(l2)).unwrap();
            db.put("free", "5", None).unwrap();
            db.attach(l2, &["x-bare"]).unwrap(); // a name with no value
            db.attach(l2, &["b"]).unwrap(); // moved from l1
            db.put("d", "4'", None).unwrap(); // detached by a put
            db.close().unwrap();
            (l1, l2)
        };
        let clock = ManualClock::new();
        let db = open_file_with_clock(&path, &clock);
        assert_eq!(db.time_to_live(l1).unwrap().keys, bytes(&["a"]));
        assert_eq!(
            db.time_to_live(l2).unwrap().keys,
            bytes(&["b", "c", "x-bare"])
        );
        assert_eq!(db.lease_of("a").unwrap(), Some(l1));
        assert_eq!(db.lease_of("b").unwrap(), Some(l2));
        assert_eq!(db.lease_of("c").unwrap(), Some(l2));
        assert_eq!(db.lease_of("d").unwrap(), None);
        assert_eq!(db.lease_of("x-bare").unwrap(), Some(l2));
        assert_eq!(db.lease_of("free").unwrap(), None);
        assert_eq!(db.get("b").unwrap().unwrap().lease, Some(l2));
        assert_eq!(db.get("x-bare").unwrap(), None);

        // The rebuilt index drives expiry: l2's keys go, l1's stay.
        let mut w = watch(&db, "", true, false);
        let expired = db.expired().unwrap();
        clock.advance(Duration::from_secs(51));
        let batch = expired.recv_timeout(WAIT).expect("l2 expires after reopen");
        assert_eq!(batch.len(), 1);
        assert_eq!(
            (batch[0].id, &batch[0].keys),
            (l2, &bytes(&["b", "c", "x-bare"]))
        );
        let rev = db.revision().unwrap();
        assert_next(&mut w, [delete_event(b"b", rev), delete_event(b"c", rev)]);
        assert_idle(&mut w);
        assert_eq!(
            keys_of(&db.range("", None).unwrap()),
            bytes(&["a", "d", "free"])
        );
        assert_eq!(db.lease_of("x-bare").unwrap(), None);
        db.close().unwrap();

        let db = open_file_with_clock(&path, &clock);
        assert_eq!(db.time_to_live(l1).unwrap().keys, bytes(&["a"]));
        assert!(matches!(db.time_to_live(l2), Err(Error::LeaseNotFound(_))));
        db.revoke(l1).unwrap();
        assert_eq!(keys_of(&db.range("", None).unwrap()), bytes(&["d", "free"]));
    }
}
