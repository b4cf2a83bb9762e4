//! SPEC E10: `tenure leases|get|dump|stats FILE` on a database no process has open; errors
//! name the file and the cause; exit codes as documented in `tenure --help`.

mod common;

use std::process::Output;

use common::{temp_db, tenure_cli, text, Server};

fn stdout(o: &Output) -> String {
    text(&o.stdout)
}

#[test]
fn e10_offline_leases_get_dump_stats_read_a_closed_file_without_changing_it() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let granted = s.ok(&["lease", "grant", "300"]);
    let hex = granted.split_whitespace().nth(1).unwrap().to_string();
    let id = i64::from_str_radix(&hex, 16).unwrap();
    s.ok(&["put", "svc/a", "10.0.0.1", "--lease", &hex]);
    s.ok(&["put", "svc/b", "10.0.0.2"]);
    s.ok(&["put", "other", "x"]);
    assert_eq!(s.terminate().code(), Some(0));
    let f = db.to_str().unwrap();
    let before = stdout(&tenure_cli(&["dump", f]));

    let o = tenure_cli(&["leases", f]);
    assert!(o.status.success());
    let text = stdout(&o);
    assert!(
        text.contains(&id.to_string()) && text.contains("svc/a") && text.contains("1 leases"),
        "{text}"
    );
    let o = tenure_cli(&["leases", f, "--json"]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        (v["id"].as_i64(), v["ttl_ms"].as_u64()),
        (Some(id), Some(300_000))
    );
    assert_eq!(v["keys"][0], "svc/a");

    assert_eq!(
        stdout(&tenure_cli(&["get", f, "svc/b"])),
        "svc/b\n10.0.0.2\n"
    );
    assert_eq!(
        stdout(&tenure_cli(&["get", f, "svc/", "--prefix"])),
        "svc/a\n10.0.0.1\nsvc/b\n10.0.0.2\n"
    );
    let o = tenure_cli(&["get", f, "svc/a", "--json"]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        (v["lease"].as_i64(), v["version"].as_i64()),
        (Some(id), Some(1))
    );
    let missing = tenure_cli(&["get", f, "nope"]);
    assert_eq!(
        (missing.status.code(), stdout(&missing)),
        (Some(3), String::new())
    );

    let dump = stdout(&tenure_cli(&["dump", f]));
    let records: Vec<serde_json::Value> = dump
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 4, "one lease and three keys: {dump}");
    assert_eq!(records[0]["type"], "lease");
    assert!(records[1..].iter().all(|r| r["type"] == "key"));

    let o = tenure_cli(&["stats", f, "--json"]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        (
            v["keys"].as_u64(),
            v["leases"].as_u64(),
            v["revision"].as_i64()
        ),
        (Some(3), Some(1), Some(4))
    );
    assert!(stdout(&tenure_cli(&["stats", f])).contains("revision: 4"));

    // Opened as a standby: nothing expires and tenure writes nothing (redb may still rewrite
    // its own allocator pages on close, so compare the contents, not the bytes).
    assert!(
        stdout(&tenure_cli(&["dump", f])) == before,
        "inspection changed the database"
    );
}

