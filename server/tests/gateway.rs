//! SPEC E21: etcd's JSON gateway under `/v3/`. Every request is sent with curl to a real etcd
//! and to `tenure serve` in the same test, and the decoded answers are compared: bodies (the
//! response header reduced to its revision, which both count alike from a fresh start; lease
//! IDs chosen by the test so that keys naming them match), errors (HTTP status and etcd's error
//! body) and streams (chunks of `{"result":…}` lines).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::{temp_db, Etcd, Server};
use serde_json::{json, Value};

/// POSTs `body` to `base/v3/path` with curl: the HTTP status and the body.
fn post(base: &str, path: &str, body: &str) -> (u32, String) {
    let out = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "20",
            "-w",
            "\n%{http_code}",
            "-X",
            "POST",
        ])
        .arg(format!("{base}/v3/{path}"))
        .args(["--data-binary", body])
        .output()
        .expect("curl is installed");
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.parse().unwrap(), body.to_string())
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"))
}

/// What two servers are expected to share: every header reduced to its revision (cluster and
/// member IDs and the raft term are each server's own), at any depth.
fn normal(mut v: Value) -> Value {
    match &mut v {
        Value::Object(m) => {
            if let Some(Value::Object(h)) = m.get_mut("header") {
                h.retain(|k, _| k == "revision");
            }
            for (_, x) in m.iter_mut() {
                *x = normal(x.take());
            }
        }
        Value::Array(a) => {
            for x in a.iter_mut() {
                *x = normal(x.take());
            }
        }
        _ => {}
    }
    v
}

