//! etcd's KV, Lease and Cluster services over one `Tenure` (SPEC E2, E3, E6); Maintenance is in
//! `maintenance.rs`.
//!
//! Bounded requests (SPEC E22: puts, one-key deletes, small reads, txns of these, lease grants)
//! are applied on the async worker and await their commit without a thread; other engine calls
//! that may wait for a commit run on tokio's blocking pool, where a panic becomes an `Internal`
//! status, never a dead connection. Renew never touches the disk and runs inline.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::proto::*;
use prost::Message;
use tokio::sync::{mpsc, watch};
use tokio_stream::{wrappers::ReceiverStream, Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::bound::{Bindings, End, MAX_BOUND_LEASES_PER_STREAM};
use super::convert::{self, Ids};
use super::errors;
use crate::etcd::client::BOUND_SESSION_HEADER;
use crate::etcd::errors::EtcdError;
use crate::etcd::{Outcome, RequestOp, ResponseOp};
use crate::handle::Tenure;
use crate::wait::WaitPool;

/// A response stream of a streaming call.
pub type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// What every service shares.
#[derive(Debug)]
pub struct Ctx {
    /// The database served.
    pub db: Tenure,
    /// The cluster and member IDs of response headers.
    pub ids: Ids,
    /// Client URLs, for MemberList.
    pub urls: Vec<String>,
    /// The largest write request accepted (etcd's `--max-request-bytes`).
    pub max_request_bytes: usize,
    /// Most watches on one watch stream.
    pub max_watches: usize,
    /// Flips to true on shutdown: long-lived streams end.
    pub shutdown: watch::Receiver<bool>,
    /// Serves every pending Lock and Campaign wait and every election observer from one
    /// thread (`coordination.rs`).
    pub pool: WaitPool,
}

/// Runs an engine call on the blocking pool: one that ends on its own (a commit, a read), never
/// a wait for another client (those go to `Ctx::pool`), so every write finds a thread.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("request handler failed: {e}");
            Err(Status::internal(
                "etcdserver: internal error in tenure serve",
            ))
        }
    }
}

/// Runs a bounded engine call on the async worker (SPEC E22); a panic becomes an `Internal`
/// status, as on the blocking pool, never a dead connection.
pub(crate) fn inline<T>(f: impl FnOnce() -> T) -> Result<T, Status> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|_| {
        tracing::error!("request handler panicked");
        Status::internal("etcdserver: internal error in tenure serve")
    })
}

fn unimplemented(what: &str) -> Status {
    Status::unimplemented(format!("tenure serve does not implement {what}"))
}

/// etcd's KV service.
#[derive(Clone, Debug)]
pub struct Kv(pub Arc<Ctx>);

/// etcd's refusal of a request that writes (goes through its raft log) and is larger than
/// `--max-request-bytes`, whatever field makes it so.
pub(crate) fn check_size(ctx: &Ctx, req: &impl Message) -> Result<(), Status> {
    sized(ctx, req).map(|_| ())
}

/// [`check_size`], returning the request's encoded size.
fn sized(ctx: &Ctx, req: &impl Message) -> Result<usize, Status> {
    let bytes = req.encoded_len();
    if bytes > ctx.max_request_bytes {
        return Err(errors::etcd(EtcdError::RequestTooLarge));
    }
    Ok(bytes)
}

/// The largest write request applied on the async worker (SPEC E22): the apply copies what the
/// request carries under the engine's lock, so a larger one goes to the blocking pool and
/// keeps the worker's turn short.
pub const INLINE_REQUEST_BYTES: usize = 16 * 1024;

impl Kv {
    /// `bytes`: the write request's encoded size (0 for a range).
    async fn run(&self, op: RequestOp, bytes: usize) -> Result<(i64, ResponseOp), Status> {
        let done = |r: crate::error::Result<Outcome>| match r {
            Ok(Outcome::Done { revision, response }) => Ok((revision, response)),
            Ok(Outcome::Refused(r)) => Err(errors::refusal(r)),
            Err(e) => Err(errors::status(e)),
        };
        // A request whose work under the engine's lock is bounded (a put, a one-key delete, a
        // small read, a txn of these; at most INLINE_REQUEST_BYTES) is applied here, on the
        // async worker, and awaits its commit without holding a thread: the end of the commit
        // completes it (SPEC E22); so is a range found small under the engine's lock (E26).
        // One that may copy or delete many keys, or reads the file's history, goes to the
        // blocking pool, so it never holds an async worker the other clients' requests need.
        if bytes <= INLINE_REQUEST_BYTES {
            match inline(|| self.0.db.execute_applied(&op))? {
                Ok(Some(applied)) => return done(applied.durable().await),
                Ok(None) => {}
                Err(e) => return done(Err(e)),
            }
        }
        let db = self.0.db.clone();
        blocking(move || done(db.execute(&op))).await
    }
}

