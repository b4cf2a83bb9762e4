//! SPEC E11 (Maintenance: Snapshot, Hash, HashKV, Defragment, Status sizes) with etcdctl
//! against `tenure serve`, and E12 (`tenure snapshot FILE OUT | restore | status`).

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use common::{temp_db, tenure_cli, text, Server};
use tenure::Tenure;

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// `etcdctl endpoint status -w json` → (dbSize, dbSizeInUse).
fn db_sizes(s: &Server) -> (i64, i64) {
    let v = json(&s.ok(&["endpoint", "status", "-w", "json"]));
    let st = &v[0]["Status"];
    (
        st["dbSize"].as_i64().unwrap(),
        st["dbSizeInUse"].as_i64().unwrap(),
    )
}

/// `etcdctl endpoint hashkv -w json` → (hash, revision).
fn hashkv(s: &Server) -> (u64, i64) {
    let v = json(&s.ok(&["endpoint", "hashkv", "-w", "json"]));
    let h = &v[0]["HashKV"];
    (
        h["hash"].as_u64().unwrap(),
        h["header"]["revision"].as_i64().unwrap(),
    )
}

/// Runs `f` while a client writes keys `w/NNNNNN` as fast as the server acknowledges them;
/// returns what `f` returned and every acknowledged (key, revision).
fn with_writer<T>(s: &Server, f: impl FnOnce() -> T) -> (T, Vec<(String, i64)>) {
    let client = Tenure::connect(&s.url()).unwrap();
    let acked = Mutex::new(Vec::new());
    let count = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let key = format!("w/{n:06}");
                let rev = client.put(&key, "v", None).unwrap();
                acked.lock().unwrap().push((key, rev));
                count.fetch_add(1, Ordering::SeqCst);
                n += 1;
            }
        });
        while count.load(Ordering::SeqCst) < 20 {
            std::thread::yield_now();
        }
        let out = f();
        let from = count.load(Ordering::SeqCst);
        // The writer still gets writes through afterwards.
        while count.load(Ordering::SeqCst) < from + 5 {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::SeqCst);
        out
    });
    (out, acked.into_inner().unwrap())
}

/// Hidden files in `dir`: what an interrupted snapshot or restore would leave.
fn hidden_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

fn open_standby(path: &Path) -> Tenure {
    Tenure::builder().path(path).primary(false).open().unwrap()
}

