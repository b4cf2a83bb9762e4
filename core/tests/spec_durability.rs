//! One or more tests per SPEC line D1–D7. (The kill -9 crash test of D1 is `crash.rs`.)

mod support;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use support::secs;
use tenure::{Durability, Error, ManualClock, StorageFaults, Tenure};

#[test]
fn d1_immediate_writes_are_committed_when_the_call_returns() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tenure::open(dir.path().join("db")).unwrap();
    let ops: [&dyn Fn(&Tenure); 4] = [
        &|db| {
            db.grant(secs(60)).unwrap();
        },
        &|db| {
            db.put("k", "v", None).unwrap();
        },
        &|db| {
            db.delete("k").unwrap();
        },
        &|db| {
            db.checkpoint(1, secs(5)).unwrap();
        },
    ];
    for (i, op) in ops.iter().enumerate() {
        op(&db);
        assert_eq!(
            db.stats().commits,
            i as u64 + 1,
            "op {i} returned before its commit"
        );
    }
}

#[test]
fn d2_group_commit_shares_commits_between_concurrent_writers() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tenure::open(dir.path().join("db")).unwrap();
    let threads = 8;
    let per = 40;
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = db.clone();
            s.spawn(move || {
                for i in 0..per {
                    db.put(format!("t{t}/{i}"), "v", None).unwrap();
                }
            });
        }
    });
    let writes = (threads * per) as u64;
    let commits = db.stats().commits;
    assert_eq!(db.stats().keys, writes);
    assert!(
        commits < writes,
        "{writes} concurrent writes took {commits} commits: none shared"
    );
}

#[test]
fn d3_buffered_acknowledges_before_commit_and_never_tears() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Tenure::builder()
        .path(&path)
        .durability(Durability::Buffered(Duration::from_secs(3600)))
        .open()
        .unwrap();
    let l = db.grant(secs(600)).unwrap();
    db.put("a", "1", Some(l)).unwrap();
    assert_eq!(
        db.stats().commits,
        0,
        "acknowledged from memory, not yet committed"
    );
    db.close().unwrap();
    let db = Tenure::open(&path).unwrap();
    assert_eq!(
        db.lease_of("a").unwrap(),
        Some(l),
        "close flushes the buffered writes"
    );
}

#[test]
fn d3_buffered_commits_at_least_every_interval() {
    let dir = tempfile::tempdir().unwrap();
    let db = Tenure::builder()
        .path(dir.path().join("db"))
        .durability(Durability::Buffered(Duration::from_millis(20)))
        .open()
        .unwrap();
    db.put("a", "1", None).unwrap();
    let deadline = std::time::Instant::now() + secs(10);
    while db.stats().commits == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no flush within 10 s of a 20 ms interval"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn d4_in_memory_touches_no_disk_and_keeps_the_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let before: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    let clock = ManualClock::new();
    let db = Tenure::builder()
        .in_memory()
        .clock(clock.clone())
        .open()
        .unwrap();
    let rx = db.expired().unwrap();
    let l = db.grant(secs(5)).unwrap();
    db.put("k", "v", Some(l)).unwrap();
    clock.advance(secs(5));
    assert_eq!(rx.recv_timeout(secs(10)).unwrap()[0].id, l);
    assert!(db.get("k").unwrap().is_none());
    assert_eq!(db.stats().commits, 0);
    db.close().unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), before.len());
}

#[test]
fn d5_a_second_open_in_the_same_process_is_already_open_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let _db = Tenure::open(&path).unwrap();
    match Tenure::open(&path) {
        Err(e @ Error::AlreadyOpen(_)) => {
            assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        }
        other => panic!("expected AlreadyOpen, got {other:?}"),
    }
}

