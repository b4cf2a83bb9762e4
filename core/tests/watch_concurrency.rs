//! SPEC K6 under concurrency: several writer threads (puts, deletes, txns, delete_prefix) and a
//! lease thread whose keys expire through a `ManualClock`, watched by prefix watchers. Every
//! watcher must see every event exactly once, in non-decreasing revision order, each revision
//! complete, including the deletes made by expiry. The expected events come from what the
//! writers report (revisions returned by put and txn; bounds for the writes that return none).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tenure::{
    Durability, Event, EventKind, LeaseId, ManualClock, Op, OpResponse, Tenure, Txn, WatchOptions,
    Watcher,
};

const WAIT: Duration = Duration::from_secs(30);
const WRITERS: usize = 4;
const OPS: usize = 150;
const ROUNDS: usize = 25;
const PREFIX: &str = "c/";

/// What a watcher reports, reduced to what a writer can predict.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ev {
    kind: EventKind,
    key: Vec<u8>,
    value: Vec<u8>,
    lease: Option<LeaseId>,
}

impl Ev {
    fn put(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, lease: Option<LeaseId>) -> Ev {
        Ev {
            kind: EventKind::Put,
            key: key.as_ref().to_vec(),
            value: value.as_ref().to_vec(),
            lease,
        }
    }

    fn delete(key: impl AsRef<[u8]>) -> Ev {
        Ev {
            kind: EventKind::Delete,
            key: key.as_ref().to_vec(),
            value: Vec::new(),
            lease: None,
        }
    }

    fn of(e: &Event) -> (i64, Ev) {
        (
            e.revision(),
            Ev {
                kind: e.kind,
                key: e.kv.key.clone(),
                value: e.kv.value.clone(),
                lease: e.kv.lease,
            },
        )
    }
}

/// One write as its thread saw it: the revision when the call returned one, and the events it
/// must have produced, in order.
#[derive(Debug, Clone)]
struct Rec {
    rev: Option<i64>,
    events: Vec<Ev>,
}

/// A writer pauses a third of the way through until the main thread has registered its
/// mid-stream watchers (the lease thread keeps writing meanwhile).
struct Pause {
    reached: crossbeam_channel::Sender<()>,
    resume: crossbeam_channel::Receiver<()>,
}

fn writer(db: Tenure, i: usize, pause: Pause) -> Vec<Rec> {
    let key = |n: usize| format!("{PREFIX}w{i}/k{n}");
    let mut present = BTreeSet::new();
    let mut log = Vec::with_capacity(OPS);
    for j in 0..OPS {
        if j == OPS / 3 {
            pause.reached.send(()).unwrap();
            pause
                .resume
                .recv_timeout(WAIT)
                .expect("resumed by the main thread");
        }
        if j == OPS / 2 && !present.is_empty() {
            // delete_prefix returns a count, not a revision.
            let n = db.delete_prefix(format!("{PREFIX}w{i}/")).unwrap();
            assert_eq!(n as usize, present.len());
            let events = present.iter().map(|k: &String| Ev::delete(k)).collect();
            present.clear();
            log.push(Rec { rev: None, events });
        } else if j % 10 == 9 {
            let (a, b) = (key(j % 5), key((j + 1) % 5));
            let (va, vb) = (format!("w{i}-{j}a"), format!("w{i}-{j}b"));
            let r = db
                .txn(Txn::new().then([Op::put(&a, &va, None), Op::put(&b, &vb, None)]))
                .unwrap();
            assert!(r.succeeded);
            present.insert(a.clone());
            present.insert(b.clone());
            log.push(Rec {
                rev: Some(r.revision),
                events: vec![Ev::put(a, va, None), Ev::put(b, vb, None)],
            });
        } else if j % 4 == 3 && !present.is_empty() {
            let k = present.pop_first().unwrap();
            if (j / 4) % 2 == 0 {
                // A plain delete returns whether the key existed, not the revision.
                assert!(db.delete(&k).unwrap(), "{k} existed");
                log.push(Rec {
                    rev: None,
                    events: vec![Ev::delete(&k)],
                });
            } else {
                let r = db.txn(Txn::new().then([Op::delete(&k)])).unwrap();
                assert_eq!(r.responses, vec![OpResponse::Delete(true)]);
                log.push(Rec {
                    rev: Some(r.revision),
                    events: vec![Ev::delete(&k)],
                });
            }
        } else {
            let (k, v) = (key(j % 5), format!("w{i}-{j}"));
            let rev = db.put(&k, &v, None).unwrap();
            present.insert(k.clone());
            log.push(Rec {
                rev: Some(rev),
                events: vec![Ev::put(k, v, None)],
            });
        }
    }
    log
}

