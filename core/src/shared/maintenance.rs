//! etcd's Maintenance service as a shared file's owner answers it (SPEC P3): Status (what a
//! connecting client asks first: version, size, revision, leader = this process) and Alarm (so
//! a non-owner's `alarms()`, `raise_alarm` and `disarm_alarm` work). The rest (snapshots,
//! hashes, defragmentation) are `tenure serve`'s; a non-owner gets `Unsupported` for them
//! before any call is made, as engine-only calls.

use std::sync::Arc;

use etcd_client::proto::*;
use tonic::{Request, Response, Status};

use crate::etcd::serve::maintenance;
use crate::etcd::serve::service::{BoxStream, Ctx};

/// Status and Alarm over the owner's engine.
#[derive(Clone, Debug)]
pub(crate) struct Maintenance(pub(crate) Arc<Ctx>);

fn unimplemented(method: &str) -> Status {
    Status::unimplemented(format!(
        "method {method} is not served to the processes sharing a file"
    ))
}

#[tonic::async_trait]
impl PbMaintenanceService for Maintenance {
    async fn alarm(
        &self,
        req: Request<PbAlarmRequest>,
    ) -> Result<Response<PbAlarmResponse>, Status> {
        maintenance::alarm(&self.0, req.into_inner())
            .await
            .map(Response::new)
    }

    async fn status(
        &self,
        _req: Request<PbStatusRequest>,
    ) -> Result<Response<PbStatusResponse>, Status> {
        maintenance::status(&self.0).await.map(Response::new)
    }

    async fn defragment(
        &self,
        _req: Request<PbDefragmentRequest>,
    ) -> Result<Response<PbDefragmentResponse>, Status> {
        Err(unimplemented("Defragment"))
    }

    async fn hash(&self, _req: Request<PbHashRequest>) -> Result<Response<PbHashResponse>, Status> {
        Err(unimplemented("Hash"))
    }

    async fn hash_kv(
        &self,
        _req: Request<PbHashKvRequest>,
    ) -> Result<Response<PbHashKvResponse>, Status> {
        Err(unimplemented("HashKV"))
    }

    type SnapshotStream = BoxStream<PbSnapshotResponse>;

    async fn snapshot(
        &self,
        _req: Request<PbSnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        Err(unimplemented("Snapshot"))
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
