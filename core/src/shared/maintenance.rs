//! etcd's Maintenance service as a shared file's owner answers it (SPEC P3): Status (what a
//! connecting client asks first: version, size, revision, leader = this process) and Alarm (so
//! a non-owner's `alarms()`, `raise_alarm` and `disarm_alarm` work). The rest (snapshots,
//! hashes, defragmentation) are `tenure serve`'s; a non-owner gets `Unsupported` for them
//! before any call is made, as engine-only calls.

use std::sync::Arc;

use etcd_client::proto::*;
use tonic::{Request, Response, Status};

use crate::alarms::{Alarm, AlarmKind};
use crate::etcd::serve::errors;
use crate::etcd::serve::service::{blocking, BoxStream, Ctx};

/// The etcd API version a shared file's owner reports (as `tenure serve`).
const ETCD_API_VERSION: &str = "3.5.0";

/// etcd's `AlarmRequest.AlarmAction` numbers.
const GET: i32 = 0;
const ACTIVATE: i32 = 1;
const DEACTIVATE: i32 = 2;

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
        let req = req.into_inner();
        let kind = AlarmKind::from_etcd_number(req.alarm);
        let ctx = self.0.clone();
        let alarms = blocking(move || {
            let db = &ctx.db;
            let member = |kind| Alarm {
                member: req.member_id,
                kind,
            };
            let out = match (req.action, kind) {
                (GET, None) => db.alarms(),
                (GET, Some(k)) => db
                    .alarms()
                    .map(|all| all.into_iter().filter(|a| a.kind == k).collect()),
                (ACTIVATE, Some(k)) => db.raise_alarm(member(k)).map(|_| vec![member(k)]),
                (DEACTIVATE, Some(k)) => {
                    db.disarm_alarm(member(k))
                        .map(|was| if was { vec![member(k)] } else { Vec::new() })
                }
                _ => Ok(Vec::new()),
            };
            out.map_err(errors::status)
        })
        .await?;
        let rev = self.0.db.revision().unwrap_or_default();
        Ok(Response::new(PbAlarmResponse {
            header: self.0.ids.header(rev),
            alarms: alarms
                .into_iter()
                .map(|a| PbAlarmMember {
                    member_id: a.member,
                    alarm: a.kind.etcd_number(),
                })
                .collect(),
        }))
    }

    async fn status(
        &self,
        _req: Request<PbStatusRequest>,
    ) -> Result<Response<PbStatusResponse>, Status> {
        let ctx = self.0.clone();
        let (size, rev) = blocking(move || {
            let size = ctx.db.storage_size().map_err(errors::status)?;
            Ok((size, ctx.db.revision().map_err(errors::status)?))
        })
        .await?;
        Ok(Response::new(PbStatusResponse {
            header: self.0.ids.header(rev),
            version: ETCD_API_VERSION.into(),
            db_size: size.file_bytes as i64,
            leader: self.0.ids.member,
            raft_index: rev as u64,
            raft_term: 1,
            raft_applied_index: rev as u64,
            db_size_in_use: size.in_use_bytes as i64,
            ..Default::default()
        }))
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