fn unexpected() -> Status {
    Status::internal("etcdserver: unexpected response kind")
}

#[tonic::async_trait]
impl PbKvService for Kv {
    async fn range(
        &self,
        req: Request<PbRangeRequest>,
    ) -> Result<Response<PbRangeResponse>, Status> {
        let r = convert::range_request(req.into_inner())?;
        match self.run(RequestOp::Range(r), 0).await? {
            (rev, ResponseOp::Range(r)) => {
                Ok(Response::new(convert::range_response(&self.0.ids, rev, r)))
            }
            _ => Err(unexpected()),
        }
    }

    type RangeStreamStream = BoxStream<PbRangeStreamResponse>;

    async fn range_stream(
        &self,
        _req: Request<PbRangeRequest>,
    ) -> Result<Response<Self::RangeStreamStream>, Status> {
        Err(unimplemented("KV.RangeStream"))
    }

    async fn put(&self, req: Request<PbPutRequest>) -> Result<Response<PbPutResponse>, Status> {
        let req = req.into_inner();
        let bytes = sized(&self.0, &req)?;
        let p = convert::put_request(req)?;
        match self.run(RequestOp::Put(p), bytes).await? {
            (rev, ResponseOp::Put { prev_kv }) => Ok(Response::new(convert::put_response(
                &self.0.ids,
                rev,
                prev_kv,
            ))),
            _ => Err(unexpected()),
        }
    }

    async fn delete_range(
        &self,
        req: Request<PbDeleteRequest>,
    ) -> Result<Response<PbDeleteResponse>, Status> {
        let req = req.into_inner();
        let bytes = sized(&self.0, &req)?;
        let d = convert::delete_request(req)?;
        match self.run(RequestOp::DeleteRange(d), bytes).await? {
            (rev, ResponseOp::DeleteRange { deleted, prev_kvs }) => Ok(Response::new(
                convert::delete_response(&self.0.ids, rev, deleted, prev_kvs),
            )),
            _ => Err(unexpected()),
        }
    }

    async fn txn(&self, req: Request<PbTxnRequest>) -> Result<Response<PbTxnResponse>, Status> {
        let req = req.into_inner();
        let bytes = sized(&self.0, &req)?;
        let t = convert::txn_request(req)?;
        match self.run(RequestOp::Txn(t), bytes).await? {
            (
                rev,
                ResponseOp::Txn {
                    succeeded,
                    responses,
                },
            ) => Ok(Response::new(convert::txn_response(
                &self.0.ids,
                rev,
                succeeded,
                responses,
            ))),
            _ => Err(unexpected()),
        }
    }

    async fn compact(
        &self,
        req: Request<PbCompactionRequest>,
    ) -> Result<Response<PbCompactionResponse>, Status> {
        let req = req.into_inner();
        let (rev, physical) = (req.revision, req.physical);
        let db = self.0.db.clone();
        let compact = move || match physical {
            true => db.compact_physical(rev),
            false => db.compact(rev),
        };
        let current = blocking(move || match compact() {
            Ok(Ok(current)) => Ok(current),
            Ok(Err(r)) => Err(errors::refusal(r)),
            Err(e) => Err(errors::status(e)),
        })
        .await?;
        Ok(Response::new(PbCompactionResponse {
            header: self.0.ids.header(current),
        }))
    }
}

/// etcd's Lease service. Built by [`Lease::binding_sessions`] (shared mode), it binds sessions
/// to their process (SPEC P10–P13, `bound.rs`): a keep-alive stream marked as a bound
/// session's that breaks (its process died) revokes the leases it kept. [`Lease::new`]
/// (`tenure serve`) ignores the mark: etcd's semantics.
#[derive(Clone, Debug)]
pub struct Lease {
    ctx: Arc<Ctx>,
    /// `Some`: sessions are bound.
    bindings: Option<Arc<Bindings>>,
}

impl Lease {
    /// The service as etcd has it: a lease lives until revoked or its TTL runs out.
    pub fn new(ctx: Arc<Ctx>) -> Lease {
        Lease {
            ctx,
            bindings: None,
        }
    }

    /// The service with sessions bound to their process (shared mode's server).
    pub fn binding_sessions(ctx: Arc<Ctx>) -> Lease {
        Lease {
            ctx,
            bindings: Some(Arc::default()),
        }
    }

    /// The number of bound keep-alive streams open, as it changes (a stream counts until the
    /// revokes of its end are done); `None` without binding.
    pub fn bound_streams(&self) -> Option<watch::Receiver<usize>> {
        self.bindings.as_ref().map(|b| b.live())
    }
}

