//! `Tenure::connect` (feature `remote`): the same handle over etcd's v3 gRPC API, to
//! `tenure serve` or an etcd cluster, through the `etcd-client` crate.
//!
//! Every call blocks the caller on a runtime this handle owns (one worker thread), under a
//! deadline (`request_timeout`, default 5 s). Calls that are safe to repeat (reads, renew,
//! revoke, time-to-live, watch creation) are retried with backoff while the server is
//! unavailable, within that deadline; writes are not, since a lost reply may hide an applied
//! write. The recipes need nothing more: the `Backend` seam runs over these calls.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use etcd_client as etcd;

mod diagnose;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::kv::request::Refusal;
use crate::kv::txn::{Compare, CompareOp, CompareTarget, Op, OpResponse, Txn, TxnResponse};
use crate::kv::watch::{WatchFeed, WatchOptions, Watcher};
use crate::sync::RangeOptions;
use crate::types::{Event, EventKind, KeyValue, LeaseId, LeaseInfo, Stats};

/// The default deadline of one call.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts of a repeatable call while the server is unavailable (within its deadline).
const ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// An etcd v3 connection and the runtime that drives it.
pub(crate) struct Remote {
    /// `None` once closed. Calls hold the read lock while they run, so close waits for them
    /// (each is bounded by its deadline) before the runtime shuts down.
    rt: RwLock<Option<tokio::runtime::Runtime>>,
    client: etcd::Client,
    endpoints: Vec<String>,
    timeout: Duration,
    closed: AtomicBool,
    /// The highest store revision any response reported (what `revision()` returns when the
    /// server cannot be asked).
    revision: AtomicI64,
    /// Whether the server keeps past revisions (etcd, not tenure serve; from its status): then
    /// a read at a watch's start revision tells whether that start is compacted.
    keeps_history: AtomicBool,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("endpoints", &self.endpoints)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The socket path of a `unix:PATH` (or `unix://PATH`) endpoint, as `tenure serve --listen`
/// spells it.
fn unix_path(endpoint: &str) -> Option<&str> {
    let rest = endpoint.strip_prefix("unix:")?;
    Some(rest.strip_prefix("//").unwrap_or(rest))
}

/// Parses `http://h:p` or `https://h:p` (several, comma-separated) or one `unix:PATH` into
/// endpoints; TLS options (`tls`) need every endpoint to be `https://`.
pub(crate) fn parse_endpoints<S: AsRef<str>>(urls: &[S], tls: bool) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for url in urls {
        for e in url
            .as_ref()
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            if let Some(path) = unix_path(e) {
                if path.is_empty() {
                    return Err(Error::invalid(format!("{e}: expected unix:PATH")));
                }
                if tls {
                    return Err(Error::invalid(format!(
                        "{e}: a unix socket is plain text (its file mode guards it); TLS options \
                         need https:// endpoints"
                    )));
                }
                out.push(e.to_string());
                continue;
            }
            let rest = match (e.strip_prefix("http://"), e.strip_prefix("https://")) {
                (Some(_), _) if tls => {
                    return Err(Error::invalid(format!(
                        "{e}: a CA, client certificate or server name is given, so every \
                         endpoint must be https://"
                    )))
                }
                (Some(rest), _) | (_, Some(rest)) => rest,
                _ => {
                    return Err(Error::invalid(format!(
                        "{e}: expected http://HOST:PORT, https://HOST:PORT or unix:PATH"
                    )))
                }
            };
            if rest.is_empty() || rest.contains('/') {
                return Err(Error::invalid(format!("{e}: expected http(s)://HOST:PORT")));
            }
            out.push(e.to_string());
        }
    }
    if out.is_empty() {
        return Err(Error::invalid("connect needs at least one endpoint"));
    }
    if out.len() > 1 && out.iter().any(|e| unix_path(e).is_some()) {
        return Err(Error::invalid(format!(
            "{}: a unix socket is the only endpoint of a connection",
            out.join(",")
        )));
    }
    Ok(out)
}

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
    fn apply(
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

fn unavailable(e: impl std::fmt::Display) -> Error {
    Error::Unavailable(e.to_string())
}

/// `e` with the endpoints it concerns in front (connect's errors: which server refused whom).
fn at_endpoints(e: Error, endpoints: &str) -> Error {
    let at = |m: String| {
        if m.contains(endpoints) {
            m
        } else {
            format!("{endpoints}: {m}")
        }
    };
    match e {
        Error::Unauthenticated(m) => Error::Unauthenticated(at(m)),
        Error::PermissionDenied(m) => Error::PermissionDenied(at(m)),
        Error::Unavailable(m) => Error::Unavailable(at(m)),
        other => other,
    }
}

/// A connection failure `e` as `Unauthenticated` when an `https://` endpoint's TLS refuses us
/// (or we it), or an `http://` endpoint is a TLS port, with the reason; else `e`.
fn refusal(
    rt: &tokio::runtime::Runtime,
    e: Error,
    endpoints: &[String],
    creds: &Credentials,
    limit: Duration,
) -> Error {
    if !matches!(e, Error::Unavailable(_)) || limit.is_zero() {
        return e;
    }
    let until = Instant::now() + limit;
    for ep in endpoints {
        let left = until.saturating_duration_since(Instant::now());
        let why = rt.block_on(async {
            tokio::time::timeout(left, async {
                if ep.starts_with("https://") {
                    diagnose::tls_refusal(ep, creds).await
                } else if diagnose::speaks_tls(ep).await {
                    Some("the server speaks TLS there; use https://".to_string())
                } else {
                    None
                }
            })
            .await
        });
        if let Ok(Some(why)) = why {
            let e =
                tls_refused(&why).unwrap_or_else(|| Error::Unauthenticated(format!("TLS: {why}")));
            return at_endpoints(e, ep);
        }
    }
    e
}

/// `top` and the causes below `e`, innermost last: a TLS refusal hides several layers down.
fn chain(top: String, e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = top;
    let mut next = e.source();
    while let Some(s) = next {
        let m = s.to_string();
        if !out.contains(&m) {
            out = format!("{out}: {m}");
        }
        next = s.source();
    }
    out
}

/// Why TLS refused a connection, in the user's terms (`None`: not a TLS refusal; retrying
/// cannot fix one, only the right CA, certificate or name).
fn tls_hint(m: &str) -> Option<&'static str> {
    Some(if m.contains("UnknownIssuer") || m.contains("UnknownCA") {
        "the server's certificate is not signed by the CA given, nor by the system's roots if none is"
    } else if m.contains("NotValidForName") || m.contains("not valid for name") {
        "the server's certificate is not for this name; see the server name option"
    } else if m.contains("invalid peer certificate") {
        "the server's certificate is not acceptable"
    } else if m.contains("alert") || m.contains("after the TLS handshake") {
        "the server refused the client certificate: missing, expired, or not from a CA it trusts"
    } else if m.contains("InvalidContentType") || m.contains("corrupt message") {
        "the server does not speak TLS there; use http://"
    } else if m.contains("frame with invalid size") {
        // A TLS record read as an HTTP/2 frame.
        "the server speaks TLS there; use https://"
    } else {
        return None;
    })
}

