//! SPEC K6 (watches): every test is named after the SPEC line it checks. Time moves only
//! through a `ManualClock`; events that arrive on other threads are awaited with generous
//! timeouts.

mod support;

use std::time::Duration;

use support::*;
use tenure::etcd::Refusal;
use tenure::{Durability, Error, ErrorCode, EventKind, Tenure, WatchOptions};

// ---- K6 Watch -------------------------------------------------------------------------------

#[test]
fn k6_watch_a_key_from_now_sees_its_puts_and_deletes_in_order() {
    let db = mem();
    let r = db.revision().unwrap();
    db.put("k", "before", None).unwrap(); // 1, before the watch: not seen
    let mut w = watch(&db, "k", false, false);
    db.put("k", "v1", None).unwrap(); // 2
    db.put("k2", "other", None).unwrap(); // 3: another key, even with "k" as a prefix
    db.put("j", "other", None).unwrap(); // 4
    assert!(db.delete("k").unwrap()); // 5
    db.put("k", "v2", None).unwrap(); // 6
    assert_next(
        &mut w,
        [
            put_event(b"k", b"v1", r + 1, r + 2, 2, None),
            delete_event(b"k", r + 5),
            put_event(b"k", b"v2", r + 6, r + 6, 1, None),
        ],
    );
    assert_idle(&mut w);
}

#[test]
fn k6_watch_a_prefix_sees_only_keys_under_it() {
    let db = mem();
    let r = db.revision().unwrap();
    let mut w = watch(&db, "svc/", true, false);
    db.put("svc/a", "1", None).unwrap(); // 1
    db.put("svc", "no", None).unwrap(); // 2
    db.put("svc0", "no", None).unwrap(); // 3
    db.put("other/svc/x", "no", None).unwrap(); // 4
    db.put("svc/b/c", "2", None).unwrap(); // 5
    db.delete_prefix("svc").unwrap(); // 6: svc, svc/a, svc/b/c, svc0
    assert_next(
        &mut w,
        [
            put_event(b"svc/a", b"1", r + 1, r + 1, 1, None),
            put_event(b"svc/b/c", b"2", r + 5, r + 5, 1, None),
            delete_event(b"svc/a", r + 6),
            delete_event(b"svc/b/c", r + 6),
        ],
    );
    assert_idle(&mut w);
}

#[test]
fn k6_prev_kv_is_included_only_when_asked() {
    let db = mem();
    let r = db.revision().unwrap();
    let l = db.grant(TTL).unwrap();
    let mut with = watch(&db, "k", false, true);
    let mut without = watch(&db, "k", false, false);
    db.put("k", "1", None).unwrap(); // 1
    db.put("k", "2", Some(l)).unwrap(); // 2
    db.delete("k").unwrap(); // 3

    let e1 = next(&mut with);
    assert_eq!(e1.kind, EventKind::Put);
    assert_eq!(e1.prev_kv, None, "a created key has no previous value");
    let e2 = next(&mut with);
    assert_eq!(e2.kv, kv(b"k", b"2", r + 1, r + 2, 2, Some(l)));
    assert_eq!(e2.prev_kv, Some(kv(b"k", b"1", r + 1, r + 1, 1, None)));
    let e3 = next(&mut with);
    assert_eq!(e3.kv, delete_event(b"k", r + 3).kv);
    assert_eq!(e3.prev_kv, Some(kv(b"k", b"2", r + 1, r + 2, 2, Some(l))));

    assert_next(
        &mut without,
        [
            put_event(b"k", b"1", r + 1, r + 1, 1, None),
            put_event(b"k", b"2", r + 1, r + 2, 2, Some(l)),
            delete_event(b"k", r + 3),
        ],
    );
    assert_idle(&mut with);
    assert_idle(&mut without);
}

