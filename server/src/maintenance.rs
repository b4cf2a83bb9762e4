//! etcd's Maintenance service (SPEC E6, E11): Status and Alarm, Snapshot (the stream
//! `etcdctl snapshot save` expects), Hash and HashKV (SPEC D9's checksums), Defragment.
//!
//! Snapshot stream, as etcd sends it: the database file in chunks, each with the bytes still to
//! come in `remaining_bytes`, then one last message whose blob is the SHA-256 of everything
//! before it. `etcdctl snapshot save` appends every blob to its file and refuses a file whose
//! length is not a multiple of 512 plus 32, so the file streamed is whole pages.
//!
//! Bounds (SPEC E16): the streams in progress and the disk their copies hold
//! (`snapshot_budget.rs`); a stream is a task, not a thread, and ends when its client takes
//! nothing for `--snapshot-read-timeout`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context as TaskContext, Poll};
use std::time::Duration;

use etcd_client::proto::*;
use sha2::{Digest, Sha256};
use tenure::etcd::errors::EtcdError;
use tenure::etcd::serve::maintenance;
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::errors;
use crate::service::{blocking, BoxStream, Ctx};
use crate::snapshot_budget::SnapshotBudget;

/// Bytes per snapshot message, as etcd.
const CHUNK: usize = 32 * 1024;

#[derive(Clone)]
pub(crate) struct Maintenance {
    pub(crate) ctx: Arc<Ctx>,
    /// `--max-snapshots` and `--max-snapshot-disk-bytes`.
    pub(crate) snapshots: Arc<SnapshotBudget>,
    /// How long a Snapshot stream waits for its client to take a chunk before it ends (and
    /// gives back its copy and its share of the budget).
    pub(crate) read_timeout: Duration,
}

/// A Snapshot stream's chunks, then the error it ended with, if any: the task sending the
/// chunks ends with an error even while the client reads nothing (the channel is full).
struct SnapshotStream {
    chunks: mpsc::Receiver<PbSnapshotResponse>,
    ended: Option<oneshot::Receiver<Status>>,
}

impl Stream for SnapshotStream {
    type Item = Result<PbSnapshotResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        if let Some(chunk) = ready!(self.chunks.poll_recv(cx)) {
            return Poll::Ready(Some(Ok(chunk)));
        }
        let Some(ended) = self.ended.as_mut() else {
            return Poll::Ready(None);
        };
        let end = ready!(Pin::new(ended).poll(cx));
        self.ended = None;
        Poll::Ready(end.ok().map(Err))
    }
}

impl Maintenance {
    pub(crate) fn new(ctx: Arc<Ctx>, bounds: &crate::bounds::Bounds) -> Maintenance {
        Maintenance {
            ctx,
            snapshots: SnapshotBudget::new(bounds.max_snapshots, bounds.max_snapshot_disk_bytes),
            read_timeout: bounds.snapshot_read_timeout,
        }
    }

    /// Streams the unlinked copy `file` down `tx`, each chunk waiting at most `read_timeout` for
    /// the client; returns the error to end the stream with. Runs as a task: an unread stream
    /// holds no thread.
    async fn send_snapshot(
        ctx: &Ctx,
        file: std::fs::File,
        info: tenure::SnapshotInfo,
        tx: &mpsc::Sender<PbSnapshotResponse>,
        read_timeout: Duration,
    ) -> Result<(), Status> {
        let total = info.bytes;
        if !total.is_multiple_of(512) {
            return Err(Status::internal(format!(
                "etcdserver: snapshot of {total} bytes is not whole 512-byte sectors"
            )));
        }
        tracing::info!(revision = info.revision, bytes = total, "sending snapshot");
        let mut file = tokio::fs::File::from_std(file);
        let mut sha = Sha256::new();
        let mut sent = 0u64;
        let send = |resp| async move {
            match tokio::time::timeout(read_timeout, tx.send(resp)).await {
                Ok(Ok(())) => Ok(true),
                Ok(Err(_)) => Ok(false), // the client went away
                Err(_) => Err(errors::etcd(EtcdError::SnapshotStalled)),
            }
        };
        while sent < total {
            let mut buf = vec![0u8; CHUNK.min((total - sent) as usize)];
            file.read_exact(&mut buf)
                .await
                .map_err(|e| Status::internal(format!("etcdserver: {e}")))?;
            sha.update(&buf);
            sent += buf.len() as u64;
            let resp = PbSnapshotResponse {
                header: ctx.ids.header(info.revision),
                remaining_bytes: total - sent,
                blob: buf,
                version: maintenance::ETCD_API_VERSION.into(),
            };
            if !send(resp).await? {
                return Ok(());
            }
        }
        send(PbSnapshotResponse {
            header: ctx.ids.header(info.revision),
            remaining_bytes: 0,
            blob: sha.finalize().to_vec(),
            version: maintenance::ETCD_API_VERSION.into(),
        })
        .await?;
        Ok(())
    }
}