/// `m` as an `Unauthenticated` TLS refusal, if it is one.
fn tls_refused(m: &str) -> Option<Error> {
    tls_hint(m).map(|h| Error::Unauthenticated(format!("TLS: {m}; {h}")))
}

/// etcd's errors as tenure's. `lease`: the lease the call was about, for lease errors.
fn map_err(e: etcd::Error, lease: Option<LeaseId>) -> Error {
    use tonic::Code;
    match e {
        etcd::Error::GRpcStatus(s) => {
            let msg = chain(s.message().to_string(), &s);
            let id = lease.unwrap_or(LeaseId::new(0));
            if msg.contains("lease not found") {
                Error::LeaseNotFound(id)
            } else if msg.contains("lease already exists") {
                Error::LeaseExists(id)
            } else if msg.contains("lease TTL") && msg.contains("too large") {
                Error::LeaseTtlTooLarge(Duration::ZERO)
            } else if msg.contains("compacted") {
                Error::Compacted {
                    revision: 0,
                    reason: msg,
                }
            } else if s.code() == Code::PermissionDenied
                // The lock and election services lose etcd's codes but keep its messages.
                || msg.contains("etcdserver: permission denied")
            {
                Error::PermissionDenied(msg)
            } else if s.code() == Code::Unauthenticated
                || msg.contains("authentication failed")
                || msg.contains("user name is empty")
                || msg.contains("invalid auth token")
            {
                Error::Unauthenticated(msg)
            } else if let Some(e) = tls_refused(&msg) {
                e
            } else {
                match s.code() {
                    Code::Unavailable
                    | Code::DeadlineExceeded
                    | Code::Cancelled
                    | Code::Unknown => Error::Unavailable(msg),
                    Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
                        Error::InvalidArgument(msg)
                    }
                    _ => Error::storage(format!("server: {msg}")),
                }
            }
        }
        etcd::Error::LeaseKeepAliveError(m) if m.contains("not found") => {
            Error::LeaseNotFound(lease.unwrap_or(LeaseId::new(0)))
        }
        etcd::Error::InvalidArgs(m) => Error::InvalidArgument(m),
        etcd::Error::InvalidUri(e) => Error::invalid(e.to_string()),
        etcd::Error::TransportError(e) => {
            let msg = chain(e.to_string(), &e);
            tls_refused(&msg).unwrap_or_else(|| unavailable(msg))
        }
        other => unavailable(chain(other.to_string(), &other)),
    }
}