#[test]
fn e10_offline_errors_name_the_file_and_the_cause() {
    let (dir, db) = temp_db();
    let f = db.to_str().unwrap();
    let o = tenure_cli(&["stats", f]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(err.contains(f) && err.contains("no such file"), "{err}");
    assert!(!db.exists(), "a missing file is never created");

    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"not a database at all, certainly not redb").unwrap();
    let o = tenure_cli(&["dump", junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        err.contains("junk") && err.contains("not a tenure database"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&junk).unwrap(),
        b"not a database at all, certainly not redb"
    );

    let s = Server::start(&db, &[]);
    let o = tenure_cli(&["leases", f]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is already open"));
    drop(s);
}

#[test]
fn e10_every_subcommand_has_help_and_bad_usage_exits_2() {
    for sub in ["serve", "leases", "get", "dump", "stats"] {
        let o = tenure_cli(&[sub, "--help"]);
        assert!(o.status.success(), "{sub} --help");
        assert!(stdout(&o).contains("Usage: tenure"), "{sub}");
    }
    let top = stdout(&tenure_cli(&["--help"]));
    assert!(top.contains("Exit codes"), "{top}");
    assert_eq!(tenure_cli(&["serve"]).status.code(), Some(2));
    assert_eq!(tenure_cli(&["frobnicate"]).status.code(), Some(2));
    let (_dir, db) = temp_db();
    let o = tenure_cli(&["serve", db.to_str().unwrap(), "--durability", "sometimes"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid --durability"));
    assert!(
        !db.exists(),
        "a refused command line never creates the file"
    );
}

/// Every byte of every file in `dir` (names and contents), to compare before and after.
fn snapshot_dir(dir: &std::path::Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    all.sort();
    all
}

/// Runs every offline subcommand on `f` (text and `--json`), each must succeed; returns `dump`.
fn inspect_all(f: &str) -> String {
    for args in [
        &["leases", f][..],
        &["leases", f, "--json"],
        &["get", f, "k/", "--prefix"],
        &["get", f, "k/0", "--json"],
        &["stats", f],
        &["stats", f, "--json"],
    ] {
        let o = tenure_cli(args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = tenure_cli(&["dump", f]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    stdout(&o)
}

#[test]
fn e10_e12_offline_inspection_and_snapshot_never_write_the_file_its_log_or_its_directory_and_see_the_logs_writes(
) {
    use std::os::unix::fs::PermissionsExt;
    let (dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let granted = s.ok(&["lease", "grant", "300"]);
    let hex = granted.split_whitespace().nth(1).unwrap().to_string();
    for i in 0..20 {
        s.ok(&["put", &format!("k/{i}"), &format!("v{i}"), "--lease", &hex]);
    }
    // Killed: the file is left for redb to repair and the acknowledged writes are in its log.
    s.kill9();
    let f = db.to_str().unwrap();
    let log = dir
        .path()
        .join(format!("{}.wal", db.file_name().unwrap().to_string_lossy()));
    assert!(log.exists(), "the server writes through a log");

    let set_mode = |p: &std::path::Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    set_mode(&db, 0o444);
    set_mode(&log, 0o444);
    set_mode(dir.path(), 0o555);
    let before = snapshot_dir(dir.path());
    let dumped = inspect_all(f);
    // `tenure snapshot FILE OUT` reads FILE the same way (E12).
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = elsewhere.path().join("copy.tenure");
    let o = tenure_cli(&["snapshot", f, copy.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let after = snapshot_dir(dir.path());
    set_mode(dir.path(), 0o755);
    set_mode(&db, 0o644);
    set_mode(&log, 0o644);
    assert!(
        before == after,
        "inspection wrote the file, its log or its directory"
    );

    // Every acknowledged write is seen, read from the log in memory.
    let records: Vec<serde_json::Value> = dumped
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 21, "one lease and 20 keys: {dumped}");
    assert_eq!(records[0]["keys"].as_array().map(Vec::len), Some(20));
    assert_eq!(records[20]["key"], "k/9");
    assert_eq!(records[20]["value"], "v9");
    let o = tenure_cli(&["stats", f, "--json"]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        (v["keys"].as_u64(), v["revision"].as_i64()),
        (Some(20), Some(21))
    );
    assert_eq!(
        stdout(&tenure_cli(&["dump", copy.to_str().unwrap()])),
        dumped,
        "the copy holds what the log held"
    );

    // The engine recovers the same contents (it may write: it is the writer).
    let s = Server::start(&db, &[]);
    assert_eq!(s.terminate().code(), Some(0));
    set_mode(&db, 0o444);
    set_mode(dir.path(), 0o555);
    let before = snapshot_dir(dir.path());
    assert_eq!(
        inspect_all(f),
        dumped,
        "a cleanly closed file reads the same"
    );
    assert!(
        before == snapshot_dir(dir.path()),
        "inspection wrote a closed file"
    );
    set_mode(dir.path(), 0o755);
}
