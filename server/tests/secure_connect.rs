//! SPEC R4/R5: `connect` over TLS (mutual TLS included) and with etcd's user/password, against
//! a real etcd (Debian's etcd-server) on loopback random ports. One etcd per mode; each test
//! runs every check against it in turn. Certificates are made by the tests (common/certs.rs).

mod common;

use std::time::Duration;

use common::certs::Certs;
use common::{session, Etcd, EtcdTls, WAIT};
use tenure::sync::{Election, Mutex};
use tenure::{Builder, Error, Tenure};

/// A lock and an election (the S-line recipes) over `a` and `b`, two connections.
fn recipes_work(a: &Tenure, b: &Tenure, prefix: &str) {
    let (sa, sb) = (session(a, 10), session(b, 10));
    let lock = format!("{prefix}lock");
    let guard = Mutex::new(&sa, &lock).lock(WAIT).unwrap();
    assert!(matches!(
        Mutex::new(&sb, &lock).try_lock(),
        Err(Error::Locked { .. })
    ));
    guard.unlock().unwrap();
    Mutex::new(&sb, &lock).lock(WAIT).unwrap().unlock().unwrap();
    let chief = format!("{prefix}chief");
    let lead = Election::new(&sa, &chief).campaign("a", WAIT).unwrap();
    assert_eq!(Election::leader(b, &chief).unwrap().unwrap().value, b"a");
    lead.resign().unwrap();
    sa.close().unwrap();
    sb.close().unwrap();
}

/// `e` is `Unauthenticated`, names `url` and says `why`.
fn refused(e: Error, url: &str, why: &[&str]) {
    let msg = e.to_string();
    assert!(matches!(e, Error::Unauthenticated(_)), "{e:?}");
    assert!(msg.contains(url), "names the endpoint: {msg}");
    assert!(
        why.iter().any(|w| msg.contains(w)),
        "says why ({why:?}): {msg}"
    );
}

#[test]
fn r4_connect_over_mutual_tls_with_the_right_ca_and_certificate_only() {
    let certs = Certs::generate();
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start_tls(dir.path(), EtcdTls::mutual(&certs));
    let url = etcd.url();
    let base = || {
        Tenure::builder()
            .endpoints([&url])
            .request_timeout(Duration::from_secs(3))
    };
    let with = |b: Builder, ca: &str, client: &str| {
        b.ca_file(certs.path(ca)).client_cert(
            certs.path(&format!("{client}.pem")),
            certs.path(&format!("{client}.key")),
        )
    };

    let a = with(base(), "ca.pem", "client").connect().unwrap();
    let b = with(base(), "ca.pem", "client")
        .server_name("localhost")
        .connect()
        .unwrap();
    let rev = a.put("k", "v", None).unwrap();
    assert_eq!(b.get("k").unwrap().unwrap().mod_revision, rev);
    recipes_work(&a, &b, "");
    let before = a.revision().unwrap();

    // The server's certificate does not chain to the CA given, or to the system's roots.
    let e = with(base(), "other-ca.pem", "client")
        .connect()
        .unwrap_err();
    refused(e, &url, &["UnknownIssuer", "certificate"]);
    let e = base()
        .client_cert(certs.path("client.pem"), certs.path("client.key"))
        .connect()
        .unwrap_err();
    refused(e, &url, &["UnknownIssuer", "certificate"]);
    // The server's certificate is not for that name.
    let e = with(base(), "ca.pem", "client")
        .server_name("elsewhere.example")
        .connect()
        .unwrap_err();
    refused(e, &url, &["NotValidForName", "certificate"]);
    // No client certificate, an expired one, one from another CA: etcd refuses them.
    let e = base().ca_file(certs.path("ca.pem")).connect().unwrap_err();
    refused(e, &url, &["certificate", "alert"]);
    let e = with(base(), "ca.pem", "expired").connect().unwrap_err();
    refused(e, &url, &["certificate", "alert"]);
    let e = with(base(), "ca.pem", "stranger").connect().unwrap_err();
    refused(e, &url, &["certificate", "alert"]);
    // TLS options with a plain-text endpoint, or a missing file: bad input, said so.
    let plain = url.replace("https://", "http://");
    let e = Tenure::builder()
        .endpoints([&plain])
        .ca_file(certs.path("ca.pem"))
        .connect()
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = with(base(), "missing.pem", "client").connect().unwrap_err();
    assert!(e.to_string().contains("missing.pem"), "{e}");

    assert_eq!(
        a.revision().unwrap(),
        before,
        "no refused connection wrote anything"
    );
    a.close().unwrap();
    b.close().unwrap();
}

/// etcd with auth enabled: `root`, and `alice` whose role may only read and write `app/`.
/// Tokens live 1 s unused, so a renewal is needed after a pause.
fn etcd_with_auth(dir: &std::path::Path) -> Etcd {
    let etcd = Etcd::start_with(dir, &["--auth-token-ttl", "1"]);
    for args in [
        &["user", "add", "root:rootpw", "--interactive=false"][..],
        &["user", "grant-role", "root", "root"],
        &["role", "add", "app"],
        &[
            "role",
            "grant-permission",
            "app",
            "readwrite",
            "app/",
            "--prefix=true",
        ],
        &["user", "add", "alice:alicepw", "--interactive=false"],
        &["user", "grant-role", "alice", "app"],
        &["auth", "enable"],
    ] {
        etcd.ctl_ok(args);
    }
    etcd
}

#[test]
fn r5_connect_with_a_user_and_password_renews_its_token_and_is_refused_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = etcd_with_auth(dir.path());
    let url = etcd.url();
    let base = || {
        Tenure::builder()
            .endpoints([&url])
            .request_timeout(Duration::from_secs(3))
    };

    let a = base().user("alice", "alicepw").connect().unwrap();
    let b = base().user("alice", "alicepw").connect().unwrap();
    let rev = a.put("app/k", "v", None).unwrap();
    assert_eq!(b.get("app/k").unwrap().unwrap().mod_revision, rev);
    recipes_work(&a, &b, "app/");

    // Outside `app/`: authenticated, but not allowed.
    for e in [
        a.put("other/k", "v", None).unwrap_err(),
        a.get("other/k").unwrap_err(),
    ] {
        assert!(matches!(e, Error::PermissionDenied(_)), "{e:?}");
        assert!(e.to_string().contains(&url), "names the endpoint: {e}");
    }
    let root = base().user("root", "rootpw").connect().unwrap();
    assert!(
        root.get("other/k").unwrap().is_none(),
        "the refused put wrote nothing"
    );

    // The token expires unused after 1 s (etcd's --auth-token-ttl): the next call fetches a
    // new one instead of failing.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(a.get("app/k").unwrap().unwrap().mod_revision, rev);

    // A wrong password, an unknown user: connect fails. Without a user, connect succeeds (it
    // only asks for the server's status) and every call is refused.
    let anonymous = base().connect().unwrap();
    for e in [
        base().user("alice", "wrong").connect().unwrap_err(),
        base().user("mallory", "alicepw").connect().unwrap_err(),
        anonymous.get("app/k").unwrap_err(),
    ] {
        let msg = e.to_string();
        assert!(matches!(e, Error::Unauthenticated(_)), "{e:?}");
        assert!(msg.contains(&url), "names the endpoint: {msg}");
        assert!(
            msg.contains("authentication failed") || msg.contains("user name is empty"),
            "says why: {msg}"
        );
    }
    a.close().unwrap();
    b.close().unwrap();
    root.close().unwrap();
}
