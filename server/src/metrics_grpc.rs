//! gRPC request figures as go-grpc-prometheus names them (what etcd exports): a tower layer
//! under tonic counts each call of a known method when it starts (`grpc_server_started_total`)
//! and when it ends with its code (`grpc_server_handled_total`), and keeps how many are in
//! flight (pending Lock and Campaign waits, open Watch streams). A call ends when its response
//! body ends (the `grpc-status` of its trailers, or of its headers for an error) or is dropped
//! before that (the client went away: `Canceled`). Labels come only from the fixed method table
//! below, never from what a client sends, so their number is bounded.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::{HeaderMap, Request, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// How a method streams, as go-grpc-prometheus' `grpc_type` says it.
#[derive(Clone, Copy)]
enum Kind {
    Unary,
    ServerStream,
    BidiStream,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Unary => "unary",
            Kind::ServerStream => "server_stream",
            Kind::BidiStream => "bidi_stream",
        }
    }
}

/// Every method `tenure serve` answers (Auth's too: answered `Unimplemented`), by service.
const METHODS: &[(&str, &[(&str, Kind)])] = &[
    (
        "etcdserverpb.KV",
        &[
            ("Range", Kind::Unary),
            ("Put", Kind::Unary),
            ("DeleteRange", Kind::Unary),
            ("Txn", Kind::Unary),
            ("Compact", Kind::Unary),
        ],
    ),
    ("etcdserverpb.Watch", &[("Watch", Kind::BidiStream)]),
    (
        "etcdserverpb.Lease",
        &[
            ("LeaseGrant", Kind::Unary),
            ("LeaseRevoke", Kind::Unary),
            ("LeaseKeepAlive", Kind::BidiStream),
            ("LeaseTimeToLive", Kind::Unary),
            ("LeaseLeases", Kind::Unary),
        ],
    ),
    (
        "etcdserverpb.Cluster",
        &[
            ("MemberAdd", Kind::Unary),
            ("MemberRemove", Kind::Unary),
            ("MemberUpdate", Kind::Unary),
            ("MemberList", Kind::Unary),
            ("MemberPromote", Kind::Unary),
        ],
    ),
    (
        "etcdserverpb.Maintenance",
        &[
            ("Alarm", Kind::Unary),
            ("Status", Kind::Unary),
            ("Defragment", Kind::Unary),
            ("Hash", Kind::Unary),
            ("HashKV", Kind::Unary),
            ("Snapshot", Kind::ServerStream),
            ("MoveLeader", Kind::Unary),
            ("Downgrade", Kind::Unary),
        ],
    ),
    (
        "etcdserverpb.Auth",
        &[
            ("AuthEnable", Kind::Unary),
            ("AuthDisable", Kind::Unary),
            ("AuthStatus", Kind::Unary),
            ("Authenticate", Kind::Unary),
            ("UserAdd", Kind::Unary),
            ("UserGet", Kind::Unary),
            ("UserList", Kind::Unary),
            ("UserDelete", Kind::Unary),
            ("UserChangePassword", Kind::Unary),
            ("UserGrantRole", Kind::Unary),
            ("UserRevokeRole", Kind::Unary),
            ("RoleAdd", Kind::Unary),
            ("RoleGet", Kind::Unary),
            ("RoleList", Kind::Unary),
            ("RoleDelete", Kind::Unary),
            ("RoleGrantPermission", Kind::Unary),
            ("RoleRevokePermission", Kind::Unary),
        ],
    ),
    (
        "v3lockpb.Lock",
        &[("Lock", Kind::Unary), ("Unlock", Kind::Unary)],
    ),
    (
        "v3electionpb.Election",
        &[
            ("Campaign", Kind::Unary),
            ("Proclaim", Kind::Unary),
            ("Leader", Kind::Unary),
            ("Observe", Kind::ServerStream),
            ("Resign", Kind::Unary),
        ],
    ),
];

/// gRPC status codes by number, as go-grpc-prometheus writes them.
const CODES: [&str; 17] = [
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];

/// A known method: its place in `METHODS`.
#[derive(Clone, Copy)]
struct Method {
    service: &'static str,
    name: &'static str,
    kind: Kind,
    /// Index into `Grpc::in_flight`.
    slot: usize,
}

