//! SPEC K6 and E15 in the engine's watch hub: watchers are found through an index (each shape
//! of range gets exactly its keys), each watcher's queue and the history are bounded in bytes
//! as well as in events, dropped watchers are forgotten, and a reader woken by `on_ready`
//! (an async task, `tenure serve`'s watch streams) misses nothing.

mod support;

use std::thread;
use std::time::Duration;

use tenure::etcd::WatchStart;
use tenure::{Error, Tenure, WatchOptions, Watcher};

const WAIT: Duration = Duration::from_secs(30);

fn watch(db: &Tenure, key: impl AsRef<[u8]>, range_end: impl AsRef<[u8]>) -> Watcher {
    match db
        .watch_range(key, range_end, WatchOptions::default())
        .unwrap()
    {
        WatchStart::Started(w) => w,
        WatchStart::Compacted(r) => panic!("compacted at {r}"),
    }
}

fn from(db: &Tenure, prefix: &str, start: i64) -> Result<Watcher, Error> {
    db.watch(
        prefix,
        WatchOptions {
            prefix: true,
            start_revision: Some(start),
            prev_kv: false,
        },
    )
}

/// The keys of every event queued now (in memory, events are queued before a write returns).
fn keys(w: &mut Watcher) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(ev) = w.try_recv().unwrap() {
        out.push(String::from_utf8_lossy(&ev.kv.key).into_owned());
    }
    out
}

#[test]
fn k6_each_shape_of_watch_gets_exactly_its_keys() {
    let db = Tenure::in_memory().unwrap();
    let mut key = watch(&db, "a/b", "");
    let mut prefix = watch(&db, "a/", "a0");
    let mut longer_prefix = watch(&db, "a/b", "a/c");
    let mut everything = watch(&db, "\0", "\0");
    let mut range = watch(&db, "a/c", "a/e");
    let mut from_key = watch(&db, "a/d", "\0");
    let mut empty_range = watch(&db, "b", "a");
    let mut unwritten = watch(&db, "zz", "");
    // The prefix "z\xff" ends at "{": still a prefix.
    let mut ff_prefix = watch(&db, b"z\xff", b"{");
    for k in ["a", "a/b", "a/b/c", "a/c", "a/d", "a/e", "b"] {
        db.put(k, "v", None).unwrap();
    }
    db.put(b"z\xffq", "v", None).unwrap();
    db.put(b"z\xfe", "v", None).unwrap();
    assert_eq!(keys(&mut key), ["a/b"]);
    assert_eq!(keys(&mut prefix), ["a/b", "a/b/c", "a/c", "a/d", "a/e"]);
    assert_eq!(keys(&mut longer_prefix), ["a/b", "a/b/c"]);
    assert_eq!(
        keys(&mut everything),
        [
            "a",
            "a/b",
            "a/b/c",
            "a/c",
            "a/d",
            "a/e",
            "b",
            "z\u{fffd}q",
            "z\u{fffd}"
        ]
    );
    assert_eq!(keys(&mut range), ["a/c", "a/d"]);
    assert_eq!(
        keys(&mut from_key),
        ["a/d", "a/e", "b", "z\u{fffd}q", "z\u{fffd}"]
    );
    assert!(keys(&mut empty_range).is_empty());
    assert!(keys(&mut unwritten).is_empty());
    assert_eq!(keys(&mut ff_prefix), ["z\u{fffd}q"]);
    // Two watches of one key are two watchers.
    let mut again = watch(&db, "a/b", "");
    db.delete("a/b").unwrap();
    assert_eq!(keys(&mut key), ["a/b"]);
    assert_eq!(keys(&mut again), ["a/b"]);
}

#[test]
fn k6_dropped_watchers_are_forgotten_and_deliver_nothing() {
    let db = Tenure::in_memory().unwrap();
    let watchers: Vec<Watcher> = (0..1000)
        .map(|i| watch(&db, format!("d/{}", i % 10), ""))
        .collect();
    let mut kept = watch(&db, "d/3", "");
    assert_eq!(db.stats().watchers, 1001);
    drop(watchers);
    assert_eq!(db.stats().watchers, 1, "only the kept watcher is left");
    db.put("d/3", "v", None).unwrap();
    assert_eq!(keys(&mut kept), ["d/3"]);
}

