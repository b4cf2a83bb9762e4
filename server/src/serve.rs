//! `tenure serve` (SPEC E1, E8, E9, E13, E14): owns the file, binds every listener (TCP with
//! TLS when given certificates), serves until SIGTERM or SIGINT, then stops accepting, ends the
//! long-lived streams, lets in-flight requests finish, checkpoints and closes. SIGHUP reloads
//! the certificates.
//!
//! Threads: a multi-threaded tokio runtime for gRPC; bounded requests are applied on its
//! workers and await their commit there without a thread (SPEC E22), other engine calls that
//! may wait for a commit run on its blocking pool; one wait-pool thread for every pending Lock and Campaign and every
//! election observer; watch streams are tasks (see `watch`); the engine's own committer
//! and expiry threads.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::proto::{
    PbClusterServer, PbKvServer, PbLeaseServer, PbMaintenanceServer, PbWatchServer,
};
use tenure::{AutoCompaction, Durability, Tenure, WaitPool};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tonic::transport::Server;

use crate::authority::LocalAuthority;
use crate::convert::Ids;
use crate::coordination::electionpb::election_server::ElectionServer;
use crate::coordination::lockpb::lock_server::LockServer;
use crate::coordination::{Elections, Lock};
use crate::maintenance::Maintenance;
use crate::max_connections;
use crate::service::{Cluster, Ctx, Kv, Lease};
use crate::tls::Tls;
use crate::watch::Watch;

/// gRPC framing overhead allowed on top of `--max-request-bytes` (as etcd does).
const GRPC_OVERHEAD: usize = 512 * 1024;
/// How long in-flight requests get to finish after SIGTERM before the server closes anyway.
const DRAIN: Duration = Duration::from_secs(5);

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The database file (created if missing)
    file: PathBuf,
    /// Where to listen: HOST:PORT (TCP) or unix:PATH; repeatable
    #[arg(long = "listen", value_name = "ADDR", default_value = "127.0.0.1:2379")]
    listen: Vec<String>,
    /// Octal mode of unix sockets (created owner-only)
    #[arg(long, value_name = "MODE", default_value = "600")]
    socket_mode: String,
    /// The server's TLS certificate (PEM, chain first): TCP listeners speak TLS; unix: sockets
    /// stay plain text (their file mode, --socket-mode, decides who connects)
    #[arg(long, value_name = "FILE", requires = "key_file")]
    cert_file: Option<PathBuf>,
    /// The private key of --cert-file (PEM)
    #[arg(long, value_name = "FILE", requires = "cert_file")]
    key_file: Option<PathBuf>,
    /// The CA bundle (PEM) that client certificates must chain to
    #[arg(long, value_name = "FILE", requires = "cert_file")]
    trusted_ca_file: Option<PathBuf>,
    /// Only clients with a certificate from --trusted-ca-file get in
    #[arg(long, requires = "trusted_ca_file")]
    client_cert_auth: bool,
    /// Allow a TCP listener on a non-loopback address without TLS (anyone who can reach it
    /// can take every lease and lock)
    #[arg(long)]
    insecure_listen: bool,
    /// immediate (fsync before every reply) or buffered:DURATION (e.g. buffered:10ms)
    #[arg(long, default_value = "immediate")]
    durability: String,
    /// Largest accepted put/txn request, in bytes (etcd's default: 1.5 MiB)
    #[arg(long, default_value_t = 1536 * 1024)]
    max_request_bytes: usize,
    /// Most client connections held at once over all listeners, TLS handshakes in progress
    /// included; at the bound new connections wait to be accepted until one closes
    #[arg(long, value_name = "N", default_value_t = crate::max_connections::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Most watches one watch stream may hold (more are answered canceled)
    #[arg(long, default_value_t = crate::watch::MAX_WATCHES_PER_STREAM)]
    max_watches_per_stream: usize,
    /// Bytes of undelivered events one watcher may have before it is canceled (it can resume
    /// from the revision it is told)
    #[arg(long, value_name = "BYTES", default_value_t = tenure::Builder::DEFAULT_WATCH_QUEUE_BYTES)]
    watch_queue_bytes: usize,
    /// Bytes of recent events kept for watches that start from a past revision
    #[arg(long, value_name = "BYTES", default_value_t = tenure::Builder::DEFAULT_WATCH_HISTORY_BYTES)]
    watch_history_bytes: usize,
    /// How --auto-compaction-retention is read: periodic (a duration) or revision (a count),
    /// as etcd's flag
    #[arg(long, value_name = "MODE", default_value = "periodic",
          value_parser = ["periodic", "revision"])]
    auto_compaction_mode: String,
    /// History kept (SPEC K12): periodic: a duration (1h, 30m, 10s; a bare number is hours, as
    /// etcd); revision: how many revisions; 0 turns compaction off. Default: the embedded
    /// default, the last 100000 revisions
    #[arg(long, value_name = "RETENTION")]
    auto_compaction_retention: Option<String>,
    /// Also serve /health, /livez, /readyz, /version and /metrics (HTTP/1.1, plain text) at
    /// URL: http://HOST:PORT or HOST:PORT; repeatable (the client port serves them anyway)
    #[arg(
        long = "listen-metrics-urls",
        value_name = "URL",
        value_delimiter = ','
    )]
    listen_metrics_urls: Vec<String>,
    /// The database file's space quota in bytes, as etcd's flag (SPEC E20): 0 is etcd's
    /// default, 2 GiB; a negative number turns the quota off. Past it, puts, txns that put
    /// and grants fail ("etcdserver: mvcc: database space exceeded") and a NOSPACE alarm is
    /// raised until disarmed (`etcdctl alarm disarm`, after compaction and defragmentation)
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    quota_backend_bytes: i64,
    /// error, warn, info, debug or trace
    #[arg(long, default_value = "info")]
    log_level: tracing::Level,
    #[command(flatten)]
    bounds: crate::bounds::Bounds,
}

