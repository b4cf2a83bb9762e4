//! SPEC E1–E9 checked with etcdctl (Debian's etcd-client package), a client nobody here wrote.
//! Every test reads etcdctl's output, not only its exit status.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{etcdctl, next_lines, spawn_lines, temp_db, wait_for, Server};

fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

#[test]
fn e2_put_get_with_prefix_limit_sort_keys_only_rev_and_del() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    for (k, v) in [
        ("svc/b", "2"),
        ("svc/a", "3"),
        ("svc/c", "1"),
        ("other", "x"),
    ] {
        assert_eq!(s.ok(&["put", k, v]).trim(), "OK");
    }
    assert_eq!(lines(&s.ok(&["get", "svc/a"])), ["svc/a", "3"]);
    assert_eq!(
        lines(&s.ok(&["get", "svc/", "--prefix"])),
        ["svc/a", "3", "svc/b", "2", "svc/c", "1"]
    );
    assert_eq!(
        lines(&s.ok(&["get", "svc/", "--prefix", "--limit", "2"])),
        ["svc/a", "3", "svc/b", "2"]
    );
    assert_eq!(
        lines(&s.ok(&["get", "svc/", "--prefix", "--sort-by", "VALUE"])),
        ["svc/c", "1", "svc/b", "2", "svc/a", "3"]
    );
    assert_eq!(
        lines(&s.ok(&[
            "get",
            "svc/",
            "--prefix",
            "--sort-by",
            "MODIFY",
            "--order",
            "DESCEND"
        ])),
        ["svc/c", "1", "svc/a", "3", "svc/b", "2"]
    );
    let keys = s.ok(&["get", "svc/", "--prefix", "--keys-only"]);
    let keys: Vec<&str> = keys.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(keys, ["svc/a", "svc/b", "svc/c"]);
    let json = s.ok(&["get", "svc/", "--prefix", "--limit", "1", "-w", "json"]);
    assert!(
        json.contains("\"count\":3") && json.contains("\"more\":true"),
        "{json}"
    );
    // As in etcd, an empty store is at revision 1: four puts make it 5.
    assert!(
        json.contains("\"revision\":5") && json.contains("\"raft_term\":1"),
        "{json}"
    );
    // --rev (K9): the current revision reads, an older one as it was; below a compaction,
    // etcd's compacted error.
    assert_eq!(
        lines(&s.ok(&["get", "other", "--rev", "5"])),
        ["other", "x"]
    );
    assert!(lines(&s.ok(&["get", "other", "--rev", "4"])).is_empty());
    assert_eq!(
        lines(&s.ok(&["get", "svc/", "--prefix", "--rev", "3"])),
        ["svc/a", "3", "svc/b", "2"]
    );
    s.ok(&["compact", "3"]);
    let old = s.etcdctl(&["get", "other", "--rev", "2"]);
    assert!(!old.status.success());
    assert!(String::from_utf8_lossy(&old.stderr)
        .contains("etcdserver: mvcc: required revision has been compacted"));
    let future = s.etcdctl(&["get", "other", "--rev", "99"]);
    assert!(String::from_utf8_lossy(&future.stderr)
        .contains("etcdserver: mvcc: required revision is a future revision"));
    assert_eq!(
        lines(&s.ok(&["del", "svc/a", "--prev-kv"])),
        ["1", "svc/a", "3"]
    );
    assert_eq!(s.ok(&["del", "svc/", "--prefix"]).trim(), "2");
    assert_eq!(s.ok(&["get", "svc/", "--prefix"]), "");
    assert_eq!(s.ok(&["del", "nothing"]).trim(), "0");
}

#[test]
fn e2_txn_from_stdin_runs_the_branch_its_compares_pick() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    s.ok(&["put", "flag", "on"]);
    let txn = "value(\"flag\") = \"on\"\n\nput a 1\nput b 2\n\nput c 3\n\n";
    let out = etcdctl(&s.addr, &["txn"], Some(txn));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(lines(&text), ["SUCCESS", "", "OK", "", "OK"]);
    assert_eq!(lines(&s.ok(&["get", "a"])), ["a", "1"]);
    let txn = "value(\"flag\") = \"off\"\n\nput a 9\n\nput c 3\n\n";
    let text = String::from_utf8(etcdctl(&s.addr, &["txn"], Some(txn)).stdout).unwrap();
    assert_eq!(lines(&text), ["FAILURE", "", "OK"]);
    assert_eq!(lines(&s.ok(&["get", "c"])), ["c", "3"]);
    assert_eq!(lines(&s.ok(&["get", "a"])), ["a", "1"]);
}

