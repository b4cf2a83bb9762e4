//! The transcoder: a JSON request becomes the gRPC call the server's own services answer (in
//! process, through the same tower stack, so with the same limits and the same answers), and its
//! answer becomes the JSON etcd's gateway (grpc-gateway v1, `OrigName`) writes:
//! - unary: the response message, or `{"error":M,"message":M,"code":C}` with the HTTP status
//!   grpc-gateway maps the code to;
//! - streams: one `{"result":…}` per response, each followed by a newline, an error as
//!   `{"error":{"grpc_code":…,"http_code":…,"message":…,"http_status":…}}`; the first response
//!   (or error) decides the HTTP status, as etcd's gateway writes its header then;
//! - a streaming request's body is read as JSON objects one after another, each sent as soon as
//!   it is complete; the end of the body closes the sending side.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{stream, Stream, StreamExt};
use http::uri::PathAndQuery;
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::client::Grpc;
use tonic::{Code, Status};
use tonic_prost::ProstCodec;

use super::json_objects::{Frame, Framer};

/// The server's gRPC services, as the client port serves them (etcd's refusals included).
pub(crate) type Services = crate::decode_refusals::Rewritten<tonic::service::Routes>;

/// What the gateway's handlers share.
#[derive(Clone)]
pub(crate) struct Gateway {
    services: Services,
    /// The largest request body (unary) or single streamed request the gateway reads: twice the
    /// gRPC message limit (base64 and field names make JSON larger than protobuf); the services
    /// then judge the encoded message as they judge any gRPC one.
    max_json: usize,
}

impl Gateway {
    pub(crate) fn new(services: Services, grpc_limit: usize) -> Self {
        Self {
            services,
            max_json: grpc_limit.saturating_mul(2),
        }
    }

    fn client(&self) -> Grpc<Services> {
        // Answers come from this server's services, which bound them; etcd's gateway takes any
        // size from its server too.
        Grpc::new(self.services.clone()).max_decoding_message_size(usize::MAX)
    }
}

/// A message the gateway reads from JSON and sends to a service.
pub(crate) trait Request:
    prost::Message + Default + DeserializeOwned + Send + 'static
{
}
impl<T: prost::Message + Default + DeserializeOwned + Send + 'static> Request for T {}

/// A message the gateway receives from a service and writes as JSON.
pub(crate) trait Reply: prost::Message + Default + Serialize + Send + 'static {}
impl<T: prost::Message + Default + Serialize + Send + 'static> Reply for T {}

/// A unary call: the body is one request (empty: all fields at their defaults, as etcd).
pub(crate) async fn unary<Q: Request, R: Reply>(
    gw: Gateway,
    path: &'static str,
    body: Body,
) -> Response {
    let request: Q = match read_one(body, gw.max_json).await {
        Ok(q) => q,
        Err(status) => return error_response(&status),
    };
    let mut grpc = gw.client();
    let answer = grpc
        .unary(
            tonic::Request::new(request),
            PathAndQuery::from_static(path),
            ProstCodec::<Q, R>::default(),
        )
        .await;
    match answer {
        Ok(reply) => match serde_json::to_vec(reply.get_ref()) {
            Ok(json) => ok_response(Body::from(json), StatusCode::OK),
            Err(e) => error_response(&Status::internal(e.to_string())),
        },
        Err(status) => error_response(&status),
    }
}

/// A server-streaming call (Observe): one request, a stream of answers.
pub(crate) async fn server_streaming<Q: Request, R: Reply>(
    gw: Gateway,
    path: &'static str,
    body: Body,
) -> Response {
    let request: Q = match read_one(body, gw.max_json).await {
        Ok(q) => q,
        Err(status) => return error_response(&status),
    };
    let mut grpc = gw.client();
    let answer = grpc
        .server_streaming(
            tonic::Request::new(request),
            PathAndQuery::from_static(path),
            ProstCodec::<Q, R>::default(),
        )
        .await;
    match answer {
        Ok(replies) => stream_response(replies.into_inner()).await,
        Err(status) => error_response(&status),
    }
}

/// A bidirectional call (Watch, LeaseKeepAlive): the body's JSON objects are the requests.
pub(crate) async fn streaming<Q: Request, R: Reply>(
    gw: Gateway,
    path: &'static str,
    body: Body,
) -> Response {
    let requests = json_requests::<Q>(body, gw.max_json);
    let mut grpc = gw.client();
    let answer = grpc
        .streaming(
            tonic::Request::new(requests),
            PathAndQuery::from_static(path),
            ProstCodec::<Q, R>::default(),
        )
        .await;
    match answer {
        Ok(replies) => stream_response(replies.into_inner()).await,
        Err(status) => error_response(&status),
    }
}

/// Reads a whole (bounded) body and decodes the first JSON value in it, as etcd's gateway
/// does (what follows the value is not read; an empty body is the default request).
async fn read_one<Q: Request>(body: Body, max: usize) -> Result<Q, Status> {
    let bytes = match http_body_util::Limited::new(body, max).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(Status::resource_exhausted(format!(
                "gateway: request body larger than max ({max} bytes)"
            )))
        }
        Err(e) => return Err(Status::invalid_argument(e.to_string())),
    };
    decode_first(&bytes)
}