/// etcd's default space quota (`DefaultQuotaBytes`), 2 GiB.
pub(crate) const DEFAULT_QUOTA_BYTES: u64 = 2 << 30;

/// `--quota-backend-bytes` as etcd reads it: 0 the default, negative none.
fn quota_bytes(flag: i64) -> Option<u64> {
    match flag {
        0 => Some(DEFAULT_QUOTA_BYTES),
        n if n < 0 => None,
        n => Some(n as u64),
    }
}

/// etcd's `--auto-compaction-mode` and `--auto-compaction-retention`, read as etcd reads them.
fn auto_compaction(mode: &str, retention: Option<&str>) -> Result<AutoCompaction, String> {
    let Some(r) = retention else {
        return Ok(AutoCompaction::DEFAULT);
    };
    let bad = || {
        format!(
            "invalid --auto-compaction-retention {r:?} for --auto-compaction-mode {mode}: \
             expected {}",
            if mode == "revision" {
                "a number of revisions"
            } else {
                "a duration such as 1h, 30m or 10s (a bare number is hours)"
            }
        )
    };
    if r == "0" {
        return Ok(AutoCompaction::Off);
    }
    if mode == "revision" {
        return r
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .map(AutoCompaction::Revisions)
            .ok_or_else(bad);
    }
    let d = if let Ok(hours) = r.parse::<u64>() {
        hours.checked_mul(3600).map(Duration::from_secs)
    } else if let Some(m) = r.strip_suffix('m').and_then(|n| n.parse::<u64>().ok()) {
        m.checked_mul(60).map(Duration::from_secs)
    } else if let Some(h) = r.strip_suffix('h').and_then(|n| n.parse::<u64>().ok()) {
        h.checked_mul(3600).map(Duration::from_secs)
    } else {
        parse_duration(r)
    };
    match d {
        Some(d) if !d.is_zero() && d <= tenure::MAX_DURATION => Ok(AutoCompaction::Periodic(d)),
        _ => Err(bad()),
    }
}

