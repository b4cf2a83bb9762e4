//! One or more tests per SPEC line D8 (online snapshot), D9 (content hash) and D10 (file size
//! and defragmentation).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod support;

use support::secs;
use tenure::{Durability, Error, ManualClock, SnapshotProgress, StorageFaults, Tenure};

/// A file-backed engine that commits every 5 ms: builds big populations fast.
fn buffered(path: &Path) -> Tenure {
    Tenure::builder()
        .path(path)
        .durability(Durability::Buffered(Duration::from_millis(5)))
        .open()
        .unwrap()
}

/// Files in `dir` other than `keep`: leftovers of a snapshot.
fn others(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

#[test]
fn d8_snapshot_holds_every_write_up_to_its_revision_and_none_after_while_writers_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tenure::open(dir.path().join("db")).unwrap();
    let acked: Mutex<Vec<(String, i64)>> = Mutex::new(Vec::new());
    let count = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let dest = dir.path().join("copy");
    let info = std::thread::scope(|s| {
        for t in 0..4 {
            let (db, acked, count, stop) = (&db, &acked, &count, &stop);
            s.spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    let key = format!("w{t}/{n:06}");
                    let rev = db.put(&key, "v", None).unwrap();
                    acked.lock().unwrap().push((key, rev));
                    count.fetch_add(1, Ordering::SeqCst);
                    n += 1;
                }
            });
        }
        while count.load(Ordering::SeqCst) < 200 {
            std::thread::yield_now();
        }
        // Not a stop-the-world: while the snapshot is under way (in its progress callback),
        // the writers still get writes acknowledged.
        let mut progressed = false;
        let info = db.snapshot_with_progress(&dest, |_| {
            if progressed {
                return;
            }
            progressed = true;
            let from = count.load(Ordering::SeqCst);
            let until = Instant::now() + secs(60);
            while count.load(Ordering::SeqCst) < from + 100 {
                assert!(
                    Instant::now() < until,
                    "writers stalled during the snapshot"
                );
                std::thread::yield_now();
            }
        });
        stop.store(true, Ordering::SeqCst);
        info.unwrap()
    });
    let acked = acked.into_inner().unwrap();
    assert!(info.revision >= 200 && info.revision < db.revision().unwrap());
    // As written (opening it writes: the open gives its write-ahead log a new id).
    assert_eq!(info.bytes, std::fs::metadata(&dest).unwrap().len());
    let copy = Tenure::builder().path(&dest).primary(false).open().unwrap();
    assert_eq!(copy.revision().unwrap(), info.revision);
    let mut before = 0;
    for (key, rev) in &acked {
        let got = copy.get(key).unwrap();
        if *rev <= info.revision {
            before += 1;
            assert_eq!(got.map(|kv| kv.mod_revision), Some(*rev), "{key} missing");
        } else {
            assert!(
                got.is_none(),
                "{key} (revision {rev}) is after the snapshot"
            );
        }
    }
    assert_eq!(copy.stats().keys, before);
    assert_eq!(info.keys, before);
    // Whole pages: what `etcdctl snapshot save` expects before the trailing checksum.
    assert_eq!(info.bytes % 512, 0, "{info:?}");
    assert_eq!(
        others(dir.path(), &["db", "db.wal", "copy", "copy.wal"]),
        Vec::<String>::new()
    );
}

#[test]
fn d8_snapshot_records_each_lease_remaining_ttl_as_of_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let open = |p: &Path| {
        Tenure::builder()
            .path(p)
            .clock(clock.clone())
            .checkpoint_interval(secs(3600))
            .open()
            .unwrap()
    };
    let db = open(&dir.path().join("db"));
    let renewed = db.grant(secs(100)).unwrap();
    let untouched = db.grant(secs(100)).unwrap();
    db.put("k", "v", Some(renewed)).unwrap();
    clock.advance(secs(30));
    db.renew(renewed).unwrap(); // in memory only: the row still says "granted 30 s ago"
    clock.advance(secs(10));
    let info = db.snapshot(dir.path().join("copy")).unwrap();
    assert_eq!(info.leases, 2);
    db.close().unwrap();
    let copy = open(&dir.path().join("copy"));
    let left = |id| copy.time_to_live(id).unwrap().remaining.unwrap();
    assert_eq!(left(renewed), secs(90));
    assert_eq!(left(untouched), secs(60));
    assert_eq!(copy.lease_of("k").unwrap(), Some(renewed));
}

