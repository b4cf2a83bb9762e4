//! Connections that never speak cannot lock clients out (issue 29, item 2; SPEC E14, E16): 520
//! sockets that send nothing or half an HTTP/2 preface fill `--max-connections` (512), yet a
//! new client's put completes once `--connection-setup-timeout` has closed them; a client that
//! stops answering the server's keep-alive pings is disconnected. etcd (no connection bound)
//! is measured in the same run for comparison.
//!
//! `cargo test -p tenure-server --test hostile_connections -- --nocapture` prints the figures.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{etcdctl, temp_db, Etcd, Server};

/// Silent connections opened before the put: more than `--max-connections`' default, 512.
const SILENT: usize = 520;
/// The setup timeout the test runs the server with.
const SETUP: Duration = Duration::from_secs(2);
/// How much longer than `SETUP` the put may take on a loaded machine.
const SLACK: Duration = Duration::from_secs(10);
const WAIT: Duration = Duration::from_secs(30);

/// The HTTP/2 client preface's magic.
const MAGIC: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Opens `SILENT` connections to `addr`; every other one sends half the preface's magic.
fn silent(addr: &str) -> Vec<TcpStream> {
    (0..SILENT)
        .map(|i| {
            let mut s = TcpStream::connect(addr).unwrap();
            if i % 2 == 1 {
                s.write_all(&MAGIC[..MAGIC.len() / 2]).unwrap();
            }
            s
        })
        .collect()
}

/// Reads until the server closes `s` (EOF or reset), within `WAIT`; the bytes it sent.
fn until_closed(s: &mut TcpStream) -> usize {
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut got = 0;
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("the server did not close the connection: {e}"),
        }
    }
}

/// One `etcdctl put`, timed; it must succeed.
fn timed_put(endpoint: &str) -> Duration {
    let started = Instant::now();
    let out = etcdctl(
        endpoint,
        &[
            "--command-timeout=60s",
            "--dial-timeout=60s",
            "put",
            "k",
            "v",
        ],
        None,
    );
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "put on {endpoint}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

#[test]
fn e16_silent_connections_past_max_connections_are_closed_and_new_clients_served() {
    let (_dir, file) = temp_db();
    let setup = format!("{}s", SETUP.as_secs());
    let s = Server::start(&file, &["--connection-setup-timeout", &setup]);
    let opened = Instant::now();
    let mut sockets = silent(&s.addr);
    println!("opened {SILENT} in {:?}", opened.elapsed());
    let tenure = timed_put(&s.addr);

    let etcd_dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(etcd_dir.path());
    let etcd_sockets = silent(&etcd.addr);
    let etcd_took = timed_put(&etcd.addr);
    drop(etcd_sockets);

    println!(
        "put with {SILENT} silent connections open: tenure serve {tenure:?} \
         (--connection-setup-timeout {SETUP:?}), etcd {etcd_took:?}"
    );
    assert!(tenure < SETUP + SLACK, "the put took {tenure:?}");
    // Every silent connection was closed by the server (having been sent its SETTINGS).
    for sock in &mut sockets {
        until_closed(sock);
    }
    // And the server serves on.
    assert_eq!(s.ok(&["get", "k", "--print-value-only"]).trim(), "v");
}

#[test]
fn e16_a_client_that_does_not_answer_keepalive_pings_is_disconnected() {
    let (_dir, file) = temp_db();
    let s = Server::start(
        &file,
        &[
            "--grpc-keepalive-interval",
            "1s",
            "--grpc-keepalive-timeout",
            "1s",
        ],
    );
    let mut sock = TcpStream::connect(&s.addr).unwrap();
    // A whole preface (the magic and an empty SETTINGS frame), then nothing: no ping answered.
    sock.write_all(MAGIC).unwrap();
    sock.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).unwrap();
    let started = Instant::now();
    let sent = until_closed(&mut sock);
    let took = started.elapsed();
    println!("closed after {took:?}, having sent {sent} bytes (settings, pings)");
    assert!(sent > 0, "the server never spoke HTTP/2");
    assert!(took < WAIT, "closed after {took:?}");
    // Other clients are served.
    s.ok(&["put", "k", "v"]);
}

#[test]
fn e16_stalled_tls_handshakes_past_max_connections_are_closed_and_new_clients_served() {
    let (dir, file) = temp_db();
    let c = common::certs::Certs::generate();
    let setup = format!("{}s", SETUP.as_secs());
    let flags = [
        format!("--cert-file={}", c.arg("server.pem")),
        format!("--key-file={}", c.arg("server.key")),
        "--connection-setup-timeout".into(),
        setup,
        // Few slots, so the stalled handshakes fill them all.
        "--max-connections".into(),
        "8".into(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let s = Server::start(&file, &flags);
    assert_eq!(s.scheme, "https");
    // Sockets that start no handshake, and ones that stop half-way through a ClientHello.
    let mut stalled: Vec<TcpStream> = (0..16)
        .map(|i| {
            let mut sock = TcpStream::connect(&s.addr).unwrap();
            if i % 2 == 1 {
                sock.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
                    .unwrap();
            }
            sock
        })
        .collect();
    let started = Instant::now();
    let mut args = c.etcdctl_flags("client");
    args.extend([
        "--command-timeout=60s".into(),
        "put".into(),
        "k".into(),
        "v".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = etcdctl(&s.url(), &args, None);
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("put with 16 stalled TLS handshakes and 8 slots: {took:?}");
    assert!(took < SETUP + SLACK, "the put took {took:?}");
    for sock in &mut stalled {
        until_closed(sock);
    }
    drop(dir);
}