#[test]
fn e11_etcdctl_snapshot_save_under_a_writer_restores_every_write_up_to_its_revision_and_none_after()
{
    let (dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let saved = dir.path().join("saved.db");
    let (out, acked) = with_writer(&s, || {
        s.etcdctl(&["snapshot", "save", saved.to_str().unwrap()])
    });
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Snapshot saved"));
    // etcdctl's own check: whole sectors plus the 32-byte SHA-256.
    assert_eq!(std::fs::metadata(&saved).unwrap().len() % 512, 32);

    let restored = dir.path().join("restored.tenure");
    let o = tenure_cli(&[
        "snapshot",
        "restore",
        saved.to_str().unwrap(),
        restored.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("checksum ok"),
        "{}",
        text(&o.stdout)
    );
    let copy = open_standby(&restored);
    let rev = copy.revision().unwrap();
    let last = acked.last().unwrap().1;
    assert!(
        rev >= acked[19].1 && rev < last,
        "snapshot at {rev}, writes up to {last}"
    );
    let mut before = 0;
    for (key, r) in &acked {
        let got = copy.get(key).unwrap();
        if *r <= rev {
            before += 1;
            assert_eq!(got.map(|kv| kv.mod_revision), Some(*r), "{key} missing");
        } else {
            assert!(
                got.is_none(),
                "{key} (revision {r}) is after the snapshot at {rev}"
            );
        }
    }
    assert_eq!(copy.stats().keys, before);
    drop(copy);
    // No temporary file is left beside the database.
    assert_eq!(hidden_files(dir.path()), Vec::<String>::new());
}

/// A `tenure serve` killed (kill -9) while it builds a streamed snapshot leaves the snapshot's
/// temporary beside the database; the next streamed snapshot removes it (I-O3: the engine's
/// name pattern, a dead PID, not open as a database) and nothing else.
#[test]
fn e11_a_snapshot_stream_killed_mid_way_leaves_a_temporary_the_next_snapshot_removes() {
    let (dir, db) = temp_db();
    // Enough rows that building the copy takes a while: killed while it copies.
    let t = Tenure::builder()
        .path(&db)
        .durability(tenure::Durability::Buffered(
            std::time::Duration::from_millis(100),
        ))
        .open()
        .unwrap();
    let value = vec![b'v'; 64];
    for i in 0..50_000 {
        t.put(format!("k/{i:07}"), &value, None).unwrap();
    }
    t.close().unwrap();
    let snapshot_temps = |d: &Path| -> Vec<String> {
        let mut v = hidden_files(d);
        v.retain(|n| n.contains("snapshot"));
        v
    };
    let mut stale = Vec::new();
    for _ in 0..10 {
        let s = Server::start(&db, &[]);
        let mut client = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", s.url()))
            .args(["snapshot", "save"])
            .arg(dir.path().join("killed.db"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let seen = loop {
            if !snapshot_temps(dir.path()).is_empty() {
                break true;
            }
            if client.try_wait().unwrap().is_some() {
                break false;
            }
        };
        s.kill9();
        // etcdctl keeps retrying a server that is gone.
        let _ = client.kill();
        client.wait().unwrap();
        stale = snapshot_temps(dir.path());
        if seen && !stale.is_empty() {
            break;
        }
    }
    assert!(
        !stale.is_empty(),
        "a serve was killed while it built a snapshot"
    );
    // Not provably stale: a live process's temporary, and names of another pattern.
    let live = format!(".db.tenure.streamed-snapshot-{}-0", std::process::id());
    let others = [
        live.as_str(),
        ".db.tenure.streamed-snapshot-junk",
        ".other.streamed-snapshot-999999999-0",
    ];
    for n in others {
        std::fs::write(dir.path().join(n), b"x").unwrap();
    }

    let s = Server::start(&db, &[]);
    let saved = dir.path().join("saved.db");
    s.ok(&["snapshot", "save", saved.to_str().unwrap()]);
    let mut kept = hidden_files(dir.path());
    kept.sort();
    let mut want: Vec<String> = others.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(
        kept, want,
        "only the killed stream's temporary is removed ({stale:?})"
    );
}

#[test]
fn e11_endpoint_hashkv_is_equal_before_and_after_a_restart_and_follows_the_contents() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    for i in 0..20 {
        s.ok(&["put", &format!("k{i:02}"), &format!("value {i}")]);
    }
    let (h1, rev) = hashkv(&s);
    assert_eq!(hashkv(&s), (h1, rev));
    assert_eq!(s.terminate().code(), Some(0));
    let s = Server::start(&db, &[]);
    assert_eq!(hashkv(&s), (h1, rev));
    // An older revision is hashed as it was (K9); below a compaction: compacted; a later one
    // is in the future.
    let older = s.ok(&["endpoint", "hashkv", "--rev", &(rev - 1).to_string()]);
    assert!(!older.contains(&h1.to_string()), "{older}");
    s.ok(&["compact", &rev.to_string()]);
    let old = s.etcdctl(&["endpoint", "hashkv", "--rev", &(rev - 1).to_string()]);
    assert!(
        text(&old.stderr).contains("compacted"),
        "{}",
        text(&old.stderr)
    );
    let future = s.etcdctl(&["endpoint", "hashkv", "--rev", &(rev + 1).to_string()]);
    assert!(
        text(&future.stderr).contains("future"),
        "{}",
        text(&future.stderr)
    );
    s.ok(&["put", "k00", "changed"]);
    let (h2, rev2) = hashkv(&s);
    assert_ne!(h2, h1);
    assert_eq!(rev2, rev + 1);
}

#[test]
fn e11_defrag_under_a_writer_loses_no_acknowledged_write_and_shrinks_a_file_of_deleted_keys() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let client = Tenure::connect(&s.url()).unwrap();
    let value = "x".repeat(4000);
    std::thread::scope(|sc| {
        for t in 0..4 {
            let (client, value) = (&client, &value);
            sc.spawn(move || {
                for i in 0..300 {
                    client.put(format!("big/{t}/{i:04}"), value, None).unwrap();
                }
            });
        }
    });
    assert_eq!(client.delete_prefix("big/").unwrap(), 1200);
    let (size, in_use) = db_sizes(&s);
    assert!(size > 4_000_000, "{size}");
    assert!(in_use < size / 2, "in use {in_use} of {size}");
    let (out, acked) = with_writer(&s, || s.etcdctl(&["defrag"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (after, in_use_after) = db_sizes(&s);
    assert!(after < size / 2, "{size} -> {after}");
    assert!(in_use_after <= after);
    assert_eq!(std::fs::metadata(&db).unwrap().len() as i64, after);
    for (key, _) in &acked {
        assert!(client.get(key).unwrap().is_some(), "{key} lost");
    }
    drop(client);
    assert_eq!(s.terminate().code(), Some(0));
    let reopened = open_standby(&db);
    assert_eq!(reopened.stats().keys, acked.len() as u64);
}

#[test]
fn e11_move_leader_and_downgrade_are_unimplemented_with_etcds_message() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let out = s.etcdctl(&["move-leader", "1234"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("code = Unimplemented desc = method MoveLeader not implemented"),
        "{err}"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let e = rt.block_on(async {
        let c = etcd_client::Client::connect([s.url()], None).await.unwrap();
        c.maintenance_client()
            .downgrade(etcd_client::DowngradeOptions::Validate("3.4.0".into()))
            .await
            .unwrap_err()
    });
    match e {
        etcd_client::Error::GRpcStatus(st) => {
            assert_eq!(st.code(), tonic::Code::Unimplemented);
            assert_eq!(st.message(), "method Downgrade not implemented");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn e12_snapshot_cli_copies_a_closed_file_restores_and_reports_with_documented_exit_codes() {
    let (dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    s.ok(&["put", "a", "1"]);
    let lease = s.ok(&["lease", "grant", "600"]);
    let hex = lease.split_whitespace().nth(1).unwrap().to_string();
    s.ok(&["put", "b", "2", "--lease", &hex]);
    let f = db.to_str().unwrap();
    let copy = dir.path().join("copy.tenure");
    let c = copy.to_str().unwrap();
    // The file is open by the server: refused, naming the file and the cause.
    let o = tenure_cli(&["snapshot", f, c]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("already open") && text(&o.stderr).contains(f));
    assert!(!copy.exists());
    let saved = dir.path().join("saved.db");
    s.ok(&["snapshot", "save", saved.to_str().unwrap()]);
    assert_eq!(s.terminate().code(), Some(0));

    let o = tenure_cli(&["snapshot", f, c, "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v = json(&text(&o.stdout));
    assert_eq!(
        (v["keys"].as_u64(), v["leases"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(
        v["bytes"].as_u64(),
        Some(std::fs::metadata(&copy).unwrap().len())
    );

    // `status` reads the file in place, read-only: no copy (TMPDIR does not even exist), the
    // file unchanged to the byte and its directory unchanged.
    let tmpdir = dir.path().join("no-such-tmp");
    for (file, checksum) in [(saved.to_str().unwrap(), true), (c, false)] {
        let before = std::fs::read(file).unwrap();
        let mode = std::fs::metadata(file).unwrap().permissions();
        let mut ro = mode.clone();
        ro.set_readonly(true);
        std::fs::set_permissions(file, ro).unwrap();
        let listing = || {
            let mut names: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            names.sort();
            names
        };
        let names = listing();
        let o = Command::new(common::bin())
            .args(["snapshot", "status", file, "--json"])
            .env("TMPDIR", &tmpdir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        let v = json(&text(&o.stdout));
        assert_eq!(
            (
                v["keys"].as_u64(),
                v["leases"].as_u64(),
                v["checksum"].as_bool()
            ),
            (Some(2), Some(1), Some(checksum))
        );
        assert_eq!(
            v["revision"].as_i64(),
            v["revision"].as_i64().filter(|r| *r >= 3)
        );
        assert!(std::fs::read(file).unwrap() == before, "{file} was written");
        assert_eq!(listing(), names);
        std::fs::set_permissions(file, mode).unwrap();
    }
    assert!(!tmpdir.exists());
    let o = tenure_cli(&["snapshot", "status", saved.to_str().unwrap()]);
    assert!(
        text(&o.stdout).contains("checksum: SHA-256 ok"),
        "{}",
        text(&o.stdout)
    );

    // Restore refuses an existing file, a damaged snapshot (4) and a file that is no snapshot.
    let o = tenure_cli(&["snapshot", "restore", saved.to_str().unwrap(), c]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("already exists"),
        "{}",
        text(&o.stderr)
    );
    let mut bytes = std::fs::read(&saved).unwrap();
    bytes[4096] ^= 0xff;
    let damaged = dir.path().join("damaged.db");
    std::fs::write(&damaged, &bytes).unwrap();
    let out = dir.path().join("out.tenure");
    let o = tenure_cli(&[
        "snapshot",
        "restore",
        damaged.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("checksum mismatch") && text(&o.stderr).contains("damaged.db")
    );
    assert!(!out.exists());
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"not a database").unwrap();
    let o = tenure_cli(&[
        "snapshot",
        "restore",
        junk.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("not a tenure snapshot"),
        "{}",
        text(&o.stderr)
    );
    assert!(!out.exists());
    let o = tenure_cli(&[
        "snapshot",
        "status",
        dir.path().join("missing").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("missing"));

    let o = tenure_cli(&[
        "snapshot",
        "restore",
        saved.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let db2 = open_standby(&out);
    assert_eq!(db2.get("a").unwrap().unwrap().value, b"1");
    assert_eq!(
        db2.lease_of("b").unwrap().unwrap().get(),
        i64::from_str_radix(&hex, 16).unwrap()
    );
    drop(db2);
    assert_eq!(hidden_files(dir.path()), Vec::<String>::new());

    for args in [
        &["snapshot", "--help"][..],
        &["snapshot", "restore", "--help"],
        &["snapshot", "status", "--help"],
    ] {
        assert!(tenure_cli(args).status.success());
    }
    assert_eq!(tenure_cli(&["snapshot", f]).status.code(), Some(2));
}

#[test]
fn e12_restore_killed_mid_way_leaves_a_temporary_the_next_restore_removes_keeping_what_is_not_stale(
) {
    let (dir, db) = temp_db();
    let t = open_writer(&db);
    t.put("a", "1", None).unwrap();
    t.close().unwrap();
    // A big source, so the copy into the temporary takes a while: killed while it copies.
    let big = dir.path().join("big.db");
    std::fs::write(&big, vec![0x5a; 48 << 20]).unwrap();
    let out = dir.path().join("out.tenure");
    let temp_of = |pid: u32| format!(".out.tenure.restoring-{pid}-");
    let mut stale = None;
    for _ in 0..10 {
        let mut child = Command::new(common::bin())
            .args(["snapshot", "restore"])
            .args([&big, &out])
            .spawn()
            .unwrap();
        let prefix = temp_of(child.id());
        let ours = |n: &String| n.starts_with(&prefix) || *n == prefix[..prefix.len() - 1];
        let seen = loop {
            if hidden_files(dir.path()).iter().any(ours) {
                break true;
            }
            if child.try_wait().unwrap().is_some() {
                break false;
            }
        };
        if seen {
            common::signal(&child, "KILL");
            child.wait().unwrap();
            stale = hidden_files(dir.path()).into_iter().find(ours);
            break;
        }
    }
    let stale = stale.expect("a restore was killed while it copied");
    assert!(!out.exists());
    assert!(
        hidden_files(dir.path()).contains(&stale),
        "the kill left its temporary"
    );
    // The older name of a restore's temporary (no sequence number), left by a killed restore:
    // stale as well.
    let killed_pid = stale
        .trim_start_matches(".out.tenure.restoring-")
        .split('-')
        .next()
        .unwrap()
        .to_string();
    std::fs::write(
        dir.path()
            .join(format!(".out.tenure.restoring-{killed_pid}")),
        b"x",
    )
    .unwrap();
    // Not provably stale: a live process's temporary (both name forms), and names of another
    // pattern.
    let live = format!("{}0", temp_of(std::process::id()));
    let live_old = format!(".out.tenure.restoring-{}", std::process::id());
    let others = [
        live.as_str(),
        live_old.as_str(),
        ".out.tenure.restoring-junk",
        ".other.restoring-999999999-0",
    ];
    for n in others {
        std::fs::write(dir.path().join(n), b"x").unwrap();
    }

    let o = tenure_cli(&[
        "snapshot",
        "restore",
        db.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut kept = hidden_files(dir.path());
    kept.sort();
    let mut want: Vec<String> = others.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(kept, want, "only the killed restore's temporary is removed");
    assert_eq!(open_standby(&out).get("a").unwrap().unwrap().value, b"1");
}

fn open_writer(path: &Path) -> Tenure {
    Tenure::builder().path(path).open().unwrap()
}