#[test]
fn d8_progress_counts_every_row_up_to_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let db = buffered(&dir.path().join("db"));
    let lease = db.grant(secs(600)).unwrap();
    for i in 0..10_000 {
        db.put(format!("k{i:05}"), "v", (i % 2 == 0).then_some(lease))
            .unwrap();
    }
    let mut seen: Vec<SnapshotProgress> = Vec::new();
    let info = db
        .snapshot_with_progress(dir.path().join("copy"), |p| seen.push(p))
        .unwrap();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].done < w[1].done));
    let last = seen.last().unwrap();
    assert_eq!((last.done, last.total), (10_001, 10_001));
    assert_eq!((info.keys, info.leases, info.revision), (10_000, 1, 10_000));
}

#[test]
fn d8_snapshot_replaces_dest_whole_and_refuses_the_database_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Tenure::open(&path).unwrap();
    db.put("a", "1", None).unwrap();
    let dest = dir.path().join("copy");
    std::fs::write(&dest, b"an older backup").unwrap();
    db.snapshot(&dest).unwrap();
    let copy = Tenure::builder().path(&dest).primary(false).open().unwrap();
    assert_eq!(copy.get("a").unwrap().unwrap().value, b"1");
    copy.close().unwrap();
    for own in [path.clone(), dir.path().join(".").join("db")] {
        match db.snapshot(&own) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("the database itself"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(db.get("a").unwrap().unwrap().value, b"1");
    let mem = Tenure::in_memory().unwrap();
    assert!(matches!(
        mem.snapshot(dir.path().join("m")),
        Err(Error::InvalidArgument(_))
    ));
    db.close().unwrap();
    assert!(matches!(
        db.snapshot(dir.path().join("x")),
        Err(Error::Closed(_))
    ));
}

#[test]
fn d8_full_disk_is_a_storage_error_naming_dest_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let faults = StorageFaults::new();
    let db = Tenure::builder()
        .path(dir.path().join("db"))
        .storage_faults(faults.clone())
        .open()
        .unwrap();
    for i in 0..100 {
        db.put(format!("k{i}"), "v", None).unwrap();
    }
    let dest = dir.path().join("copy");
    // The file holds everything (the write-ahead log is checkpointed): only the copy is written.
    db.flush_to_file().unwrap();
    faults.fail_writes(true);
    match db.snapshot(&dest) {
        Err(Error::Storage { path, message, .. }) => {
            assert_eq!(path.as_deref(), Some(dest.as_path()), "{message}");
            assert!(message.contains("copy"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    faults.fail_writes(false);
    assert_eq!(others(dir.path(), &["db", "db.wal"]), Vec::<String>::new());
    // The source is untouched and the engine carries on.
    db.put("after", "v", None).unwrap();
    assert_eq!(db.snapshot(&dest).unwrap().keys, 101);
}

#[test]
fn d8_unwritable_destination_is_a_storage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tenure::open(dir.path().join("db")).unwrap();
    let dest = dir.path().join("no-such-dir").join("copy");
    match db.snapshot(&dest) {
        Err(Error::Storage { path, errno, .. }) => {
            assert_eq!(path.as_deref(), Some(dest.as_path()));
            assert_eq!(errno, Some(2));
        }
        other => panic!("{other:?}"),
    }
}

const KILL_CHILD: &str = "TENURE_SNAPSHOT_KILL_CHILD";

/// The child of the kill test: snapshots the database named by the environment and, at its
/// first progress report, says so and waits to be killed. Not a test of its own: run
/// (`--ignored`) by the kill test.
#[test]
#[ignore = "child process of the D8 kill test; run by it"]
fn d8_kill_child_entry() {
    let Ok(path) = std::env::var(KILL_CHILD) else {
        // Not started by the parent test (e.g. `--include-ignored`): there is nothing to check.
        return;
    };
    let db = Tenure::open(&path).unwrap();
    let _ = db.snapshot_with_progress(format!("{path}.snap"), |_| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "@@SNAPSHOTTING").unwrap();
        out.flush().unwrap();
        loop {
            std::thread::sleep(secs(3600));
        }
    });
    unreachable!("the parent kills this process mid-snapshot");
}

#[test]
fn d8_kill_9_during_a_snapshot_leaves_no_file_at_dest_and_the_source_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = buffered(&path);
        for i in 0..10_000 {
            db.put(format!("k{i:05}"), "v", None).unwrap();
        }
        db.close().unwrap();
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "d8_kill_child_entry",
            "--nocapture",
            "-q",
        ])
        .env(KILL_CHILD, &path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("@@SNAPSHOTTING") => break,
            Some(Ok(_)) => continue,
            other => panic!("the child ended before snapshotting: {other:?}"),
        }
    }
    let killed = child.id();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(!dir.path().join("db.snap").exists());
    let db = Tenure::open(&path).unwrap();
    assert_eq!(db.stats().keys, 10_000);
    assert_eq!(db.revision().unwrap(), 10_000);

    // The killed writer's temporary is left beside the destination; the next snapshot there
    // removes it, and only what is provably stale: not a live process's, not one someone
    // holds locked, not another destination's, nothing but its own name pattern.
    let hidden = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        names.sort();
        names
    };
    let left_by_kill = hidden();
    assert!(
        left_by_kill.len() == 1
            && left_by_kill[0].starts_with(&format!(".db.snap.snapshot-{killed}-")),
        "{left_by_kill:?}"
    );
    let mut live = Command::new("sleep").arg("600").spawn().unwrap();
    let kept = [
        format!(".db.snap.snapshot-{}-0", live.id()),
        format!(".other.snapshot-{killed}-0"),
        format!(".db.snap.snapshot-{killed}-x"),
        format!(".db.snap.creating-{killed}-0"),
    ];
    for name in &kept {
        std::fs::write(dir.path().join(name), b"").unwrap();
    }
    // A database someone has open under such a name (its PID says gone: another namespace).
    let held_name = format!(".db.snap.snapshot-{killed}-99");
    let held = Tenure::builder()
        .path(dir.path().join(&held_name))
        .write_ahead_log(false)
        .open()
        .unwrap();
    let done = db.snapshot(dir.path().join("db.snap"));
    live.kill().unwrap();
    live.wait().unwrap();
    done.unwrap();
    let mut expected: Vec<String> = kept.to_vec();
    expected.push(held_name);
    expected.sort();
    let ours: Vec<String> = hidden()
        .into_iter()
        .filter(|n| expected.contains(n) || n.starts_with(".db.snap.snapshot-"))
        .collect();
    assert_eq!(ours, expected);
    held.close().unwrap();
}