fn parse_duration(s: &str) -> Option<Duration> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = num.parse().ok()?;
    Some(match unit {
        "us" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        _ => return None,
    })
}

fn durability(s: &str) -> Result<Durability, String> {
    if s == "immediate" {
        return Ok(Durability::Immediate);
    }
    match s.strip_prefix("buffered:").and_then(parse_duration) {
        Some(d) if !d.is_zero() => Ok(Durability::Buffered(d)),
        _ => Err(format!(
            "invalid --durability {s:?}: expected immediate or buffered:DURATION (e.g. buffered:10ms)"
        )),
    }
}

enum Listener {
    Tcp(TcpListener, String),
    Unix(UnixListener, PathBuf),
}

/// Binds a unix socket at `path` that has `mode` from the start: it is made in a directory only
/// this user can enter, given its mode there, then linked into place.
fn bind_unix(path: &std::path::Path, mode: u32) -> Result<UnixListener, String> {
    use std::os::unix::fs::DirBuilderExt;
    let cannot = |e: std::io::Error| format!("cannot listen on unix:{}: {e}", path.display());
    let name = path
        .file_name()
        .ok_or_else(|| cannot(std::io::ErrorKind::InvalidInput.into()))?;
    let parent = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let private = parent.join(format!(
        ".{}.bind-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(cannot)?;
    let staged = private.join("s");
    let bound = UnixListener::bind(&staged).map_err(cannot).and_then(|l| {
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("cannot set the mode of {}: {e}", path.display()))?;
        // A link, not a rename: it fails instead of replacing a socket someone serves.
        std::fs::hard_link(&staged, path).map_err(cannot)?;
        Ok(l)
    });
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&private);
    bound
}

/// Refuses a TCP listener on an address other than loopback without TLS (E14): everyone who
/// can reach it could take every lease and lock.
fn check_exposure(args: &Args) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    if args.cert_file.is_some() || args.insecure_listen {
        return Ok(());
    }
    for addr in args.listen.iter().filter(|a| !a.starts_with("unix:")) {
        // An address that does not resolve is reported when binding.
        let Ok(ips) = addr.to_socket_addrs() else {
            continue;
        };
        if let Some(ip) = ips.map(|a| a.ip()).find(|ip| !ip.is_loopback()) {
            return Err(format!(
                "refusing to listen on {addr} ({ip}) without TLS: anyone who can reach it could \
                 read and write every key and take every lease and lock. Give --cert-file and \
                 --key-file (and --trusted-ca-file with --client-cert-auth so only your \
                 clients get in), listen on loopback or a unix: socket, or pass \
                 --insecure-listen if the network itself is trusted"
            ));
        }
    }
    Ok(())
}

async fn bind(addr: &str, mode: u32) -> Result<Listener, String> {
    if let Some(path) = addr.strip_prefix("unix:") {
        let path = PathBuf::from(path.strip_prefix("//").unwrap_or(path));
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            use std::os::unix::fs::FileTypeExt;
            // A socket left by a server that died: remove it unless someone still answers.
            if meta.file_type().is_socket()
                && std::os::unix::net::UnixStream::connect(&path).is_err()
            {
                let _ = std::fs::remove_file(&path);
            }
        }
        let l = bind_unix(&path, mode)?;
        Ok(Listener::Unix(l, path))
    } else {
        let l = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let local = l.local_addr().map_err(|e| e.to_string())?;
        Ok(Listener::Tcp(l, local.to_string()))
    }
}

