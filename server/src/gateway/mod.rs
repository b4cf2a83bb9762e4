//! etcd's JSON gateway under `/v3/` (SPEC E21), on the client port beside gRPC and the HTTP
//! routes of E18: each path is one gRPC method of etcd's v3 API, transcoded (`transcode`) to the
//! server's own service, so the gateway answers what gRPC answers, within the same limits.

mod json_objects;
mod pb;
mod transcode;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post, MethodRouter};
use axum::Router;

use pb::etcdserverpb as kv;
use pb::v3electionpb as election;
use pb::v3lockpb as lock;
pub(crate) use transcode::Gateway;

/// The gateway's routes: etcd 3.4's paths (the lease ones also under `/v3/kv/lease/`, as etcd).
pub(crate) fn router(gw: Gateway) -> Router {
    Router::new()
        .route("/v3/kv/range", unary::<kv::RangeRequest, kv::RangeResponse>("/etcdserverpb.KV/Range"))
        .route("/v3/kv/put", unary::<kv::PutRequest, kv::PutResponse>("/etcdserverpb.KV/Put"))
        .route(
            "/v3/kv/deleterange",
            unary::<kv::DeleteRangeRequest, kv::DeleteRangeResponse>("/etcdserverpb.KV/DeleteRange"),
        )
        .route("/v3/kv/txn", unary::<kv::TxnRequest, kv::TxnResponse>("/etcdserverpb.KV/Txn"))
        .route(
            "/v3/kv/compaction",
            unary::<kv::CompactionRequest, kv::CompactionResponse>("/etcdserverpb.KV/Compact"),
        )
        .route(
            "/v3/watch",
            streaming::<kv::WatchRequest, kv::WatchResponse>("/etcdserverpb.Watch/Watch"),
        )
        .route(
            "/v3/lease/grant",
            unary::<kv::LeaseGrantRequest, kv::LeaseGrantResponse>("/etcdserverpb.Lease/LeaseGrant"),
        )
        .route("/v3/lease/revoke", lease_revoke())
        .route("/v3/kv/lease/revoke", lease_revoke())
        .route(
            "/v3/lease/keepalive",
            streaming::<kv::LeaseKeepAliveRequest, kv::LeaseKeepAliveResponse>(
                "/etcdserverpb.Lease/LeaseKeepAlive",
            ),
        )
        .route("/v3/lease/timetolive", lease_time_to_live())
        .route("/v3/kv/lease/timetolive", lease_time_to_live())
        .route("/v3/lease/leases", lease_leases())
        .route("/v3/kv/lease/leases", lease_leases())
        .route(
            "/v3/maintenance/status",
            unary::<kv::StatusRequest, kv::StatusResponse>("/etcdserverpb.Maintenance/Status"),
        )
        .route("/v3/lock/lock", unary::<lock::LockRequest, lock::LockResponse>("/v3lockpb.Lock/Lock"))
        .route(
            "/v3/lock/unlock",
            unary::<lock::UnlockRequest, lock::UnlockResponse>("/v3lockpb.Lock/Unlock"),
        )
        .route(
            "/v3/election/campaign",
            unary::<election::CampaignRequest, election::CampaignResponse>(
                "/v3electionpb.Election/Campaign",
            ),
        )
        .route(
            "/v3/election/proclaim",
            unary::<election::ProclaimRequest, election::ProclaimResponse>(
                "/v3electionpb.Election/Proclaim",
            ),
        )
        .route(
            "/v3/election/leader",
            unary::<election::LeaderRequest, election::LeaderResponse>(
                "/v3electionpb.Election/Leader",
            ),
        )
        .route(
            "/v3/election/observe",
            server_streaming::<election::LeaderRequest, election::LeaderResponse>(
                "/v3electionpb.Election/Observe",
            ),
        )
        .route(
            "/v3/election/resign",
            unary::<election::ResignRequest, election::ResignResponse>(
                "/v3electionpb.Election/Resign",
            ),
        )
        .route("/v3/{*rest}", any(not_found))
        .with_state(gw)
}

fn lease_revoke() -> MethodRouter<Gateway> {
    unary::<kv::LeaseRevokeRequest, kv::LeaseRevokeResponse>("/etcdserverpb.Lease/LeaseRevoke")
}

fn lease_time_to_live() -> MethodRouter<Gateway> {
    unary::<kv::LeaseTimeToLiveRequest, kv::LeaseTimeToLiveResponse>(
        "/etcdserverpb.Lease/LeaseTimeToLive",
    )
}

fn lease_leases() -> MethodRouter<Gateway> {
    unary::<kv::LeaseLeasesRequest, kv::LeaseLeasesResponse>("/etcdserverpb.Lease/LeaseLeases")
}

fn unary<Q: transcode::Request, R: transcode::Reply>(grpc: &'static str) -> MethodRouter<Gateway> {
    post(move |State(gw): State<Gateway>, body: Body| transcode::unary::<Q, R>(gw, grpc, body))
        .fallback(method_not_allowed)
}

fn server_streaming<Q: transcode::Request, R: transcode::Reply>(
    grpc: &'static str,
) -> MethodRouter<Gateway> {
    post(move |State(gw): State<Gateway>, body: Body| {
        transcode::server_streaming::<Q, R>(gw, grpc, body)
    })
    .fallback(method_not_allowed)
}

fn streaming<Q: transcode::Request, R: transcode::Reply>(grpc: &'static str) -> MethodRouter<Gateway> {
    post(move |State(gw): State<Gateway>, body: Body| transcode::streaming::<Q, R>(gw, grpc, body))
        .fallback(method_not_allowed)
}

/// What etcd's gateway answers another method on a known path.
async fn method_not_allowed() -> Response {
    plain(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed\n")
}

/// What etcd's gateway answers a path under `/v3/` it does not know.
async fn not_found() -> Response {
    plain(StatusCode::NOT_FOUND, "Not Found\n")
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}