#[test]
fn d9_hash_is_equal_for_equal_contents_stable_across_restart_and_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let build = |name: &str, order: &[&str]| {
        let db = Tenure::open(dir.path().join(name)).unwrap();
        let lease = db.grant_with_id(7, secs(600)).unwrap();
        for k in order {
            db.put(k, format!("value of {k}"), Some(lease)).unwrap();
        }
        db
    };
    let a = build("a", &["x", "y", "z"]);
    let b = build("b", &["x", "y", "z"]);
    let ha = a.content_hash().unwrap();
    assert_eq!(ha, b.content_hash().unwrap());
    assert_eq!(ha.revision, 3);
    // Same keys and values written in another order: other revisions, another hash.
    let c = build("c", &["z", "y", "x"]);
    assert_ne!(c.content_hash().unwrap().kv, ha.kv);
    // A lease change shows in `all`, not in `kv`.
    b.grant_with_id(8, secs(600)).unwrap();
    let hb = b.content_hash().unwrap();
    assert_eq!(hb.kv, ha.kv);
    assert_ne!(hb.all, ha.all);
    // Stable across a restart and in a snapshot.
    a.snapshot(dir.path().join("a.snap")).unwrap();
    a.close().unwrap();
    let a = Tenure::open(dir.path().join("a")).unwrap();
    assert_eq!(a.content_hash().unwrap(), ha);
    let snap = Tenure::open(dir.path().join("a.snap")).unwrap();
    assert_eq!(snap.content_hash().unwrap(), ha);
    a.put("x", "changed", Some(7.into())).unwrap();
    assert_ne!(a.content_hash().unwrap().kv, ha.kv);
}

