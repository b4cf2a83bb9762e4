//! Certificates made by the tests themselves (never committed keys): a CA, a server
//! certificate for 127.0.0.1/localhost, client certificates (valid, expired, from another CA).
#![allow(dead_code)]

use std::path::PathBuf;

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

pub(crate) struct Certs {
    pub dir: tempfile::TempDir,
}

fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(p, key))
}

/// A leaf certificate and its key, PEM. `server`: for 127.0.0.1 and localhost.
fn leaf(cn: &str, server: bool, expired: bool, ca: &Issuer<'_, KeyPair>) -> (String, String) {
    let names = if server {
        vec!["localhost".to_string(), "127.0.0.1".to_string()]
    } else {
        Vec::new()
    };
    let mut p = CertificateParams::new(names).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    // etcd also dials itself with its server certificate, so that one is a client one too.
    p.extended_key_usages = if server {
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ]
    } else {
        vec![ExtendedKeyUsagePurpose::ClientAuth]
    };
    if expired {
        p.not_before = date_time_ymd(2000, 1, 1);
        p.not_after = date_time_ymd(2001, 1, 1);
    }
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, ca).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl Certs {
    /// `ca.pem`; `server.pem`/`server.key` and `server2.pem`/`server2.key` (CN `tenure-2`, for
    /// a reload); `client.pem`/`client.key`; `expired.pem`/`expired.key`; `other-ca.pem` and
    /// `stranger.pem`/`stranger.key` (a client certificate from that other CA).
    pub(crate) fn generate() -> Certs {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        let (ca_pem, issuer) = ca("tenure test CA");
        write("ca.pem", &ca_pem);
        let (other_pem, other) = ca("another CA");
        write("other-ca.pem", &other_pem);
        for (name, cn, server, expired, by) in [
            ("server", "tenure-1", true, false, &issuer),
            ("server2", "tenure-2", true, false, &issuer),
            ("client", "client", false, false, &issuer),
            ("expired", "client", false, true, &issuer),
            ("stranger", "client", false, false, &other),
        ] {
            let (cert, key) = leaf(cn, server, expired, by);
            write(&format!("{name}.pem"), &cert);
            write(&format!("{name}.key"), &key);
        }
        Certs { dir }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `path` as a string, for command lines.
    pub(crate) fn arg(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_string()
    }

    /// etcdctl's flags for the CA and the client certificate `name` (`client`, `expired`...).
    pub(crate) fn etcdctl_flags(&self, name: &str) -> Vec<String> {
        vec![
            format!("--cacert={}", self.arg("ca.pem")),
            format!("--cert={}", self.arg(&format!("{name}.pem"))),
            format!("--key={}", self.arg(&format!("{name}.key"))),
        ]
    }
}
