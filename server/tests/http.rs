//! SPEC E18: HTTP/1.1 and HTTP/2 beside gRPC on the client port (TCP, unix, TLS) and on
//! `--listen-metrics-urls`: etcd's `/health`, `/version`, `/livez`, `/readyz`, and `/metrics`
//! whose figures move when they should. Checked with curl, etcdctl and etcd's own answers.

mod common;

use std::process::Command;

use common::{certs::Certs, temp_db, Etcd, Server};

/// curl's answer: status, HTTP version, body.
fn curl(args: &[&str]) -> (u32, String, String) {
    let out = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "20",
            "-w",
            "\n%{http_code} %{http_version}",
        ])
        .args(args)
        .output()
        .expect("curl is installed");
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, tail) = text.rsplit_once('\n').unwrap();
    let (code, version) = tail.split_once(' ').unwrap();
    (code.parse().unwrap(), version.to_string(), body.to_string())
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"))
}

/// The value of the sample `name` (with its labels, exactly as written) in a `/metrics` text.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map(|v| v.trim().parse().unwrap())
}

#[test]
fn e18_health_and_version_over_http1_and_http2_beside_grpc_on_the_client_port() {
    let (_dir, file) = temp_db();
    let s = Server::start(&file, &[]);
    let url = s.url();
    for proto in ["--http1.1", "--http2-prior-knowledge"] {
        let (code, version, body) = curl(&[proto, &format!("{url}/health")]);
        assert_eq!(
            (code, version.as_str()),
            (200, if proto == "--http1.1" { "1.1" } else { "2" })
        );
        assert_eq!(json(&body)["health"], "true", "{body}");
        let (code, _, body) = curl(&[proto, &format!("{url}/version")]);
        assert_eq!(code, 200);
        let v = json(&body);
        assert_eq!(v["etcdserver"], tenure_server::ETCD_API_VERSION);
        assert_eq!(v["etcdcluster"], tenure_server::ETCD_API_VERSION);
    }
    for path in ["livez", "readyz"] {
        let (code, _, body) = curl(&[&format!("{url}/{path}")]);
        assert_eq!((code, body.as_str()), (200, "ok"), "{path}");
    }
    let (code, _, body) = curl(&[&format!("{url}/nowhere")]);
    assert_eq!((code, body.as_str()), (404, "404 page not found\n"));
    // gRPC on the same port, between the HTTP/1.1 requests.
    s.ok(&["put", "k", "v"]);
    assert_eq!(s.ok(&["get", "k", "--print-value-only"]), "v\n");
    let out = s.etcdctl(&["endpoint", "health"]);
    let said = format!("{}{}", common::text(&out.stdout), common::text(&out.stderr));
    assert!(
        out.status.success() && said.contains("is healthy"),
        "{said}"
    );
}

#[test]
fn e18_health_and_version_answer_as_etcd_answers() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path());
    let (_d, file) = temp_db();
    let s = Server::start(&file, &[]);
    for path in ["health", "version"] {
        let (ecode, _, ebody) = curl(&[&format!("http://{}/{path}", etcd.addr)]);
        let (code, _, body) = curl(&[&format!("{}/{path}", s.url())]);
        assert_eq!(code, ecode, "{path}");
        let (e, t) = (json(&ebody), json(&body));
        let (e, t) = (e.as_object().unwrap(), t.as_object().unwrap());
        // etcd 3.4 has no "reason" yet; every field it writes, tenure writes.
        for key in e.keys() {
            assert!(
                t.contains_key(key),
                "{path}: no {key} in {body} (etcd: {ebody})"
            );
        }
        if path == "health" {
            assert_eq!(e["health"], t["health"]);
        }
    }
}

