//! Sessions bound to their process (shared mode, SPEC P10–P13): a session's keep-alive runs on
//! one stream for the session's whole life, marked with [`BOUND_SESSION_HEADER`], so a server
//! that binds sessions revokes its lease the moment that stream ends without END_STREAM (the
//! connection closed under it: the process died). Ending it on purpose ([`Remote::end_bound`])
//! half-closes it and waits for the server's end of it, so the server knows it was on purpose.
//!
//! The stream is tonic's own streaming call on the connection's channel (etcd-client's keeper
//! cannot carry metadata); its two messages are declared here, by etcd's field numbers.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::errors::{map_err, unavailable};
use super::Remote;
use crate::error::{Error, Result};
use crate::locks::Mutex;
use crate::types::LeaseId;

/// The gRPC metadata a bound session's keep-alive stream carries (value `1`).
pub(crate) const BOUND_SESSION_HEADER: &str = "tenure-bound-session";

const KEEP_ALIVE_PATH: &str = "/etcdserverpb.Lease/LeaseKeepAlive";

/// etcd's `LeaseKeepAliveRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct KeepAliveRequest {
    #[prost(int64, tag = "1")]
    id: i64,
}

/// etcd's `LeaseKeepAliveResponse` without its header (field 1, skipped).
#[derive(Clone, PartialEq, prost::Message)]
struct KeepAliveResponse {
    #[prost(int64, tag = "2")]
    id: i64,
    #[prost(int64, tag = "3")]
    ttl: i64,
}

/// Requests queued ahead of the connection: one renew is in flight at a time, so a few.
const QUEUED_RENEWS: usize = 4;

/// One session's keep-alive stream: opened by its first renew, opened again by the renew after
/// one that found it broken (the server gone: a takeover).
#[derive(Debug)]
pub(crate) struct BoundStream {
    id: LeaseId,
    /// The open stream, `None` before the first renew and after a failure. Held across one
    /// renew (or the end) at a time, under `Remote::rt`'s read side.
    open: Mutex<Option<Open>>,
}

#[derive(Debug)]
struct Open {
    requests: mpsc::Sender<KeepAliveRequest>,
    responses: tonic::Streaming<KeepAliveResponse>,
    /// Renews sent whose answer was not read (their deadline passed first): their answers are
    /// read and dropped before the next renew's. The stream is kept, never reset, since a
    /// reset is what the server takes for the process's death.
    unanswered: usize,
}

impl BoundStream {
    pub(crate) fn new(id: LeaseId) -> BoundStream {
        BoundStream {
            id,
            open: Mutex::new(None),
        }
    }
}

async fn open_stream(channel: tonic::transport::Channel) -> Result<Open> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| unavailable(format!("opening a session's keep-alive stream: {e}")))?;
    let (requests, rx) = mpsc::channel(QUEUED_RENEWS);
    let mut req = tonic::Request::new(ReceiverStream::new(rx));
    req.metadata_mut().insert(
        BOUND_SESSION_HEADER,
        tonic::metadata::MetadataValue::from_static("1"),
    );
    let codec = tonic_prost::ProstCodec::<KeepAliveRequest, KeepAliveResponse>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(KEEP_ALIVE_PATH);
    let responses = grpc
        .streaming(req, path, codec)
        .await
        .map_err(|s| map_err(etcd_client::Error::GRpcStatus(s), None))?
        .into_inner();
    Ok(Open {
        requests,
        responses,
        unanswered: 0,
    })
}

/// One renew on `open` (opened first if need be): the TTL the server answered.
async fn renew_on(
    channel: &tonic::transport::Channel,
    id: LeaseId,
    open: &mut Option<Open>,
) -> Result<i64> {
    if open.is_none() {
        *open = Some(open_stream(channel.clone()).await?);
    }
    let Some(o) = open.as_mut() else {
        unreachable!("opened above")
    };
    let ended = || unavailable("the server ended a session's keep-alive stream");
    o.requests
        .send(KeepAliveRequest { id: id.get() })
        .await
        .map_err(|_| ended())?;
    o.unanswered += 1;
    let mut ttl = 0;
    while o.unanswered > 0 {
        match o.responses.message().await {
            Ok(Some(r)) => {
                o.unanswered -= 1;
                ttl = r.ttl;
            }
            Ok(None) => return Err(ended()),
            Err(s) => return Err(map_err(etcd_client::Error::GRpcStatus(s), Some(id))),
        }
    }
    Ok(ttl)
}

impl Remote {
    /// Whether this connection binds its sessions to this process (`bind_sessions`).
    pub(crate) fn binds_sessions(&self) -> bool {
        self.bound_channel.is_some()
    }

    /// One renew of `s`'s lease on its stream; its deadline is at most `limit`.
    pub(crate) fn renew_bound(&self, s: &BoundStream, limit: Option<Duration>) -> Result<Duration> {
        let Some(channel) = self.bound_channel.as_ref() else {
            return self.renew(s.id, limit);
        };
        let guard = self.rt.read().unwrap_or_else(|p| p.into_inner());
        let Some(rt) = guard.as_ref().filter(|_| !self.is_closed()) else {
            return Err(Error::Closed("(etcd connection)".into()));
        };
        let budget = limit.map_or(self.timeout, |l| l.min(self.timeout));
        let mut open = s.open.lock();
        let out = rt.block_on(async {
            tokio::time::timeout(budget, renew_on(channel, s.id, &mut open)).await
        });
        let ttl = match out {
            Ok(Ok(ttl)) => ttl,
            Ok(Err(e)) => {
                // Broken (the server is gone, or ended it): the next renew opens a new one.
                *open = None;
                return Err(e);
            }
            // The stream is kept: its answer may still come (see `Open::unanswered`).
            Err(_) => {
                return Err(unavailable(format!(
                    "no answer from {} within {budget:?}",
                    self.endpoints.join(",")
                )))
            }
        };
        if ttl <= 0 {
            return Err(Error::LeaseNotFound(s.id));
        }
        Ok(super::convert::secs(ttl))
    }

    /// Ends `s`'s stream on purpose: half-closes it (END_STREAM) and waits, within the
    /// deadline, for the server's end of it; past the deadline a task of the runtime keeps
    /// waiting, so the stream is never reset. Nothing to do if it is not open.
    pub(crate) fn end_bound(&self, s: &BoundStream) {
        let guard = self.rt.read().unwrap_or_else(|p| p.into_inner());
        let Some(rt) = guard.as_ref().filter(|_| !self.is_closed()) else {
            return;
        };
        let Some(Open {
            requests,
            mut responses,
            ..
        }) = s.open.lock().take()
        else {
            return;
        };
        drop(requests);
        let drained = rt.spawn(async move { while let Ok(Some(_)) = responses.message().await {} });
        // A caller on a runtime's thread cannot block on this one: the task finishes alone.
        if tokio::runtime::Handle::try_current().is_err() {
            let _ = rt.block_on(async { tokio::time::timeout(self.timeout, drained).await });
        }
    }
}