#[test]
fn e4_watch_prefix_prev_kv_and_from_a_revision() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    s.ok(&["put", "w/a", "1"]); // revision 2: an empty store is at 1, as in etcd
    let (mut w, rx) = spawn_lines(&s.addr, &["watch", "w/", "--prefix", "--prev-kv"]);
    // The watch is created asynchronously: write until it reports the first event.
    let mut first = None;
    for i in 0..100 {
        s.ok(&["put", "w/a", &format!("v{i}")]);
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            first = Some(l);
            break;
        }
    }
    assert_eq!(first.as_deref(), Some("PUT"));
    let rest = next_lines(&rx, 4);
    assert_eq!(rest[0], "w/a", "prev key");
    assert_eq!(rest[2], "w/a");
    s.ok(&["del", "w/a"]);
    // Skip whatever other puts raced in before the watch started; find the delete.
    let mut seen = Vec::new();
    while !seen.ends_with(&["DELETE".to_string()]) {
        seen.extend(next_lines(&rx, 1));
    }
    // etcdctl prints the previous key-value first, then the deleted key.
    let after = next_lines(&rx, 3);
    assert_eq!(after[0], "w/a", "previous key (prev-kv)");
    assert!(after[1].starts_with('v'), "previous value: {after:?}");
    assert_eq!(after[2], "w/a", "deleted key");
    let _ = w.kill();
    let _ = w.wait();
    // From revision 2 (the first write): replayed from the history kept since the server opened.
    let (mut w, rx) = spawn_lines(&s.addr, &["watch", "w/a", "--rev", "2"]);
    assert_eq!(next_lines(&rx, 3), ["PUT", "w/a", "1"]);
    let _ = w.kill();
    let _ = w.wait();
}

#[test]
fn e3_lease_grant_keep_alive_timetolive_list_revoke() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let granted = s.ok(&["lease", "grant", "100"]);
    // "lease 0000000000000001 granted with TTL(100s)"
    let id = granted.split_whitespace().nth(1).unwrap().to_string();
    assert!(granted.contains("granted with TTL(100s)"), "{granted}");
    s.ok(&["put", "l/k", "v", "--lease", &id]);
    let ttl = s.ok(&["lease", "timetolive", &id, "--keys"]);
    assert!(
        ttl.contains("granted with TTL(100s)") && ttl.contains("attached keys([l/k])"),
        "{ttl}"
    );
    let ka = s.ok(&["lease", "keep-alive", "--once", &id]);
    assert!(
        ka.contains(&format!("lease {id} keepalived with TTL(100)")),
        "{ka}"
    );
    let list = s.ok(&["lease", "list"]);
    assert!(
        list.contains("found 1 leases") && list.contains(&id),
        "{list}"
    );
    assert!(s
        .ok(&["lease", "revoke", &id])
        .contains(&format!("lease {id} revoked")));
    assert_eq!(s.ok(&["get", "l/k"]), "", "revoke deleted the attached key");
    let gone = s.ok(&["lease", "timetolive", &id]);
    assert!(gone.contains("already expired"), "{gone}");
    let again = s.etcdctl(&["lease", "revoke", &id]);
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("etcdserver: requested lease not found")
    );
    let bad = s.etcdctl(&["put", "x", "v", "--lease", "abcdef"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("etcdserver: requested lease not found"));
    assert_eq!(s.ok(&["get", "x"]), "", "nothing written");
}

/// A spawned etcdctl, killed when the test ends however it ends (a failed assertion too).
struct Spawned(std::process::Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(endpoint: &str, args: &[&str]) -> (Spawned, std::sync::mpsc::Receiver<String>) {
    let (child, rx) = spawn_lines(endpoint, args);
    (Spawned(child), rx)
}

/// Two `etcdctl lock` on `endpoint`: the second waits until the first exits.
fn lock_excludes_a_second_until_the_first_exits(endpoint: &str) {
    let (mut a, a_rx) = spawn(endpoint, &["lock", "job"]);
    let a_key = next_lines(&a_rx, 1).remove(0);
    assert!(a_key.starts_with("job/"), "{a_key}");
    let (mut b, b_rx) = spawn(endpoint, &["lock", "job"]);
    // B must keep waiting while A holds the lock (bounded check: 1.5 s).
    assert!(
        b_rx.recv_timeout(Duration::from_millis(1500)).is_err(),
        "the second etcdctl lock got the lock while the first held it"
    );
    common::signal(&a.0, "INT");
    wait_for(&mut a.0, Duration::from_secs(20));
    let b_key = next_lines(&b_rx, 1).remove(0);
    assert!(b_key.starts_with("job/") && b_key != a_key, "{b_key}");
    common::signal(&b.0, "INT");
    wait_for(&mut b.0, Duration::from_secs(20));
}

/// `etcdctl elect` on `endpoint` wins; `elect -l` names the same leader.
fn elect_and_elect_l_agree(endpoint: &str) {
    let (mut c, rx) = spawn(endpoint, &["elect", "chief", "node-1"]);
    let won = next_lines(&rx, 2);
    assert!(
        won[0].starts_with("chief/") && won[1] == "node-1",
        "{won:?}"
    );
    let (l, lrx) = spawn(endpoint, &["elect", "-l", "chief"]);
    assert_eq!(next_lines(&lrx, 2), won);
    drop(l);
    common::signal(&c.0, "INT");
    wait_for(&mut c.0, Duration::from_secs(20));
}

#[test]
fn e5_etcdctl_lock_excludes_a_second_etcdctl_until_the_first_exits() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    lock_excludes_a_second_until_the_first_exits(&s.addr);
}

