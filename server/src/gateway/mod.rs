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

/// The gateway's routes: etcd 3.4's paths under `/v3/` and, as etcd 3.4 also serves them,
/// `/v3beta/` (etcd3gw and tooz ask for it by name).
pub(crate) fn router(gw: Gateway) -> Router {
    Router::new()
        .nest("/v3", routes())
        .nest("/v3beta", routes())
        .with_state(gw)
}

/// One path per method (the lease ones also under `kv/lease/`, as etcd).
fn routes() -> Router<Gateway> {
    Router::new()
        .route(
            "/kv/range",
            unary::<kv::RangeRequest, kv::RangeResponse>("/etcdserverpb.KV/Range"),
        )
        .route(
            "/kv/put",
            unary::<kv::PutRequest, kv::PutResponse>("/etcdserverpb.KV/Put"),
        )
        .route(
            "/kv/deleterange",
            unary::<kv::DeleteRangeRequest, kv::DeleteRangeResponse>(
                "/etcdserverpb.KV/DeleteRange",
            ),
        )
        .route(
            "/kv/txn",
            unary::<kv::TxnRequest, kv::TxnResponse>("/etcdserverpb.KV/Txn"),
        )
        .route(
            "/kv/compaction",
            unary::<kv::CompactionRequest, kv::CompactionResponse>("/etcdserverpb.KV/Compact"),
        )
        .route(
            "/watch",
            streaming::<kv::WatchRequest, kv::WatchResponse>("/etcdserverpb.Watch/Watch"),
        )
        .route(
            "/lease/grant",
            unary::<kv::LeaseGrantRequest, kv::LeaseGrantResponse>(
                "/etcdserverpb.Lease/LeaseGrant",
            ),
        )
        .route("/lease/revoke", lease_revoke())
        .route("/kv/lease/revoke", lease_revoke())
        .route(
            "/lease/keepalive",
            streaming::<kv::LeaseKeepAliveRequest, kv::LeaseKeepAliveResponse>(
                "/etcdserverpb.Lease/LeaseKeepAlive",
            ),
        )
        .route("/lease/timetolive", lease_time_to_live())
        .route("/kv/lease/timetolive", lease_time_to_live())
        .route("/lease/leases", lease_leases())
        .route("/kv/lease/leases", lease_leases())
        .route(
            "/maintenance/status",
            unary::<kv::StatusRequest, kv::StatusResponse>("/etcdserverpb.Maintenance/Status"),
        )
        .route(
            "/lock/lock",
            unary::<lock::LockRequest, lock::LockResponse>("/v3lockpb.Lock/Lock"),
        )
        .route(
            "/lock/unlock",
            unary::<lock::UnlockRequest, lock::UnlockResponse>("/v3lockpb.Lock/Unlock"),
        )
        .route(
            "/election/campaign",
            unary::<election::CampaignRequest, election::CampaignResponse>(
                "/v3electionpb.Election/Campaign",
            ),
        )
        .route(
            "/election/proclaim",
            unary::<election::ProclaimRequest, election::ProclaimResponse>(
                "/v3electionpb.Election/Proclaim",
            ),
        )
        .route(
            "/election/leader",
            unary::<election::LeaderRequest, election::LeaderResponse>(
                "/v3electionpb.Election/Leader",
            ),
        )
        .route(
            "/election/observe",
            server_streaming::<election::LeaderRequest, election::LeaderResponse>(
                "/v3electionpb.Election/Observe",
            ),
        )
        .route(
            "/election/resign",
            unary::<election::ResignRequest, election::ResignResponse>(
                "/v3electionpb.Election/Resign",
            ),
        )
        .route("/{*rest}", any(not_found))
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

fn streaming<Q: transcode::Request, R: transcode::Reply>(
    grpc: &'static str,
) -> MethodRouter<Gateway> {
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
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response()
}