fn lookup(path: &str) -> Option<Method> {
    let (service, name) = path.strip_prefix('/')?.split_once('/')?;
    let mut slot = 0;
    for (s, methods) in METHODS {
        if *s == service {
            let i = methods.iter().position(|(m, _)| *m == name)?;
            let (name, kind) = methods[i];
            return Some(Method {
                service: s,
                name,
                kind,
                slot: slot + i,
            });
        }
        slot += methods.len();
    }
    None
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Started {
    grpc_type: &'static str,
    grpc_service: &'static str,
    grpc_method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Handled {
    grpc_type: &'static str,
    grpc_service: &'static str,
    grpc_method: &'static str,
    grpc_code: &'static str,
}

/// The figures the layer keeps (registered by `metrics.rs`).
pub(crate) struct Grpc {
    pub(crate) started: Family<Started, Counter>,
    pub(crate) handled: Family<Handled, Counter>,
    /// Calls in flight per method (index: `Method::slot`).
    in_flight: Box<[AtomicI64]>,
}

impl Grpc {
    pub(crate) fn new() -> Grpc {
        let n = METHODS.iter().map(|(_, m)| m.len()).sum();
        Grpc {
            started: Family::default(),
            handled: Family::default(),
            in_flight: (0..n).map(|_| AtomicI64::new(0)).collect(),
        }
    }

    /// Calls of `service`/`method` in flight now (0 for an unknown method).
    pub(crate) fn in_flight(&self, service: &str, method: &str) -> i64 {
        lookup(&format!("/{service}/{method}"))
            .map_or(0, |m| self.in_flight[m.slot].load(Ordering::Relaxed))
    }
}

/// The tower layer tonic's server wraps every service in.
#[derive(Clone)]
pub(crate) struct GrpcLayer(pub(crate) Arc<Grpc>);

impl<S> tower::Layer<S> for GrpcLayer {
    type Service = Counted<S>;
    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            grpc: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub(crate) struct Counted<S> {
    inner: S,
    grpc: Arc<Grpc>,
}

/// One counted call, from its start until its response body ends or is dropped.
struct Call {
    grpc: Arc<Grpc>,
    method: Method,
    code: Option<&'static str>,
}

impl Call {
    fn start(grpc: Arc<Grpc>, method: Method) -> Call {
        grpc.started
            .get_or_create(&Started {
                grpc_type: method.kind.label(),
                grpc_service: method.service,
                grpc_method: method.name,
            })
            .inc();
        grpc.in_flight[method.slot].fetch_add(1, Ordering::Relaxed);
        Call {
            grpc,
            method,
            code: None,
        }
    }

    /// Takes the call's code from `grpc-status` in `headers` if it is there.
    fn observe(&mut self, headers: &HeaderMap) {
        if let Some(v) = headers.get("grpc-status") {
            let n: usize = v.to_str().ok().and_then(|s| s.parse().ok()).unwrap_or(2);
            self.code = Some(CODES.get(n).copied().unwrap_or("Unknown"));
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let m = self.method;
        self.grpc.in_flight[m.slot].fetch_sub(1, Ordering::Relaxed);
        self.grpc
            .handled
            .get_or_create(&Handled {
                grpc_type: m.kind.label(),
                grpc_service: m.service,
                grpc_method: m.name,
                // Ended without a status: the client went away (or the server shut down).
                grpc_code: self.code.unwrap_or("Canceled"),
            })
            .inc();
    }
}

impl<S, B, R> tower::Service<Request<B>> for Counted<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    R: http_body::Body + Unpin,
{
    type Response = Response<Observed<R>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // Only gRPC requests (not HTTP/1 health checks) of a known method are counted.
        let grpc = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
        let call = lookup(req.uri().path())
            .filter(|_| grpc)
            .map(|m| Call::start(self.grpc.clone(), m));
        let fut = self.inner.call(req);
        Box::pin(async move {
            let mut call = call;
            let res = fut.await?;
            if let Some(c) = &mut call {
                c.observe(res.headers());
                if c.code.is_some() {
                    // A trailers-only answer (an error): the call ends here.
                    call = None;
                }
            }
            Ok(res.map(|inner| Observed { inner, call }))
        })
    }
}

/// A response body that ends its call when it ends.
pub(crate) struct Observed<B> {
    inner: B,
    call: Option<Call>,
}

impl<B: http_body::Body + Unpin> http_body::Body for Observed<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(trailers), Some(c)) = (frame.trailers_ref(), &mut this.call) {
                    c.observe(trailers);
                    this.call = None;
                }
            }
            Poll::Ready(Some(Err(_))) => {
                if let Some(c) = &mut this.call {
                    c.code = Some("Unknown");
                }
                this.call = None;
            }
            Poll::Ready(None) => this.call = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e18_only_methods_of_the_table_are_labels() {
        let m = lookup("/etcdserverpb.KV/Put").unwrap();
        assert_eq!(
            (m.service, m.name, m.kind.label()),
            ("etcdserverpb.KV", "Put", "unary")
        );
        let w = lookup("/etcdserverpb.Watch/Watch").unwrap();
        assert_eq!(w.kind.label(), "bidi_stream");
        let c = lookup("/v3electionpb.Election/Campaign").unwrap();
        assert_eq!(
            c.slot,
            METHODS.iter().map(|(_, m)| m.len()).sum::<usize>() - 5
        );
        for unknown in [
            "/etcdserverpb.KV/Nope",
            "/x.Y/Put",
            "/",
            "",
            "/etcdserverpb.KV",
        ] {
            assert!(lookup(unknown).is_none(), "{unknown}");
        }
    }
}