#[test]
fn k6_watch_from_a_start_revision_replays_then_continues() {
    let db = mem();
    let r = db.revision().unwrap();
    for (i, k) in ["w/a", "x", "w/b", "w/a", "w/c"].iter().enumerate() {
        db.put(k, format!("{}", i + 1), None).unwrap(); // revisions r + 1..=r + 5
    }
    let mut w = watch_from(&db, "w/", true, r + 3).unwrap();
    assert_next(
        &mut w,
        [
            put_event(b"w/b", b"3", r + 3, r + 3, 1, None),
            put_event(b"w/a", b"4", r + 1, r + 4, 2, None),
            put_event(b"w/c", b"5", r + 5, r + 5, 1, None),
        ],
    );
    assert_idle(&mut w);
    db.put("w/d", "6", None).unwrap();
    assert_eq!(next(&mut w), put_event(b"w/d", b"6", r + 6, r + 6, 1, None));

    // From the first revision, on one key, with prev_kv.
    let mut all = db
        .watch(
            "w/a",
            WatchOptions {
                prefix: false,
                start_revision: Some(r + 1),
                prev_kv: true,
            },
        )
        .unwrap();
    let e = next(&mut all);
    assert_eq!((e.kv.mod_revision, e.prev_kv), (r + 1, None));
    let e = next(&mut all);
    assert_eq!(e.kv.mod_revision, r + 4);
    assert_eq!(e.prev_kv, Some(kv(b"w/a", b"1", r + 1, r + 1, 1, None)));
    assert_idle(&mut all);

    // A start revision in the future skips everything before it.
    let mut later = watch_from(&db, "w/", true, r + 8).unwrap();
    db.put("w/e", "7", None).unwrap(); // 7
    db.put("w/f", "8", None).unwrap(); // 8
    assert_eq!(
        next(&mut later),
        put_event(b"w/f", b"8", r + 8, r + 8, 1, None)
    );
    assert_idle(&mut later);

    // Revision 0 and below is not a revision.
    assert!(matches!(
        watch_from(&db, "w/", true, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        watch_from(&db, "w/", true, -5),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn k6_a_watcher_fed_by_another_backend_yields_its_events_then_ends() {
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut w = tenure::Watcher::from_events(rx);
    let ev = put_event(b"k", b"v", 1, 1, 1, None);
    tx.send(std::sync::Arc::new(ev.clone())).unwrap();
    assert_eq!(next(&mut w), ev);
    assert!(matches!(
        w.recv_timeout(Duration::from_millis(1)),
        Err(Error::Timeout { .. })
    ));
    drop(tx);
    assert!(matches!(w.recv_timeout(WAIT), Err(Error::Closed(_))));
    assert!(w.next().is_none());
}

/// A start below the server's compaction fails at the call on every backend (not at the first
/// receive), and a past start that is not compacted returns at once, even with no event to
/// replay.
#[test]
fn k6_watch_from_a_compacted_revision_fails_at_the_call() {
    let db = mem();
    let r1 = db.put("cw/a", "1", None).unwrap();
    let r2 = db.put("cw/b", "2", None).unwrap();
    let r3 = db.put("cw/c", "3", None).unwrap();
    db.compact(r2).unwrap().unwrap();
    assert_eq!(db.compact(r2).unwrap(), Err(Refusal::Compacted));
    assert_eq!(db.compact(r3 + 1).unwrap(), Err(Refusal::FutureRevision));
    for (key, prefix) in [("cw/", true), ("cw/a", false)] {
        let err = watch_from(&db, key, prefix, r1).unwrap_err();
        assert!(
            matches!(&err, Error::Compacted { revision, .. } if *revision == r1),
            "{err:?}"
        );
        assert_eq!(err.code(), ErrorCode::Compacted);
        assert!(err.to_string().contains("compacted"), "{err}");
    }
    let mut w = watch_from(&db, "cw/", true, r3).unwrap();
    assert_eq!(next(&mut w).kv.key, b"cw/c");
    db.put("cw/d", "4", None).unwrap();
    let mut quiet = watch_from(&db, "cw/none", false, r3).unwrap();
    db.put("cw/none", "5", None).unwrap();
    assert_eq!(next(&mut quiet).kv.key, b"cw/none");
    assert_eq!(next(&mut w).kv.key, b"cw/d");
}

/// Tests of the embedded engine itself (a `ManualClock`, files, checkpoints, promote,
/// the engine's counters): not run against `tenure serve` or etcd.
mod embedded_only {
    use super::*;

    #[test]
    fn k6_start_revision_older_than_the_retained_history_is_compacted() {
        let db = Tenure::builder().watch_history(3).open().unwrap();
        for k in ["a", "b", "c", "d", "e"] {
            db.put(k, "v", None).unwrap(); // revisions 1..=5; history keeps 3..=5
        }
        for start in [1, 2] {
            let err = watch_from(&db, "", true, start).unwrap_err();
            assert!(
                matches!(&err, Error::Compacted { revision, .. } if *revision == start),
                "{err:?}"
            );
            assert_eq!(err.code(), ErrorCode::Compacted);
            assert!(err.to_string().contains("compacted"), "{err}");
        }
        let mut w = watch_from(&db, "", true, 3).unwrap();
        assert_eq!(next(&mut w).kv.key, b"c");
        assert_eq!(next(&mut w).kv.key, b"d");
        assert_eq!(next(&mut w).kv.key, b"e");
        assert_idle(&mut w);
    }

    #[test]
    fn k6_history_never_keeps_part_of_a_revision() {
        let db = Tenure::builder().watch_history(2).open().unwrap();
        for k in ["p/a", "p/b", "p/c"] {
            db.put(k, "v", None).unwrap(); // 1..=3
        }
        assert_eq!(db.delete_prefix("p/").unwrap(), 3); // 4: three events, more than the history holds
                                                        // Revision 4 cannot be replayed whole, so it is compacted rather than replayed in part.
        assert!(matches!(
            watch_from(&db, "", true, 4),
            Err(Error::Compacted { revision: 4, .. })
        ));
        let mut w = watch_from(&db, "", true, 5).unwrap();
        db.put("q", "v", None).unwrap(); // 5
        assert_eq!(next(&mut w), put_event(b"q", b"v", 5, 5, 1, None));
        assert_idle(&mut w);

        // History 4: revision 4 (three events) and 5 fit; revision 3 does not.
        let db = Tenure::builder().watch_history(4).open().unwrap();
        for k in ["p/a", "p/b", "p/c"] {
            db.put(k, "v", None).unwrap();
        }
        db.delete_prefix("p/").unwrap();
        db.put("q", "v", None).unwrap();
        assert!(matches!(
            watch_from(&db, "", true, 3),
            Err(Error::Compacted { .. })
        ));
        let mut w = watch_from(&db, "", true, 4).unwrap();
        for k in ["p/a", "p/b", "p/c"] {
            assert_eq!(next(&mut w), delete_event(k.as_bytes(), 4));
        }
        assert_eq!(next(&mut w).kv.key, b"q");
        assert_idle(&mut w);
    }

    #[test]
    fn k6_without_history_only_future_revisions_can_be_watched() {
        let db = Tenure::builder().watch_history(0).open().unwrap();
        db.put("a", "1", None).unwrap();
        db.put("a", "2", None).unwrap();
        db.put("a", "3", None).unwrap();
        for start in 1..=3 {
            assert!(
                matches!(
                    watch_from(&db, "a", false, start),
                    Err(Error::Compacted { .. })
                ),
                "revision {start} was never retained, so it must not be silently skipped"
            );
        }
        let mut w = watch_from(&db, "a", false, 4).unwrap();
        db.put("a", "4", None).unwrap();
        assert_eq!(next(&mut w), put_event(b"a", b"4", 1, 4, 4, None));
        // Once events flowed to a watcher, they are still not replayable.
        assert!(matches!(
            watch_from(&db, "a", false, 4),
            Err(Error::Compacted { .. })
        ));
    }

    #[test]
    fn k11_history_survives_reopen_so_older_starts_replay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hist.tenure");
        let db = open_file(&path);
        db.put("a", "1", None).unwrap();
        db.put("a", "2", None).unwrap();
        db.close().unwrap();
        let db = open_file(&path);
        let mut w = watch_from(&db, "a", false, 1).unwrap();
        db.put("a", "3", None).unwrap();
        assert_next(
            &mut w,
            [
                put_event(b"a", b"1", 1, 1, 1, None),
                put_event(b"a", b"2", 1, 2, 2, None),
                put_event(b"a", b"3", 1, 3, 3, None),
            ],
        );
        assert_idle(&mut w);
    }

    #[test]
    fn k6_slow_watcher_is_cancelled_with_compacted_and_never_blocks_writers() {
        const QUEUE: usize = 4;
        const WRITES: i64 = 200;
        let db = Tenure::builder().watch_queue(QUEUE).open().unwrap();
        let mut slow = watch(&db, "s/", true, false);
        let mut other = watch(&db, "other/", true, false);
        assert_eq!(db.stats().watchers, 2);

        // Writers must finish although nobody reads the watcher: run them on a thread and bound
        // the wait, so a blocking writer fails the test instead of hanging it.
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        let writer = {
            let db = db.clone();
            std::thread::spawn(move || {
                let revs: Vec<i64> = (1..=WRITES)
                    .map(|i| db.put(format!("s/{i:03}"), "v", None).unwrap())
                    .collect();
                done_tx.send(revs).unwrap();
            })
        };
        let revs = done_rx
            .recv_timeout(WAIT)
            .expect("writers were blocked by a slow watcher");
        writer.join().unwrap();
        assert_eq!(revs, (1..=WRITES).collect::<Vec<_>>());

        // The queued events come first, then a clear Compacted naming where to resume.
        for rev in 1..=QUEUE as i64 {
            assert_eq!(next(&mut slow).kv.mod_revision, rev);
        }
        let err = slow.recv_timeout(WAIT).unwrap_err();
        let resume = match &err {
            Error::Compacted {
                revision, reason, ..
            } => {
                assert!(reason.contains("behind"), "{reason}");
                *revision
            }
            other => panic!("expected Compacted, got {other:?}"),
        };
        assert_eq!(
            resume,
            QUEUE as i64 + 1,
            "the first revision that could not be delivered"
        );
        assert_eq!(err.code(), ErrorCode::Compacted);
        assert!(slow.next().is_none(), "a cancelled watcher ends");
        assert_eq!(
            db.stats().watchers,
            1,
            "the cancelled watcher is unregistered"
        );

        // Cancelling one watcher leaves the others alone.
        let rev = db.put("other/x", "v", None).unwrap();
        assert_eq!(next(&mut other).kv.mod_revision, rev);
        assert_eq!(
            db.stats().watchers,
            1,
            "only the cancelled watcher was unregistered"
        );

        // Resuming from the revision in the error loses nothing.
        let mut resumed = watch_from(&db, "s/", true, resume).unwrap();
        for rev in resume..=QUEUE as i64 * 2 {
            assert_eq!(next(&mut resumed).kv.mod_revision, rev);
        }
    }

    #[test]
    fn k6_a_watcher_that_keeps_up_is_never_cancelled() {
        const QUEUE: usize = 2;
        let db = Tenure::builder().watch_queue(QUEUE).open().unwrap();
        let mut w = watch(&db, "", true, false);
        for i in 1..=100 {
            let rev = db.put("k", format!("{i}"), None).unwrap();
            assert_eq!(next(&mut w).kv.mod_revision, rev);
        }
        assert_idle(&mut w);
        assert_eq!(db.stats().watchers, 1);
    }

    #[test]
    fn k6_watcher_ends_when_the_engine_closes() {
        let db = mem();
        let mut w = watch(&db, "k", false, false);
        let w2 = watch(&db, "", true, false);
        let blocked = std::thread::spawn(move || w.recv());
        let iterating = std::thread::spawn(move || w2.count());
        db.put("k", "v", None).unwrap();
        db.close().unwrap();
        let first = blocked.join().unwrap();
        assert_eq!(first.unwrap().kv.key, b"k");
        assert_eq!(
            iterating.join().unwrap(),
            1,
            "the iterator yields the event, then ends on close"
        );
        assert!(matches!(
            db.watch("k", WatchOptions::default()),
            Err(Error::Closed(_))
        ));

        // Dropping the last handle closes the engine too.
        let db = mem();
        let mut w = watch(&db, "k", false, false);
        drop(db);
        assert!(matches!(w.recv_timeout(WAIT), Err(Error::Closed(_))));
        assert!(w.next().is_none());
    }

    #[test]
    fn k6_immediate_events_are_delivered_once_the_write_is_durable() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_file(&dir.path().join("imm.tenure"));
        let mut w = watch(&db, "", true, false);
        for i in 1..=5 {
            let commits = db.stats().commits;
            let rev = db.put("k", format!("{i}"), None).unwrap();
            assert!(
                db.stats().commits > commits,
                "the put was committed before it returned"
            );
            // By the time put returns, the event is already in the watcher's queue.
            let ev = w
                .try_recv()
                .unwrap()
                .expect("event delivered by the time put returns");
            assert_eq!(ev.kv.mod_revision, rev);
        }
    }

    #[test]
    fn k6_buffered_events_wait_for_the_flush() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("buf.tenure");
        let db = Tenure::builder()
            .path(&path)
            .durability(Durability::Buffered(Duration::from_secs(3600)))
            .open()
            .unwrap();
        let mut w = watch(&db, "", true, false);
        let commits = db.stats().commits;
        assert_eq!(db.put("a", "1", None).unwrap(), 1);
        assert_eq!(db.put("b", "2", None).unwrap(), 2);
        // Applied (readable) but not yet committed: no event may be seen yet.
        assert_eq!(db.get("a").unwrap().unwrap().value, b"1");
        assert_eq!(
            db.stats().commits,
            commits,
            "nothing committed within the interval"
        );
        assert_idle(&mut w);

        // A watcher from a past revision still gets the not-yet-durable events only after the flush.
        let mut replay = watch_from(&db, "", true, 1).unwrap();
        assert_idle(&mut replay);

        db.close().unwrap(); // flushes
        for w in [&mut w, &mut replay] {
            assert_eq!(next(w), put_event(b"a", b"1", 1, 1, 1, None));
            assert_eq!(next(w), put_event(b"b", b"2", 2, 2, 1, None));
            assert!(matches!(w.recv_timeout(WAIT), Err(Error::Closed(_))));
        }
        let db = open_file(&path);
        assert_eq!(db.revision().unwrap(), 2);
    }

    #[test]
    fn k6_a_slow_watcher_is_cancelled_between_revisions_never_inside_one() {
        let db = Tenure::builder().watch_queue(3).open().unwrap();
        let mut w = db
            .watch(
                "p/",
                WatchOptions {
                    prefix: true,
                    ..Default::default()
                },
            )
            .unwrap();
        db.put("p/a", "1", None).unwrap();
        db.put("p/b", "2", None).unwrap();
        let rev = db.revision().unwrap() + 1;
        assert_eq!(db.delete_prefix("p/").unwrap(), 2); // one revision, two events: no room for both
        assert_eq!(w.recv().unwrap().kv.key, b"p/a");
        assert_eq!(w.recv().unwrap().kv.key, b"p/b");
        match w.recv() {
            Err(Error::Compacted { revision, .. }) => assert_eq!(revision, rev),
            other => panic!("expected Compacted at {rev}, got {other:?}"),
        }
        let mut resumed = db
            .watch(
                "p/",
                WatchOptions {
                    prefix: true,
                    start_revision: Some(rev),
                    ..Default::default()
                },
            )
            .unwrap();
        let keys: Vec<_> = (0..2).map(|_| resumed.recv().unwrap().kv.key).collect();
        assert_eq!(
            keys,
            vec![b"p/a".to_vec(), b"p/b".to_vec()],
            "each delete exactly once"
        );
        assert!(resumed.try_recv().unwrap().is_none());
    }
}

/// Files and in-memory engines: run embedded only (the remote backends read no file).
mod history {
    mod embedded_only {
        use super::super::*;

        // ---- K11 Watch from history -------------------------------------------------------------------

        #[test]
        fn k11_a_watch_from_a_past_revision_replays_the_file_history_after_reopen_then_goes_live() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("k11.db");
            let db = open_file(&path);
            db.put("k", "1", None).unwrap(); // 1
            db.put("k", "2", None).unwrap(); // 2
            db.put("other", "x", None).unwrap(); // 3
            assert!(db.delete("k").unwrap()); // 4
            db.put("k", "3", None).unwrap(); // 5
            db.close().unwrap();
            let db = open_file(&path);
            let mut w = db
                .watch(
                    "k",
                    WatchOptions {
                        prefix: false,
                        start_revision: Some(2),
                        prev_kv: true,
                    },
                )
                .expect("a retained start");
            let mut first = put_event(b"k", b"2", 1, 2, 2, None);
            first.prev_kv = Some(kv(b"k", b"1", 1, 1, 1, None));
            let mut gone = delete_event(b"k", 4);
            gone.prev_kv = Some(kv(b"k", b"2", 1, 2, 2, None));
            assert_next(&mut w, [first, gone, put_event(b"k", b"3", 5, 5, 1, None)]);
            db.put("k", "4", None).unwrap(); // 6, live
            let mut live = put_event(b"k", b"4", 5, 6, 2, None);
            live.prev_kv = Some(kv(b"k", b"3", 5, 5, 1, None));
            assert_next(&mut w, [live]);
            assert_idle(&mut w);
            // After a compaction at 4, a start at 4 is kept (etcd), one at 3 is refused with 4.
            assert_eq!(db.compact(4).unwrap(), Ok(6));
            let mut from4 = watch_from(&db, "k", false, 4).unwrap();
            assert_next(
                &mut from4,
                [
                    delete_event(b"k", 4),
                    put_event(b"k", b"3", 5, 5, 1, None),
                    put_event(b"k", b"4", 5, 6, 2, None),
                ],
            );
            match db.watch_range(
                "k",
                "",
                WatchOptions {
                    start_revision: Some(3),
                    ..WatchOptions::default()
                },
            ) {
                Ok(tenure::etcd::WatchStart::Compacted(rev)) => assert_eq!(rev, 4),
                other => panic!("{other:?}"),
            }
            assert_eq!(
                watch_from(&db, "k", false, 3).unwrap_err().code(),
                ErrorCode::Compacted
            );
            db.close().unwrap();
        }
    }
}