/// etcd and tenure, side by side.
struct Pair {
    etcd: String,
    tenure: String,
    _etcd: Etcd,
    _server: Server,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Pair {
    fn start() -> Pair {
        let dir = tempfile::tempdir().unwrap();
        let etcd = Etcd::start(dir.path());
        let (d, file) = temp_db();
        let server = Server::start(&file, &[]);
        Pair {
            etcd: format!("http://{}", etcd.addr),
            tenure: server.url(),
            _etcd: etcd,
            _server: server,
            _dirs: (dir, d),
        }
    }

    /// Sends the request to both; asserts the statuses and normalised bodies are equal and
    /// returns tenure's decoded body.
    fn same(&self, path: &str, body: Value) -> Value {
        let body = body.to_string();
        let (ecode, ebody) = post(&self.etcd, path, &body);
        let (code, tbody) = post(&self.tenure, path, &body);
        assert_eq!(code, ecode, "{path} {body}: tenure {tbody}, etcd {ebody}");
        let (e, t) = (normal(parse(&ebody)), normal(parse(&tbody)));
        assert_eq!(t, e, "{path} {body}");
        t
    }

    /// Sends the request to both and returns the two decoded bodies with their statuses (for
    /// answers that differ in a known way, e.g. a TTL that counts down).
    fn both(&self, path: &str, body: Value) -> ((u32, Value), (u32, Value)) {
        let body = body.to_string();
        let (ecode, ebody) = post(&self.etcd, path, &body);
        let (code, tbody) = post(&self.tenure, path, &body);
        (
            (ecode, normal(parse(&ebody))),
            (code, normal(parse(&tbody))),
        )
    }
}

fn b64(s: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = s.as_bytes();
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn e21_kv_range_put_deleterange_txn_and_compaction_answer_as_etcd() {
    let p = Pair::start();
    let put = p.same("kv/put", json!({"key": b64("foo"), "value": b64("bar")}));
    assert_eq!(put["header"]["revision"], "2");
    let put = p.same(
        "kv/put",
        json!({"key": b64("foo"), "value": b64("baz"), "prev_kv": true}),
    );
    assert_eq!(put["prev_kv"]["value"], b64("bar"));
    p.same("kv/put", json!({"key": b64("fop"), "value": b64("1")}));
    let range = p.same("kv/range", json!({"key": b64("foo")}));
    assert_eq!(range["kvs"][0]["version"], "2");
    assert_eq!(range["count"], "1");
    let prefix = p.same(
        "kv/range",
        json!({"key": b64("fo"), "range_end": b64("fp"), "sort_order": "DESCEND", "limit": 1}),
    );
    assert_eq!(prefix["more"], true);
    p.same(
        "kv/range",
        json!({"key": b64("f"), "range_end": "AA==", "count_only": true}),
    );
    p.same(
        "kv/range",
        json!({"key": b64("foo"), "revision": 2, "keys_only": true}),
    );
    let txn = p.same(
        "kv/txn",
        json!({
            "compare": [{"key": b64("foo"), "result": "EQUAL", "target": "VALUE", "value": b64("baz")}],
            "success": [
                {"request_put": {"key": b64("t"), "value": b64("v")}},
                {"request_range": {"key": b64("foo")}}
            ],
            "failure": [{"request_delete_range": {"key": b64("foo")}}]
        }),
    );
    assert_eq!(txn["succeeded"], true);
    let txn = p.same(
        "kv/txn",
        json!({
            "compare": [{"key": b64("foo"), "target": "MOD", "result": "LESS", "mod_revision": 2}],
            "failure": [{"request_delete_range": {"key": b64("t"), "prev_kv": true}}]
        }),
    );
    assert_eq!(txn["succeeded"], Value::Null, "false is left out, as etcd");
    let del = p.same(
        "kv/deleterange",
        json!({"key": b64("f"), "range_end": b64("g"), "prev_kv": true}),
    );
    assert_eq!(del["deleted"], "2");
    p.same("kv/compaction", json!({"revision": 4}));
    // Errors: etcd's body and HTTP status for each code.
    let compacted = p.same("kv/range", json!({"key": b64("foo"), "revision": 3}));
    assert_eq!(compacted["code"], 11);
    assert_eq!(
        compacted["error"],
        "etcdserver: mvcc: required revision has been compacted"
    );
    p.same("kv/range", json!({"key": b64("foo"), "revision": 1000}));
    let no_key = p.same("kv/range", json!({}));
    assert_eq!(no_key["message"], "etcdserver: key is not provided");
    // An empty body is the default request, as etcd reads it.
    let (ecode, _) = post(&p.etcd, "kv/range", "");
    let (code, body) = post(&p.tenure, "kv/range", "");
    assert_eq!((code, ecode), (400, 400), "{body}");
    // Not JSON: code InvalidArgument, 400 (the decoder's text is each gateway's own).
    let ((ecode, e), (code, t)) = p.both("kv/put", json!("{not json"));
    assert_eq!((code, ecode), (400, 400));
    assert_eq!((t["code"].clone(), e["code"].clone()), (json!(3), json!(3)));
    assert!(t["error"].as_str().is_some_and(|m| !m.is_empty()), "{t}");
}

#[test]
fn e21_wrong_method_and_unknown_path_answer_as_etcd() {
    let p = Pair::start();
    // etcd 3.4's other prefix, which etcd3gw and tooz may ask for.
    p.same("kv/put", json!({"key": b64("k"), "value": b64("v")}));
    let beta = p.same("../v3beta/kv/range", json!({"key": b64("k")}));
    assert_eq!(beta["kvs"][0]["value"], b64("v"));
    for (method, path) in [("GET", "kv/range"), ("POST", "kv/nothing")] {
        let answer = |base: &str| {
            let out = Command::new("curl")
                .args(["-s", "-w", "\n%{http_code}", "-X", method])
                .arg(format!("{base}/v3/{path}"))
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        };
        assert_eq!(answer(&p.tenure), answer(&p.etcd), "{method} {path}");
    }
}

#[test]
fn e21_lease_grant_revoke_keepalive_timetolive_and_leases_answer_as_etcd() {
    let p = Pair::start();
    let grant = p.same("lease/grant", json!({"TTL": 60, "ID": 1000}));
    assert_eq!(
        (grant["ID"].clone(), grant["TTL"].clone()),
        (json!("1000"), json!("60"))
    );
    p.same(
        "kv/put",
        json!({"key": b64("leased"), "value": b64("v"), "lease": 1000}),
    );
    let leases = p.same("lease/leases", json!({}));
    assert_eq!(leases["leases"], json!([{"ID": "1000"}]));
    p.same("kv/lease/leases", json!({}));
    let ((ecode, mut e), (code, mut t)) =
        p.both("lease/timetolive", json!({"ID": 1000, "keys": true}));
    assert_eq!((code, ecode), (200, 200));
    // The remaining TTL counts down on each server's clock.
    for v in [&mut e, &mut t] {
        let ttl: i64 = v["TTL"].as_str().unwrap().parse().unwrap();
        assert!((55..=60).contains(&ttl), "{v}");
        v.as_object_mut().unwrap().remove("TTL");
    }
    assert_eq!(t, e);
    assert_eq!(t["keys"], json!([b64("leased")]));
    assert_eq!(t["grantedTTL"], "60");
    // Keep-alive: a stream, one result line per request.
    let ((ecode, e), (code, t)) = p.both("lease/keepalive", json!({"ID": 1000}));
    assert_eq!((code, ecode), (200, 200));
    assert_eq!(t, e);
    assert_eq!(t["result"]["TTL"], "60");
    let unknown = p.same("lease/keepalive", json!({"ID": 4242}));
    assert_eq!(
        unknown["result"]["TTL"],
        Value::Null,
        "TTL 0: the lease is gone"
    );
    p.same("lease/revoke", json!({"ID": 1000}));
    let gone = p.same("kv/lease/revoke", json!({"ID": 1000}));
    assert_eq!(
        (gone["code"].clone(), gone["error"].clone()),
        (json!(5), json!("etcdserver: requested lease not found"))
    );
    let left = p.same("kv/range", json!({"key": b64("leased")}));
    assert_eq!(left["kvs"], Value::Null, "the key went with its lease");
    p.same("lease/timetolive", json!({"ID": 1000}));
}

/// A long-lived streaming POST, its chunks read line by line as they come.
struct Stream {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Stream {
    fn open(base: &str, path: &str, body: &Value) -> Stream {
        let mut child = Command::new("curl")
            .args(["-s", "-N", "--max-time", "30", "-X", "POST"])
            .arg(format!("{base}/v3/{path}"))
            .args(["--data-binary", &body.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Stream { child, lines }
    }

    fn next(&mut self) -> Value {
        let line = self.lines.next().expect("a chunk").unwrap();
        normal(parse(&line))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn e21_watch_is_a_chunked_stream_of_results_as_etcd_writes_it() {
    let p = Pair::start();
    p.same("kv/put", json!({"key": b64("w/0"), "value": b64("old")}));
    let create = json!({"create_request": {
        "key": b64("w/"), "range_end": b64("w0"), "prev_kv": true, "start_revision": 2
    }});
    let mut e = Stream::open(&p.etcd, "watch", &create);
    let mut t = Stream::open(&p.tenure, "watch", &create);
    let created = t.next();
    assert_eq!(created, e.next());
    assert_eq!(created["result"]["created"], true);
    // The history from revision 2.
    let replay = t.next();
    assert_eq!(replay, e.next());
    assert_eq!(replay["result"]["events"][0]["kv"]["value"], b64("old"));
    p.same("kv/put", json!({"key": b64("w/1"), "value": b64("new")}));
    p.same("kv/deleterange", json!({"key": b64("w/0")}));
    let put = t.next();
    assert_eq!(put, e.next());
    let delete = t.next();
    assert_eq!(delete, e.next());
    assert_eq!(delete["result"]["events"][0]["type"], "DELETE");
    assert_eq!(
        delete["result"]["events"][0]["prev_kv"]["value"],
        b64("old")
    );
}

#[test]
fn e21_lock_and_election_answer_as_etcd() {
    let p = Pair::start();
    p.same("lease/grant", json!({"TTL": 60, "ID": 1001}));
    let lock = p.same("lock/lock", json!({"name": b64("lk"), "lease": 1001}));
    let key = lock["key"].as_str().unwrap().to_string();
    assert_eq!(key, b64("lk/3e9"));
    p.same("lock/unlock", json!({"key": key}));
    let campaign = p.same(
        "election/campaign",
        json!({"name": b64("el"), "lease": 1001, "value": b64("v1")}),
    );
    let leader = campaign["leader"].clone();
    assert_eq!(leader["key"], b64("el/3e9"));
    let mut e = Stream::open(&p.etcd, "election/observe", &json!({"name": b64("el")}));
    let mut t = Stream::open(&p.tenure, "election/observe", &json!({"name": b64("el")}));
    let first = t.next();
    assert_eq!(first, e.next());
    assert_eq!(first["result"]["kv"]["value"], b64("v1"));
    p.same(
        "election/proclaim",
        json!({"leader": leader, "value": b64("v2")}),
    );
    let now = p.same("election/leader", json!({"name": b64("el")}));
    assert_eq!(now["kv"]["value"], b64("v2"));
    assert_eq!(t.next(), e.next(), "the observer sees the proclamation");
    p.same("election/resign", json!({"leader": leader}));
    let none = p.same("election/leader", json!({"name": b64("el")}));
    assert_eq!(
        (none["code"].clone(), none["error"].clone()),
        (json!(2), json!("election: no leader"))
    );
}

#[test]
fn e21_maintenance_status_answers_etcds_fields() {
    let p = Pair::start();
    let ((ecode, e), (code, t)) = p.both("maintenance/status", json!({}));
    assert_eq!((code, ecode), (200, 200));
    for key in [
        "header",
        "version",
        "dbSize",
        "leader",
        "raftIndex",
        "raftTerm",
        "dbSizeInUse",
    ] {
        assert!(e.get(key).is_some(), "etcd writes {key}: {e}");
        assert!(t.get(key).is_some(), "tenure writes {key}: {t}");
    }
    assert_eq!(t["version"], tenure_server::ETCD_API_VERSION);
}

#[test]
fn e21_bodies_and_streamed_requests_are_bounded() {
    let (_d, file) = temp_db();
    let s = Server::start(&file, &["--max-request-bytes", "1024"]);
    let url = s.url();
    // Above the gRPC limit but within the gateway's: the service refuses it, as over gRPC.
    let big = json!({"key": b64("k"), "value": "A".repeat(4096)}).to_string();
    let (code, body) = post(&url, "kv/put", &big);
    let v = parse(&body);
    assert_eq!(
        (code, v["code"].clone(), v["message"].clone()),
        (400, json!(3), json!("etcdserver: request is too large")),
        "{v}"
    );
    // Above the gateway's bound (twice the gRPC limit): refused before it is decoded.
    let huge_path = s.child.id().to_string();
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join(huge_path);
    let limit = 1024 + 512 * 1024;
    std::fs::write(
        &huge,
        json!({"key": b64("k"), "value": "A".repeat(3 * limit)}).to_string(),
    )
    .unwrap();
    let out = Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", "-X", "POST"])
        .arg(format!("{url}/v3/kv/put"))
        .arg("--data-binary")
        .arg(format!("@{}", huge.display()))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    assert_eq!(code, "429", "{body}");
    assert_eq!(parse(body)["code"], 8);
    // A streamed request past the bound ends the sending side: the keep-alives before it are
    // answered, the stream ends, and the server serves on.
    let (_, grant) = post(
        &url,
        "lease/grant",
        &json!({"TTL": 60, "ID": 7}).to_string(),
    );
    assert_eq!(parse(&grant)["ID"], "7");
    let mut stream = format!("{}{}", json!({"ID": 7}), json!({"ID": 7}));
    stream.push_str(&format!("{{\"ID\":\"{}", "7".repeat(3 * limit)));
    std::fs::write(&huge, stream).unwrap();
    let out = Command::new("curl")
        .args(["-s", "--max-time", "20", "-X", "POST"])
        .arg(format!("{url}/v3/lease/keepalive"))
        .arg("--data-binary")
        .arg(format!("@{}", huge.display()))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let results: Vec<Value> = text.lines().map(parse).collect();
    assert_eq!(results.len(), 2, "{text}");
    assert!(results.iter().all(|r| r["result"]["TTL"] == "60"), "{text}");
    let (code, _) = post(&url, "kv/range", &json!({"key": b64("k")}).to_string());
    assert_eq!(code, 200);
}