/// Child half of the cross-process test: opens the file named in the environment and prints
/// the error's code name. Not a test of its own: run (`--ignored`) by `d5_child`.
#[test]
#[ignore = "child process of the D5 cross-process tests; run by them"]
fn d5_child_entry() {
    let Ok(path) = std::env::var("TENURE_D5_CHILD_PATH") else {
        // Not started by a parent test (e.g. `--include-ignored`): there is nothing to check.
        return;
    };
    match Tenure::open(&path) {
        Ok(_) => println!("D5-RESULT opened"),
        Err(e) => println!("D5-RESULT {} {}", e.code().name(), e),
    }
}

/// Starts `d5_child_entry` in a child process on `path`.
fn d5_child(path: &std::path::Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "d5_child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TENURE_D5_CHILD_PATH", path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The `D5-RESULT …` line a child printed.
fn d5_child_result(child: std::process::Child) -> String {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    stdout
        .lines()
        .find_map(|l| l.find("D5-RESULT").map(|i| l[i..].to_string()))
        .unwrap_or_else(|| panic!("child printed no result: {stdout}"))
}

#[test]
fn d5_a_second_open_from_another_process_is_already_open_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let _db = Tenure::open(&path).unwrap();
    let line = d5_child_result(d5_child(&path));
    assert!(line.contains("TENURE_ERR_ALREADY_OPEN"), "{line}");
    assert!(line.contains(&path.display().to_string()), "{line}");
}

/// Two processes opening one file at the same moment: one of them gets it (the other
/// `AlreadyOpen`, or the file after the first closed it), never neither. Each open's read-only
/// pass holds shared locks that only one of them can then convert.
#[test]
fn d5_of_two_processes_opening_at_once_one_gets_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        // Enough rows that the read-only passes of both children overlap.
        let db = Tenure::open(&path).unwrap();
        let id = db.grant(Duration::from_secs(3600)).unwrap();
        let ops = (0..20_000).map(|i| tenure::Op::put(format!("k{i}"), [0u8; 32], Some(id)));
        db.txn(tenure::Txn::new().then(ops)).unwrap();
        db.close().unwrap();
    }
    for round in 0..30 {
        let (a, b) = (d5_child(&path), d5_child(&path));
        let (a, b) = (d5_child_result(a), d5_child_result(b));
        for r in [&a, &b] {
            assert!(
                r.contains("opened") || r.contains("TENURE_ERR_ALREADY_OPEN"),
                "round {round}: {r}"
            );
        }
        assert!(
            a.contains("opened") || b.contains("opened"),
            "round {round}: neither process got the file: {a} / {b}"
        );
    }
}

#[test]
fn d5_a_garbage_file_is_corrupt_and_left_byte_for_byte_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage");
    let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&path, &bytes).unwrap();
    match Tenure::open(&path) {
        Err(e @ Error::Corrupt { .. }) => assert!(e.to_string().contains("garbage"), "{e}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    // A tiny file too.
    std::fs::write(&path, b"x").unwrap();
    assert!(matches!(Tenure::open(&path), Err(Error::Corrupt { .. })));
    assert_eq!(std::fs::read(&path).unwrap(), b"x");
}

#[test]
fn d5_a_redb_file_that_is_not_tenure_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.redb");
    {
        let db = redb::Database::create(&path).unwrap();
        let tx = db.begin_write().unwrap();
        {
            let def: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("someone_else");
            tx.open_table(def).unwrap().insert("x", 1).unwrap();
        }
        tx.commit().unwrap();
    }
    assert!(matches!(Tenure::open(&path), Err(Error::Corrupt { .. })));
}

/// A database at `path` with injectable storage faults.
fn faulty(path: &std::path::Path) -> (Tenure, StorageFaults) {
    let faults = StorageFaults::new();
    let db = Tenure::builder()
        .path(path)
        .storage_faults(faults.clone())
        .open()
        .unwrap();
    (db, faults)
}

/// `faulty` with 4 KiB log regions: commits switch regions and checkpoint into the file often.
fn faulty_small_regions(path: &Path) -> (Tenure, StorageFaults) {
    let faults = StorageFaults::new();
    let db = Tenure::builder()
        .path(path)
        .storage_faults(faults.clone())
        .log_region_size(4096)
        .open()
        .unwrap();
    (db, faults)
}