/// Each round: two leases with keys, one renewed, then the clock passes their deadline and the
/// thread waits for the expiry batch; the expiry's deletes are one write whose revision no call
/// returns, so it is recorded with bounds.
fn lease_thread(db: Tenure, clock: Arc<ManualClock>) -> Vec<Rec> {
    let expired = db.expired().unwrap();
    let mut log = Vec::new();
    for r in 0..ROUNDS {
        let la = db.grant(Duration::from_secs(1)).unwrap();
        let lb = db.grant(Duration::from_secs(1)).unwrap();
        let keys_a = [format!("{PREFIX}l{r:02}/a2"), format!("{PREFIX}l{r:02}/a1")];
        let keys_b = [format!("{PREFIX}l{r:02}/b1"), format!("{PREFIX}l{r:02}/b0")];
        for (k, l) in [(&keys_a[0], la), (&keys_b[0], lb), (&keys_a[1], la)] {
            let rev = db.put(k, "leased", Some(l)).unwrap();
            log.push(Rec {
                rev: Some(rev),
                events: vec![Ev::put(k, "leased", Some(l))],
            });
        }
        let t = db
            .txn(Txn::new().then([Op::put(&keys_b[1], "leased", Some(lb))]))
            .unwrap();
        log.push(Rec {
            rev: Some(t.revision),
            events: vec![Ev::put(&keys_b[1], "leased", Some(lb))],
        });
        db.renew(la).unwrap();

        clock.advance(Duration::from_secs(2));
        let batch = expired.recv_timeout(WAIT).expect("expiry batch");
        let ids: BTreeSet<LeaseId> = batch.iter().map(|e| e.id).collect();
        assert_eq!(
            ids,
            [la, lb].into_iter().collect(),
            "both leases expire in one batch"
        );
        let mut events = Vec::new();
        for e in &batch {
            let mut want: Vec<Vec<u8>> = if e.id == la { &keys_a } else { &keys_b }
                .iter()
                .map(|k| k.as_bytes().to_vec())
                .collect();
            want.sort();
            assert_eq!(
                e.keys, want,
                "lease {} reports its deleted keys in key order",
                e.id
            );
            events.extend(e.keys.iter().map(Ev::delete));
        }
        log.push(Rec { rev: None, events });
    }
    log
}

fn drain(w: &mut Watcher, n: usize, name: &str) -> Vec<(i64, Ev)> {
    (0..n)
        .map(|i| match w.recv_timeout(WAIT) {
            Ok(e) => Ev::of(&e),
            Err(e) => panic!("{name}: event {i} of {n} did not arrive: {e:?}"),
        })
        .collect()
}

/// Matches the watched stream against every thread's log. Returns nothing; panics with detail.
fn verify(stream: &[(i64, Ev)], logs: &[Vec<Rec>], final_rev: i64) {
    assert!(
        stream.windows(2).all(|w| w[0].0 <= w[1].0),
        "revisions must never go back"
    );
    // Events of one revision are contiguous in a non-decreasing stream.
    let mut groups: BTreeMap<i64, Vec<Ev>> = BTreeMap::new();
    for (rev, ev) in stream {
        groups.entry(*rev).or_default().push(ev.clone());
    }
    // Every write under the prefix produced at least one event, and nothing else wrote a
    // revision, so the watched revisions are exactly 1..=final_rev.
    assert_eq!(
        groups.keys().copied().collect::<Vec<_>>(),
        (1..=final_rev).collect::<Vec<_>>(),
        "every revision seen, none invented"
    );

    // Writes whose revision the caller got back.
    for log in logs {
        for rec in log {
            if let Some(rev) = rec.rev {
                let got = groups
                    .remove(&rev)
                    .unwrap_or_else(|| panic!("revision {rev} seen twice or never"));
                assert_eq!(
                    got, rec.events,
                    "revision {rev}: the whole write, in order, once"
                );
            }
        }
    }
    // Writes without a returned revision lie strictly between their thread's neighbours.
    for log in logs {
        for (idx, rec) in log.iter().enumerate() {
            if rec.rev.is_some() {
                continue;
            }
            let lo = log[..idx].iter().rev().find_map(|r| r.rev).unwrap_or(0);
            let hi = log[idx + 1..]
                .iter()
                .find_map(|r| r.rev)
                .unwrap_or(i64::MAX);
            let found: Vec<i64> = groups
                .range(lo + 1..hi)
                .filter(|(_, evs)| **evs == rec.events)
                .map(|(rev, _)| *rev)
                .collect();
            assert_eq!(
                found.len(),
                1,
                "write {:?} between revisions {lo} and {hi}: {found:?}",
                rec.events
            );
            groups.remove(&found[0]);
        }
    }
    assert!(
        groups.is_empty(),
        "events no write accounts for: {groups:?}"
    );
}