/// etcd's reply to a Maintenance call that a single member has no use for: the text of the
/// Go stub of a method that is not implemented.
fn unimplemented(method: &str) -> Status {
    Status::unimplemented(format!("method {method} not implemented"))
}

#[tonic::async_trait]
impl PbMaintenanceService for Maintenance {
    /// SPEC E20 (`tenure::etcd::serve::maintenance`, shared with a shared file's owner).
    async fn alarm(
        &self,
        req: Request<PbAlarmRequest>,
    ) -> Result<Response<PbAlarmResponse>, Status> {
        maintenance::alarm(&self.ctx, req.into_inner())
            .await
            .map(Response::new)
    }

    async fn status(
        &self,
        _req: Request<PbStatusRequest>,
    ) -> Result<Response<PbStatusResponse>, Status> {
        maintenance::status(&self.ctx).await.map(Response::new)
    }

    async fn defragment(
        &self,
        _req: Request<PbDefragmentRequest>,
    ) -> Result<Response<PbDefragmentResponse>, Status> {
        let ctx = self.ctx.clone();
        let size = blocking(move || ctx.db.defragment().map_err(errors::status)).await?;
        tracing::info!(bytes = size.file_bytes, "defragmented");
        Ok(Response::new(PbDefragmentResponse {
            header: self
                .ctx
                .ids
                .header(self.ctx.db.revision().unwrap_or_default()),
        }))
    }

    /// SPEC D9's `all` checksum at the durable revision.
    async fn hash(&self, _req: Request<PbHashRequest>) -> Result<Response<PbHashResponse>, Status> {
        let ctx = self.ctx.clone();
        let h = blocking(move || ctx.db.content_hash().map_err(errors::status)).await?;
        Ok(Response::new(PbHashResponse {
            header: self.ctx.ids.header(h.revision.max(1)),
            hash: h.all,
        }))
    }

    /// SPEC D9's `kv` checksum of the key space at the revision asked (0: the current one),
    /// with the compaction revision (E11, K9: an older one is compacted, a later one future).
    async fn hash_kv(
        &self,
        req: Request<PbHashKvRequest>,
    ) -> Result<Response<PbHashKvResponse>, Status> {
        let want = req.into_inner().revision;
        let ctx = self.ctx.clone();
        let (hash, rev, compacted, current) = blocking(move || {
            let (hash, rev) = ctx.db.hash_kv(want).map_err(errors::status)?;
            let compacted = ctx.db.compacted_revision().map_err(errors::status)?;
            let current = ctx.db.revision().map_err(errors::status)?;
            Ok::<_, Status>((hash, rev, compacted, current))
        })
        .await?;
        Ok(Response::new(PbHashKvResponse {
            // The server starts at revision 1 (DESIGN); an empty file still says 0.
            header: self.ctx.ids.header(current.max(1)),
            hash,
            compact_revision: compacted,
            hash_revision: rev.max(1),
        }))
    }

    type SnapshotStream = BoxStream<PbSnapshotResponse>;

    async fn snapshot(
        &self,
        _req: Request<PbSnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        // The share is taken before the copy is made: a refused call writes nothing.
        let ctx = self.ctx.clone();
        let estimate = blocking(move || ctx.db.storage_size().map_err(errors::status)).await?;
        let mut share = self
            .snapshots
            .begin(estimate.file_bytes)
            .map_err(errors::etcd)?;
        // Built under the engine's temporary name beside the database (same filesystem, so
        // the space check is the database's) and unlinked once open: a kill leaves a
        // temporary the next snapshot removes.
        let ctx = self.ctx.clone();
        let (file, info) =
            blocking(move || ctx.db.snapshot_unlinked().map_err(errors::status)).await?;
        // Dropping `file` on a refusal gives its disk back.
        share.settle(info.bytes).map_err(errors::etcd)?;
        let (tx, chunks) = mpsc::channel(4);
        let (end_tx, ended) = oneshot::channel();
        let ctx = self.ctx.clone();
        let read_timeout = self.read_timeout;
        tokio::spawn(async move {
            let _share = share;
            if let Err(status) =
                Maintenance::send_snapshot(&ctx, file, info, &tx, read_timeout).await
            {
                tracing::warn!("snapshot failed: {}", status.message());
                let _ = end_tx.send(status);
            }
        });
        Ok(Response::new(Box::pin(SnapshotStream {
            chunks,
            ended: Some(ended),
        })))
    }

    async fn move_leader(
        &self,
        _req: Request<PbMoveLeaderRequest>,
    ) -> Result<Response<PbMoveLeaderResponse>, Status> {
        Err(unimplemented("MoveLeader"))
    }

    async fn downgrade(
        &self,
        _req: Request<PbDowngradeRequest>,
    ) -> Result<Response<PbDowngradeResponse>, Status> {
        Err(unimplemented("Downgrade"))
    }
}