#[test]
fn k6_a_watchers_queue_is_bounded_in_bytes() {
    const BOUND: usize = 32 * 1024;
    let db = Tenure::builder().watch_queue_bytes(BOUND).open().unwrap();
    let mut slow = watch(&db, "q/", "q0");
    let mut keeping_up = watch(&db, "q/", "q0");
    let value = vec![b'v'; 1024];
    let mut revs = Vec::new();
    for i in 0..100 {
        revs.push(db.put(format!("q/{i:03}"), &value, None).unwrap());
        let ev = keeping_up.try_recv().unwrap().expect("delivered");
        assert_eq!(ev.kv.mod_revision, revs[i]);
    }
    let mut got = 0;
    let err = loop {
        match slow.try_recv() {
            Ok(Some(ev)) => {
                assert_eq!(ev.kv.mod_revision, revs[got]);
                got += 1;
            }
            Ok(None) => panic!("the slow watcher was not cancelled"),
            Err(e) => break e,
        }
    };
    assert!(
        got > 0 && got * 1024 <= BOUND,
        "{got} events of 1 KiB queued"
    );
    match err {
        Error::Compacted {
            revision, reason, ..
        } => {
            assert_eq!(revision, revs[got], "resumes at the first event it lost");
            assert!(reason.contains(&format!("{BOUND} bytes")), "{reason}");
        }
        other => panic!("expected Compacted, got {other:?}"),
    }
    assert!(keeping_up.try_recv().unwrap().is_none());
    assert_eq!(db.stats().watchers, 1);
}

#[test]
fn k6_a_watcher_that_keeps_up_gets_a_revision_larger_than_its_bound() {
    let (_clock, db) = support::manual_with(|b| b.watch_queue_bytes(1024));
    let mut w = watch(&db, "big", "");
    for _ in 0..3 {
        let rev = db.put("big", vec![b'x'; 64 * 1024], None).unwrap();
        let ev = w.try_recv().unwrap().expect("delivered");
        assert_eq!((ev.kv.mod_revision, ev.kv.value.len()), (rev, 64 * 1024));
    }
}

#[test]
fn k6_the_history_is_bounded_in_bytes() {
    let db = Tenure::builder()
        .watch_history_bytes(16 * 1024)
        .open()
        .unwrap();
    let value = vec![b'h'; 1024];
    let mut last = 0;
    for i in 0..100 {
        last = db.put(format!("h/{i}"), &value, None).unwrap();
    }
    assert!(matches!(
        from(&db, "h/", 1),
        Err(Error::Compacted { revision: 1, .. })
    ));
    // The last few revisions are kept and replay in order.
    let mut w = from(&db, "h/", last - 4).unwrap();
    let replayed: Vec<i64> = (0..5)
        .map(|_| w.try_recv().unwrap().expect("replayed").kv.mod_revision)
        .collect();
    assert_eq!(replayed, (last - 4..=last).collect::<Vec<_>>());
}

/// A reader that only drains on `on_ready` calls, as an async task does, sees every event and
/// the end, while a writer thread races it.
#[test]
fn k6_on_ready_never_misses_an_event_or_the_end() {
    const EVENTS: i64 = 3000;
    let db = Tenure::in_memory().unwrap();
    let mut w = watch(&db, "r", "");
    let (ready_tx, ready_rx) = crossbeam_channel::unbounded();
    w.on_ready(move || {
        let _ = ready_tx.send(());
    });
    let writer = {
        let db = db.clone();
        thread::spawn(move || {
            for i in 1..=EVENTS {
                assert_eq!(db.put("r", i.to_string(), None).unwrap(), i);
            }
            db.close().unwrap();
        })
    };
    let mut seen = 0;
    let end = 'outer: loop {
        ready_rx
            .recv_timeout(WAIT)
            .expect("on_ready called while events were pending");
        loop {
            match w.try_recv() {
                Ok(Some(ev)) => {
                    seen += 1;
                    assert_eq!(ev.kv.mod_revision, seen);
                }
                Ok(None) => break,
                Err(e) => break 'outer e,
            }
        }
    };
    writer.join().unwrap();
    assert_eq!(seen, EVENTS);
    assert!(matches!(end, Error::Closed(_)), "{end:?}");
}