fn run(db: Tenure, clock: Arc<ManualClock>) {
    let mut all = db
        .watch(
            PREFIX,
            WatchOptions {
                prefix: true,
                ..WatchOptions::default()
            },
        )
        .unwrap();
    let (reached_tx, reached_rx) = crossbeam_channel::unbounded();
    let (resume_tx, resume_rx) = crossbeam_channel::unbounded();
    let writers: Vec<_> = (0..WRITERS)
        .map(|i| {
            let db = db.clone();
            let pause = Pause {
                reached: reached_tx.clone(),
                resume: resume_rx.clone(),
            };
            thread::spawn(move || writer(db, i, pause))
        })
        .collect();
    let leases = {
        let (db, clock) = (db.clone(), clock.clone());
        thread::spawn(move || lease_thread(db, clock))
    };

    // Mid-stream (writers a third through, the lease thread running): one watcher from now,
    // one replaying from revision 1.
    for _ in 0..WRITERS {
        reached_rx
            .recv_timeout(WAIT)
            .expect("a writer made progress");
    }
    let before_late = db.revision().unwrap();
    let mut late = db
        .watch(
            PREFIX,
            WatchOptions {
                prefix: true,
                ..WatchOptions::default()
            },
        )
        .unwrap();
    let mut replay = db
        .watch(
            PREFIX,
            WatchOptions {
                prefix: true,
                start_revision: Some(1),
                prev_kv: false,
            },
        )
        .unwrap();
    for _ in 0..WRITERS {
        resume_tx.send(()).unwrap();
    }

    let mut logs: Vec<Vec<Rec>> = writers.into_iter().map(|t| t.join().unwrap()).collect();
    logs.push(leases.join().unwrap());
    let expected: usize = logs.iter().flatten().map(|r| r.events.len()).sum();
    let final_rev = db.revision().unwrap();
    assert_eq!(db.stats().expired, 2 * ROUNDS as u64);

    let stream = drain(&mut all, expected, "watcher from the start");
    verify(&stream, &logs, final_rev);

    let replayed = drain(&mut replay, expected, "watcher replaying from revision 1");
    assert_eq!(replayed, stream, "replay then live equals the live stream");

    // Nothing more is queued: the next event these see is this sentinel.
    let end = db.put(format!("{PREFIX}~end"), "", None).unwrap();
    for w in [&mut all, &mut replay] {
        let e = w.recv_timeout(WAIT).expect("sentinel");
        assert_eq!(
            (e.revision(), e.kv.key.as_slice()),
            (end, b"c/~end".as_slice())
        );
    }

    // The late watcher: everything up to the sentinel is a suffix of whole revisions.
    let mut late_stream = Vec::new();
    loop {
        let (rev, ev) = late
            .recv_timeout(WAIT)
            .map(|e| Ev::of(&e))
            .expect("late watcher");
        if rev == end {
            break;
        }
        late_stream.push((rev, ev));
    }
    let first = late_stream
        .first()
        .expect("writers resumed after the late watcher registered")
        .0;
    assert!(
        first > before_late,
        "a watcher from now starts after its registration"
    );
    let suffix: Vec<_> = stream
        .iter()
        .filter(|(rev, _)| *rev >= first)
        .cloned()
        .collect();
    assert_eq!(
        late_stream, suffix,
        "a late watcher sees whole revisions, without gaps"
    );
    db.close().unwrap();
}

#[test]
fn k6_concurrent_writers_and_expiry_each_event_seen_once_in_order_in_memory() {
    let (clock, db) = support::manual_with(|b| b.watch_queue(1 << 16).watch_history(1 << 16));
    run(db, clock);
}

#[test]
fn k6_concurrent_writers_and_expiry_each_event_seen_once_in_order_on_file() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, db) = support::manual_with(|b| {
        b.path(dir.path().join("watch.tenure"))
            .durability(Durability::Immediate)
            .watch_queue(1 << 16)
            .watch_history(1 << 16)
    });
    run(db, clock);
}
