//! tonic's refusals of a request it cannot decode, answered with etcd's (gRPC-Go's) codes and
//! texts (SPEC E7): a message above the size limit is `RESOURCE_EXHAUSTED` "grpc: received
//! message larger than max (N vs. M)" (tonic says `OUT_OF_RANGE`), and a message nested deeper
//! than the decoder goes (prost's recursion limit: a txn in a txn costs two of its 100 levels,
//! so 50 levels of txns decode) is etcd's "too many operations in txn request", what etcd
//! answers a txn nested past its shared budget of 128 ops (tonic says `INTERNAL`, as for a bug).
//!
//! A tower layer over every service: it rewrites the status of a response whose headers carry
//! one (a unary call refused before its handler ran), and the trailers of a stream (a streaming
//! request refused part-way).

use std::task::{Context, Poll};

use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use tenure::etcd::errors::EtcdError;
use tonic::body::Body;
use tower_service::Service;

/// What tonic's decoder says of a message above the limit, before the two numbers.
const TOO_LARGE: &str = "Error, decoded message length too large: found ";
/// What prost says when a message nests deeper than its recursion limit.
const TOO_DEEP: &str = "recursion limit reached";

/// The code and text etcd answers for tonic's `code` and `message`, if they differ.
fn rewrite(code: &str, message: &str) -> Option<(tonic::Code, String)> {
    match code {
        // OUT_OF_RANGE
        "11" => {
            let rest = message.strip_prefix(TOO_LARGE)?;
            let mut numbers = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty());
            let (found, limit) = (numbers.next()?, numbers.next()?);
            Some((
                tonic::Code::ResourceExhausted,
                format!("grpc: received message larger than max ({found} vs. {limit})"),
            ))
        }
        // INTERNAL
        "13" if message.contains(TOO_DEEP) => {
            let refusal = EtcdError::TooManyOps;
            Some((
                tonic::Code::from_i32(refusal.code() as i32),
                refusal.text().to_string(),
            ))
        }
        _ => None,
    }
}

/// Rewrites the gRPC status in `headers` (response headers or trailers) where etcd differs.
fn fix(headers: &mut HeaderMap) {
    let (Some(code), Some(message)) = (headers.get("grpc-status"), headers.get("grpc-message"))
    else {
        return;
    };
    let (Ok(code), Ok(message)) = (code.to_str(), message.to_str()) else {
        return;
    };
    let message = percent_encoding::percent_decode_str(message).decode_utf8_lossy();
    let Some((code, text)) = rewrite(code, &message) else {
        return;
    };
    // Both texts are printable ASCII: no percent-encoding needed.
    if let Ok(text) = HeaderValue::from_str(&text) {
        headers.insert("grpc-status", HeaderValue::from(code as i32));
        headers.insert("grpc-message", text);
    }
}

/// The layer (`Server::layer`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DecodeRefusals;

impl<S> tower_layer::Layer<S> for DecodeRefusals {
    type Service = Rewritten<S>;

    fn layer(&self, inner: S) -> Rewritten<S> {
        Rewritten(inner)
    }
}

/// A service whose responses carry etcd's refusals.
#[derive(Clone, Debug)]
pub(crate) struct Rewritten<S>(S);

impl<S, B> Service<Request<B>> for Rewritten<S>
where
    S: Service<Request<B>, Response = Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Response<Body>, S::Error>> + Send>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let answer = self.0.call(req);
        Box::pin(async move {
            let (mut parts, body) = answer.await?.into_parts();
            fix(&mut parts.headers);
            let body = body.map_frame(|frame| match frame.into_trailers() {
                Ok(mut trailers) => {
                    fix(&mut trailers);
                    http_body::Frame::trailers(trailers)
                }
                Err(frame) => frame,
            });
            Ok(Response::from_parts(parts, Body::new(body)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e7_a_message_above_the_limit_is_resource_exhausted_as_grpc_go_says() {
        let (code, text) = rewrite(
            "11",
            "Error, decoded message length too large: found 2202009 bytes, the limit is: \
             2097152 bytes",
        )
        .unwrap();
        assert_eq!(code, tonic::Code::ResourceExhausted);
        assert_eq!(
            text,
            "grpc: received message larger than max (2202009 vs. 2097152)"
        );
        // etcd's own OUT_OF_RANGE answers stay.
        assert_eq!(
            rewrite(
                "11",
                "etcdserver: mvcc: required revision has been compacted"
            ),
            None
        );
    }

    #[test]
    fn e7_a_message_nested_too_deep_is_invalid_argument() {
        let (code, text) = rewrite(
            "13",
            "failed to decode Protobuf message: TxnRequest.success: RequestOp.request: \
             recursion limit reached",
        )
        .unwrap();
        assert_eq!(code, tonic::Code::InvalidArgument);
        assert_eq!(text, "etcdserver: too many operations in txn request");
        assert_eq!(rewrite("13", "etcdserver: internal error"), None);
    }

    #[test]
    fn e7_headers_and_trailers_are_rewritten_in_place() {
        let mut h = HeaderMap::new();
        h.insert("grpc-status", HeaderValue::from_static("11"));
        h.insert(
            "grpc-message",
            HeaderValue::from_static(
                "Error,%20decoded message length too large: found 5 bytes, the limit is: 4 bytes",
            ),
        );
        fix(&mut h);
        assert_eq!(h["grpc-status"], "8");
        assert_eq!(
            h["grpc-message"],
            "grpc: received message larger than max (5 vs. 4)"
        );
    }
}
