//! D5 and open-time validation: what `open` refuses, that a refused file is never written, that a
//! damaged file is `Corrupt` (never a panic) and that an interrupted first open bricks nothing.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use redb::{ReadableTable, TableDefinition};
use tenure::{Error, FileContents, StorageFaults, Tenure};

const META: TableDefinition<&str, i64> = TableDefinition::new("tenure_meta");
const LEASES: TableDefinition<i64, &[u8]> = TableDefinition::new("tenure_leases");
const KV: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tenure_kv");

/// A closed tenure file with leases, attached keys and plain keys.
fn populated(dir: &Path) -> PathBuf {
    let path = dir.join("db.tenure");
    let db = Tenure::open(&path).unwrap();
    for i in 0..20 {
        let l = db.grant(Duration::from_secs(600)).unwrap();
        db.put(format!("leased/{i}"), vec![b'v'; 100], Some(l))
            .unwrap();
        db.put(format!("plain/{i}"), vec![b'p'; 300], None).unwrap();
    }
    db.close().unwrap();
    path
}

/// Edits the raw tables of a closed tenure file with redb itself.
fn tamper(path: &Path, f: impl FnOnce(&redb::WriteTransaction)) {
    let db = redb::Database::open(path).unwrap();
    let tx = db.begin_write().unwrap();
    f(&tx);
    tx.commit().unwrap();
}

fn assert_refused_untouched(path: &Path, what: &str) {
    let before = std::fs::read(path).unwrap();
    match Tenure::open(path) {
        Err(e @ Error::Corrupt { .. }) => {
            assert!(
                e.to_string().contains(&path.display().to_string()),
                "{what}: {e}"
            );
        }
        other => panic!("{what}: expected Corrupt, got {other:?}"),
    }
    let after = std::fs::read(path).unwrap();
    assert!(before == after, "{what}: the refused file was modified");
}

#[test]
fn d5_refused_files_are_left_byte_for_byte_untouched_for_every_reason() {
    type Edit = fn(&redb::WriteTransaction);
    let cases: Vec<(&str, Edit)> = vec![
        ("unsupported format version", |tx| {
            tx.open_table(META).unwrap().insert("format", 11).unwrap();
        }),
        ("format 1, before records had checksums", |tx| {
            tx.open_table(META).unwrap().insert("format", 1).unwrap();
        }),
        ("missing format version", |tx| {
            tx.open_table(META).unwrap().remove("format").unwrap();
        }),
        ("a redb file that is not tenure's", |tx| {
            for t in ["tenure_meta", "tenure_leases", "tenure_kv"] {
                let def: TableDefinition<&str, i64> = TableDefinition::new(t);
                let _ = tx.delete_table(def);
            }
            let other: TableDefinition<&str, u64> = TableDefinition::new("someone_else");
            tx.open_table(other).unwrap().insert("x", 1).unwrap();
        }),
        ("undecodable key row", |tx| {
            tx.open_table(KV)
                .unwrap()
                .insert(&b"bad"[..], &b"\x07short"[..])
                .unwrap();
        }),
        ("key attached to a missing lease", |tx| {
            let mut leases = tx.open_table(LEASES).unwrap();
            let first = leases.first().unwrap().unwrap().0.value();
            leases.remove(first).unwrap();
        }),
        ("revision below a key's mod revision (I-K1)", |tx| {
            tx.open_table(META).unwrap().insert("revision", 3).unwrap();
        }),
        ("negative revision", |tx| {
            tx.open_table(META).unwrap().insert("revision", -5).unwrap();
        }),
        ("missing revision", |tx| {
            tx.open_table(META).unwrap().remove("revision").unwrap();
        }),
        ("next lease ID not above every lease ID (I-L2)", |tx| {
            tx.open_table(META)
                .unwrap()
                .insert("next_lease_id", 2)
                .unwrap();
        }),
        ("missing next lease ID", |tx| {
            tx.open_table(META)
                .unwrap()
                .remove("next_lease_id")
                .unwrap();
        }),
    ];
    for (what, edit) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = populated(dir.path());
        tamper(&path, edit);
        assert_refused_untouched(&path, what);
    }
}

