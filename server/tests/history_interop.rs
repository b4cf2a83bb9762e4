//! Revision history (issue 24) checked with clients nobody here wrote: etcd's own Go
//! `concurrency.STM`, `etcdctl get --rev`, `etcdctl watch --rev` after a compaction, a watch
//! resumed across `kill -9`, and `etcdctl make-mirror` from `tenure serve` into a real etcd and
//! back. Where etcd can answer the same scenario, its output is the expected one.

mod common;

use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::{etcdctl, go_program, next_lines, spawn_lines, temp_db, text, Etcd, Server, WAIT};

/// `etcdctl ARGS` against `endpoint`, which must succeed; its stdout.
fn ok(endpoint: &str, args: &[&str]) -> String {
    let out = etcdctl(endpoint, args, None);
    assert!(
        out.status.success(),
        "etcdctl {args:?} against {endpoint}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// `etcdctl ARGS` against `endpoint`, which must fail; its stderr.
fn refused(endpoint: &str, args: &[&str]) -> String {
    let out: Output = etcdctl(endpoint, args, None);
    assert!(
        !out.status.success(),
        "etcdctl {args:?} against {endpoint} succeeded: {}",
        text(&out.stdout)
    );
    text(&out.stderr)
}

/// The revision in the header of `etcdctl get KEY -w json`.
fn revision(endpoint: &str) -> i64 {
    let json = ok(endpoint, &["get", "any", "-w", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["header"]["revision"].as_i64().unwrap()
}

/// Kills a long-running etcdctl and reaps it.
fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Waits (20 s at most) until `etcdctl get PREFIX --prefix` on `endpoint` prints `want`.
fn wait_for_contents(endpoint: &str, prefix: &str, want: &str) {
    let until = Instant::now() + WAIT;
    loop {
        let got = ok(endpoint, &["get", prefix, "--prefix"]);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < until,
            "{endpoint} never had {want:?} under {prefix}; it has {got:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The lines a watch prints for puts `key=value`, in order.
fn put_events<'a>(kvs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    kvs.into_iter()
        .flat_map(|(k, v)| ["PUT".to_string(), k.to_string(), v.to_string()])
        .collect()
}

// ---- etcd's Go concurrency.STM ----------------------------------------------------------------

/// `tests/go/stm ENDPOINT ISOLATION`: its one line of output, after asserting it succeeded.
fn stm(endpoint: &str, isolation: &str) -> String {
    let out = go_program("stm")
        .args([endpoint, isolation])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stm {isolation} on {endpoint}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout).trim().to_string()
}

#[test]
fn e2_go_stm_moves_money_under_every_isolation_level_with_no_error_as_on_etcd() {
    let (dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let etcd = Etcd::start(&dir.path().join("etcd"));
    // Serializable and snapshot isolation read every key at the revision of the first read:
    // the transfers of the other 7 goroutines move the store past it meanwhile.
    for isolation in ["serializable", "snapshot", "repeatable"] {
        let want = "errors=0 total=500 accounts=5";
        assert_eq!(stm(&etcd.url(), isolation), want, "etcd, {isolation}");
        assert_eq!(stm(&s.url(), isolation), want, "tenure, {isolation}");
    }
}

// ---- etcdctl get --rev, compact, watch --rev -------------------------------------------------

/// Four puts of `k` (revisions 2..=5 on a new store), `other` at 6, a delete of `k` at 7; then
/// reads at each revision, a compaction at 4 and watches from 4 and from 3. Everything
/// etcdctl prints, in order, so tenure's transcript can be compared with etcd's.
fn history_transcript(endpoint: &str) -> Vec<String> {
    let mut t = Vec::new();
    for v in ["v1", "v2", "v3", "v4"] {
        assert_eq!(ok(endpoint, &["put", "k", v]).trim(), "OK");
    }
    assert_eq!(ok(endpoint, &["put", "other", "o"]).trim(), "OK");
    assert_eq!(ok(endpoint, &["del", "k"]).trim(), "1");
    assert_eq!(revision(endpoint), 7);
    for rev in 2..=7 {
        let r = rev.to_string();
        t.push(format!("get --rev {rev}"));
        t.push(ok(endpoint, &["get", "", "--prefix", "--rev", &r]));
        let json = ok(endpoint, &["get", "k", "--rev", &r, "-w", "json"]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        // The key as it was: create/mod revision and version; the header is the current one.
        t.push(format!(
            "header {} kvs {} count {}",
            v["header"]["revision"], v["kvs"], v["count"]
        ));
    }
    let future = refused(endpoint, &["get", "k", "--rev", "8"]);
    assert!(
        future.contains("etcdserver: mvcc: required revision is a future revision"),
        "{future}"
    );
    assert_eq!(
        ok(endpoint, &["compact", "4"]).trim(),
        "compacted revision 4"
    );
    // etcd keeps the compacted revision itself readable; below it is gone.
    t.push(ok(endpoint, &["get", "k", "--rev", "4"]));
    let below = refused(endpoint, &["get", "k", "--rev", "3"]);
    assert!(
        below.contains("etcdserver: mvcc: required revision has been compacted"),
        "{below}"
    );
    // A watch from the compacted revision sees every event from it on: put v3 (4), put v4 (5),
    // other (6) and the delete (7).
    let (w, rx) = spawn_lines(endpoint, &["watch", "", "--prefix", "--rev", "4"]);
    t.extend(next_lines(&rx, 11));
    stop(w);
    // One below: the watch is refused as compacted.
    let out = etcdctl(endpoint, &["watch", "k", "--rev", "3"], None);
    t.push(format!(
        "watch --rev 3: {} {}",
        text(&out.stdout).trim(),
        text(&out.stderr).trim()
    ));
    t
}

#[test]
fn e2_etcdctl_get_rev_and_watch_rev_after_a_compaction_print_what_etcd_prints() {
    let (dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let want = history_transcript(&etcd.url());
    // What the transcript checks, spelled out on etcd's own output.
    assert_eq!(want[1], "k\nv1\n");
    assert_eq!(want[13], "k\nv4\nother\no\n");
    assert_eq!(want[16], "other\no\n");
    assert_eq!(want[18], "k\nv3\n");
    assert_eq!(
        want[19..30],
        ["PUT", "k", "v3", "PUT", "k", "v4", "PUT", "other", "o", "DELETE", "k"]
    );
    assert!(
        want[30].contains("required revision has been compacted"),
        "{}",
        want[30]
    );
    let got = history_transcript(&s.url());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "line {i} of the transcript differs from etcd's");
    }
    assert_eq!(got.len(), want.len());
}

// ---- a watch resumed across kill -9 ----------------------------------------------------------

#[test]
fn e4_a_watch_resumes_across_kill_9_and_restart_with_every_event_once_in_order() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let addr = s.addr.clone();
    // etcd's Go client (inside etcdctl) reconnects by itself and resumes at its last
    // revision + 1.
    let (w, rx) = spawn_lines(&addr, &["watch", "r/", "--prefix"]);
    // The watch is created asynchronously: put r/0 = start-N until it reports one. Every put
    // after the first one reported is reported too (the watch exists by then), so the lines
    // to skip are known exactly.
    let until = Instant::now() + WAIT;
    let mut attempts = 0;
    let first = loop {
        assert!(Instant::now() < until, "the watch never reported r/0");
        attempts += 1;
        let v = format!("start-{attempts}");
        assert_eq!(ok(&addr, &["put", "r/0", &v]).trim(), "OK");
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            assert_eq!(l, "PUT");
            let kv = next_lines(&rx, 2);
            assert_eq!(kv[0], "r/0");
            break kv[1]
                .strip_prefix("start-")
                .unwrap()
                .parse::<usize>()
                .unwrap();
        }
    };
    for n in first + 1..=attempts {
        assert_eq!(next_lines(&rx, 3), ["PUT", "r/0", &format!("start-{n}")]);
    }
    let before: Vec<(String, String)> = (1..=3)
        .map(|i| (format!("r/{i}"), format!("a{i}")))
        .collect();
    for (k, v) in &before {
        ok(&addr, &["put", k, v]);
    }
    // The revision of r/2.
    let resume_from = revision(&addr) - 1;
    // Written and acknowledged (durable), then the server dies without a word.
    let unseen: Vec<(String, String)> = (4..=6)
        .map(|i| (format!("r/{i}"), format!("b{i}")))
        .collect();
    for (k, v) in &unseen {
        ok(&addr, &["put", k, v]);
    }
    s.kill9();
    // While no server runs, three more writes land in the file (embedded): the watcher can
    // only see them if the restarted server replays them from its history.
    let down: Vec<(String, String)> = (7..=9)
        .map(|i| (format!("r/{i}"), format!("c{i}")))
        .collect();
    {
        let db = tenure::Tenure::open(&db).unwrap();
        for (k, v) in &down {
            db.put(k, v, None).unwrap();
        }
        db.close().unwrap();
    }
    let s = Server::start_on(&db, &addr, &[]);
    let after: Vec<(String, String)> = (10..=11)
        .map(|i| (format!("r/{i}"), format!("d{i}")))
        .collect();
    for (k, v) in &after {
        ok(&addr, &["put", k, v]);
    }
    let all: Vec<(&str, &str)> = before
        .iter()
        .chain(&unseen)
        .chain(&down)
        .chain(&after)
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        next_lines(&rx, all.len() * 3),
        put_events(all.iter().copied())
    );
    // Nothing twice: the next line is the next put.
    ok(&addr, &["put", "r/end", "end"]);
    assert_eq!(next_lines(&rx, 3), ["PUT", "r/end", "end"]);
    stop(w);

    // etcdctl watch --rev from before the kill, on the restarted server: the history survived.
    let r = resume_from.to_string();
    let (w, rx) = spawn_lines(&s.addr, &["watch", "r/", "--prefix", "--rev", &r]);
    let mut want: Vec<(&str, &str)> = all[1..].to_vec();
    want.push(("r/end", "end"));
    assert_eq!(next_lines(&rx, want.len() * 3), put_events(want));
    stop(w);
}

// ---- etcdctl make-mirror ---------------------------------------------------------------------

/// `etcdctl --endpoints=FROM make-mirror --prefix m/ TO`, running until stopped.
fn mirror(from: &str, to: &str) -> Child {
    spawn_lines(from, &["make-mirror", "--prefix", "m/", to]).0
}

#[test]
fn e2_etcdctl_make_mirror_from_tenure_into_etcd_and_back() {
    let (dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let etcd = Etcd::start(&dir.path().join("etcd"));
    let back_db = dir.path().join("back.tenure");
    let back = Server::start(&back_db, &[]);
    // More keys than one page of the mirror's base read (1000 at a fixed revision), several
    // revisions of some, a deleted one, and a key outside the prefix.
    let mut want = String::new();
    let keys: Vec<String> = (0..1500).map(|i| format!("m/{i:05}")).collect();
    for chunk in keys.chunks(100) {
        let ops: String = chunk
            .iter()
            .map(|k| format!("put {k} first-{k}\n"))
            .collect();
        let out = etcdctl(&s.addr, &["txn"], Some(&format!("\n{ops}\n\n")));
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    for k in &keys[..10] {
        ok(&s.addr, &["put", k, &format!("second-{k}")]);
    }
    ok(&s.addr, &["del", &keys[10]]);
    ok(&s.addr, &["put", "outside", "x"]);
    for (i, k) in keys.iter().enumerate() {
        if i == 10 {
            continue;
        }
        let v = if i < 10 { "second" } else { "first" };
        want.push_str(&format!("{k}\n{v}-{k}\n"));
    }

    let there = mirror(&s.url(), &etcd.url());
    let back_again = mirror(&etcd.url(), &back.url());
    wait_for_contents(&etcd.addr, "m/", &want);
    wait_for_contents(&back.addr, "m/", &want);
    // Live changes follow both hops: a put, an overwrite and a delete.
    ok(&s.addr, &["put", "m/zz", "live"]);
    ok(&s.addr, &["put", &keys[0], "changed"]);
    ok(&s.addr, &["del", &keys[1]]);
    let want = want
        .replace(
            &format!("{}\nsecond-{}\n", keys[0], keys[0]),
            &format!("{}\nchanged\n", keys[0]),
        )
        .replace(&format!("{}\nsecond-{}\n", keys[1], keys[1]), "")
        + "m/zz\nlive\n";
    wait_for_contents(&etcd.addr, "m/", &want);
    wait_for_contents(&back.addr, "m/", &want);
    assert_eq!(ok(&etcd.addr, &["get", "outside"]), "");
    stop(there);
    stop(back_again);
}
