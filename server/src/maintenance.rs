//! etcd's Maintenance service (SPEC E6, E11): Status and Alarm, Snapshot (the stream
//! `etcdctl snapshot save` expects), Hash and HashKV (SPEC D9's checksums), Defragment.
//!
//! Snapshot stream, as etcd sends it: the database file in chunks, each with the bytes still to
//! come in `remaining_bytes`, then one last message whose blob is the SHA-256 of everything
//! before it. `etcdctl snapshot save` appends every blob to its file and refuses a file whose
//! length is not a multiple of 512 plus 32, so the file streamed is whole pages.

use std::io::Read;
use std::sync::Arc;

use etcd_client::proto::*;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::errors;
use crate::service::{blocking, BoxStream, Ctx};

/// Bytes per snapshot message, as etcd.
const CHUNK: usize = 32 * 1024;

#[derive(Clone)]
pub(crate) struct Maintenance(pub Arc<Ctx>);

impl Maintenance {
    /// Takes the snapshot and sends it down `tx`; returns the error to end the stream with.
    fn send_snapshot(
        ctx: &Ctx,
        tx: &mpsc::Sender<Result<PbSnapshotResponse, Status>>,
    ) -> Result<(), Status> {
        // Built under the engine's temporary name beside the database (same filesystem, so
        // the space check is the database's) and unlinked once open: a kill leaves a
        // temporary the next snapshot removes.
        let (mut file, info) = ctx.db.snapshot_unlinked().map_err(errors::status)?;
        let total = info.bytes;
        if total % 512 != 0 {
            return Err(Status::internal(format!(
                "etcdserver: snapshot of {total} bytes is not whole 512-byte sectors"
            )));
        }
        tracing::info!(revision = info.revision, bytes = total, "sending snapshot");
        let mut sha = Sha256::new();
        let mut sent = 0u64;
        while sent < total {
            let mut buf = vec![0u8; CHUNK.min((total - sent) as usize)];
            file.read_exact(&mut buf)
                .map_err(|e| Status::internal(format!("etcdserver: {e}")))?;
            sha.update(&buf);
            sent += buf.len() as u64;
            let resp = PbSnapshotResponse {
                header: ctx.ids.header(info.revision),
                remaining_bytes: total - sent,
                blob: buf,
                version: crate::ETCD_API_VERSION.into(),
            };
            if tx.blocking_send(Ok(resp)).is_err() {
                return Ok(()); // the client went away
            }
        }
        let _ = tx.blocking_send(Ok(PbSnapshotResponse {
            header: ctx.ids.header(info.revision),
            remaining_bytes: 0,
            blob: sha.finalize().to_vec(),
            version: crate::ETCD_API_VERSION.into(),
        }));
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
    /// No alarm is ever raised (no space quota, no corruption check across members).
    async fn alarm(
        &self,
        _req: Request<PbAlarmRequest>,
    ) -> Result<Response<PbAlarmResponse>, Status> {
        Ok(Response::new(PbAlarmResponse {
            header: self.0.ids.header(self.0.db.revision().unwrap_or_default()),
            alarms: Vec::new(),
        }))
    }

    /// `db_size` is the file's length, `db_size_in_use` the bytes of its pages in use (D10).
    async fn status(
        &self,
        _req: Request<PbStatusRequest>,
    ) -> Result<Response<PbStatusResponse>, Status> {
        let ctx = self.0.clone();
        let size = blocking(move || ctx.db.storage_size().map_err(errors::status)).await?;
        let rev = self.0.db.revision().unwrap_or_default();
        Ok(Response::new(PbStatusResponse {
            header: self.0.ids.header(rev),
            version: crate::ETCD_API_VERSION.into(),
            db_size: size.file_bytes as i64,
            leader: self.0.ids.member,
            raft_index: rev as u64,
            raft_term: 1,
            raft_applied_index: rev as u64,
            errors: Vec::new(),
            db_size_in_use: size.in_use_bytes as i64,
            is_learner: false,
            storage_version: String::new(),
            db_size_quota: 0,
            downgrade_info: None,
        }))
    }

    async fn defragment(
        &self,
        _req: Request<PbDefragmentRequest>,
    ) -> Result<Response<PbDefragmentResponse>, Status> {
        let ctx = self.0.clone();
        let size = blocking(move || ctx.db.defragment().map_err(errors::status)).await?;
        tracing::info!(bytes = size.file_bytes, "defragmented");
        Ok(Response::new(PbDefragmentResponse {
            header: self.0.ids.header(self.0.db.revision().unwrap_or_default()),
        }))
    }

    /// SPEC D9's `all` checksum at the durable revision.
    async fn hash(&self, _req: Request<PbHashRequest>) -> Result<Response<PbHashResponse>, Status> {
        let ctx = self.0.clone();
        let h = blocking(move || ctx.db.content_hash().map_err(errors::status)).await?;
        Ok(Response::new(PbHashResponse {
            header: self.0.ids.header(h.revision.max(1)),
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
        let ctx = self.0.clone();
        let (hash, rev, compacted, current) = blocking(move || {
            let (hash, rev) = ctx.db.hash_kv(want).map_err(errors::status)?;
            let compacted = ctx.db.compacted_revision().map_err(errors::status)?;
            let current = ctx.db.revision().map_err(errors::status)?;
            Ok::<_, Status>((hash, rev, compacted, current))
        })
        .await?;
        Ok(Response::new(PbHashKvResponse {
            // The server starts at revision 1 (DESIGN); an empty file still says 0.
            header: self.0.ids.header(current.max(1)),
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
        let (tx, rx) = mpsc::channel(4);
        let ctx = self.0.clone();
        tokio::task::spawn_blocking(move || {
            let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Maintenance::send_snapshot(&ctx, &tx)
            }));
            let err = match sent {
                Ok(Ok(())) => return,
                Ok(Err(status)) => status,
                Err(_) => Status::internal("etcdserver: internal error in tenure serve"),
            };
            tracing::warn!("snapshot failed: {}", err.message());
            let _ = tx.blocking_send(Err(err));
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
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