pub(crate) fn run(args: Args) -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(args.log_level)
        .with_ansi(false)
        // A host that runs the command twice in one process (the Python wheel) keeps the
        // first subscriber instead of panicking.
        .try_init();
    let fail = |msg: String| {
        eprintln!("tenure serve: {msg}");
        ExitCode::from(1)
    };
    let durability = match durability(&args.durability) {
        Ok(d) => d,
        Err(m) => return fail(m),
    };
    let retention = match auto_compaction(
        &args.auto_compaction_mode,
        args.auto_compaction_retention.as_deref(),
    ) {
        Ok(r) => r,
        Err(m) => return fail(m),
    };
    let Ok(mode) = u32::from_str_radix(&args.socket_mode, 8) else {
        return fail(format!(
            "invalid --socket-mode {:?}: expected octal, e.g. 600",
            args.socket_mode
        ));
    };
    // Both before the file is opened: a refused start creates and changes nothing.
    if let Err(m) = check_exposure(&args) {
        return fail(m);
    }
    let tls = match (&args.cert_file, &args.key_file) {
        (Some(cert), Some(key)) => match Tls::load(crate::tls::Files {
            cert: cert.clone(),
            key: key.clone(),
            ca: args.trusted_ca_file.clone(),
            client_auth: args.client_cert_auth,
        }) {
            Ok(t) => Some(Arc::new(t)),
            Err(m) => return fail(m),
        },
        _ => None,
    };
    let db = match Tenure::builder()
        .path(&args.file)
        .durability(durability)
        .base_revision(1)
        .watch_queue_bytes(args.watch_queue_bytes)
        .watch_history_bytes(args.watch_history_bytes)
        .auto_compaction(retention)
        .quota_backend_bytes(quota_bytes(args.quota_backend_bytes))
        .member_id(Ids::for_path(&args.file).member)
        .open()
    {
        Ok(db) => db,
        Err(e) => return fail(format!("{}: {e}", args.file.display())),
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(format!("cannot start the runtime: {e}")),
    };
    let result = rt.block_on(serve(db.clone(), &args, mode, tls));
    // Streams and handlers hold engine handles; close checkpoints and releases the file (E9).
    rt.shutdown_timeout(DRAIN);
    let closed = db.close();
    match (result, closed) {
        (Ok(()), Ok(())) => {
            tracing::info!("closed {}", args.file.display());
            ExitCode::SUCCESS
        }
        (Err(m), _) => fail(m),
        (_, Err(e)) => fail(format!("{}: closing: {e}", args.file.display())),
    }
}