fn kv(k: &etcd::KeyValue) -> KeyValue {
    KeyValue {
        key: k.key().to_vec(),
        value: k.value().to_vec(),
        create_revision: k.create_revision(),
        mod_revision: k.mod_revision(),
        version: k.version(),
        lease: (k.lease() != 0).then(|| LeaseId::new(k.lease())),
    }
}

fn secs(ttl: i64) -> Duration {
    Duration::from_secs(ttl.max(0) as u64)
}

/// A TTL in etcd's whole seconds, rounded up.
fn ttl_secs(ttl: Duration) -> Result<i64> {
    crate::limits::check_ttl(ttl)?;
    Ok(ttl.as_secs() as i64 + i64::from(ttl.subsec_nanos() > 0))
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::invalid("empty key"));
    }
    Ok(())
}

fn compare(c: &Compare) -> etcd::Compare {
    let op = match c.op {
        CompareOp::Equal => etcd::CompareOp::Equal,
        CompareOp::NotEqual => etcd::CompareOp::NotEqual,
        CompareOp::Less => etcd::CompareOp::Less,
        CompareOp::Greater => etcd::CompareOp::Greater,
    };
    let key = c.key.clone();
    match &c.target {
        CompareTarget::Value(v) => etcd::Compare::value(key, op, v.clone()),
        CompareTarget::Version(v) => etcd::Compare::version(key, op, *v),
        CompareTarget::CreateRevision(r) => etcd::Compare::create_revision(key, op, *r),
        CompareTarget::ModRevision(r) => etcd::Compare::mod_revision(key, op, *r),
        CompareTarget::Lease(l) => etcd::Compare::lease(key, op, *l),
    }
}

fn txn_op(op: &Op) -> etcd::TxnOp {
    match op {
        Op::Put { key, value, lease } => {
            let opts = lease.map(|l| etcd::PutOptions::new().with_lease(l.get()));
            etcd::TxnOp::put(key.clone(), value.clone(), opts)
        }
        Op::Get { key } => etcd::TxnOp::get(key.clone(), None),
        Op::Delete { key } => etcd::TxnOp::delete(key.clone(), None),
        Op::DeletePrefix { prefix } => etcd::TxnOp::delete(
            prefix.clone(),
            Some(etcd::DeleteOptions::new().with_prefix()),
        ),
        Op::Range { prefix, limit } => {
            let mut o = etcd::GetOptions::new().with_prefix();
            if let Some(n) = limit {
                o = o.with_limit(i64::try_from(*n).unwrap_or(i64::MAX));
            }
            etcd::TxnOp::get(prefix.clone(), Some(o))
        }
    }
}

fn op_response(op: &Op, r: &etcd::TxnOpResponse, revision: i64) -> OpResponse {
    match (op, r) {
        (Op::Get { .. }, etcd::TxnOpResponse::Get(g)) => OpResponse::Get(g.kvs().first().map(kv)),
        // etcd reads limit 0 as "no limit"; tenure's limit 0 is no key.
        (Op::Range { limit: Some(0), .. }, etcd::TxnOpResponse::Get(_)) => {
            OpResponse::Range(Vec::new())
        }
        (Op::Range { .. }, etcd::TxnOpResponse::Get(g)) => {
            OpResponse::Range(g.kvs().iter().map(kv).collect())
        }
        (Op::Delete { .. }, etcd::TxnOpResponse::Delete(d)) => OpResponse::Delete(d.deleted() > 0),
        (Op::DeletePrefix { .. }, etcd::TxnOpResponse::Delete(d)) => {
            OpResponse::DeletePrefix(d.deleted().max(0) as u64)
        }
        _ => OpResponse::Put { revision },
    }
}

fn event(e: &etcd::Event) -> Option<Event> {
    let kind = match e.event_type() {
        etcd::EventType::Put => EventKind::Put,
        etcd::EventType::Delete => EventKind::Delete,
    };
    Some(Event {
        kind,
        kv: kv(e.kv()?),
        prev_kv: e.prev_kv().map(kv),
    })
}