#[test]
fn e5_etcdctl_elect_and_elect_l_agree_on_the_leader() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    elect_and_elect_l_agree(&s.addr);
}

#[test]
fn e6_endpoint_status_health_and_member_list() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    s.ok(&["put", "k", "v"]);
    let status = s.ok(&["endpoint", "status", "-w", "json"]);
    assert!(
        status.contains("\"raftIndex\":2") && status.contains("\"version\":\"3.5.0\""),
        "{status}"
    );
    // The member is its own leader.
    let member = status
        .split("\"member_id\":")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    let member = member.trim_end_matches('}');
    assert!(status.contains(&format!("\"leader\":{member}")), "{status}");
    let health = s.etcdctl(&["endpoint", "health"]);
    assert!(health.status.success());
    // etcdctl 3.4 prints the health line on stderr.
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&health.stdout),
        String::from_utf8_lossy(&health.stderr)
    );
    assert!(text.contains(&format!("{} is healthy", s.addr)), "{text}");
    let members = s.ok(&["member", "list"]);
    assert!(
        members.contains("started, tenure") && members.contains(&s.url()),
        "{members}"
    );
    let unsupported = s.etcdctl(&["member", "add", "second", "--peer-urls=http://127.0.0.1:1"]);
    assert!(String::from_utf8_lossy(&unsupported.stderr)
        .contains("tenure serve does not implement Cluster.MemberAdd"));
}

/// `tenure serve` on a unix socket at an absolute path in a temp dir (beside a loopback port
/// the harness waits on), and etcdctl's endpoint for it: grpc-go 1.26 sends that path, or the
/// whole `unix://` URL, as the HTTP/2 authority.
struct Unix {
    server: Server,
    sock: std::path::PathBuf,
    endpoint: String,
    _dir: tempfile::TempDir,
}

