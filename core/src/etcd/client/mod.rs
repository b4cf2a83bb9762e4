//! `Tenure::connect` (feature `remote`): the same handle over etcd's v3 gRPC API, to
//! `tenure serve` or an etcd cluster, through the `etcd-client` crate.
//!
//! Every call blocks the caller on a runtime this handle owns (one worker thread), under a
//! deadline (`request_timeout`, default 5 s). While the server is unreachable (a restart, a
//! shared-mode takeover) a call waits with a short backoff within that deadline: any call whose
//! request never reached the server, and calls that are safe to repeat (reads, renew, revoke,
//! time-to-live, watch creation) whatever happened; a write whose answer was lost is not sent
//! again, since it may have been applied. Watches resume by themselves where they were. The
//! recipes need nothing more: the `Backend` seam runs over these calls.
//!
//! Files: `endpoints` (parsing), `credentials` (TLS and user), `errors` (etcd-client's errors
//! through the one table), `convert` (etcd-client's types and tenure's), `calls` (deadlines),
//! `retry` (when a failed call is tried again), `keys`, `leases`, `watch` (and its resuming),
//! `diagnose` (why TLS refused a connection), `options` (ConnectOptions); this file: the
//! connection.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use etcd_client as etcd;

mod alarms;
mod bound;
mod calls;
mod convert;
mod credentials;
mod diagnose;
mod endpoints;
mod errors;
mod keys;
mod leases;
mod options;
mod retry;
mod watch;

pub(crate) use self::bound::{BoundStream, BOUND_SESSION_HEADER};
pub use self::credentials::Credentials;
pub(crate) use self::endpoints::parse_endpoints;
pub use self::options::ConnectOptions;

use self::diagnose::refusal;
use self::endpoints::unix_path;
use self::errors::{at_endpoints, map_err, unavailable};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::types::Stats;

/// The default deadline of one call.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

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
    clock: Arc<dyn Clock>,
    /// With `bind_sessions`: the channel sessions' keep-alive streams open on (`bound.rs`); for
    /// `unix:` the one the client uses, so they share its connection.
    bound_channel: Option<tonic::transport::Channel>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("endpoints", &self.endpoints)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// A channel over the Unix socket at `path`: its connector dials the socket (reconnecting
/// lazily, as the TCP channels do); handed to etcd-client as a raw channel.
fn unix_channel(path: &str, timeout: Duration) -> tonic::transport::Channel {
    let path = std::path::PathBuf::from(path);
    // The URI is never dialled (the connector is); it names the HTTP/2 authority only.
    tonic::transport::Endpoint::from_static("http://localhost")
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
        }))
}

/// The channel bound sessions' keep-alive streams open on (`bind_sessions`): the unix
/// channel itself, else a channel of its own to the first `http://` endpoint (TLS is refused:
/// binding is for a server on this host).
fn bound_channel(
    endpoints: &[String],
    unix: Option<&tonic::transport::Channel>,
    timeout: Duration,
) -> Result<tonic::transport::Channel> {
    if let Some(c) = unix {
        return Ok(c.clone());
    }
    let first = &endpoints[0];
    if !first.starts_with("http://") {
        return Err(Error::invalid(format!(
            "bind_sessions needs a unix: or http:// endpoint, not {first}"
        )));
    }
    let endpoint = tonic::transport::Endpoint::from_shared(first.clone())
        .map_err(|e| Error::invalid(format!("endpoint {first}: {e}")))?;
    Ok(endpoint
        .connect_timeout(timeout)
        .tcp_nodelay(true)
        .connect_lazy())
}

impl Remote {
    /// Connects to `endpoints` (already parsed), each call bounded by `timeout`; `bind`:
    /// sessions' keep-alive streams are bound to this process (`bound.rs`).
    pub(crate) fn connect(
        endpoints: Vec<String>,
        timeout: Duration,
        creds: &Credentials,
        bind: bool,
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
        // The channel is made on the runtime (tonic's lazy channel spawns its worker there).
        let unix = unix_path(&endpoints[0]).map(|path| {
            let _in_rt = rt.enter();
            unix_channel(path, timeout)
        });
        let bound_channel = match bind {
            true => {
                let _in_rt = rt.enter();
                Some(bound_channel(&endpoints, unix.as_ref(), timeout)?)
            }
            false => None,
        };
        let connected = rt
            .block_on(async {
                let connect = async {
                    match unix.clone() {
                        Some(channel) => {
                            let channel = etcd::Channel::Tonic(channel);
                            etcd::Client::from_channel(channel, Some(opts)).await
                        }
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
            clock: Arc::new(SystemClock::new()),
            bound_channel,
        };
        // Fail early on an unreachable server (or one that refuses us), as `open` fails on an
        // unusable file. Over TLS a third of the deadline is kept for the diagnosis: a server
        // that refuses our certificate after the handshake may reset the connection before
        // its alert is read, which looks like a broken pipe and is retried as one.
        let first_call = match r.endpoints.iter().any(|e| e.starts_with("https://")) {
            true => left() * 2 / 3,
            false => left(),
        };
        if let Err(e) = r.status_revision(Some(first_call)) {
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

    pub(super) fn seen(&self, h: Option<&etcd::ResponseHeader>) -> i64 {
        let rev = h.map_or(0, etcd::ResponseHeader::revision);
        self.revision.fetch_max(rev, Ordering::Relaxed);
        rev
    }

    pub(super) fn fetch_revision(&self) -> Result<i64> {
        self.status_revision(None)
    }

    /// The server's revision, asked within `limit` (at most the request timeout).
    fn status_revision(&self, limit: Option<Duration>) -> Result<i64> {
        // Status, not a read of some key: a user whose roles allow only a prefix may ask it.
        let s = self.call(true, limit, None, |mut c| async move { c.status().await })?;
        let rev = self.seen(s.header());
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
}