#[test]
fn d6_a_failed_commit_is_not_acknowledged_poisons_writes_and_reopen_recovers_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let (db, faults) = faulty(&path);
    let l = db.grant(secs(600)).unwrap();
    db.put("acked", "1", Some(l)).unwrap();
    faults.fail_writes(true);
    assert!(matches!(
        db.put("lost", "2", None),
        Err(Error::Storage { .. })
    ));
    faults.fail_writes(false);
    assert!(
        matches!(db.grant(secs(5)), Err(Error::Storage { .. })),
        "writes fail until reopen"
    );
    assert!(matches!(db.revoke(l), Err(Error::Storage { .. })));
    assert_eq!(
        db.get("acked").unwrap().unwrap().value,
        b"1",
        "reads keep working"
    );
    assert!(db.time_to_live(l).is_ok());
    let _ = db.close();
    drop(db);
    let db = Tenure::open(&path).unwrap();
    assert_eq!(db.get("acked").unwrap().unwrap().value, b"1");
    assert!(
        db.get("lost").unwrap().is_none(),
        "the failed write was never acknowledged"
    );
    assert_eq!(db.lease_of("acked").unwrap(), Some(l));
    db.put("again", "3", None).unwrap();
}

#[test]
fn d6_a_failed_fsync_is_not_acknowledged_and_leaves_no_torn_state() {
    // After a failed fsync the kernel may or may not have the data (fsyncgate): the write is
    // reported failed and never acknowledged, and reopen shows it whole or not at all.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let (db, faults) = faulty(&path);
    let l = db.grant(secs(600)).unwrap();
    db.put("a", "1", Some(l)).unwrap();
    faults.fail_syncs(true);
    let txn = tenure::Txn::new().then([
        tenure::Op::put("b", "2", Some(l)),
        tenure::Op::put("c", "3", None),
        tenure::Op::delete("a"),
    ]);
    assert!(matches!(db.txn(txn), Err(Error::Storage { .. })));
    assert!(matches!(db.put("d", "4", None), Err(Error::Storage { .. })));
    faults.fail_syncs(false);
    let _ = db.close();
    drop(db);
    let db = Tenure::open(&path).unwrap();
    let present = [
        db.get("b").unwrap().is_some(),
        db.get("c").unwrap().is_some(),
        db.get("a").unwrap().is_none(),
    ];
    assert!(
        present.iter().all(|&p| p) || present.iter().all(|&p| !p),
        "torn txn: {present:?}"
    );
    assert!(
        db.get("d").unwrap().is_none(),
        "writes after the failure were refused"
    );
}

#[test]
fn d7_every_call_on_a_closed_engine_is_closed_and_close_is_idempotent() {
    let clock = ManualClock::new();
    let db = Tenure::builder().clock(clock).open().unwrap();
    let other = db.clone();
    let l = db.grant(secs(5)).unwrap();
    let rx = db.expired().unwrap();
    let mut w = db.watch("k", Default::default()).unwrap();
    db.close().unwrap();
    db.close().unwrap();
    let closed = |r: Result<(), Error>| assert!(matches!(r, Err(Error::Closed(_))), "{r:?}");
    closed(other.grant(secs(5)).map(drop));
    closed(other.grant_with_id(9, secs(5)).map(drop));
    closed(other.revoke(l));
    closed(other.renew(l).map(drop));
    closed(other.time_to_live(l).map(drop));
    closed(other.attach(l, &["k"]));
    closed(other.detach(l, &["k"]));
    closed(other.checkpoint(l, secs(1)));
    closed(other.promote(Duration::ZERO));
    closed(other.demote());
    closed(other.put("k", "v", None).map(drop));
    closed(other.get("k").map(drop));
    closed(other.range("k", None).map(drop));
    closed(other.delete("k").map(drop));
    closed(other.delete_prefix("k").map(drop));
    closed(other.txn(tenure::Txn::new()).map(drop));
    closed(other.watch("k", Default::default()).map(drop));
    closed(other.keep_alive(l, None).map(drop));
    closed(other.leases().map(drop));
    closed(other.lease_of("k").map(drop));
    closed(other.is_primary().map(drop));
    closed(other.revision().map(drop));
    assert!(other.is_closed());
    assert!(
        matches!(w.recv(), Err(Error::Closed(_))),
        "watchers end on close"
    );
    assert!(rx.recv().is_err(), "expired() disconnects on close");
    assert_eq!(other.stats().granted, 1, "stats stay readable");
}

