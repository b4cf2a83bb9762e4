//! etcd's Auth service, answered honestly (SPEC E19): tenure serve has no users, roles or
//! tokens, so every Auth call is `Unimplemented` with a message that says so and what decides
//! access instead, rather than an empty status a client cannot explain. Routed by path (the
//! etcd-client crate does not export every Auth message type, and no call reads its request).

use axum::extract::Path;
use axum::response::Response;

/// Every Auth call's answer.
pub(crate) const NOT_SERVED: &str = "etcdserver: authentication is not served by tenure serve \
    (no users, roles or tokens): who may connect is decided by the listener instead (loopback, \
    a unix socket's file mode, TLS client certificates with --client-cert-auth); connect \
    without a user and password";

/// `/etcdserverpb.Auth/{method}`: a trailers-only gRPC answer.
pub(crate) async fn not_served(Path(method): Path<String>) -> Response {
    // The method is echoed only when it is one of etcd's names (bounded, printable).
    let known = method.len() <= 32 && method.bytes().all(|b| b.is_ascii_alphabetic());
    let message = if known {
        format!("{NOT_SERVED} ({method})")
    } else {
        NOT_SERVED.to_string()
    };
    let (parts, ()) = tonic::Status::unimplemented(message)
        .into_http::<()>()
        .into_parts();
    Response::from_parts(parts, axum::body::Body::empty())
}