async fn serve(db: Tenure, args: &Args, mode: u32, tls: Option<Arc<Tls>>) -> Result<(), String> {
    let mut listeners = Vec::new();
    for addr in &args.listen {
        listeners.push(bind(addr, mode).await?);
    }
    let urls = listeners
        .iter()
        .map(|l| match l {
            Listener::Tcp(_, addr) if tls.is_some() => format!("https://{addr}"),
            Listener::Tcp(_, addr) => format!("http://{addr}"),
            Listener::Unix(_, p) => format!("unix://{}", p.display()),
        })
        .collect::<Vec<_>>();
    let (stop_tx, stop_rx) = watch::channel(false);
    let pool = WaitPool::new("tenure-wait").map_err(|e| format!("cannot start a thread: {e}"))?;
    let ctx = Arc::new(Ctx {
        ids: Ids::for_path(&args.file),
        db,
        urls: urls.clone(),
        max_request_bytes: args.max_request_bytes,
        max_watches: args.max_watches_per_stream,
        shutdown: stop_rx.clone(),
        pool,
    });
    let limit = args.max_request_bytes.saturating_add(GRPC_OVERHEAD);
    let metrics = Arc::new(crate::metrics::Metrics::new(ctx.db.clone()));
    let http = crate::http::Http {
        db: ctx.db.clone(),
        metrics: metrics.clone(),
    };
    let kv = PbKvServer::new(Kv(ctx.clone())).max_decoding_message_size(limit);
    let lease = PbLeaseServer::new(Lease::new(ctx.clone())).max_decoding_message_size(limit);
    let watch = PbWatchServer::new(Watch(ctx.clone())).max_decoding_message_size(limit);
    let maintenance = PbMaintenanceServer::new(Maintenance::new(ctx.clone(), &args.bounds))
        .max_decoding_message_size(limit);
    let cluster = PbClusterServer::new(Cluster(ctx.clone())).max_decoding_message_size(limit);
    let lock = LockServer::new(Lock(ctx.clone())).max_decoding_message_size(limit);
    let election = ElectionServer::new(Elections(ctx.clone())).max_decoding_message_size(limit);
    // The JSON gateway (E21) calls these same services, behind the same refusals.
    let services = tonic::service::Routes::new(kv.clone())
        .add_service(lease.clone())
        .add_service(watch.clone())
        .add_service(maintenance.clone())
        .add_service(cluster.clone())
        .add_service(lock.clone())
        .add_service(election.clone())
        .prepare();
    let gateway = crate::gateway::Gateway::new(
        tower_layer::Layer::layer(&crate::decode_refusals::DecodeRefusals, services),
        limit,
    );
    // HTTP/1.1 and HTTP/2 on every client listener (E18): the HTTP routes and the JSON
    // gateway, then gRPC's.
    let router = Server::builder()
        .tcp_nodelay(true)
        .http2_keepalive_interval(Some(args.bounds.grpc_keepalive_interval))
        .http2_keepalive_timeout(Some(args.bounds.grpc_keepalive_timeout))
        .accept_http1(true)
        // The metrics layer sees the statuses DecodeRefusals has rewritten (tonic stacks the
        // first layer outermost).
        .layer(crate::metrics_grpc::GrpcLayer(metrics.grpc.clone()))
        .layer(crate::decode_refusals::DecodeRefusals)
        .add_routes(
            crate::http::router(http.clone(), true)
                .merge(crate::gateway::router(gateway))
                .into(),
        )
        .add_service(kv)
        .add_service(lease)
        .add_service(watch)
        .add_service(maintenance)
        .add_service(cluster)
        .add_service(lock)
        .add_service(election);
    let mut tasks = tokio::task::JoinSet::new();
    let mut sockets = Vec::new();
    let slots =
        max_connections::Slots::new(args.max_connections, args.bounds.connection_setup_timeout);
    for l in listeners {
        let router = router.clone();
        let mut stop = stop_rx.clone();
        let until = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        match l {
            Listener::Tcp(l, _) => match &tls {
                Some(tls) => {
                    let incoming = crate::tls::incoming(l, tls.clone(), slots.clone());
                    tasks.spawn(async move {
                        router.serve_with_incoming_shutdown(incoming, until).await
                    });
                }
                None => {
                    let l = Arc::new(l);
                    let incoming = max_connections::incoming(slots.clone(), move || {
                        let l = l.clone();
                        async move {
                            let (s, _) = l.accept().await?;
                            let _ = s.set_nodelay(true);
                            Ok(s)
                        }
                    });
                    tasks.spawn(async move {
                        router.serve_with_incoming_shutdown(incoming, until).await
                    });
                }
            },
            Listener::Unix(l, path) => {
                sockets.push(path);
                let l = Arc::new(l);
                // Clients name the socket in `:authority`, which h2 refuses: rewritten below h2.
                let incoming = max_connections::incoming(slots.clone(), move || {
                    let l = l.clone();
                    async move { Ok(LocalAuthority::new(l.accept().await?.0)) }
                });
                tasks.spawn(
                    async move { router.serve_with_incoming_shutdown(incoming, until).await },
                );
            }
        }
    }
    let mut metrics_urls = Vec::new();
    for url in &args.listen_metrics_urls {
        let addr = url.strip_prefix("http://").unwrap_or(url);
        if addr.contains("://") {
            return Err(format!(
                "invalid --listen-metrics-urls {url:?}: expected http://HOST:PORT"
            ));
        }
        let l = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {url} for metrics: {e}"))?;
        let local = l.local_addr().map_err(|e| e.to_string())?;
        metrics_urls.push(format!("http://{local}"));
        let routes = crate::http::router(http.clone(), false);
        let mut stop = stop_rx.clone();
        let until = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        let incoming = max_connections::incoming(slots.clone(), {
            let l = Arc::new(l);
            move || {
                let l = l.clone();
                async move { Ok(l.accept().await?.0) }
            }
        });
        tasks.spawn(async move {
            Server::builder()
                .accept_http1(true)
                .add_routes(routes.into())
                .serve_with_incoming_shutdown(incoming, until)
                .await
        });
    }
    // Before "serving" is logged: whoever waits for that line may signal at once.
    use tokio::signal::unix::{signal, SignalKind};
    let listen = |kind: SignalKind, name: &str| {
        signal(kind).map_err(|e| format!("cannot handle {name}: {e}"))
    };
    let mut term = listen(SignalKind::terminate(), "SIGTERM")?;
    let mut int = listen(SignalKind::interrupt(), "SIGINT")?;
    let mut hup = listen(SignalKind::hangup(), "SIGHUP")?;
    tracing::info!(
        "serving {} on {} (etcd v3 API)",
        args.file.display(),
        urls.join(", ")
    );
    if !metrics_urls.is_empty() {
        tracing::info!("metrics and health on {}", metrics_urls.join(", "));
    }
    let mut failed = None;
    loop {
        tokio::select! {
            _ = term.recv() => {
                tracing::info!("SIGTERM: shutting down");
                break;
            }
            _ = int.recv() => {
                tracing::info!("SIGINT: shutting down");
                break;
            }
            _ = hup.recv() => match &tls {
                // New connections get the new certificates; open ones keep theirs (E13).
                Some(t) => match t.reload() {
                    Ok(()) => tracing::info!("SIGHUP: certificates reloaded"),
                    Err(m) => tracing::warn!("SIGHUP: keeping the certificates in use: {m}"),
                },
                None => tracing::info!("SIGHUP: no TLS, nothing to reload"),
            },
            Some(r) = tasks.join_next() => {
                failed = Some(match r {
                    Ok(Ok(())) => "a listener stopped".to_string(),
                    Ok(Err(e)) => format!("listener failed: {e}"),
                    Err(e) => format!("listener failed: {e}"),
                });
                break;
            }
        }
    }
    let _ = stop_tx.send(true);
    let drained =
        tokio::time::timeout(DRAIN, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!("in-flight requests did not finish within {DRAIN:?}; closing anyway");
    }
    for p in sockets {
        let _ = std::fs::remove_file(p);
    }
    match failed {
        Some(m) => Err(m),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn exposure(argv: &[&str]) -> Result<(), String> {
        let cli = Cli::try_parse_from(["serve", "db.tenure"].iter().chain(argv)).unwrap();
        check_exposure(&cli.args)
    }

    #[test]
    fn e14_only_loopback_and_unix_listen_without_tls() {
        for ok in [
            &[][..],
            &["--listen", "127.0.0.1:0"],
            &["--listen", "[::1]:0"],
            &["--listen", "localhost:0"],
            &["--listen", "unix:/run/tenure.sock"],
            &["--listen", "0.0.0.0:0", "--insecure-listen"],
            &[
                "--listen",
                "0.0.0.0:0",
                "--cert-file",
                "c.pem",
                "--key-file",
                "k.pem",
            ],
        ] {
            assert_eq!(exposure(ok), Ok(()), "{ok:?}");
        }
        for refused in [
            &["--listen", "0.0.0.0:0"][..],
            &["--listen", "127.0.0.1:0", "--listen", "[::]:0"],
        ] {
            let e = exposure(refused).unwrap_err();
            assert!(
                e.contains("without TLS") && e.contains("--insecure-listen"),
                "{e}"
            );
        }
    }
}
