//! TLS material and etcd's user for a connection (SPEC R4, R5).

use std::path::{Path, PathBuf};

use etcd_client as etcd;

use crate::error::{Error, Result};

/// How [`connect`](crate::Builder::connect) proves who it talks to and who it is: TLS material
/// (PEM files, read when connecting) and etcd's user name and password (SPEC R4, R5). Every
/// field is optional; the pairs (`cert_file` with `key_file`, `user` with `password`) go
/// together, which `connect` checks before it dials, so a binding passes its options through
/// as they came. Feature `remote`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The CA bundle the server's certificate must chain to (else the system's roots).
    pub ca_file: Option<PathBuf>,
    /// The client certificate, for servers that require one (mutual TLS); with `key_file`.
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key; with `cert_file`.
    pub key_file: Option<PathBuf>,
    /// The name the server's certificate must carry, instead of the endpoint's host.
    pub server_name: Option<String>,
    /// etcd's user (the `Authenticate` token, fetched again when it expires); with `password`.
    pub user: Option<String>,
    /// The user's password; with `user`.
    pub password: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("Credentials")
            .field("ca_file", &self.ca_file)
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .field("server_name", &self.server_name)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Whether a TLS option is set (then every endpoint must be `https://`).
    pub(crate) fn has_tls(&self) -> bool {
        self.ca_file.is_some()
            || self.cert_file.is_some()
            || self.key_file.is_some()
            || self.server_name.is_some()
    }

    /// The pairs are whole: both halves or neither (`InvalidArgument` naming them).
    pub(crate) fn check(&self) -> Result<()> {
        if self.cert_file.is_some() != self.key_file.is_some() {
            return Err(Error::invalid(
                "the client cert and key go together (cert_file and key_file): give both or \
                 neither",
            ));
        }
        if self.user.is_some() != self.password.is_some() {
            return Err(Error::invalid(
                "user and password go together: give both or neither",
            ));
        }
        Ok(())
    }

    /// The client certificate and its key, when both are given.
    pub(crate) fn identity(&self) -> Option<(&Path, &Path)> {
        Some((self.cert_file.as_deref()?, self.key_file.as_deref()?))
    }

    fn read(what: &str, path: &Path) -> Result<Vec<u8>> {
        std::fs::read(path).map_err(|e| Error::io(format!("cannot read the {what}"), path, &e))
    }

    /// The connect options these credentials add.
    pub(super) fn apply(
        &self,
        endpoints: &[String],
        mut opts: etcd::ConnectOptions,
    ) -> Result<etcd::ConnectOptions> {
        if endpoints.iter().any(|e| e.starts_with("https://")) {
            let mut tls = etcd::TlsOptions::new();
            tls = match &self.ca_file {
                Some(p) => {
                    tls.ca_certificate(etcd::Certificate::from_pem(Self::read("CA bundle", p)?))
                }
                None => tls.with_native_roots(),
            };
            if let Some((cert, key)) = self.identity() {
                let identity = etcd::Identity::from_pem(
                    Self::read("client certificate", cert)?,
                    Self::read("client key", key)?,
                );
                tls = tls.identity(identity);
            }
            if let Some(name) = &self.server_name {
                tls = tls.domain_name(name.clone());
            }
            opts = opts.with_tls(tls);
        }
        if let (Some(user), Some(password)) = (&self.user, &self.password) {
            opts = opts
                .with_user(user.clone(), password.clone())
                .with_auto_token_refresh(true);
        }
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pairs_go_together() {
        let cert_only = Credentials {
            cert_file: Some("c.pem".into()),
            ..Credentials::default()
        };
        assert!(
            matches!(cert_only.check(), Err(Error::InvalidArgument(m)) if m.contains("key_file"))
        );
        let user_only = Credentials {
            user: Some("alice".into()),
            ..Credentials::default()
        };
        assert!(
            matches!(user_only.check(), Err(Error::InvalidArgument(m)) if m.contains("password"))
        );
        let both = Credentials {
            cert_file: Some("c.pem".into()),
            key_file: Some("k.pem".into()),
            ..Credentials::default()
        };
        assert!(both.check().is_ok());
        assert_eq!(
            both.identity(),
            Some((Path::new("c.pem"), Path::new("k.pem")))
        );
        assert!(both.has_tls());
        assert!(!user_only.has_tls(), "a user alone is not TLS");
    }

    #[test]
    fn debug_never_shows_the_password() {
        let c = Credentials {
            user: Some("alice".into()),
            password: Some("s3cret".into()),
            ..Credentials::default()
        };
        let shown = format!("{c:?}");
        assert!(
            shown.contains("alice") && !shown.contains("s3cret"),
            "{shown}"
        );
    }

    #[test]
    fn a_missing_ca_file_is_a_storage_error_naming_it() {
        let c = Credentials {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..Credentials::default()
        };
        let e = c
            .apply(&["https://a:1".into()], etcd::ConnectOptions::new())
            .unwrap_err();
        assert!(
            matches!(&e, Error::Storage { path: Some(p), .. } if p.ends_with("ca.pem")),
            "{e:?}"
        );
        assert!(e.to_string().contains("CA bundle"), "{e}");
        // Plain endpoints read no TLS material.
        assert!(c
            .apply(&["http://a:1".into()], etcd::ConnectOptions::new())
            .is_ok());
    }
}
