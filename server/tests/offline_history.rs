//! SPEC E10 with history (issue 24): `tenure get FILE KEY --rev N` reads a past revision of a
//! database no process has open, as `etcdctl get --rev` does, read in place under the file's
//! lock (refused while a process has it open) and writes nothing.

mod common;

use common::{temp_db, tenure_cli, text};

/// k=v1 (1), k=v2 (2), other=o (3), k=v3 (4), delete other (5).
fn history(path: &std::path::Path) {
    let db = tenure::Tenure::open(path).unwrap();
    db.put("k", "v1", None).unwrap();
    db.put("k", "v2", None).unwrap();
    db.put("other", "o", None).unwrap();
    db.put("k", "v3", None).unwrap();
    assert!(db.delete("other").unwrap());
    assert_eq!(db.revision().unwrap(), 5);
    db.close().unwrap();
}

/// Every file in `dir` with its bytes.
fn contents(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn e10_get_rev_prints_the_keys_as_they_were_and_writes_nothing() {
    let (dir, path) = temp_db();
    history(&path);
    let before = contents(dir.path());
    let file = path.to_str().unwrap();
    let get = |args: &[&str]| {
        let mut all = vec!["get", file];
        all.extend_from_slice(args);
        tenure_cli(&all)
    };
    let out = get(&["k", "--rev", "1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "k\nv1\n");
    assert_eq!(text(&get(&["k", "--rev", "3"]).stdout), "k\nv2\n");
    // The current revision and 0 read the present.
    assert_eq!(text(&get(&["k", "--rev", "5"]).stdout), "k\nv3\n");
    assert_eq!(text(&get(&["k", "--rev", "0"]).stdout), "k\nv3\n");
    assert_eq!(
        text(&get(&["", "--prefix", "--rev", "4"]).stdout),
        "k\nv3\nother\no\n"
    );
    let json = text(&get(&["k", "--rev", "2", "--json"]).stdout);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(
        (
            &v["value"],
            &v["create_revision"],
            &v["mod_revision"],
            &v["version"]
        ),
        (&"v2".into(), &1.into(), &2.into(), &2.into())
    );
    // Not there at that revision: exit 3 as for a missing key; deleted at 5, there at 4.
    assert_eq!(get(&["other", "--rev", "2"]).status.code(), Some(3));
    assert_eq!(get(&["other", "--rev", "5"]).status.code(), Some(3));
    assert_eq!(text(&get(&["other", "--rev", "4"]).stdout), "other\no\n");
    // A future revision is etcd's error; a negative one is bad usage.
    let future = get(&["k", "--rev", "6"]);
    assert_eq!(future.status.code(), Some(1));
    assert!(
        text(&future.stderr).contains("required revision is a future revision"),
        "{}",
        text(&future.stderr)
    );
    assert_eq!(get(&["k", "--rev", "-1"]).status.code(), Some(2));
    assert_eq!(get(&["k", "--rev", "x"]).status.code(), Some(2));
    // Nothing was written: the directory holds the same files with the same bytes.
    assert_eq!(contents(dir.path()), before);
}

#[test]
fn e10_get_rev_below_a_compaction_is_compacted() {
    let (_dir, path) = temp_db();
    history(&path);
    {
        let db = tenure::Tenure::open(&path).unwrap();
        assert!(db.compact(3).unwrap().is_ok());
        db.close().unwrap();
    }
    let file = path.to_str().unwrap();
    assert_eq!(
        text(&tenure_cli(&["get", file, "k", "--rev", "3"]).stdout),
        "k\nv2\n"
    );
    let below = tenure_cli(&["get", file, "k", "--rev", "2"]);
    assert_eq!(below.status.code(), Some(1));
    assert!(
        text(&below.stderr).contains("required revision has been compacted"),
        "{}",
        text(&below.stderr)
    );
}

#[test]
fn e10_get_rev_of_a_file_a_running_server_has_open_is_refused_naming_tenure_serve() {
    let (dir, path) = temp_db();
    history(&path);
    let s = common::Server::start(&path, &[]);
    s.ok(&["put", "k", "v4"]);
    let before = contents(dir.path());
    let file = path.to_str().unwrap();
    // Never a copy of a file being written: the read takes the file's lock and is refused.
    let o = tenure_cli(&["get", file, "k", "--rev", "2"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(
        err.contains("is already open") && err.contains("tenure serve"),
        "{err}"
    );
    assert_eq!(
        contents(dir.path()),
        before,
        "the refused read wrote nothing"
    );
    drop(s);
}

#[test]
fn e10_get_rev_reads_a_killed_servers_file_with_its_log_in_place() {
    let (dir, path) = temp_db();
    history(&path);
    let s = common::Server::start(&path, &[]);
    s.ok(&["put", "k", "v4"]); // revision 6
    s.ok(&["put", "k", "v5"]); // revision 7
                               // Killed: the acknowledged writes are in the log, which the read replays in memory.
    s.kill9();
    let before = contents(dir.path());
    let file = path.to_str().unwrap();
    let get = |rev: &str| tenure_cli(&["get", file, "k", "--rev", rev]);
    assert_eq!(
        text(&get("6").stdout),
        "k\nv4\n",
        "{}",
        text(&get("6").stderr)
    );
    assert_eq!(text(&get("2").stdout), "k\nv2\n");
    assert_eq!(text(&get("0").stdout), "k\nv5\n");
    let future = get("8");
    assert_eq!(future.status.code(), Some(1));
    assert!(text(&future.stderr).contains("future revision"));
    assert_eq!(contents(dir.path()), before, "nothing was written");
    // The lock is released when the read is over: an engine opens the file.
    let db = tenure::Tenure::open(&path).unwrap();
    assert_eq!(db.get_at("k", 6).unwrap().unwrap().value, b"v4");
    db.close().unwrap();
}
