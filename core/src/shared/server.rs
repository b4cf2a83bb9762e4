//! The owner's socket (SPEC P3, P7): etcd's v3 services (`etcd/serve`) and a Status-and-Alarm
//! Maintenance over the owner's engine, on a unix socket of mode 0600, served by a tokio
//! runtime on a thread of its own until `stop`.
//!
//! The socket is bound in a directory only this user can enter, given its mode there and
//! renamed into place, so it never exists with a wider mode; the rename replaces a stale socket
//! of a dead owner, and only the owner (who holds the lock file) ever binds or unlinks it.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use etcd_client::proto::{
    PbClusterServer, PbKvServer, PbLeaseServer, PbMaintenanceServer, PbWatchServer,
};
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::Server;

use super::maintenance::Maintenance;
use super::socket_path::fallback_dir;
use crate::error::{Error, Result};
use crate::etcd::serve::convert::Ids;
use crate::etcd::serve::coordination::electionpb::election_server::ElectionServer;
use crate::etcd::serve::coordination::lockpb::lock_server::LockServer;
use crate::etcd::serve::coordination::{Elections, Lock};
use crate::etcd::serve::service::{Cluster, Ctx, Kv, Lease};
use crate::etcd::serve::watch::{Watch, MAX_WATCHES_PER_STREAM};
use crate::handle::Tenure;
use crate::wait::WaitPool;

/// The largest write request accepted (etcd's default `--max-request-bytes`, 1.5 MiB).
const MAX_REQUEST_BYTES: usize = 1536 * 1024;
/// gRPC framing allowed on top of it (as `tenure serve`).
const GRPC_OVERHEAD: usize = 512 * 1024;
/// How long requests in flight get to finish once the owner stops serving.
const DRAIN: Duration = Duration::from_secs(2);

/// A running socket server.
#[derive(Debug)]
pub(crate) struct SocketServer {
    socket: PathBuf,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

fn cannot(what: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::io(format!("shared mode: cannot {what}"), path, e)
}

/// Makes the fallback directory `/tmp/tenure-<uid>` (mode 0700) if `socket` is in it, and
/// refuses one that another user made or left open to others.
fn prepare_dir(socket: &Path, uid: u32) -> Result<()> {
    let dir = fallback_dir(uid);
    if socket.parent() != Some(dir.as_path()) {
        return Ok(());
    }
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let m = std::fs::symlink_metadata(&dir).map_err(|e| cannot("read", &dir, &e))?;
            if !m.is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
                return Err(Error::PermissionDenied(format!(
                    "{}: the socket directory must be a directory of user {uid} with mode 0700",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(e) => Err(cannot("create the socket directory", &dir, &e)),
    }
}

/// Binds `socket` with mode 0600 from the start (see the module docs), replacing whatever is
/// there. Must run inside the runtime.
fn bind(socket: &Path) -> Result<UnixListener> {
    let name = socket
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{}: not a socket path", socket.display())))?;
    let parent = socket.parent().unwrap_or(Path::new("."));
    let private = parent.join(format!(
        ".{}.bind-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(|e| cannot("create a directory beside the socket", &private, &e))?;
    let staged = private.join("s");
    let bound = UnixListener::bind(&staged)
        .map_err(|e| cannot("listen on", &staged, &e))
        .and_then(|l| {
            std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| cannot("set the mode of", &staged, &e))?;
            std::fs::rename(&staged, socket).map_err(|e| cannot("put in place", socket, &e))?;
            Ok(l)
        });
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&private);
    bound
}

impl SocketServer {
    /// Serves `db` (the owner's engine; `file` names it) on `socket`. Call only while owning the
    /// file: a stale socket there is replaced.
    pub(crate) fn start(db: Tenure, file: &Path, socket: &Path, uid: u32) -> Result<SocketServer> {
        prepare_dir(socket, uid)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tenure-shared")
            .enable_all()
            .build()
            .map_err(|e| Error::storage(format!("shared mode: cannot start the runtime: {e}")))?;
        let listener = {
            let _in = rt.enter();
            bind(socket)?
        };
        let pool = WaitPool::new("tenure-shared-wait")
            .map_err(|e| Error::storage(format!("shared mode: cannot start a thread: {e}")))?;
        let (stop, stopped) = watch::channel(false);
        let ctx = Arc::new(Ctx {
            db,
            ids: Ids::for_path(file),
            urls: vec![format!("unix://{}", socket.display())],
            max_request_bytes: MAX_REQUEST_BYTES,
            max_watches: MAX_WATCHES_PER_STREAM,
            shutdown: stopped.clone(),
            pool,
        });
        let thread = std::thread::Builder::new()
            .name("tenure-shared-serve".into())
            .spawn(move || {
                rt.block_on(serve(ctx, listener, stopped));
                rt.shutdown_timeout(DRAIN);
            })
            .map_err(|e| Error::storage(format!("shared mode: cannot start a thread: {e}")))?;
        Ok(SocketServer {
            socket: socket.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    /// Stops accepting, ends the long-lived streams, lets requests in flight finish (at most
    /// `DRAIN`), then removes the socket. Call while still owning the file. Idempotent.
    pub(crate) fn stop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn serve(ctx: Arc<Ctx>, listener: UnixListener, mut stopped: watch::Receiver<bool>) {
    let limit = MAX_REQUEST_BYTES + GRPC_OVERHEAD;
    let router = Server::builder()
        .add_service(PbKvServer::new(Kv(ctx.clone())).max_decoding_message_size(limit))
        .add_service(
            PbLeaseServer::new(Lease::binding_sessions(ctx.clone()))
                .max_decoding_message_size(limit),
        )
        .add_service(PbWatchServer::new(Watch(ctx.clone())).max_decoding_message_size(limit))
        .add_service(
            PbMaintenanceServer::new(Maintenance(ctx.clone())).max_decoding_message_size(limit),
        )
        .add_service(PbClusterServer::new(Cluster(ctx.clone())).max_decoding_message_size(limit))
        .add_service(LockServer::new(Lock(ctx.clone())).max_decoding_message_size(limit))
        .add_service(ElectionServer::new(Elections(ctx.clone())).max_decoding_message_size(limit));
    drop(ctx);
    let mut until = stopped.clone();
    let served =
        router.serve_with_incoming_shutdown(UnixListenerStream::new(listener), async move {
            let _ = until.wait_for(|s| *s).await;
        });
    // Once stopping, requests in flight get `DRAIN` to finish, then the owner closes anyway.
    let drained = async move {
        let _ = stopped.wait_for(|s| *s).await;
        tokio::time::sleep(DRAIN).await;
    };
    tokio::select! {
        r = served => {
            if let Err(e) = r {
                log::error!("shared mode: the socket server failed: {e}");
            }
        }
        () = drained => log::warn!("shared mode: requests still in flight after {DRAIN:?}; closing anyway"),
    }
}
