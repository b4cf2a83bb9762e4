//! [`ConnectOptions`]: what only a connection takes (endpoints, deadline, TLS and user), apart
//! from the embedded engine's [`Builder`](crate::Builder).

use std::path::Path;
use std::time::Duration;

use super::{parse_endpoints, Credentials, Remote, DEFAULT_TIMEOUT};
use crate::error::Result;

/// Options of [`Tenure::connect`](crate::Tenure::connect) (feature `remote`); `connect` is on
/// [`ConnectOptions::connect`].
#[derive(Clone)]
pub struct ConnectOptions {
    endpoints: Vec<String>,
    request_timeout: Duration,
    credentials: Credentials,
    bind_sessions: bool,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Credentials stay out: a password must not reach a log.
        f.debug_struct("ConnectOptions")
            .field("endpoints", &self.endpoints)
            .field("request_timeout", &self.request_timeout)
            .field("bind_sessions", &self.bind_sessions)
            .finish_non_exhaustive()
    }
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            endpoints: Vec::new(),
            request_timeout: DEFAULT_TIMEOUT,
            credentials: Credentials::default(),
            bind_sessions: false,
        }
    }
}

impl ConnectOptions {
    /// The deadline of a call when none is set.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = DEFAULT_TIMEOUT;

    /// No endpoint yet, the default deadline, no TLS material, no user.
    pub fn new() -> ConnectOptions {
        ConnectOptions::default()
    }

    /// The etcd v3 endpoints to talk to: `http://HOST:PORT` or `https://HOST:PORT` (TLS) each
    /// (a string may hold several, comma-separated), or one `unix:PATH` (a
    /// `tenure serve --listen unix:PATH`).
    pub fn endpoints<S: AsRef<str>>(mut self, urls: impl IntoIterator<Item = S>) -> Self {
        self.endpoints = urls.into_iter().map(|u| u.as_ref().to_string()).collect();
        self
    }

    /// The deadline of every call, retries included. Default 5 s.
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// The CA bundle (PEM file) the server's certificate must chain to, for `https://`
    /// endpoints; without it, the system's roots (SPEC R4).
    pub fn ca_file(mut self, path: impl AsRef<Path>) -> Self {
        self.credentials.ca_file = Some(path.as_ref().to_path_buf());
        self
    }

    /// The client certificate and its private key (PEM files) presented to a server that
    /// requires one (mutual TLS, etcd's `--client-cert-auth`; SPEC R4).
    pub fn client_cert(mut self, cert: impl AsRef<Path>, key: impl AsRef<Path>) -> Self {
        self.credentials.cert_file = Some(cert.as_ref().to_path_buf());
        self.credentials.key_file = Some(key.as_ref().to_path_buf());
        self
    }

    /// The name the server's certificate must carry, instead of the endpoint's host (a server
    /// reached by IP address, or through a tunnel; SPEC R4).
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.credentials.server_name = Some(name.into());
        self
    }

    /// etcd's user name and password (a cluster with auth enabled): connecting authenticates,
    /// and a new token is fetched whenever the server says the old one expired (SPEC R5).
    pub fn user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials.user = Some(name.into());
        self.credentials.password = Some(password.into());
        self
    }

    /// Every TLS and credential option at once, replacing those set before (what a binding
    /// passes through); connecting refuses a pair given by half (SPEC R4, R5).
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// Shared mode's connections (SPEC P10): each session's keep-alive runs on a stream of its
    /// own marked as bound, so a server that binds sessions revokes the session's lease as
    /// soon as this process's connection closes under it (exit, kill, crash). Needs a `unix:`
    /// or `http://` endpoint. Off by default: over a network a blip must not revoke anyone's
    /// locks.
    #[doc(hidden)]
    pub fn bind_sessions(mut self, bind: bool) -> Self {
        self.bind_sessions = bind;
        self
    }

    /// The connection these options describe: checked, endpoints parsed, first call made.
    pub(crate) fn open_remote(&self) -> Result<Remote> {
        self.credentials.check()?;
        let endpoints = parse_endpoints(&self.endpoints, self.credentials.has_tls())?;
        Remote::connect(
            endpoints,
            self.request_timeout,
            &self.credentials,
            self.bind_sessions,
        )
    }
}