#[test]
fn d5_a_key_with_a_revision_above_the_store_revision_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated(dir.path());
    tamper(&path, |tx| {
        let mut kv = tx.open_table(KV).unwrap();
        let mut rec = kv.get(&b"plain/0"[..]).unwrap().unwrap().value().to_vec();
        // mod revision (bytes 9..17) far in the future
        rec[9..17].copy_from_slice(&1_000_000i64.to_le_bytes());
        kv.insert(&b"plain/0"[..], rec.as_slice()).unwrap();
    });
    assert_refused_untouched(&path, "mod revision above the store revision");
}

/// Opens a damaged file: it is `Corrupt` and left byte for byte as it was (D5), or it opens with
/// exactly the contents of the file before the damage (`pristine`: read in place) — never with
/// anything else; read in place, the same. Anything else (a panic included) fails the test.
fn open_damaged(path: &Path, pristine: &FileContents, what: &str) {
    match Tenure::read_file(path) {
        Ok(read) => assert!(
            read == *pristine,
            "{what}: read in place, the damaged file gives wrong contents"
        ),
        Err(Error::Corrupt { .. }) => {}
        Err(e) => panic!("{what}: read in place: expected Ok or Corrupt, got {e:?}"),
    }
    let before = std::fs::read(path).unwrap();
    match Tenure::open(path) {
        Ok(db) => {
            let keys = db.range("", None).unwrap();
            let revision = db.revision().unwrap();
            let leases: Vec<_> = db.leases().unwrap().into_iter().map(|l| l.id).collect();
            let _ = db.close();
            assert!(
                keys == pristine.keys,
                "{what}: the damaged file opened and serves wrong keys or values"
            );
            assert_eq!(revision, pristine.revision, "{what}");
            let mut leases = leases;
            leases.sort();
            let expected: Vec<_> = pristine.leases.iter().map(|l| l.id).collect();
            assert_eq!(leases, expected, "{what}");
        }
        Err(Error::Corrupt { path: p, .. }) => {
            assert_eq!(p, path, "{what}");
            assert!(
                std::fs::read(path).unwrap() == before,
                "{what}: refused as Corrupt, yet the open wrote the file (D5)"
            );
        }
        Err(e) => panic!("{what}: expected Ok or Corrupt, got {e:?}"),
    }
}

#[test]
fn d5_a_randomly_damaged_file_is_corrupt_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let original = populated(dir.path());
    let contents = Tenure::read_file(&original).unwrap();
    let pristine = std::fs::read(&original).unwrap();
    let path = dir.path().join("damaged.tenure");
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let started = Instant::now();
    for round in 0..400 {
        if started.elapsed() > Duration::from_secs(60) {
            break; // bounded in time on a slow machine; the seed keeps rounds reproducible
        }
        let mut bytes = pristine.clone();
        for _ in 0..rng.random_range(1..16) {
            let at = rng.random_range(0..bytes.len());
            bytes[at] = rng.random();
        }
        std::fs::write(&path, &bytes).unwrap();
        open_damaged(&path, &contents, &format!("round {round}"));
    }
}

#[test]
fn d5_a_file_with_any_page_zeroed_is_corrupt_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let original = populated(dir.path());
    let contents = Tenure::read_file(&original).unwrap();
    let pristine = std::fs::read(&original).unwrap();
    let path = dir.path().join("zeroed.tenure");
    let started = Instant::now();
    for (page, _) in pristine.chunks(4096).enumerate() {
        if started.elapsed() > Duration::from_secs(60) {
            break;
        }
        let mut bytes = pristine.clone();
        let end = ((page + 1) * 4096).min(bytes.len());
        bytes[page * 4096..end].fill(0);
        std::fs::write(&path, &bytes).unwrap();
        open_damaged(&path, &contents, &format!("page {page} zeroed"));
    }
}

/// The path opens as a tenure database that keeps a write across a reopen.
fn assert_usable(path: &Path) {
    let db = support::open_file(path);
    db.put("k", "v", None).unwrap();
    db.close().unwrap();
    assert!(Tenure::open(path).unwrap().get("k").unwrap().is_some());
}