/// Whether a keep-alive stream is a bound session's (the client's `bind_sessions`).
fn marked_bound(req: &Request<Streaming<PbLeaseKeepAliveRequest>>) -> bool {
    req.metadata()
        .get(BOUND_SESSION_HEADER)
        .is_some_and(|v| v.as_bytes() == b"1")
}

/// Revokes, through the engine, the leases of a bound stream that broke.
async fn revoke_bound(ctx: &Ctx, ids: Vec<i64>) {
    for id in ids {
        let db = ctx.db.clone();
        let revoked = blocking(move || match db.revoke(id) {
            Ok(()) => Ok(true),
            // Expired or revoked meanwhile.
            Err(crate::error::Error::LeaseNotFound(_)) => Ok(false),
            Err(e) => Err(errors::status(e)),
        });
        match revoked.await {
            Ok(true) => tracing::debug!("lease {id} revoked: its process's connection closed"),
            Ok(false) => {}
            Err(s) => tracing::warn!(
                "lease {id}: its process's connection closed, but revoking it failed: {}",
                s.message()
            ),
        }
    }
}

/// The TTL, in seconds, etcd 3.4 grants to a LeaseGrant asking for 0 or less: its lessor's
/// `minLeaseTTL`, 1.5 election timeouts (1 s by default) rounded up to whole seconds.
pub(crate) const MIN_LEASE_TTL: i64 = 2;

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

#[tonic::async_trait]
impl PbLeaseService for Lease {
    async fn lease_grant(
        &self,
        req: Request<PbLeaseGrantRequest>,
    ) -> Result<Response<PbLeaseGrantResponse>, Status> {
        let mut req = req.into_inner();
        // etcd's lessor raises a TTL below its minimum (TTL ≤ 0 included) to the minimum.
        if req.ttl <= 0 {
            req.ttl = MIN_LEASE_TTL;
        }
        if req.id < 0 {
            return Err(Status::invalid_argument(
                "etcdserver: lease ID must be positive",
            ));
        }
        let ttl = Duration::from_secs(req.ttl as u64);
        let id = (req.id != 0).then(|| crate::types::LeaseId::new(req.id));
        // Applied here; the commit completes the answer (SPEC E22).
        let applied = inline(|| self.ctx.db.grant_applied(id, ttl))?.map_err(errors::status)?;
        let (id, rev) = applied.durable().await.map_err(errors::status)?;
        let id = id.get();
        Ok(Response::new(PbLeaseGrantResponse {
            header: self.ctx.ids.header(rev),
            id,
            ttl: req.ttl,
            error: String::new(),
        }))
    }

    async fn lease_revoke(
        &self,
        req: Request<PbLeaseRevokeRequest>,
    ) -> Result<Response<PbLeaseRevokeResponse>, Status> {
        let id = req.into_inner().id;
        let db = self.ctx.db.clone();
        let rev = blocking(move || {
            db.revoke(id).map_err(errors::status)?;
            db.revision().map_err(errors::status)
        })
        .await?;
        Ok(Response::new(PbLeaseRevokeResponse {
            header: self.ctx.ids.header(rev),
        }))
    }

    type LeaseKeepAliveStream = BoxStream<PbLeaseKeepAliveResponse>;