#[test]
fn d7_close_checkpoints_and_dropping_the_last_handle_closes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let clock = ManualClock::new();
    let open = || {
        Tenure::builder()
            .path(&path)
            .clock(clock.clone())
            .open()
            .unwrap()
    };
    let db = open();
    let l = db.grant(secs(100)).unwrap();
    clock.advance(secs(60));
    db.renew(l).unwrap();
    let extra: Arc<Tenure> = Arc::new(db.clone());
    drop(db);
    drop(extra); // last handle: closes, checkpoints and releases the file
    let db = open();
    assert_eq!(db.time_to_live(l).unwrap().remaining, Some(secs(100)));
}

// ---- the write-ahead log (D1, D5, D6; DESIGN "The write-ahead log") ---------------------------

use std::path::{Path, PathBuf};

/// The log beside the database at `path`.
fn log_of(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".wal");
    PathBuf::from(p)
}

/// `[start, end)` of each record in the first region of a log that was made in the session
/// that wrote them (the format of DESIGN: 4 KiB header; u32 length, u32 head crc, u64 LSN,
/// payload, u32 crc, padding to 8 bytes).
fn records(log: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 4096;
    loop {
        let len = u32::from_le_bytes(log[pos..pos + 4].try_into().unwrap()) as usize;
        if len == 0 {
            return out;
        }
        out.push((pos, pos + 16 + len + 4));
        pos += (16 + len + 4 + 7) & !7;
    }
}

/// Acknowledges puts `k0..k{n-1}` (one commit each) on a new database, then copies the file and
/// its log as they are while the engine is still open: what a kill -9 at that moment leaves
/// (redb at the open's commit, every write beyond it only in the log). Returns the copy.
fn crash_image(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("live.tenure");
    let db = Tenure::open(&path).unwrap();
    for i in 0..n {
        db.put(format!("k{i}"), format!("v{i}"), None).unwrap();
    }
    let copy = dir.join("image.tenure");
    std::fs::copy(&path, &copy).unwrap();
    std::fs::copy(log_of(&path), log_of(&copy)).unwrap();
    db.close().unwrap();
    copy
}

/// Which of `k0..k{n-1}` the database at `path` holds, asserting they are a prefix.
fn prefix_held(db: &Tenure, n: usize) -> usize {
    let held = (0..n)
        .take_while(|i| db.get(format!("k{i}")).unwrap().is_some())
        .count();
    for i in held..n {
        assert!(
            db.get(format!("k{i}")).unwrap().is_none(),
            "k{i} present after missing k{held}: not a prefix"
        );
    }
    held
}

#[test]
fn d1_after_a_crash_open_replays_the_log_and_close_leaves_the_file_complete() {
    let dir = tempfile::tempdir().unwrap();
    let copy = crash_image(dir.path(), 20);
    let db = Tenure::open(&copy).unwrap();
    assert_eq!(
        prefix_held(&db, 20),
        20,
        "every acknowledged put is replayed"
    );
    assert_eq!(db.revision().unwrap(), 20);
    db.put("after", "replay", None).unwrap();
    db.close().unwrap();
    // Close leaves the file alone complete: without its log it still holds everything.
    std::fs::remove_file(log_of(&copy)).unwrap();
    let db = Tenure::open(&copy).unwrap();
    assert_eq!(prefix_held(&db, 20), 20);
    assert!(db.get("after").unwrap().is_some());
}