#[test]
fn d5_an_interrupted_first_open_leaves_the_path_usable() {
    for fault in ["write", "sync"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.tenure");
        let faults = StorageFaults::new();
        match fault {
            "write" => faults.fail_writes(true), // ENOSPC while creating
            _ => faults.fail_syncs(true),
        }
        let first = Tenure::builder().path(&path).storage_faults(faults).open();
        assert!(
            matches!(first, Err(Error::Storage { .. })),
            "fail {fault}: {first:?}"
        );
        // Nothing half-made is left where the database belongs, nor beside it.
        assert!(!path.exists(), "fail {fault}: a half-created file was left");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_usable(&path);
    }
}

#[test]
fn d5_a_redb_file_an_older_version_left_without_tables_is_initialised() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("half.tenure");
    drop(redb::Database::create(&path).unwrap());
    assert_usable(&path);
}

#[test]
fn d5_a_fifo_or_directory_path_is_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(ok.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let p = fifo.clone();
    std::thread::spawn(move || tx.send(Tenure::open(&p).map(|_| ())).unwrap());
    // A generous bound: the refusal is immediate, the old behaviour blocked forever.
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Err(e @ Error::Corrupt { .. })) => {
            assert!(e.to_string().contains("regular file"), "{e}")
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // A directory is the OS's EISDIR, in its words (the error names it as such).
    match Tenure::open(dir.path()) {
        Err(e @ Error::Storage { .. }) => {
            assert!(
                e.to_string().to_lowercase().contains("is a directory"),
                "{e}"
            )
        }
        other => panic!("expected Storage (is a directory), got {other:?}"),
    }
}

#[test]
fn e14_a_new_database_file_is_owner_only_and_an_existing_one_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let path = dir.path().join("new.tenure");
    let db = Tenure::open(&path).unwrap();
    db.put("k", "v", None).unwrap();
    // The write-ahead log (on by default) holds the same data.
    assert_eq!(mode(&dir.path().join("new.tenure.wal")), 0o600);
    db.close().unwrap();
    assert_eq!(mode(&path), 0o600);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    Tenure::open(&path).unwrap().close().unwrap();
    assert_eq!(mode(&path), 0o640, "only a created file gets 0600");
}

/// Makes `path` impossible to open for writing: mode 0444, and for root (whom modes do not stop)
/// the immutable attribute. `false` where neither works here.
fn unwritable(path: &Path, on: bool) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let mode = if on { 0o444 } else { 0o644 };
    if !on {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(path)
            .status();
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    let writable = || std::fs::OpenOptions::new().write(true).open(path).is_ok();
    if on && writable() {
        let _ = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .status();
    }
    on && !writable()
}

#[test]
fn d5_a_file_that_cannot_be_opened_for_writing_is_validated_first_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated(dir.path());
    let bad = dir.path().join("bad.tenure");
    std::fs::copy(&path, &bad).unwrap();
    tamper(&bad, |tx| {
        tx.open_table(META).unwrap().insert("format", 11).unwrap();
    });
    if !unwritable(&path, true) || !unwritable(&bad, true) {
        unwritable(&path, false);
        unwritable(&bad, false);
        eprintln!("skipped: no way to make a file unwritable here");
        return;
    }
    let before = std::fs::read(&bad).unwrap();
    let refused = Tenure::open(&bad);
    let valid = Tenure::open(&path);
    unwritable(&path, false);
    unwritable(&bad, false);
    // A refused file is refused for what it is, not for the permission.
    assert!(
        matches!(&refused, Err(Error::Corrupt { path: p, .. }) if p == &bad),
        "{refused:?}"
    );
    assert!(before == std::fs::read(&bad).unwrap());
    match valid {
        Err(e @ Error::Storage { .. }) => {
            assert!(e.to_string().contains(&path.display().to_string()), "{e}")
        }
        other => panic!("expected Storage naming the file, got {other:?}"),
    }
    assert_usable(&path);
}