/// A client over the Unix socket at `path`: a tonic channel whose connector dials the socket
/// (reconnecting lazily, as the TCP channels do), handed to etcd-client as a raw channel.
async fn unix_client(
    path: &str,
    timeout: Duration,
    opts: etcd::ConnectOptions,
) -> std::result::Result<etcd::Client, etcd::Error> {
    let path = std::path::PathBuf::from(path);
    // The URI is never dialled (the connector is); it names the HTTP/2 authority only.
    let channel = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_timeout(timeout)
        .timeout(timeout)
        .http2_keep_alive_interval(Duration::from_secs(1))
        .keep_alive_timeout(timeout)
        .keep_alive_while_idle(true)
        .connect_with_connector_lazy(tower::service_fn(move |_: tonic::transport::Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }));
    etcd::Client::from_channel(etcd::Channel::Tonic(channel), Some(opts)).await
}

impl Remote {
    /// Connects to `endpoints` (already parsed), each call bounded by `timeout`.
    pub(crate) fn connect(
        endpoints: Vec<String>,
        timeout: Duration,
        creds: &Credentials,
    ) -> Result<Remote> {
        if timeout.is_zero() {
            return Err(Error::invalid("request timeout must be positive"));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("tenure-connect")
            .enable_all()
            .build()
            .map_err(|e| Error::storage(format!("cannot start the connect runtime: {e}")))?;
        let opts = etcd::ConnectOptions::new()
            .with_connect_timeout(timeout)
            .with_timeout(timeout)
            .with_keep_alive(Duration::from_secs(1), timeout);
        let opts = creds.apply(&endpoints, opts)?;
        // A diagnosis of a refused connection gets what is left of the deadline (none when the
        // deadline itself was the failure).
        let started = Instant::now();
        let left = || timeout.saturating_sub(started.elapsed());
        let names = endpoints.join(",");
        let named = |e: Error| at_endpoints(e, &names);
        let connected = rt
            .block_on(async {
                let connect = async {
                    match unix_path(&endpoints[0]) {
                        Some(path) => unix_client(path, timeout, opts).await,
                        None => etcd::Client::connect(&endpoints, Some(opts)).await,
                    }
                };
                tokio::time::timeout(timeout, connect).await
            })
            .map_err(|_| unavailable(format!("connecting to {names}")))
            .and_then(|c| c.map_err(|e| named(map_err(e, None))));
        let client = match connected {
            Ok(c) => c,
            Err(e) => return Err(refusal(&rt, e, &endpoints, creds, left())),
        };
        let r = Remote {
            rt: RwLock::new(Some(rt)),
            client,
            endpoints,
            timeout,
            closed: AtomicBool::new(false),
            revision: AtomicI64::new(0),
            keeps_history: AtomicBool::new(false),
            clock: Arc::new(SystemClock::new()),
        };
        // Fail early on an unreachable server (or one that refuses us), as `open` fails on an
        // unusable file.
        if let Err(e) = r.fetch_revision() {
            let e = named(e);
            let guard = r.rt.read().unwrap_or_else(|p| p.into_inner());
            return Err(match guard.as_ref() {
                Some(rt) => refusal(rt, e, &r.endpoints, creds, left()),
                None => e,
            });
        }
        Ok(r)
    }

    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Stops the runtime (ending keep-alive and watch tasks: watchers end with `Closed`).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let rt = self.rt.write().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(rt) = rt {
            rt.shutdown_background();
        }
    }

    fn seen(&self, h: Option<&etcd::ResponseHeader>) -> i64 {
        let rev = h.map_or(0, etcd::ResponseHeader::revision);
        self.revision.fetch_max(rev, Ordering::Relaxed);
        rev
    }