#[test]
fn d1_flush_to_file_puts_every_applied_write_into_the_file_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Tenure::open(&path).unwrap();
    let l = db.grant(secs(600)).unwrap();
    for i in 0..10 {
        db.put(format!("k{i}"), "v", Some(l)).unwrap();
    }
    db.flush_to_file().unwrap();
    let copy = dir.path().join("copy");
    std::fs::copy(&path, &copy).unwrap(); // the file only, not its log
    db.close().unwrap();
    let db = Tenure::open(&copy).unwrap();
    assert_eq!(prefix_held(&db, 10), 10);
    assert_eq!(db.lease_of("k9").unwrap(), Some(l));
    assert!(matches!(
        Tenure::in_memory().unwrap().flush_to_file(),
        Ok(())
    ));
}

#[test]
fn d1_a_torn_last_log_record_is_dropped_and_the_rest_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let copy = crash_image(dir.path(), 5);
    let log = std::fs::read(log_of(&copy)).unwrap();
    let recs = records(&log);
    assert_eq!(recs.len(), 5);
    let (start, end) = recs[4];
    // Torn at every length: only its head, half of it, all but its checksum.
    for cut in [start + 16, (start + end) / 2, end - 4] {
        let mut torn = log.clone();
        torn[cut..end].fill(0);
        std::fs::write(log_of(&copy), &torn).unwrap();
        let image = std::fs::read(&copy).unwrap();
        let db = Tenure::open(&copy).unwrap();
        assert_eq!(
            prefix_held(&db, 5),
            4,
            "torn at {cut}: the last put is gone"
        );
        db.close().unwrap();
        std::fs::write(&copy, image).unwrap(); // the crash image again
    }
}

#[test]
fn d5_any_damage_to_the_log_loses_only_a_torn_tail_otherwise_it_is_corrupt_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let n = 12;
    let copy = crash_image(dir.path(), n);
    let (image, log) = (
        std::fs::read(&copy).unwrap(),
        std::fs::read(log_of(&copy)).unwrap(),
    );
    let recs = records(&log);
    assert_eq!(recs.len(), n);
    let used = recs[n - 1].1 + 64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    for round in 0..150 {
        let mut bad = log.clone();
        let mut hit = Vec::new();
        for _ in 0..rng.random_range(1..4) {
            let at = if rng.random_bool(0.1) {
                rng.random_range(0..64) // the header
            } else {
                rng.random_range(4096..used)
            };
            let flip: u8 = rng.random_range(1..=255);
            bad[at] ^= flip;
            hit.push(at);
        }
        // The first record a flip made unreadable (padding and zeros beyond count for none).
        let header = hit.iter().any(|&a| a < 36);
        let first = recs
            .iter()
            .position(|&(s, e)| hit.iter().any(|&a| a >= s && a < e));
        std::fs::write(&copy, &image).unwrap();
        std::fs::write(log_of(&copy), &bad).unwrap();
        let ctx = format!("round {round}: flips at {hit:?}, first damaged record {first:?}");
        match Tenure::open(&copy) {
            Ok(db) => {
                let held = prefix_held(&db, n);
                db.close().unwrap();
                assert!(!header, "{ctx}: a damaged header must be refused");
                match first {
                    None => assert_eq!(held, n, "{ctx}"),
                    Some(i) => assert!(i == n - 1 && held == n - 1, "{ctx}: held {held}"),
                }
            }
            Err(Error::Corrupt { path, detail }) => {
                assert_eq!(path, copy, "{ctx}");
                assert!(detail.contains("write-ahead log"), "{ctx}: {detail}");
                assert!(
                    header || first.is_some_and(|i| i < n - 1),
                    "{ctx}: refused ({detail}) though only a torn tail or nothing was damaged"
                );
                assert!(
                    std::fs::read(&copy).unwrap() == image,
                    "{ctx}: file written"
                );
                assert!(
                    std::fs::read(log_of(&copy)).unwrap() == bad,
                    "{ctx}: log written"
                );
            }
            Err(e) => panic!("{ctx}: expected Ok or Corrupt, got {e:?}"),
        }
    }
}

