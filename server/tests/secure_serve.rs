//! SPEC E13/E14: `tenure serve` with TLS (etcd's flags), certificates reloaded on SIGHUP,
//! refusals that write nothing, and what it refuses to expose. Real clients: etcdctl, tenure's
//! own connect, and a bare rustls handshake to see which certificate is served.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::certs::Certs;
use common::{etcdctl, signal, temp_db, Server};
use tenure::{Error, Tenure, WatchOptions};
use tokio_rustls::rustls::crypto::ring::default_provider;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

fn tls_flags(c: &Certs, cert: &Path, key: &Path) -> Vec<String> {
    vec![
        format!("--cert-file={}", cert.display()),
        format!("--key-file={}", key.display()),
        format!("--trusted-ca-file={}", c.arg("ca.pem")),
        "--client-cert-auth".into(),
    ]
}

fn start_tls(c: &Certs, file: &Path, cert: &Path, key: &Path) -> Server {
    let flags = tls_flags(c, cert, key);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let s = Server::start(file, &flags);
    assert_eq!(s.scheme, "https");
    s
}

/// etcdctl against `s` with `flags` (CA, client certificate...).
fn ctl(s: &Server, flags: &[String], args: &[&str]) -> std::process::Output {
    let all: Vec<&str> = flags
        .iter()
        .map(String::as_str)
        .chain(["--command-timeout=3s", "--dial-timeout=3s"])
        .chain(args.iter().copied())
        .collect();
    etcdctl(&s.url(), &all, None)
}

fn connect(s: &Server, c: &Certs, client: Option<&str>) -> tenure::Result<Tenure> {
    let mut b = Tenure::builder()
        .endpoints([s.url()])
        .request_timeout(Duration::from_secs(3))
        .ca_file(c.path("ca.pem"));
    if let Some(name) = client {
        b = b.client_cert(
            c.path(&format!("{name}.pem")),
            c.path(&format!("{name}.key")),
        );
    }
    b.connect()
}

