//! HTTP/1.1 on the client port, beside gRPC (SPEC E18): tonic's server takes both protocols
//! (hyper-util's auto connection builder) and its router is axum's, so these routes sit next to
//! the gRPC services: `/health`, `/livez`, `/readyz` and `/version` as etcd answers them,
//! `/metrics`. The same routes serve `--listen-metrics-urls`.

use std::sync::Arc;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use tenure::Tenure;

use crate::metrics::Metrics;

/// What the handlers read.
#[derive(Clone)]
pub(crate) struct Http {
    pub db: Tenure,
    pub metrics: Arc<Metrics>,
}

/// The routes every listener serves over HTTP/1.1 (and HTTP/2). `grpc`: the client port, whose
/// other paths are gRPC methods, so an unknown one is answered as gRPC answers it.
pub(crate) fn router(http: Http, grpc: bool) -> Router {
    let r = Router::new()
        .route("/health", get(health))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/version", get(version))
        .route("/metrics", get(metrics));
    let r = if grpc {
        r.route("/etcdserverpb.Auth/{*method}", any(crate::auth::not_served))
            .fallback(not_found_or_unimplemented)
    } else {
        r.fallback(not_found)
    };
    r.with_state(http)
}

fn json(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// etcd's `/health`: `{"health":"true","reason":""}` while the engine serves, 503 once it is
/// closed or a failed commit poisoned it.
async fn health(axum::extract::State(h): axum::extract::State<Http>) -> Response {
    match probe(&h.db).await {
        Ok(()) => json(StatusCode::OK, r#"{"health":"true","reason":""}"#.into()),
        Err(reason) => json(
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({"health": "false", "reason": reason}).to_string(),
        ),
    }
}

/// A serializable read, off the async threads: what etcd's health check does.
async fn probe(db: &Tenure) -> Result<(), String> {
    let db = db.clone();
    match tokio::task::spawn_blocking(move || db.get("health")).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// etcd 3.5's `/livez`: the process answers.
async fn livez() -> Response {
    (StatusCode::OK, "ok").into_response()
}

/// etcd 3.5's `/readyz`: the engine serves reads.
async fn readyz(axum::extract::State(h): axum::extract::State<Http>) -> Response {
    match probe(&h.db).await {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}"),
        )
            .into_response(),
    }
}

/// etcd's `/version`.
async fn version() -> Response {
    let v = crate::ETCD_API_VERSION;
    json(
        StatusCode::OK,
        serde_json::json!({"etcdserver": v, "etcdcluster": v}).to_string(),
    )
}

async fn metrics(axum::extract::State(h): axum::extract::State<Http>) -> Response {
    let m = h.metrics.clone();
    match tokio::task::spawn_blocking(move || m.render()).await {
        Ok(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// Go's `http.NotFound`, as etcd answers an unknown path.
async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "404 page not found\n").into_response()
}

/// A gRPC request for a service nobody serves gets gRPC's `Unimplemented` (as tonic's own
/// fallback answers), anything else a 404.
async fn not_found_or_unimplemented(headers: HeaderMap) -> Response {
    let grpc = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if grpc {
        let (parts, ()) = tonic::Status::unimplemented("unknown service")
            .into_http::<()>()
            .into_parts();
        Response::from_parts(parts, axum::body::Body::empty())
    } else {
        not_found().await
    }
}