    /// Many leases on one stream: each request renews its lease and answers with the granted
    /// TTL, or TTL 0 once the lease is gone (etcd). A bound session's stream (SPEC P10)
    /// remembers the leases it renewed; if it breaks, they are revoked.
    async fn lease_keep_alive(
        &self,
        req: Request<Streaming<PbLeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let mut bound = match &self.bindings {
            Some(b) if marked_bound(&req) => Some(b.stream()),
            _ => None,
        };
        let mut input = req.into_inner();
        let ctx = self.ctx.clone();
        let (tx, rx) = mpsc::channel(64);
        let mut shutdown = ctx.shutdown.clone();
        tokio::spawn(async move {
            let end = loop {
                let next = tokio::select! {
                    n = input.next() => n,
                    _ = shutdown.wait_for(|s| *s) => break End::Server,
                };
                let req = match next {
                    Some(Ok(r)) => r,
                    // END_STREAM: the client ended it.
                    None => break End::Clean,
                    // The connection closed under it, or the client reset it.
                    Some(Err(_)) => break End::Broken,
                };
                let ttl = match ctx.db.renew(req.id) {
                    Ok(ttl) => secs(ttl),
                    Err(crate::error::Error::NotPrimary) => {
                        let _ = tx.send(Err(errors::etcd(EtcdError::NoLeader))).await;
                        break End::Server;
                    }
                    Err(_) => 0,
                };
                if let Some(b) = bound.as_mut() {
                    match ttl > 0 {
                        true if !b.renewed(req.id) => tracing::warn!(
                            "a bound keep-alive stream renews more than {MAX_BOUND_LEASES_PER_STREAM} \
                             leases: lease {} is renewed but not bound",
                            req.id
                        ),
                        true => {}
                        false => b.gone(req.id),
                    }
                }
                let resp = PbLeaseKeepAliveResponse {
                    header: ctx.ids.header(ctx.db.revision().unwrap_or_default()),
                    id: req.id,
                    ttl,
                };
                if tx.send(Ok(resp)).await.is_err() {
                    // The response stream is gone: the client reset the stream.
                    break End::Broken;
                }
            };
            if let Some(mut b) = bound {
                revoke_bound(&ctx, b.end(end)).await;
                b.done();
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn lease_time_to_live(
        &self,
        req: Request<PbLeaseTimeToLiveRequest>,
    ) -> Result<Response<PbLeaseTimeToLiveResponse>, Status> {
        let req = req.into_inner();
        let db = self.ctx.db.clone();
        let (info, rev) = blocking(move || {
            let info = match db.time_to_live(req.id) {
                Ok(info) => Some(info),
                Err(crate::error::Error::LeaseNotFound(_)) => None,
                Err(e) => return Err(errors::status(e)),
            };
            Ok((info, db.revision().map_err(errors::status)?))
        })
        .await?;
        // An unknown lease is TTL -1, not an error (etcd; etcdctl prints "already expired").
        let resp = match info {
            Some(info) => PbLeaseTimeToLiveResponse {
                header: self.ctx.ids.header(rev),
                id: req.id,
                ttl: info.remaining.map_or(-1, secs),
                granted_ttl: secs(info.ttl),
                keys: if req.keys { info.keys } else { Vec::new() },
            },
            None => PbLeaseTimeToLiveResponse {
                header: self.ctx.ids.header(rev),
                id: req.id,
                ttl: -1,
                granted_ttl: 0,
                keys: Vec::new(),
            },
        };
        Ok(Response::new(resp))
    }

    async fn lease_leases(
        &self,
        _req: Request<PbLeaseLeasesRequest>,
    ) -> Result<Response<PbLeaseLeasesResponse>, Status> {
        let db = self.ctx.db.clone();
        let (mut ids, rev) = blocking(move || {
            let ids: Vec<i64> = db
                .leases()
                .map_err(errors::status)?
                .into_iter()
                .map(|l| l.id.get())
                .collect();
            Ok((ids, db.revision().map_err(errors::status)?))
        })
        .await?;
        ids.sort_unstable();
        Ok(Response::new(PbLeaseLeasesResponse {
            header: self.ctx.ids.header(rev),
            leases: ids.into_iter().map(|id| PbLeaseStatus { id }).collect(),
        }))
    }
}

/// etcd's Cluster service (one member).
#[derive(Clone, Debug)]
pub struct Cluster(pub Arc<Ctx>);

#[tonic::async_trait]
impl PbClusterService for Cluster {
    async fn member_add(
        &self,
        _r: Request<PbMemberAddRequest>,
    ) -> Result<Response<PbMemberAddResponse>, Status> {
        Err(unimplemented(
            "Cluster.MemberAdd (a tenure server is a single member)",
        ))
    }

    async fn member_remove(
        &self,
        _r: Request<PbMemberRemoveRequest>,
    ) -> Result<Response<PbMemberRemoveResponse>, Status> {
        Err(unimplemented(
            "Cluster.MemberRemove (a tenure server is a single member)",
        ))
    }

    async fn member_update(
        &self,
        _r: Request<PbMemberUpdateRequest>,
    ) -> Result<Response<PbMemberUpdateResponse>, Status> {
        Err(unimplemented(
            "Cluster.MemberUpdate (a tenure server is a single member)",
        ))
    }

    async fn member_list(
        &self,
        _r: Request<PbMemberListRequest>,
    ) -> Result<Response<PbMemberListResponse>, Status> {
        Ok(Response::new(PbMemberListResponse {
            header: self.0.ids.header(self.0.db.revision().unwrap_or_default()),
            members: vec![PbMember {
                id: self.0.ids.member,
                name: "tenure".into(),
                peer_ur_ls: Vec::new(),
                client_ur_ls: self.0.urls.clone(),
                is_learner: false,
            }],
        }))
    }

    async fn member_promote(
        &self,
        _r: Request<PbMemberPromoteRequest>,
    ) -> Result<Response<PbMemberPromoteResponse>, Status> {
        Err(unimplemented(
            "Cluster.MemberPromote (a tenure server is a single member)",
        ))
    }
}