#[test]
fn d5_a_second_open_is_refused_before_the_log_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Tenure::open(&path).unwrap();
    db.put("k", "v", None).unwrap();
    let log = std::fs::read(log_of(&path)).unwrap();
    assert!(matches!(Tenure::open(&path), Err(Error::AlreadyOpen(_))));
    assert!(std::fs::read(log_of(&path)).unwrap() == log);
    db.put("k2", "v", None).unwrap();
    db.close().unwrap();
    // A log that is not a tenure log is refused, and neither file is written.
    std::fs::write(log_of(&path), b"not a log").unwrap();
    let image = std::fs::read(&path).unwrap();
    assert!(matches!(Tenure::open(&path), Err(Error::Corrupt { .. })));
    assert!(std::fs::read(&path).unwrap() == image);
    assert!(std::fs::read(log_of(&path)).unwrap() == b"not a log");
}

#[test]
fn d6_a_failed_log_write_or_fsync_is_not_acknowledged_and_reopen_recovers_exactly() {
    for fault in ["write", "fsync"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let (db, faults) = faulty(&path);
        let l = db.grant(secs(600)).unwrap();
        db.put("acked", "1", Some(l)).unwrap();
        match fault {
            "write" => faults.fail_log_writes(true),
            _ => faults.fail_log_syncs(true),
        }
        assert!(
            matches!(db.put("lost", "2", None), Err(Error::Storage { .. })),
            "{fault}"
        );
        faults.fail_writes(false);
        faults.fail_syncs(false);
        assert!(matches!(db.grant(secs(5)), Err(Error::Storage { .. })));
        assert!(db.get("acked").unwrap().is_some(), "reads keep working");
        let _ = db.close();
        drop(db);
        let db = Tenure::open(&path).unwrap();
        assert_eq!(db.lease_of("acked").unwrap(), Some(l), "{fault}");
        if fault == "write" {
            assert!(db.get("lost").unwrap().is_none(), "never written");
        } // after a failed fsync the record may be there, whole (fsyncgate)
        db.put("again", "3", None).unwrap();
    }
}

#[test]
fn d6_a_log_fault_under_concurrent_writers_fails_every_unacknowledged_write_and_loses_no_acknowledged_one(
) {
    // Commits are led by the writers themselves: the fault hits whichever writer leads, every
    // writer waiting on that commit or a later one gets `Storage`, none hangs, and reopen has
    // exactly the acknowledged writes (plus, after a failed fsync, possibly the failed batch).
    const THREADS: usize = 8;
    for fault in ["write", "fsync"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let (db, faults) = faulty_small_regions(&path);
        let (acked, failed) = (
            std::sync::Mutex::new(Vec::new()),
            std::sync::Mutex::new(Vec::new()),
        );
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (db, faults, acked, failed) = (&db, &faults, &acked, &failed);
                s.spawn(move || {
                    for i in 0.. {
                        if t == 0 && i == 40 {
                            match fault {
                                "write" => faults.fail_log_writes(true),
                                _ => faults.fail_log_syncs(true),
                            }
                        }
                        let key = format!("t{t}/{i:05}");
                        match db.put(&key, "v", None) {
                            Ok(_) => acked.lock().unwrap().push(key),
                            Err(Error::Storage { .. }) => {
                                failed.lock().unwrap().push(key);
                                return;
                            }
                            Err(e) => panic!("{fault}: {e}"),
                        }
                        assert!(i < 100_000, "{fault}: a failed commit must stop the writes");
                    }
                });
            }
        });
        faults.fail_log_writes(false);
        faults.fail_log_syncs(false);
        let (acked, failed) = (acked.into_inner().unwrap(), failed.into_inner().unwrap());
        assert_eq!(
            failed.len(),
            THREADS,
            "{fault}: every writer saw the failure"
        );
        assert!(matches!(
            db.put("late", "v", None),
            Err(Error::Storage { .. })
        ));
        let _ = db.close();
        drop(db);
        let db = Tenure::open(&path).unwrap();
        for k in &acked {
            assert!(
                db.get(k).unwrap().is_some(),
                "{fault}: acknowledged {k} lost"
            );
        }
        if fault == "write" {
            for k in &failed {
                assert!(
                    db.get(k).unwrap().is_none(),
                    "{fault}: {k} was never written"
                );
            }
        }
        assert!(db.get("late").unwrap().is_none());
    }
}