#[test]
fn e18_metrics_move_when_they_should() {
    let (_dir, file) = temp_db();
    let s = Server::start(&file, &[]);
    let metrics = || {
        let (code, _, body) = curl(&[&format!("{}/metrics", s.url())]);
        assert_eq!(code, 200);
        body
    };
    let put_ok = "grpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"etcdserverpb.KV\",grpc_method=\"Put\",grpc_code=\"OK\"}";
    let before = metrics();
    assert_eq!(sample(&before, "etcd_server_has_leader"), Some(1.0));
    assert_eq!(sample(&before, put_ok), None, "no put yet");
    let proposals = sample(&before, "etcd_server_proposals_committed_total").unwrap();
    let commits = sample(&before, "tenure_commit_duration_seconds_count").unwrap();
    s.ok(&["put", "a", "1"]);
    s.ok(&["put", "b", "2"]);
    let lease = s.ok(&["lease", "grant", "1"]);
    let id = lease.split_whitespace().nth(1).unwrap().to_string();
    // A refused call is counted with its code.
    assert!(!s.etcdctl(&["lease", "revoke", "abc123"]).status.success());
    let after = metrics();
    assert_eq!(sample(&after, put_ok), Some(2.0));
    assert_eq!(
        sample(&after, "etcd_server_proposals_committed_total").unwrap(),
        proposals + 2.0,
        "two puts, two revisions"
    );
    assert_eq!(sample(&after, "etcd_debugging_mvcc_keys_total"), Some(2.0));
    assert!(sample(&after, "tenure_commit_duration_seconds_count").unwrap() >= commits + 3.0);
    assert_eq!(sample(&after, "tenure_leases"), Some(1.0));
    assert_eq!(
        sample(&after, "etcd_debugging_lease_granted_total"),
        Some(1.0)
    );
    assert_eq!(
        sample(&after, "grpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"etcdserverpb.Lease\",grpc_method=\"LeaseRevoke\",grpc_code=\"NotFound\"}"),
        Some(1.0),
        "{after}"
    );
    assert!(sample(&after, "etcd_mvcc_db_total_size_in_bytes").unwrap() > 0.0);
    assert!(sample(&after, "process_resident_memory_bytes").unwrap() > 0.0);
    // The lease expires (1 s): its lateness lands in the histogram.
    assert_eq!(
        sample(&after, "tenure_expiry_lateness_seconds_count"),
        Some(0.0)
    );
    let deadline = std::time::Instant::now() + common::WAIT;
    loop {
        let m = metrics();
        if sample(&m, "tenure_expiry_lateness_seconds_count") == Some(1.0) {
            assert_eq!(
                sample(&m, "etcd_debugging_server_lease_expired_total"),
                Some(1.0)
            );
            assert_eq!(
                sample(&m, "tenure_expiry_lateness_seconds_bucket{le=\"+Inf\"}"),
                Some(1.0)
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "lease {id} never expired: {m}"
        );
        // Polling a server we do not drive: each round is one scrape.
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // A watch stream in flight is a gauge. It starts at revision 1, so it sees the put from the
    // history whenever its stream is set up.
    s.ok(&["put", "w", "x"]);
    let (mut watch, lines) = common::spawn_lines(&s.addr, &["watch", "w", "--rev", "1"]);
    lines
        .recv_timeout(common::WAIT)
        .expect("the watch saw the put");
    assert_eq!(
        sample(&metrics(), "etcd_debugging_mvcc_watch_stream_total"),
        Some(1.0)
    );
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn e18_the_metrics_port_serves_http_only_and_etcdctl_check_datascale_passes() {
    let (_dir, file) = temp_db();
    let port = common::free_port();
    let s = Server::start(
        &file,
        &["--listen-metrics-urls", &format!("http://127.0.0.1:{port}")],
    );
    s.wait_log(&format!("metrics and health on http://127.0.0.1:{port}"));
    let m = format!("http://127.0.0.1:{port}");
    let (code, _, body) = curl(&[&format!("{m}/health")]);
    assert_eq!((code, json(&body)["health"].clone()), (200, "true".into()));
    let (code, _, body) = curl(&[&format!("{m}/metrics")]);
    assert_eq!(code, 200);
    assert_eq!(sample(&body, "etcd_server_has_leader"), Some(1.0));
    // No gRPC there.
    let out = common::etcdctl(&m, &["get", "k", "--command-timeout=2s"], None);
    assert!(!out.status.success());
    // etcdctl reads process_resident_memory_bytes from the client port's /metrics.
    let out = s.etcdctl(&["check", "datascale", "--load", "s"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("PASS"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn e18_http_on_a_unix_socket_and_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("t.sock");
    let (_d, file) = temp_db();
    let s = Server::start(&file, &["--listen", &format!("unix:{}", sock.display())]);
    s.wait_log("unix://");
    let path = sock.to_str().unwrap();
    for proto in ["--http1.1", "--http2-prior-knowledge"] {
        let (code, _, body) = curl(&[proto, "--unix-socket", path, "http://localhost/health"]);
        assert_eq!(
            (code, json(&body)["health"].clone()),
            (200, "true".into()),
            "{proto}"
        );
    }
    drop(s);

    let certs = Certs::generate();
    let (_d2, file) = temp_db();
    let tls = Server::start(
        &file,
        &[
            "--cert-file",
            &certs.arg("server.pem"),
            "--key-file",
            &certs.arg("server.key"),
        ],
    );
    assert_eq!(tls.scheme, "https");
    for proto in ["--http1.1", "--http2"] {
        let (code, version, body) = curl(&[
            proto,
            "--cacert",
            &certs.arg("ca.pem"),
            &format!("{}/version", tls.url()),
        ]);
        assert_eq!(code, 200, "{proto}");
        assert_eq!(version, if proto == "--http1.1" { "1.1" } else { "2" });
        assert_eq!(json(&body)["etcdserver"], tenure_server::ETCD_API_VERSION);
    }
}
