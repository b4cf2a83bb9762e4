//! `tenure serve` (SPEC E1, E8, E9): owns the file, binds every listener, serves until SIGTERM
//! or SIGINT, then stops accepting, ends the long-lived streams, lets in-flight requests finish,
//! checkpoints and closes.
//!
//! Threads: a multi-threaded tokio runtime for gRPC; engine calls that may wait for a commit run
//! on its blocking pool; one thread per watch stream (see `watch`); the engine's own committer
//! and expiry threads.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::proto::{
    PbClusterServer, PbKvServer, PbLeaseServer, PbMaintenanceServer, PbWatchServer,
};
use tenure::{Durability, Tenure};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

use crate::convert::Ids;
use crate::coordination::electionpb::election_server::ElectionServer;
use crate::coordination::lockpb::lock_server::LockServer;
use crate::coordination::{Elections, Lock};
use crate::maintenance::Maintenance;
use crate::service::{Cluster, Ctx, Kv, Lease};
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
    /// Octal mode of unix sockets
    #[arg(long, value_name = "MODE", default_value = "600")]
    socket_mode: String,
    /// immediate (fsync before every reply) or buffered:DURATION (e.g. buffered:10ms)
    #[arg(long, default_value = "immediate")]
    durability: String,
    /// Largest accepted put/txn request, in bytes (etcd's default: 1.5 MiB)
    #[arg(long, default_value_t = 1536 * 1024)]
    max_request_bytes: usize,
    /// Most watches one watch stream may hold (more are answered canceled)
    #[arg(long, default_value_t = crate::watch::MAX_WATCHES_PER_STREAM)]
    max_watches_per_stream: usize,
    /// error, warn, info, debug or trace
    #[arg(long, default_value = "info")]
    log_level: tracing::Level,
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
        let l = UnixListener::bind(&path)
            .map_err(|e| format!("cannot listen on unix:{}: {e}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("cannot set the mode of {}: {e}", path.display()))?;
        Ok(Listener::Unix(l, path))
    } else {
        let l = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let local = l.local_addr().map_err(|e| e.to_string())?;
        Ok(Listener::Tcp(l, format!("http://{local}")))
    }
}

pub(crate) fn run(args: Args) -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(args.log_level)
        .with_ansi(false)
        .init();
    let fail = |msg: String| {
        eprintln!("tenure serve: {msg}");
        ExitCode::from(1)
    };
    let durability = match durability(&args.durability) {
        Ok(d) => d,
        Err(m) => return fail(m),
    };
    let Ok(mode) = u32::from_str_radix(&args.socket_mode, 8) else {
        return fail(format!(
            "invalid --socket-mode {:?}: expected octal, e.g. 600",
            args.socket_mode
        ));
    };
    let db = match Tenure::builder()
        .path(&args.file)
        .durability(durability)
        .base_revision(1)
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
    let result = rt.block_on(serve(db.clone(), &args, mode));
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

async fn serve(db: Tenure, args: &Args, mode: u32) -> Result<(), String> {
    let mut listeners = Vec::new();
    for addr in &args.listen {
        listeners.push(bind(addr, mode).await?);
    }
    let urls = listeners
        .iter()
        .map(|l| match l {
            Listener::Tcp(_, url) => url.clone(),
            Listener::Unix(_, p) => format!("unix://{}", p.display()),
        })
        .collect::<Vec<_>>();
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctx = Arc::new(Ctx {
        ids: Ids::for_path(&args.file),
        db,
        path: args.file.clone(),
        urls: urls.clone(),
        max_request_bytes: args.max_request_bytes,
        max_watches: args.max_watches_per_stream,
        shutdown: stop_rx.clone(),
    });
    let limit = args.max_request_bytes.saturating_add(GRPC_OVERHEAD);
    let router = Server::builder()
        .tcp_nodelay(true)
        .add_service(PbKvServer::new(Kv(ctx.clone())).max_decoding_message_size(limit))
        .add_service(PbLeaseServer::new(Lease(ctx.clone())).max_decoding_message_size(limit))
        .add_service(PbWatchServer::new(Watch(ctx.clone())).max_decoding_message_size(limit))
        .add_service(
            PbMaintenanceServer::new(Maintenance(ctx.clone())).max_decoding_message_size(limit),
        )
        .add_service(PbClusterServer::new(Cluster(ctx.clone())).max_decoding_message_size(limit))
        .add_service(LockServer::new(Lock(ctx.clone())).max_decoding_message_size(limit))
        .add_service(ElectionServer::new(Elections(ctx.clone())).max_decoding_message_size(limit));
    let mut tasks = tokio::task::JoinSet::new();
    let mut sockets = Vec::new();
    for l in listeners {
        let router = router.clone();
        let mut stop = stop_rx.clone();
        let until = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        match l {
            Listener::Tcp(l, _) => {
                let incoming = TcpIncoming::from(l).with_nodelay(Some(true));
                tasks.spawn(
                    async move { router.serve_with_incoming_shutdown(incoming, until).await },
                );
            }
            Listener::Unix(l, path) => {
                sockets.push(path);
                let incoming = tokio_stream::wrappers::UnixListenerStream::new(l);
                tasks.spawn(
                    async move { router.serve_with_incoming_shutdown(incoming, until).await },
                );
            }
        }
    }
    tracing::info!(
        "serving {} on {} (etcd v3 API)",
        args.file.display(),
        urls.join(", ")
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
    let mut failed = None;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
        Some(r) = tasks.join_next() => {
            failed = Some(match r {
                Ok(Ok(())) => "a listener stopped".to_string(),
                Ok(Err(e)) => format!("listener failed: {e}"),
                Err(e) => format!("listener failed: {e}"),
            });
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