/// The `format` of a file complete on its own, and of one whose log may hold writes it lacks.
const COMPLETE: i64 = 9;
const LOGGED: i64 = 10;

/// The `format` row of the database at `path` (opened by redb itself, which repairs a crash
/// image as a tenure open would).
fn format_of(path: &Path) -> i64 {
    use redb::ReadableDatabase;
    let meta: redb::TableDefinition<&str, i64> = redb::TableDefinition::new("tenure_meta");
    let db = redb::Database::open(path).unwrap();
    let tx = db.begin_read().unwrap();
    let v = tx
        .open_table(meta)
        .unwrap()
        .get("format")
        .unwrap()
        .unwrap()
        .value();
    v
}

#[test]
fn d5_a_file_whose_log_may_hold_writes_it_lacks_is_refused_by_builds_without_the_log() {
    // Those builds accept the complete format only: the file is marked logged from the open with the log until
    // its clean close, so a crash image is never opened by a build that would ignore its log.
    let dir = tempfile::tempdir().unwrap();
    let image = crash_image(dir.path(), 20);
    let live = dir.path().join("live.tenure");
    assert_eq!(
        format_of(&live),
        COMPLETE,
        "closed cleanly: complete on its own"
    );
    let marked = dir.path().join("marked.tenure");
    std::fs::copy(&image, &marked).unwrap();
    assert_eq!(
        format_of(&marked),
        LOGGED,
        "the crash image's log holds writes"
    );
    let unlogged = dir.path().join("unlogged.tenure");
    std::fs::copy(&image, &unlogged).unwrap();
    std::fs::copy(log_of(&image), log_of(&unlogged)).unwrap();
    // This build replays it, and its clean close marks it complete again.
    let db = Tenure::open(&image).unwrap();
    assert_eq!(prefix_held(&db, 20), 20);
    let snap = dir.path().join("snap.tenure");
    db.snapshot(&snap).unwrap();
    db.close().unwrap();
    assert_eq!(format_of(&image), COMPLETE);
    assert_eq!(
        format_of(&snap),
        COMPLETE,
        "a snapshot has no log: complete on its own"
    );
    // Opened without the log, the image's log is replayed into the file, complete from then on.
    let db = Tenure::builder()
        .path(&unlogged)
        .write_ahead_log(false)
        .open()
        .unwrap();
    assert_eq!(prefix_held(&db, 20), 20);
    db.close().unwrap();
    assert_eq!(format_of(&unlogged), COMPLETE);
}

#[test]
fn d7_close_reports_a_failed_last_checkpoint_and_the_log_keeps_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let (db, faults) = faulty(&path);
    for i in 0..20 {
        db.put(format!("k{i}"), "v", None).unwrap();
    }
    faults.fail_db_writes(true);
    assert!(matches!(db.close(), Err(Error::Storage { .. })));
    assert!(matches!(db.close(), Ok(()) | Err(Error::Closed(_))));
    faults.fail_db_writes(false);
    drop(db);
    let db = Tenure::open(&path).unwrap();
    assert_eq!(
        prefix_held(&db, 20),
        20,
        "the log kept every acknowledged write"
    );
    db.close().unwrap();
}