impl Unix {
    fn start() -> Unix {
        let (dir, db) = temp_db();
        let sock = dir.path().join("tenure.sock");
        assert!(sock.is_absolute());
        let server = Server::start(&db, &["--listen", &format!("unix:{}", sock.display())]);
        let endpoint = format!("unix://{}", sock.display());
        Unix {
            server,
            sock,
            endpoint,
            _dir: dir,
        }
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        etcdctl(&self.endpoint, args, stdin)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args, None);
        assert!(
            out.status.success(),
            "etcdctl {args:?} over {}: {}",
            self.endpoint,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

#[test]
fn e1_unix_socket_has_mode_0600_and_serves_etcdctl_put_get_del_txn() {
    use std::os::unix::fs::PermissionsExt;
    let u = Unix::start();
    let mode = std::fs::metadata(&u.sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    for (k, v) in [("svc/b", "2"), ("svc/a", "1"), ("other", "x")] {
        assert_eq!(u.ok(&["put", k, v]).trim(), "OK");
    }
    assert_eq!(lines(&u.ok(&["get", "svc/a"])), ["svc/a", "1"]);
    assert_eq!(
        lines(&u.ok(&["get", "svc/", "--prefix"])),
        ["svc/a", "1", "svc/b", "2"]
    );
    let keys = u.ok(&["get", "svc/", "--prefix", "--keys-only"]);
    let keys: Vec<&str> = keys.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(keys, ["svc/a", "svc/b"]);
    assert_eq!(
        lines(&u.ok(&["del", "svc/a", "--prev-kv"])),
        ["1", "svc/a", "1"]
    );
    assert_eq!(u.ok(&["get", "svc/a"]), "");
    let txn = "value(\"other\") = \"x\"\n\nput t yes\n\nput t no\n\n";
    let out = u.run(&["txn"], Some(txn));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        lines(&String::from_utf8(out.stdout).unwrap()),
        ["SUCCESS", "", "OK"]
    );
    assert_eq!(lines(&u.ok(&["get", "t"])), ["t", "yes"]);
    // The same store over TCP.
    assert_eq!(lines(&u.server.ok(&["get", "t"])), ["t", "yes"]);
    let sock = u.sock.clone();
    assert_eq!(u.server.terminate().code(), Some(0));
    assert!(!sock.exists(), "the socket is removed on shutdown");
}

#[test]
fn e1_etcdctl_watch_and_lease_over_a_unix_socket() {
    let u = Unix::start();
    let (w, rx) = spawn(&u.endpoint, &["watch", "w/", "--prefix"]);
    // The watch is created asynchronously: write until it reports an event.
    let mut first = None;
    for i in 0..100 {
        u.ok(&["put", "w/a", &format!("v{i}")]);
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            first = Some(l);
            break;
        }
    }
    assert_eq!(first.as_deref(), Some("PUT"));
    let event = next_lines(&rx, 2);
    assert_eq!(event[0], "w/a");
    assert!(event[1].starts_with('v'), "{event:?}");
    drop(w);
    let granted = u.ok(&["lease", "grant", "100"]);
    assert!(granted.contains("granted with TTL(100s)"), "{granted}");
    let id = granted.split_whitespace().nth(1).unwrap().to_string();
    u.ok(&["put", "l/k", "v", "--lease", &id]);
    let ttl = u.ok(&["lease", "timetolive", &id, "--keys"]);
    assert!(
        ttl.contains("granted with TTL(100s)") && ttl.contains("attached keys([l/k])"),
        "{ttl}"
    );
    assert!(u
        .ok(&["lease", "revoke", &id])
        .contains(&format!("lease {id} revoked")));
    assert_eq!(u.ok(&["get", "l/k"]), "", "revoke deleted the attached key");
}

#[test]
fn e1_etcdctl_lock_and_elect_over_a_unix_socket() {
    let u = Unix::start();
    lock_excludes_a_second_until_the_first_exits(&u.endpoint);
    elect_and_elect_l_agree(&u.endpoint);
}

#[test]
fn e1_etcdctl_endpoint_status_and_health_over_a_unix_socket() {
    let u = Unix::start();
    u.ok(&["put", "k", "v"]);
    // `endpoint status` sends the whole `unix://` URL as the authority.
    let status = u.ok(&["endpoint", "status", "-w", "json"]);
    assert!(
        status.contains(&format!("\"Endpoint\":\"{}\"", u.endpoint))
            && status.contains("\"raftIndex\":2")
            && status.contains("\"version\":\"3.5.0\""),
        "{status}"
    );
    let health = u.run(&["endpoint", "health"], None);
    assert!(health.status.success());
    // etcdctl 3.4 prints the health line on stderr.
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&health.stdout),
        String::from_utf8_lossy(&health.stderr)
    );
    assert!(
        text.contains(&format!("{} is healthy", u.endpoint)),
        "{text}"
    );
}

/// The Rust etcd-client crate over the same socket, through a tonic unix-socket channel.
#[test]
fn e1_the_rust_etcd_client_over_a_unix_socket() {
    let u = Unix::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(u.endpoint.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut c = etcd_client::Client::from_channel(etcd_client::Channel::Tonic(channel), None)
            .await
            .unwrap();
        c.put("rust", "over unix", None).await.unwrap();
        let got = c.get("rust", None).await.unwrap();
        assert_eq!(got.kvs()[0].value(), b"over unix");
        let lease = c.lease_grant(60, None).await.unwrap();
        assert_eq!(lease.ttl(), 60);
    });
    assert_eq!(lines(&u.ok(&["get", "rust"])), ["rust", "over unix"]);
}

#[test]
fn e1_a_second_serve_on_the_same_file_exits_1_with_already_open() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    let out = Command::new(common::bin())
        .arg("serve")
        .arg(&db)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is already open") && err.contains(&db.display().to_string()),
        "{err}"
    );
    s.ok(&["put", "still", "serving"]);
}

#[test]
fn e9_sigterm_exits_0_and_the_file_holds_every_write() {
    let (_dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    s.ok(&["put", "kept", "yes"]);
    // An open stream must not block exit: the watch replays the put (revision 2) once it is.
    let (_w, rx) = spawn_lines(&s.addr, &["watch", "kept", "--rev", "2"]);
    assert_eq!(next_lines(&rx, 3), ["PUT", "kept", "yes"]);
    assert_eq!(s.terminate().code(), Some(0));
    let out = Command::new(common::bin())
        .args(["get"])
        .arg(&db)
        .arg("kept")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "kept\nyes\n");
}