    /// Runs one call under the deadline (at most `limit`), retrying while the server is
    /// unavailable if `repeatable`.
    fn call<T, F, Fut>(
        &self,
        repeatable: bool,
        limit: Option<Duration>,
        lease: Option<LeaseId>,
        f: F,
    ) -> Result<T>
    where
        F: Fn(etcd::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd::Error>>,
    {
        let guard = self.rt.read().unwrap_or_else(|p| p.into_inner());
        let Some(rt) = guard.as_ref().filter(|_| !self.is_closed()) else {
            return Err(Error::Closed("(etcd connection)".into()));
        };
        let budget = limit.map_or(self.timeout, |l| l.min(self.timeout));
        let deadline = Instant::now() + budget;
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let call = f(self.client.clone());
            let out = rt.block_on(async { tokio::time::timeout(left, call).await });
            let err = match out {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => match map_err(e, lease) {
                    e @ (Error::PermissionDenied(_) | Error::Unauthenticated(_)) => {
                        at_endpoints(e, &self.endpoints.join(","))
                    }
                    e => e,
                },
                Err(_) => unavailable(format!(
                    "no answer from {} within {budget:?}",
                    self.endpoints.join(",")
                )),
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if !repeatable
                || !matches!(err, Error::Unavailable(_))
                || attempt >= ATTEMPTS
                || left <= backoff
            {
                return Err(err);
            }
            std::thread::sleep(backoff);
            backoff *= 2;
            attempt += 1;
        }
    }

    fn fetch_revision(&self) -> Result<i64> {
        // Status, not a read of some key: a user whose roles allow only a prefix may ask it.
        let s = self.call(true, None, None, |mut c| async move { c.status().await })?;
        let rev = self.seen(s.header());
        // tenure serve has no raft: it answers term 1 and raft index = revision, which no etcd
        // member does (its first election makes the term 2). Only etcd keeps past revisions.
        let serve = s.raft_term() <= 1 && s.raft_index() == u64::try_from(rev).unwrap_or(0);
        self.keeps_history.store(!serve, Ordering::Relaxed);
        Ok(rev)
    }

    pub(crate) fn revision(&self) -> Result<i64> {
        self.fetch_revision()
    }

    /// The server's revision, else the last one seen (unreachable or closed): for figures
    /// that never fail.
    pub(crate) fn revision_or_last(&self) -> i64 {
        self.fetch_revision()
            .unwrap_or_else(|_| self.revision.load(Ordering::Relaxed))
    }

    /// What the server can tell: the revision and the live keys and leases. The engine's
    /// counters (grants, commits, watchers...) stay 0.
    pub(crate) fn stats(&self) -> Stats {
        let keys = self.call(true, None, None, |mut c| async move {
            let all = etcd::GetOptions::new().with_all_keys().with_count_only();
            c.get(vec![0], Some(all)).await
        });
        let leases = self.call(true, None, None, |mut c| async move { c.leases().await });
        Stats {
            revision: keys
                .as_ref()
                .map_or_else(|_| self.revision_or_last(), |r| self.seen(r.header())),
            keys: keys.map_or(0, |r| r.count().max(0) as u64),
            leases: leases.map_or(0, |r| r.leases().len() as u64),
            ..Stats::default()
        }
    }

    // ---- keys ---------------------------------------------------------------------------------

    pub(crate) fn put(&self, key: &[u8], value: &[u8], lease: Option<LeaseId>) -> Result<i64> {
        check_key(key)?;
        let r = self.call(false, None, lease, |mut c| {
            let opts = lease.map(|l| etcd::PutOptions::new().with_lease(l.get()));
            async move { c.put(key, value, opts).await }
        })?;
        Ok(self.seen(r.header()))
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        // No key is empty: as the engine answers (etcd would refuse the request).
        if key.is_empty() {
            return Ok(None);
        }
        let r = self.call(
            true,
            None,
            None,
            |mut c| async move { c.get(key, None).await },
        )?;
        self.seen(r.header());
        Ok(r.kvs().first().map(kv))
    }

    /// Keys under `prefix` in key order (`order: None`) or as the recipes read them.
    pub(crate) fn range(
        &self,
        prefix: &[u8],
        limit: Option<usize>,
        order: Option<RangeOptions>,
    ) -> Result<Vec<KeyValue>> {
        let limit = order.map_or(limit, |o| o.limit);
        // etcd reads limit 0 as "no limit"; tenure's limit 0 is no key.
        if limit == Some(0) {
            return Ok(Vec::new());
        }
        let r = self.call(true, None, None, |mut c| {
            let mut o = etcd::GetOptions::new().with_prefix();
            if let Some(n) = limit {
                o = o.with_limit(i64::try_from(n).unwrap_or(i64::MAX));
            }
            if let Some(opts) = order {
                let dir = match opts.order {
                    crate::sync::CreateOrder::Oldest => etcd::SortOrder::Ascend,
                    crate::sync::CreateOrder::Newest => etcd::SortOrder::Descend,
                };
                o = o.with_sort(etcd::SortTarget::Create, dir);
                if let Some(max) = opts.max_create_revision {
                    o = o.with_max_create_revision(max);
                }
            }
            async move { c.get(prefix, Some(o)).await }
        })?;
        self.seen(r.header());
        Ok(r.kvs().iter().map(kv).collect())
    }

    /// Deletes `key` (or every key under it): how many.
    pub(crate) fn delete(&self, key: &[u8], prefix: bool) -> Result<u64> {
        if !prefix {
            check_key(key)?;
        }
        let r = self.call(false, None, None, |mut c| {
            let o = prefix.then(|| etcd::DeleteOptions::new().with_prefix());
            async move { c.delete(key, o).await }
        })?;
        self.seen(r.header());
        Ok(r.deleted().max(0) as u64)
    }

    pub(crate) fn txn(&self, txn: &Txn) -> Result<TxnResponse> {
        let req = etcd::Txn::new()
            .when(txn.compares.iter().map(compare).collect::<Vec<_>>())
            .and_then(txn.success.iter().map(txn_op).collect::<Vec<_>>())
            .or_else(txn.failure.iter().map(txn_op).collect::<Vec<_>>());
        let r = self
            .call(false, None, None, |mut c| {
                let req = req.clone();
                async move { c.txn(req).await }
            })
            .map_err(|e| self.name_missing_lease(e, txn))?;
        let revision = self.seen(r.header());
        let branch = if r.succeeded() {
            &txn.success
        } else {
            &txn.failure
        };
        let responses = branch
            .iter()
            .zip(r.op_responses().iter())
            .map(|(op, resp)| op_response(op, resp, revision))
            .collect();
        Ok(TxnResponse {
            succeeded: r.succeeded(),
            revision,
            responses,
        })
    }

    /// etcd's "lease not found" does not say which: the first lease of `txn` that is gone.
    fn name_missing_lease(&self, e: Error, txn: &Txn) -> Error {
        if !matches!(e, Error::LeaseNotFound(id) if id.get() == 0) {
            return e;
        }
        let leases = txn
            .success
            .iter()
            .chain(&txn.failure)
            .filter_map(|op| match op {
                Op::Put { lease, .. } => *lease,
                _ => None,
            });
        for id in leases {
            if let Err(Error::LeaseNotFound(_)) = self.time_to_live(id) {
                return Error::LeaseNotFound(id);
            }
        }
        e
    }

    /// Attaches `keys` to `id` (`attach`), or detaches those attached to it: a put that keeps
    /// the value (etcd's `ignore_value`). Attach is one txn, all or nothing: every key must
    /// have a value (etcd has no bare key names), else `Unsupported` naming the first without,
    /// as the txn itself saw them (its failure branch reads them: no second look that a
    /// concurrent writer could change). Detach is one conditional txn per key, so a key on
    /// another lease stays there.
    pub(crate) fn attach<K: AsRef<[u8]>>(
        &self,
        id: LeaseId,
        keys: &[K],
        attach: bool,
    ) -> Result<()> {
        self.time_to_live(id)?;
        keys.iter().try_for_each(|k| check_key(k.as_ref()))?;
        let put = |key: &[u8], lease: i64| {
            let o = etcd::PutOptions::new()
                .with_ignore_value()
                .with_lease(lease);
            etcd::TxnOp::put(key, Vec::new(), Some(o))
        };
        let mut reqs = Vec::new();
        if attach {
            let has_value = |k: &K| etcd::Compare::version(k.as_ref(), etcd::CompareOp::Greater, 0);
            let read = |k: &K| {
                etcd::TxnOp::get(k.as_ref(), Some(etcd::GetOptions::new().with_keys_only()))
            };
            reqs.push(
                etcd::Txn::new()
                    .when(keys.iter().map(has_value).collect::<Vec<_>>())
                    .and_then(
                        keys.iter()
                            .map(|k| put(k.as_ref(), id.get()))
                            .collect::<Vec<_>>(),
                    )
                    .or_else(keys.iter().map(read).collect::<Vec<_>>()),
            );
        } else {
            for key in keys {
                let key = key.as_ref();
                let when = etcd::Compare::lease(key, etcd::CompareOp::Equal, id.get());
                reqs.push(etcd::Txn::new().when([when]).and_then([put(key, 0)]));
            }
        }
        for req in reqs {
            let r = self.call(false, None, Some(id), |mut c| {
                let req = req.clone();
                async move { c.txn(req).await }
            })?;
            self.seen(r.header());
            if attach && !r.succeeded() {
                let missing = keys.iter().zip(r.op_responses()).find(
                    |(_, resp)| matches!(resp, etcd::TxnOpResponse::Get(g) if g.kvs().is_empty()),
                );
                let key = missing.map_or_else(
                    || String::from("a key"),
                    |(k, _)| String::from_utf8_lossy(k.as_ref()).into_owned(),
                );
                return Err(Error::Unsupported(format!(
                    "attach {key}: the key has no value; over connect only keys with a value \
                     can be attached (etcd has no bare key names)"
                )));
            }
        }
        Ok(())
    }

    pub(crate) fn watch(&self, key: &[u8], opts: &WatchOptions) -> Result<Watcher> {
        let mut o = etcd::WatchOptions::new();
        if opts.prefix {
            o = o.with_prefix();
        }
        if let Some(r) = opts.start_revision {
            if r <= 0 {
                return Err(Error::invalid(format!(
                    "watch start revision {r}: must be positive"
                )));
            }
            o = o.with_start_revision(r);
        }
        if opts.prev_kv {
            o = o.with_prev_key();
        }
        // The server's first answer says the watch exists (or why not): only then does a write
        // made after `watch` returns reach it, as with the embedded engine.
        let (mut stream, created) = self.call(true, None, None, |mut c| {
            let o = o.clone();
            async move {
                let mut stream = c.watch(key, Some(o)).await?;
                let created = stream.message().await?;
                Ok((stream, created))
            }
        })?;
        let created = created.ok_or_else(|| unavailable("the watch stream ended"))?;
        let start = opts.start_revision.unwrap_or(0);
        refused(&created, start)?;
        let mut early = created.events().to_vec();
        let current = created.header().map_or(0, etcd::ResponseHeader::revision);
        if start > 0 && start <= current {
            early.extend(self.past_start(&mut stream, key, start)?);
        }
        let (feed, watcher) = WatchFeed::new();
        for e in &early {
            if let Some(ev) = event(e) {
                feed.send(ev);
            }
        }
        let guard = self.rt.read().unwrap_or_else(|p| p.into_inner());
        let rt = guard
            .as_ref()
            .ok_or_else(|| Error::Closed("(etcd connection)".into()))?;
        rt.spawn(pump(stream, feed));
        Ok(watcher)
    }

    /// Whether a watch from `start` (at or below the server's revision when it created the
    /// watch) is compacted, decided before `watch` returns as the engine does. etcd
    /// creates such a watch at once and cancels it later (when it catches up), so a read at
    /// `start` answers instead. tenure serve refuses every read at a past revision, but it
    /// decides at creation: its cancel precedes its reply to a progress request. The events
    /// read meanwhile are returned, to be delivered first.
    fn past_start(
        &self,
        stream: &mut etcd::WatchStream,
        key: &[u8],
        start: i64,
    ) -> Result<Vec<etcd::Event>> {
        if self.keeps_history.load(Ordering::Relaxed) {
            let read = self.call(true, None, None, |mut c| async move {
                let o = etcd::GetOptions::new()
                    .with_revision(start)
                    .with_count_only();
                c.get(key, Some(o)).await
            });
            return match read {
                Ok(_) => Ok(Vec::new()),
                Err(Error::Compacted { .. }) => Err(compacted(start, None)),
                Err(e) => Err(e),
            };
        }
        // No history to read: the server's own outcome, fenced by a progress request.
        self.block(async move {
            stream
                .request_progress()
                .await
                .map_err(|e| map_err(e, None))?;
            let mut events = Vec::new();
            loop {
                let m = stream.message().await.map_err(|e| map_err(e, None))?;
                let m = m.ok_or_else(|| unavailable("the watch stream ended"))?;
                refused(&m, start)?;
                events.extend_from_slice(m.events());
                if m.watch_id() == -1 {
                    return Ok(events);
                }
            }
        })
    }

    /// Runs `f` once under the call deadline (for what cannot be repeated as a new request).
    fn block<T>(&self, f: impl Future<Output = Result<T>>) -> Result<T> {
        let guard = self.rt.read().unwrap_or_else(|p| p.into_inner());
        let Some(rt) = guard.as_ref().filter(|_| !self.is_closed()) else {
            return Err(Error::Closed("(etcd connection)".into()));
        };
        rt.block_on(async { tokio::time::timeout(self.timeout, f).await })
            .unwrap_or_else(|_| {
                Err(unavailable(format!(
                    "no answer from {} within {:?}",
                    self.endpoints.join(","),
                    self.timeout
                )))
            })
    }

    /// etcd's Compact (not physical: it returns once the revision is compacted logically).
    pub(crate) fn compact(&self, revision: i64) -> Result<std::result::Result<i64, Refusal>> {
        let r = self.call(false, None, None, |mut c| async move {
            c.compact(revision, None).await
        });
        match r {
            Ok(r) => Ok(Ok(self.seen(r.header()))),
            Err(Error::Compacted { .. }) => Ok(Err(Refusal::Compacted)),
            Err(Error::InvalidArgument(m)) if m.contains("future revision") => {
                Ok(Err(Refusal::FutureRevision))
            }
            Err(e) => Err(e),
        }
    }

    // ---- leases -------------------------------------------------------------------------------

    pub(crate) fn grant(&self, id: Option<LeaseId>, ttl: Duration) -> Result<LeaseInfo> {
        let secs_ttl = ttl_secs(ttl)?;
        if id.is_some_and(|i| i.get() <= 0) {
            return Err(Error::invalid("lease ID must be positive"));
        }
        let r = self.call(false, None, id, |mut c| {
            let o = id.map(|i| etcd::LeaseGrantOptions::new().with_id(i.get()));
            async move { c.lease_grant(secs_ttl, o).await }
        })?;
        self.seen(r.header());
        if !r.error().is_empty() {
            return Err(Error::storage(format!("server: {}", r.error())));
        }
        Ok(LeaseInfo {
            id: LeaseId::new(r.id()),
            ttl: secs(r.ttl()),
            remaining: Some(secs(r.ttl())),
            keys: Vec::new(),
        })
    }

    pub(crate) fn revoke(&self, id: LeaseId) -> Result<()> {
        let r = self.call(true, None, Some(id), |mut c| async move {
            c.lease_revoke(id.get()).await
        })?;
        self.seen(r.header());
        Ok(())
    }

    /// One keep-alive round trip; its deadline is at most `limit`.
    pub(crate) fn renew(&self, id: LeaseId, limit: Option<Duration>) -> Result<Duration> {
        let ttl = self.call(true, limit, Some(id), |mut c| async move {
            let (mut keeper, mut stream) = c.lease_keep_alive(id.get()).await?;
            keeper.keep_alive().await?;
            Ok(stream.message().await?.map_or(0, |r| r.ttl()))
        })?;
        if ttl <= 0 {
            return Err(Error::LeaseNotFound(id));
        }
        Ok(secs(ttl))
    }

    pub(crate) fn time_to_live(&self, id: LeaseId) -> Result<LeaseInfo> {
        let r = self.call(true, None, Some(id), |mut c| async move {
            c.lease_time_to_live(
                id.get(),
                Some(etcd::LeaseTimeToLiveOptions::new().with_keys()),
            )
            .await
        })?;
        self.seen(r.header());
        if r.ttl() < 0 {
            return Err(Error::LeaseNotFound(id));
        }
        let mut keys = r.keys().to_vec();
        keys.sort();
        Ok(LeaseInfo {
            id,
            ttl: secs(r.granted_ttl()),
            remaining: Some(secs(r.ttl())),
            keys,
        })
    }

    pub(crate) fn leases(&self) -> Result<Vec<LeaseInfo>> {
        let r = self.call(true, None, None, |mut c| async move { c.leases().await })?;
        let mut out = Vec::new();
        for l in r.leases() {
            match self.time_to_live(LeaseId::new(l.id())) {
                Ok(info) => out.push(info),
                Err(Error::LeaseNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        out.sort_by_key(|l| l.remaining);
        Ok(out)
    }
}

/// The error a watch start at `start` gets when the server compacted it (`compact_revision`, if
/// it said).
fn compacted(start: i64, compact_revision: Option<i64>) -> Error {
    Error::Compacted {
        revision: start,
        reason: match compact_revision {
            Some(c) => format!("history before revision {c} was compacted on the server"),
            None => "the history from that revision was compacted on the server".into(),
        },
    }
}

/// The error of a watch response that cancels (or refuses) the watch from `start`, if it does.
fn refused(m: &etcd::WatchResponse, start: i64) -> Result<()> {
    if m.compact_revision() > 0 {
        return Err(compacted(start, Some(m.compact_revision())));
    }
    if m.canceled() {
        return Err(cancelled("watch refused by the server", m.cancel_reason()));
    }
    Ok(())
}

/// A watch the server cancelled, as the error of the one table: a refusal is not the network
/// (`Unavailable`), it says why (etcd's and tenure serve's reasons).
fn cancelled(what: &str, reason: &str) -> Error {
    let msg = format!("{what}: {reason}");
    if reason.contains("permission denied") {
        Error::PermissionDenied(msg)
    } else if reason.contains("not provided")
        || reason.contains("too many")
        || reason.contains("invalid")
    {
        Error::InvalidArgument(msg)
    } else if reason.is_empty() {
        // A cancel without a reason: the server let go of the watch (shutting down, say).
        unavailable(format!("{what} without a reason"))
    } else {
        Error::storage(format!("server: {msg}"))
    }
}

/// Moves an etcd watch stream's events into a watcher until either ends.
async fn pump(mut stream: etcd::WatchStream, feed: WatchFeed) {
    loop {
        let msg = match stream.message().await {
            Ok(Some(m)) => m,
            Ok(None) => return feed.fail(unavailable("the watch stream ended")),
            Err(e) => return feed.fail(map_err(e, None)),
        };
        if msg.compact_revision() > 0 {
            return feed.fail(Error::Compacted {
                revision: msg.compact_revision(),
                reason: "compacted on the server".into(),
            });
        }
        if msg.canceled() {
            return feed.fail(cancelled(
                "watch cancelled by the server",
                msg.cancel_reason(),
            ));
        }
        for e in msg.events() {
            if let Some(ev) = event(e) {
                if !feed.send(ev) {
                    return;
                }
            }
        }
        if feed.is_dropped() {
            return;
        }
    }
}