#[test]
fn d10_defragment_shrinks_a_file_with_many_deleted_keys_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let db = buffered(&dir.path().join("db"));
    let value = vec![b'x'; 1000];
    for i in 0..20_000 {
        db.put(format!("k{i:05}"), &value, None).unwrap();
    }
    db.put("other", "me", None).unwrap();
    db.close().unwrap(); // every put on disk
    let db = Tenure::open(dir.path().join("db")).unwrap();
    let full = db.storage_size().unwrap();
    assert!(full.file_bytes > 20_000_000, "{full:?}");
    db.delete_prefix("k").unwrap();
    let before = db.storage_size().unwrap();
    assert!(before.in_use_bytes < before.file_bytes / 2, "{before:?}");
    let after = db.defragment().unwrap();
    assert!(
        after.file_bytes < before.file_bytes / 2,
        "{before:?} -> {after:?}"
    );
    assert_eq!(
        after.file_bytes,
        std::fs::metadata(dir.path().join("db")).unwrap().len()
    );
    assert_eq!(db.get("other").unwrap().unwrap().value, b"me");
    db.put("later", "v", None).unwrap();
    let rev = db.revision().unwrap();
    db.close().unwrap();
    let db = Tenure::open(dir.path().join("db")).unwrap();
    assert_eq!((db.stats().keys, db.revision().unwrap()), (2, rev));
}

#[test]
fn d10_defragment_under_writers_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Tenure::open(dir.path().join("db")).unwrap());
    let stop = AtomicBool::new(false);
    let acked = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..3 {
            let (db, stop, acked) = (&db, &stop, &acked);
            s.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    db.put(format!("w{t}/{n:06}"), "v", None).unwrap();
                    acked.fetch_add(1, Ordering::SeqCst);
                    n += 1;
                }
            });
        }
        for _ in 0..3 {
            let from = acked.load(Ordering::SeqCst);
            while acked.load(Ordering::SeqCst) < from + 50 {
                std::thread::yield_now();
            }
            db.defragment().unwrap();
        }
        stop.store(true, Ordering::SeqCst);
    });
    let n = acked.load(Ordering::SeqCst);
    assert_eq!(db.stats().keys, n);
    db.close().unwrap();
    let db = Tenure::open(dir.path().join("db")).unwrap();
    assert_eq!(db.stats().keys, n);
}

#[test]
fn d8_a_close_during_a_snapshot_neither_hangs_nor_leaves_a_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = buffered(&dir.path().join("db"));
    for i in 0..10_000 {
        db.put(format!("k{i:05}"), "v", None).unwrap();
    }
    let dest = dir.path().join("copy");
    let mut closed = false;
    let result = db.snapshot_with_progress(&dest, |_| {
        if !closed {
            closed = true;
            db.close().unwrap();
        }
    });
    assert!(closed);
    // The read transaction began before the close: the copy completes, or fails cleanly.
    match result {
        Ok(info) => {
            assert_eq!(info.keys, 10_000);
            let copy = Tenure::open(&dest).unwrap();
            assert_eq!(copy.stats().keys, 10_000);
        }
        Err(e) => {
            assert!(
                matches!(e, Error::Storage { .. } | Error::Closed(_)),
                "{e:?}"
            );
            assert!(!dest.exists());
        }
    }
    let db = Tenure::open(dir.path().join("db")).unwrap();
    assert_eq!(db.stats().keys, 10_000);
}
