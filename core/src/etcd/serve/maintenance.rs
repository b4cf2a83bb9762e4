//! etcd's Maintenance answers that need only the engine (SPEC E20, P3): Alarm and Status.
//! `tenure serve`'s Maintenance service and a shared file's owner both answer with these; the
//! rest of the service (snapshots, hashes, defragmentation) is `tenure serve`'s alone.

use etcd_client::proto::{PbAlarmMember, PbAlarmRequest, PbAlarmResponse, PbStatusResponse};
use tonic::Status;

use super::errors;
use super::service::{blocking, Ctx};
use crate::alarms::{Alarm, AlarmKind};

/// The etcd API version reported in Status (what clients check features against).
pub const ETCD_API_VERSION: &str = "3.5.0";

/// etcd's `AlarmRequest.AlarmAction` numbers.
const GET: i32 = 0;
const ACTIVATE: i32 = 1;
const DEACTIVATE: i32 = 2;

/// etcd's Alarm: GET lists the alarms of a type (NONE: all), ACTIVATE raises one and answers
/// it (raised already or not), DEACTIVATE disarms one and answers it if it was raised. The
/// engine keeps them in the file and refuses writes by them.
pub async fn alarm(
    ctx: &std::sync::Arc<Ctx>,
    req: PbAlarmRequest,
) -> Result<PbAlarmResponse, Status> {
    let kind = AlarmKind::from_etcd_number(req.alarm);
    let c = ctx.clone();
    let alarms = blocking(move || {
        let db = &c.db;
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
            // NONE or a type etcd does not define: nothing to raise or disarm.
            _ => Ok(Vec::new()),
        };
        out.map_err(errors::status)
    })
    .await?;
    Ok(PbAlarmResponse {
        header: ctx.ids.header(ctx.db.revision().unwrap_or_default()),
        alarms: alarms
            .into_iter()
            .map(|a| PbAlarmMember {
                member_id: a.member,
                alarm: a.kind.etcd_number(),
            })
            .collect(),
    })
}

/// An alarm as etcd's Status lists it in `errors` (Go's text form of its `AlarmMember`).
fn alarm_error(a: Alarm) -> String {
    format!("memberID:{} alarm:{} ", a.member, a.kind.name())
}

/// etcd's Status: `db_size` is the file's length, `db_size_in_use` the bytes of its pages in
/// use (D10), `errors` the alarms raised, `db_size_quota` the quota in force (0: none).
pub async fn status(ctx: &std::sync::Arc<Ctx>) -> Result<PbStatusResponse, Status> {
    let c = ctx.clone();
    let (size, alarms) = blocking(move || {
        let size = c.db.storage_size().map_err(errors::status)?;
        Ok((size, c.db.alarms().map_err(errors::status)?))
    })
    .await?;
    let rev = ctx.db.revision().unwrap_or_default();
    Ok(PbStatusResponse {
        header: ctx.ids.header(rev),
        version: ETCD_API_VERSION.into(),
        db_size: size.file_bytes as i64,
        leader: ctx.ids.member,
        raft_index: rev as u64,
        raft_term: 1,
        raft_applied_index: rev as u64,
        errors: alarms.into_iter().map(alarm_error).collect(),
        db_size_in_use: size.in_use_bytes as i64,
        is_learner: false,
        storage_version: String::new(),
        // etcd 3.5's field (3.4 has none).
        db_size_quota: ctx
            .db
            .quota_backend_bytes()
            .ok()
            .flatten()
            .map_or(0, |q| q as i64),
        downgrade_info: None,
    })
}