#[test]
fn e13_tls_serves_clients_with_a_certificate_and_refuses_the_rest_writing_nothing() {
    let c = Certs::generate();
    let (_dir, file) = temp_db();
    let s = start_tls(&c, &file, &c.path("server.pem"), &c.path("server.key"));

    let out = ctl(&s, &c.etcdctl_flags("client"), &["put", "k", "v"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = connect(&s, &c, Some("client")).unwrap();
    assert_eq!(db.get("k").unwrap().unwrap().value, b"v");
    let rev = db.revision().unwrap();

    // etcdctl without a client certificate, with an expired one, with one from another CA;
    // a plain-text etcdctl to the TLS port.
    let ca_only = vec![format!("--cacert={}", c.arg("ca.pem"))];
    for flags in [
        ca_only,
        c.etcdctl_flags("expired"),
        c.etcdctl_flags("stranger"),
    ] {
        let out = ctl(&s, &flags, &["put", "k", "refused"]);
        assert!(!out.status.success(), "{flags:?} got in");
    }
    let plain = etcdctl(
        &format!("http://{}", s.addr),
        &[
            "--command-timeout=3s",
            "--dial-timeout=3s",
            "put",
            "k",
            "plain",
        ],
        None,
    );
    assert!(!plain.status.success(), "a plain-text client got in");
    // tenure's connect, refused the same way: Unauthenticated, naming the endpoint.
    for client in [None, Some("expired"), Some("stranger")] {
        let e = connect(&s, &c, client).unwrap_err();
        assert!(matches!(e, Error::Unauthenticated(_)), "{client:?}: {e:?}");
        assert!(e.to_string().contains(&s.url()), "{e}");
    }
    let e = Tenure::builder()
        .endpoints([format!("http://{}", s.addr)])
        .request_timeout(Duration::from_secs(2))
        .connect()
        .unwrap_err();
    assert!(matches!(e, Error::Unauthenticated(_)), "{e:?}");
    assert!(e.to_string().contains("use https://"), "{e}");

    // Nothing was written and the server still serves.
    assert_eq!(db.revision().unwrap(), rev);
    assert_eq!(db.get("k").unwrap().unwrap().value, b"v");
    db.close().unwrap();
    assert_eq!(s.terminate().code(), Some(0));
}

/// The common name of the certificate a new TLS connection to `addr` is served.
fn served_name(c: &Certs, addr: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(c.path("ca.pem")).unwrap())
            .unwrap();
        let chain = vec![CertificateDer::from_pem_file(c.path("client.pem")).unwrap()];
        let key = PrivateKeyDer::from_pem_file(c.path("client.key")).unwrap();
        let config = ClientConfig::builder_with_provider(Arc::new(default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .unwrap();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .unwrap();
        let der = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
        ["tenure-1", "tenure-2"]
            .into_iter()
            .find(|cn| der.windows(cn.len()).any(|w| w == cn.as_bytes()))
            .unwrap_or("?")
            .to_string()
    })
}

#[test]
fn e13_sighup_reloads_the_certificate_for_new_connections_and_keeps_open_streams() {
    let c = Certs::generate();
    let (dir, file) = temp_db();
    let (cert, key) = (dir.path().join("live.pem"), dir.path().join("live.key"));
    std::fs::copy(c.path("server.pem"), &cert).unwrap();
    std::fs::copy(c.path("server.key"), &key).unwrap();
    let s = start_tls(&c, &file, &cert, &key);
    assert_eq!(served_name(&c, &s.addr), "tenure-1");

    // An open connection with a watch stream on it.
    let old = connect(&s, &c, Some("client")).unwrap();
    let prefix = WatchOptions {
        prefix: true,
        ..WatchOptions::default()
    };
    let mut w = old.watch("w/", prefix).unwrap();
    old.put("w/1", "before", None).unwrap();
    assert_eq!(
        w.recv_timeout(Duration::from_secs(20)).unwrap().kv.value,
        b"before"
    );

    std::fs::copy(c.path("server2.pem"), &cert).unwrap();
    std::fs::copy(c.path("server2.key"), &key).unwrap();
    signal(&s.child, "HUP");
    s.wait_log("SIGHUP: certificates reloaded");
    assert_eq!(
        served_name(&c, &s.addr),
        "tenure-2",
        "a new connection gets the new one"
    );

    // The old connection and its stream kept working; a new connection works too.
    let new = connect(&s, &c, Some("client")).unwrap();
    new.put("w/2", "after", None).unwrap();
    assert_eq!(
        w.recv_timeout(Duration::from_secs(20)).unwrap().kv.value,
        b"after"
    );
    old.put("w/3", "old", None).unwrap();
    assert_eq!(
        w.recv_timeout(Duration::from_secs(20)).unwrap().kv.value,
        b"old"
    );

    // A broken file on reload: the certificates in use stay.
    std::fs::write(&cert, "not a certificate").unwrap();
    signal(&s.child, "HUP");
    s.wait_log("SIGHUP: keeping the certificates in use");
    assert_eq!(served_name(&c, &s.addr), "tenure-2");
    drop(w);
    old.close().unwrap();
    new.close().unwrap();
    assert_eq!(s.terminate().code(), Some(0));
}

fn serve_fails(file: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(common::bin())
        .arg("serve")
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn e14_refused_starts_say_why_and_create_nothing() {
    let c = Certs::generate();
    let (_dir, file) = temp_db();
    // A TCP listener beyond loopback without TLS (refused before anything is bound).
    let (code, err) = serve_fails(&file, &["--listen", "0.0.0.0:0"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("without TLS") && err.contains("--insecure-listen"),
        "{err}"
    );
    // A certificate file that is not there, or not a certificate.
    let missing = c.path("missing.pem");
    let (code, err) = serve_fails(
        &file,
        &[
            "--listen",
            "127.0.0.1:0",
            &format!("--cert-file={}", missing.display()),
            &format!("--key-file={}", c.arg("server.key")),
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--cert-file") && err.contains("missing.pem"),
        "{err}"
    );
    let (code, err) = serve_fails(
        &file,
        &[
            "--listen",
            "127.0.0.1:0",
            &format!("--cert-file={}", c.arg("server.key")),
            &format!("--key-file={}", c.arg("server.key")),
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--cert-file"), "{err}");
    // --client-cert-auth without the CA of the clients: bad usage.
    let (code, err) = serve_fails(
        &file,
        &[
            &format!("--cert-file={}", c.arg("server.pem")),
            &format!("--key-file={}", c.arg("server.key")),
            "--client-cert-auth",
        ],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(!file.exists(), "a refused start created the database");
}

/// E13: with TLS configured, a `unix:` listener stays plain text beside the TLS TCP port: a
/// client without TLS options is served over the socket, and both see one database.
#[test]
fn e13_a_unix_listener_stays_plain_text_beside_a_tls_port() {
    let c = Certs::generate();
    let (dir, file) = temp_db();
    let sock = dir.path().join("serve.sock");
    let mut flags = tls_flags(&c, &c.path("server.pem"), &c.path("server.key"));
    flags.extend(["--listen".to_string(), format!("unix:{}", sock.display())]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let s = Server::start(&file, &flags);
    assert_eq!(s.scheme, "https", "the TCP listener serves TLS");
    let plain = Tenure::connect(&format!("unix:{}", sock.display())).unwrap();
    let rev = plain.put("k", "over the socket", None).unwrap();
    let tls = connect(&s, &c, Some("client")).unwrap();
    let kv = tls.get("k").unwrap().unwrap();
    assert_eq!(
        (kv.value, kv.mod_revision),
        (b"over the socket".to_vec(), rev)
    );
    drop((plain, tls));
    assert_eq!(s.terminate().code(), Some(0));
}

#[test]
fn e14_the_database_file_and_the_unix_socket_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, file) = temp_db();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let sock = dir.path().join("localhost:1");
    let s = Server::start(
        &file,
        &[
            "--listen",
            &format!("unix:{}", sock.display()),
            "--socket-mode",
            "660",
        ],
    );
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&sock), 0o660, "--socket-mode widens it");
    assert_eq!(s.terminate().code(), Some(0));
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains(".bind-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// E14 `--max-connections`: connections that never finish their TLS handshake hold slots of
/// the bound; while they hold them all, a real client is not served (its connection waits in
/// the backlog), and once one of them goes, it is.
#[test]
fn e14_max_connections_bounds_connections_and_handshakes_in_progress() {
    let c = Certs::generate();
    let (_dir, file) = temp_db();
    let mut flags = tls_flags(&c, &c.path("server.pem"), &c.path("server.key"));
    flags.push("--max-connections=2".into());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let s = Server::start(&file, &flags);
    // Accepted in the kernel's order: these two take both slots (each for up to the 10 s the
    // server gives a handshake), the client after them waits.
    let mut stalled: Vec<std::net::TcpStream> = (0..2)
        .map(|_| std::net::TcpStream::connect(&s.addr).unwrap())
        .collect();
    let blocked = Tenure::builder()
        .endpoints([s.url()])
        .request_timeout(Duration::from_secs(1))
        .ca_file(c.path("ca.pem"))
        .client_cert(c.path("client.pem"), c.path("client.key"))
        .connect();
    assert!(
        matches!(&blocked, Err(Error::Unavailable(_))),
        "{blocked:?}"
    );
    drop(stalled.pop());
    let db = connect(&s, &c, Some("client")).unwrap();
    db.put("k", "v", None).unwrap();
    assert_eq!(db.get("k").unwrap().unwrap().value, b"v");
    drop(stalled);
}