fn decode_first<Q: Request>(bytes: &[u8]) -> Result<Q, Status> {
    match serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Q>()
        .next()
    {
        None => Ok(Q::default()),
        Some(Ok(q)) => Ok(q),
        Some(Err(e)) => Err(Status::invalid_argument(e.to_string())),
    }
}

/// The requests of a streaming call, read from the body as they arrive. Each is bounded by
/// `max` bytes; one that is larger or not a valid request ends the sending side (as etcd's
/// gateway stops sending at a decode error), and so does the end of the body.
fn json_requests<Q: Request>(body: Body, max: usize) -> impl Stream<Item = Q> + Send + 'static {
    struct Reader {
        body: axum::body::BodyDataStream,
        buf: Vec<u8>,
        framer: Framer,
        ended: bool,
    }
    let reader = Reader {
        body: body.into_data_stream(),
        buf: Vec::new(),
        framer: Framer::default(),
        ended: false,
    };
    stream::unfold(reader, move |mut r| async move {
        loop {
            match r.framer.scan(&r.buf) {
                Frame::Complete(end) => {
                    let decoded = serde_json::from_slice::<Q>(&r.buf[..end]);
                    r.buf.drain(..end);
                    r.framer.consumed(end);
                    return match decoded {
                        Ok(q) => Some((q, r)),
                        Err(e) => {
                            tracing::debug!("gateway: a streamed request is not valid: {e}");
                            None
                        }
                    };
                }
                Frame::Empty => {
                    r.framer.consumed(r.buf.len());
                    r.buf.clear();
                }
                Frame::Partial => {}
            }
            if r.ended {
                return None;
            }
            if r.buf.len() > max {
                tracing::debug!("gateway: a streamed request is larger than {max} bytes");
                return None;
            }
            match r.body.next().await {
                Some(Ok(chunk)) => r.buf.extend_from_slice(&chunk),
                Some(Err(_)) | None => r.ended = true,
            }
        }
    })
}

/// The answers of a stream as chunks of JSON lines, pulled from the service only as fast as
/// the client reads them (no queue of their own: the services' own bounds hold).
async fn stream_response<R: Reply>(mut replies: tonic::Streaming<R>) -> Response {
    let (status, first, done) = match replies.message().await {
        Ok(Some(m)) => (StatusCode::OK, result_chunk(&m), false),
        Ok(None) => (StatusCode::OK, Bytes::new(), true),
        Err(s) => (http_status(s.code()), error_chunk(&s), true),
    };
    let rest = stream::unfold((replies, done), |(mut replies, done)| async move {
        if done {
            return None;
        }
        match replies.message().await {
            Ok(Some(m)) => Some((result_chunk(&m), (replies, false))),
            Ok(None) => None,
            Err(s) => Some((error_chunk(&s), (replies, true))),
        }
    });
    let chunks = stream::once(async move { first })
        .chain(rest)
        .filter(|c| std::future::ready(!c.is_empty()))
        .map(Ok::<_, Infallible>);
    ok_response(Body::from_stream(chunks), status)
}

fn result_chunk<R: Reply>(m: &R) -> Bytes {
    #[derive(Serialize)]
    struct Chunk<'a, R> {
        result: &'a R,
    }
    match serde_json::to_vec(&Chunk { result: m }) {
        Ok(mut json) => {
            json.push(b'\n');
            json.into()
        }
        Err(e) => error_chunk(&Status::internal(e.to_string())),
    }
}

/// grpc-gateway's stream error (its fields in its order; no delimiter follows, the stream ends).
fn error_chunk(s: &Status) -> Bytes {
    #[derive(Serialize)]
    struct StreamError<'a> {
        grpc_code: i32,
        http_code: u16,
        message: &'a str,
        http_status: &'a str,
    }
    #[derive(Serialize)]
    struct Chunk<'a> {
        error: StreamError<'a>,
    }
    let http = http_status(s.code());
    let chunk = Chunk {
        error: StreamError {
            grpc_code: s.code() as i32,
            http_code: http.as_u16(),
            message: s.message(),
            http_status: http.canonical_reason().unwrap_or(""),
        },
    };
    serde_json::to_vec(&chunk).unwrap_or_default().into()
}

/// grpc-gateway's error body for a unary call, with the HTTP status of its code.
pub(crate) fn error_response(s: &Status) -> Response {
    #[derive(Serialize)]
    struct ErrorBody<'a> {
        error: &'a str,
        message: &'a str,
        code: i32,
    }
    let body = ErrorBody {
        error: s.message(),
        message: s.message(),
        code: s.code() as i32,
    };
    (
        http_status(s.code()),
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&body).unwrap_or_default(),
    )
        .into_response()
}

fn ok_response(body: Body, status: StatusCode) -> Response {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    // etcd's gateway forwards the gRPC response's headers so.
    h.insert(
        "grpc-metadata-content-type",
        HeaderValue::from_static("application/grpc"),
    );
    r
}

/// grpc-gateway v1's `HTTPStatusFromCode` (etcd 3.4's gateway).
pub(crate) fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::Cancelled => StatusCode::REQUEST_TIMEOUT,
        Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::FailedPrecondition => StatusCode::PRECONDITION_FAILED,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