#[test]
fn d6_a_failed_checkpoint_into_the_file_poisons_writes_and_the_log_keeps_every_acknowledged_one() {
    // Through a barrier, and through region hand-offs in the background (4 KiB regions).
    for background in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let (db, faults) = faulty_small_regions(&path);
        db.put("k0", "v", None).unwrap();
        faults.fail_db_writes(true);
        let mut acked = 1;
        if background {
            while db.put(format!("k{acked}"), "v", None).is_ok() {
                acked += 1;
                assert!(acked < 10_000, "a failed checkpoint must stop the writes");
            }
        } else {
            db.put("k1", "v", None).unwrap();
            acked = 2;
            assert!(matches!(db.flush_to_file(), Err(Error::Storage { .. })));
        }
        assert!(matches!(
            db.put("refused", "v", None),
            Err(Error::Storage { .. })
        ));
        assert!(db.get("k0").unwrap().is_some(), "reads keep working");
        faults.fail_db_writes(false);
        let _ = db.close();
        drop(db);
        let db = Tenure::open(&path).unwrap();
        let held = prefix_held(&db, acked + 1);
        assert!(
            held >= acked,
            "background {background}: {held} of {acked} acknowledged puts"
        );
        assert!(db.get("refused").unwrap().is_none());
    }
}

#[test]
fn d1_a_batch_larger_than_a_log_region_goes_straight_to_the_file_and_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live");
    let db = Tenure::builder()
        .path(&path)
        .log_region_size(4096)
        .open()
        .unwrap();
    let big = vec![b'x'; 10_000];
    for i in 0..40 {
        db.put(format!("k{i}"), "v", None).unwrap(); // about 10 regions
    }
    db.put("big", &big, None).unwrap();
    for i in 40..45 {
        db.put(format!("k{i}"), "v", None).unwrap();
    }
    // The big put waited for its checkpoint and the small ones fill no region: nothing is
    // being written to the file while it is copied.
    let copy = dir.path().join("image");
    std::fs::copy(&path, &copy).unwrap();
    std::fs::copy(log_of(&path), log_of(&copy)).unwrap();
    db.close().unwrap();
    let db = Tenure::open(&copy).unwrap();
    assert_eq!(prefix_held(&db, 45), 45);
    assert_eq!(db.get("big").unwrap().unwrap().value, big);
}

/// A durable write from a thread-local's destructor (the thread is ending, its own thread-locals
/// may be gone) while other writers keep commits in flight: acknowledged like any other.
#[test]
fn d1_a_write_from_a_thread_local_destructor_while_commits_are_in_flight_is_acknowledged() {
    struct WritesOnDrop(
        Option<Tenure>,
        Arc<std::sync::Mutex<Vec<tenure::Result<i64>>>>,
    );
    impl Drop for WritesOnDrop {
        fn drop(&mut self) {
            if let Some(db) = self.0.take() {
                let r = (0..50)
                    .map(|i| db.put(format!("dtor/{i}"), "v", None))
                    .collect::<tenure::Result<Vec<_>>>()
                    .map(|v| v.len() as i64);
                self.1.lock().unwrap().push(r);
            }
        }
    }
    thread_local! {
        static LATE: std::cell::RefCell<Option<WritesOnDrop>> = const { std::cell::RefCell::new(None) };
    }
    let dir = tempfile::tempdir().unwrap();
    let db = Tenure::open(dir.path().join("db")).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..3)
        .map(|w| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    db.put(format!("busy/{w}/{i}"), "v", None).unwrap();
                    i += 1;
                }
            })
        })
        .collect();
    let results = Arc::new(std::sync::Mutex::new(Vec::new()));
    let ended: Vec<_> = (0..8)
        .map(|_| {
            let (db, results) = (db.clone(), results.clone());
            std::thread::spawn(move || {
                // Set before the engine's own thread-locals exist (writes that waited), so
                // it is dropped after them.
                LATE.with(|l| *l.borrow_mut() = Some(WritesOnDrop(Some(db.clone()), results)));
                for i in 0..20 {
                    db.put(format!("warm/{i}"), "v", None).unwrap();
                }
            })
        })
        .collect();
    for t in ended {
        t.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in busy {
        t.join().unwrap();
    }
    let results = results.lock().unwrap();
    assert_eq!(results.len(), 8);
    for r in results.iter() {
        assert_eq!(r.as_ref().ok(), Some(&50), "{r:?}");
    }
    assert_eq!(db.range("dtor/", None).unwrap().len(), 50);
}
