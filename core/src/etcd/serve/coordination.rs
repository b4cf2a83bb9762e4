//! etcd's `v3lock` and `v3election` services on tenure's recipes (SPEC E5): the same key
//! layouts (`name/<lease hex>`, ordered by create revision) as etcdctl and Go's `concurrency`
//! package, so all of them exclude each other and agree on the leader.
//!
//! The caller's lease is the session's, attached without a keep-alive: the client renews it.
//! Lock and Campaign waits are served by the server's one `WaitPool` and answered through a
//! oneshot, so a pending wait holds no thread. A wait is cancelled when the client goes away
//! (its call future is dropped): the contender's key is then removed, so no one waits behind a
//! caller that left. Observe follows the core's `Observer` in the same pool.

use std::sync::Arc;

use crossbeam_channel::Receiver;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status};

use super::service::{blocking, BoxStream, Ctx};
use super::{convert, errors};
use crate::etcd::errors::EtcdError;
use crate::sync::{Election, Leadership, Mutex, Observer, Session};
use crate::types::KeyValue;
use crate::wait::Interest;
use crate::wait::Pollable;
use crate::wait::Source;
use crate::wait::Stop;
use crate::wait::Wait;

// Generated code: its items are `pub` by construction.
#[allow(unreachable_pub, missing_debug_implementations, missing_docs)]
/// etcd's v3lock protocol (server side), compiled from `core/proto`.
pub mod lockpb {
    tonic::include_proto!("v3lockpb");
}
#[allow(unreachable_pub, missing_debug_implementations, missing_docs)]
/// etcd's v3election protocol (server side), compiled from `core/proto`.
pub mod electionpb {
    tonic::include_proto!("v3electionpb");
}

const NOT_LEADER: &str = "election: not leader";
const NO_LEADER: &str = "election: no leader";

fn name_of(name: &[u8]) -> Result<String, Status> {
    if name.is_empty() {
        return Err(errors::etcd(EtcdError::KeyNotProvided));
    }
    String::from_utf8(name.to_vec()).map_err(|_| {
        Status::invalid_argument("tenure serve: lock and election names must be UTF-8")
    })
}

/// etcd's refusal of a request above `--max-request-bytes`; its lock and election services
/// pass the error on as it is, so the code is `Unknown` (the text is the KV service's).
fn check_size(ctx: &Ctx, req: &impl prost::Message) -> Result<(), Status> {
    super::service::check_size(ctx, req).map_err(|s| Status::new(Code::Unknown, s.message()))
}

/// A session on the caller's lease that does not renew it (the client does): no thread.
fn session(ctx: &Ctx, lease: i64) -> Result<Session, Status> {
    if lease <= 0 {
        return Err(errors::etcd(EtcdError::LeaseNotFound));
    }
    Session::attach(&ctx.db, lease).map_err(errors::status)
}

fn wait_error(e: crate::error::Error) -> Status {
    match e {
        crate::error::Error::SessionExpired(_) => errors::etcd(EtcdError::LeaseNotFound),
        crate::error::Error::Timeout { .. } => Status::cancelled("the caller went away"),
        other => errors::status(other),
    }
}

fn lock_header(ctx: &Ctx, rev: i64) -> Option<lockpb::Header> {
    convert::Ids::header(&ctx.ids, rev).map(|h| lockpb::Header {
        cluster_id: h.cluster_id,
        member_id: h.member_id,
        revision: h.revision,
        raft_term: h.raft_term,
    })
}

fn election_header(ctx: &Ctx, rev: i64) -> Option<electionpb::Header> {
    convert::Ids::header(&ctx.ids, rev).map(|h| electionpb::Header {
        cluster_id: h.cluster_id,
        member_id: h.member_id,
        revision: h.revision,
        raft_term: h.raft_term,
    })
}

fn election_kv(kv: KeyValue) -> electionpb::KeyValue {
    let kv = convert::kv(kv);
    electionpb::KeyValue {
        key: kv.key,
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
        value: kv.value,
        lease: kv.lease,
    }
}

/// Raises its token when dropped (with the future of a cancelled call, or an observer's task).
struct StopOnDrop(Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Runs `wait` in the server's wait pool and answers with its end. `cancel` is the token of the
/// wait, raised when this future is dropped (the client went away): the pool then ends the
/// wait, which withdraws its key; so is it at shutdown (`Unavailable`). A result that finds no
/// one to take it goes to `undelivered` (on the pool's thread), so what it acquired is given
/// back.
async fn pooled<P>(
    ctx: &Ctx,
    wait: P,
    cancel: StopOnDrop,
    undelivered: impl FnOnce(P::Output) + Send + 'static,
) -> Result<P::Output, Status>
where
    P: Pollable + 'static,
    P::Output: Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    ctx.pool.submit(wait, move |out| {
        if let Err(Ok(Ok(v))) = tx.send(out) {
            undelivered(v);
        }
    });
    let mut shutdown = ctx.shutdown.clone();
    let out = tokio::select! {
        out = rx => out.ok(),
        // Dropping `cancel` ends the wait; the server does not wait for it to stop.
        _ = shutdown.wait_for(|s| *s) => None,
    };
    drop(cancel);
    match out {
        Some(Ok(Ok(v))) => Ok(v),
        Some(Ok(Err(e))) => Err(wait_error(e)),
        Some(Err(_)) => {
            tracing::error!("a lock or campaign wait panicked");
            Err(Status::internal(
                "etcdserver: internal error in tenure serve",
            ))
        }
        // The server is stopping (or dropped the wait without an end).
        None => Err(errors::etcd(EtcdError::Stopped)),
    }
}

/// etcd's Lock service on the `sync` mutex recipe.
#[derive(Clone, Debug)]
pub struct Lock(pub Arc<Ctx>);

#[tonic::async_trait]
impl lockpb::lock_server::Lock for Lock {
    async fn lock(
        &self,
        req: Request<lockpb::LockRequest>,
    ) -> Result<Response<lockpb::LockResponse>, Status> {
        let req = req.into_inner();
        let ctx = &self.0;
        check_size(ctx, &req)?;
        let name = name_of(&req.name)?;
        let s = session(ctx, req.lease)?;
        let cancel = StopOnDrop(Stop::new());
        let wait = Mutex::new(&s, &name).lock_wait(Wait::from(&cancel.0));
        // An undelivered guard is dropped: it unlocks.
        let guard = pooled(ctx, wait, cancel, drop).await?;
        let (key, rev) = guard.keep();
        Ok(Response::new(lockpb::LockResponse {
            header: lock_header(ctx, rev.max(ctx.db.revision().unwrap_or_default())),
            key,
        }))
    }

    async fn unlock(
        &self,
        req: Request<lockpb::UnlockRequest>,
    ) -> Result<Response<lockpb::UnlockResponse>, Status> {
        let req = req.into_inner();
        check_size(&self.0, &req)?;
        let key = req.key;
        if key.is_empty() {
            return Err(errors::etcd(EtcdError::KeyNotProvided));
        }
        let db = self.0.db.clone();
        let rev = blocking(move || {
            db.delete(&key).map_err(errors::status)?;
            db.revision().map_err(errors::status)
        })
        .await?;
        Ok(Response::new(lockpb::UnlockResponse {
            header: lock_header(&self.0, rev),
        }))
    }
}

/// etcd's Election service on the `sync` election recipe.
#[derive(Clone, Debug)]
pub struct Elections(pub Arc<Ctx>);

/// The leadership a client names (etcd's `LeaderKey`), for Proclaim and Resign.
fn leadership(ctx: &Ctx, leader: Option<electionpb::LeaderKey>) -> Result<Leadership, Status> {
    let leader =
        leader.ok_or_else(|| Status::invalid_argument("\"leader\" field must be provided"))?;
    Ok(Leadership::resume(
        &ctx.db,
        &leader.key,
        leader.rev,
        leader.lease,
    ))
}

/// What an observer's feed hands to its stream: the latest leader, or the error that ended it.
type Latest = Option<Result<KeyValue, Status>>;

/// An election's leaders, read by the core's `Observer` in the wait pool and published as the
/// latest state (a slow client skips to the newest leader, never to a stale one). Ends when its
/// token is raised (the stream was dropped or the server is stopping) or the observer fails.
struct Feed {
    observer: Observer,
    wait: Wait,
    stopped: Option<Receiver<()>>,
    latest: watch::Sender<Latest>,
}

impl Pollable for Feed {
    type Output = ();

    fn poll(&mut self) -> crate::error::Result<Option<()>> {
        loop {
            match self.observer.try_recv() {
                Ok(Some(Some(kv))) => {
                    self.latest.send_replace(Some(Ok(kv)));
                }
                // No leader: etcd's Observe reports leaders only.
                Ok(Some(None)) => {}
                Ok(None) => break,
                Err(e) => {
                    self.latest.send_replace(Some(Err(errors::status(e))));
                    return Ok(Some(()));
                }
            }
        }
        if self.wait.is_over() || self.latest.is_closed() {
            return Ok(Some(()));
        }
        Ok(None)
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        interest.recv(self.observer.wakeup());
        interest.wait(&self.wait, &self.stopped);
    }
}

#[tonic::async_trait]
impl electionpb::election_server::Election for Elections {
    async fn campaign(
        &self,
        req: Request<electionpb::CampaignRequest>,
    ) -> Result<Response<electionpb::CampaignResponse>, Status> {
        let req = req.into_inner();
        let ctx = &self.0;
        check_size(ctx, &req)?;
        let name = name_of(&req.name)?;
        let s = session(ctx, req.lease)?;
        let cancel = StopOnDrop(Stop::new());
        let wait = Election::new(&s, &name).campaign_wait(&req.value, Wait::from(&cancel.0));
        let resign = |l: Leadership| {
            let _ = l.resign();
        };
        let won = pooled(ctx, wait, cancel, resign).await?;
        Ok(Response::new(electionpb::CampaignResponse {
            header: election_header(ctx, ctx.db.revision().unwrap_or_default()),
            leader: Some(electionpb::LeaderKey {
                name: req.name,
                key: won.key().to_vec(),
                rev: won.fencing_token(),
                lease: req.lease,
            }),
        }))
    }

    async fn proclaim(
        &self,
        req: Request<electionpb::ProclaimRequest>,
    ) -> Result<Response<electionpb::ProclaimResponse>, Status> {
        let req = req.into_inner();
        check_size(&self.0, &req)?;
        let leadership = leadership(&self.0, req.leader)?;
        let db = self.0.db.clone();
        let rev = blocking(move || {
            match leadership.proclaim(&req.value) {
                Ok(()) => {}
                Err(crate::error::Error::NotLeader) => {
                    return Err(Status::new(Code::Unknown, NOT_LEADER));
                }
                Err(e) => return Err(errors::status(e)),
            }
            db.revision().map_err(errors::status)
        })
        .await?;
        Ok(Response::new(electionpb::ProclaimResponse {
            header: election_header(&self.0, rev),
        }))
    }

    async fn leader(
        &self,
        req: Request<electionpb::LeaderRequest>,
    ) -> Result<Response<electionpb::LeaderResponse>, Status> {
        let name = name_of(&req.into_inner().name)?;
        let db = self.0.db.clone();
        let (kv, rev) = blocking(move || {
            let kv = Election::leader(&db, &name).map_err(errors::status)?;
            Ok((kv, db.revision().map_err(errors::status)?))
        })
        .await?;
        let kv = kv.ok_or_else(|| Status::new(Code::Unknown, NO_LEADER))?;
        Ok(Response::new(electionpb::LeaderResponse {
            header: election_header(&self.0, rev),
            kv: Some(election_kv(kv)),
        }))
    }

    type ObserveStream = BoxStream<electionpb::LeaderResponse>;

    /// A `Feed` in the wait pool and a task forwarding its latest state to the stream: no
    /// thread per observer. The task ends when the client drops the stream or the server
    /// shuts down; its end raises the feed's token, which ends the feed.
    async fn observe(
        &self,
        req: Request<electionpb::LeaderRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        let name = name_of(&req.into_inner().name)?;
        let ctx = self.0.clone();
        let observer = Election::observe(&ctx.db, &name).map_err(errors::status)?;
        let cancel = StopOnDrop(Stop::new());
        let wait = Wait::from(&cancel.0);
        let (latest_tx, mut latest) = watch::channel(None);
        ctx.pool.submit(
            Feed {
                observer,
                stopped: wait.stop_channel(),
                wait,
                latest: latest_tx,
            },
            drop,
        );
        let (tx, rx) = mpsc::channel(16);
        let mut shutdown = ctx.shutdown.clone();
        tokio::spawn(async move {
            let _cancel = cancel;
            loop {
                tokio::select! {
                    changed = latest.changed() => if changed.is_err() {
                        return; // the feed ended and everything it published was sent
                    },
                    _ = tx.closed() => return,
                    _ = shutdown.wait_for(|s| *s) => return,
                }
                let resp = match latest.borrow_and_update().clone() {
                    Some(Ok(kv)) => Ok(electionpb::LeaderResponse {
                        header: election_header(&ctx, ctx.db.revision().unwrap_or_default()),
                        kv: Some(election_kv(kv)),
                    }),
                    Some(Err(status)) => Err(status),
                    None => continue,
                };
                if tx.send(resp).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn resign(
        &self,
        req: Request<electionpb::ResignRequest>,
    ) -> Result<Response<electionpb::ResignResponse>, Status> {
        let req = req.into_inner();
        check_size(&self.0, &req)?;
        let leadership = leadership(&self.0, req.leader)?;
        let db = self.0.db.clone();
        let rev = blocking(move || {
            leadership.resign().map_err(errors::status)?;
            db.revision().map_err(errors::status)
        })
        .await?;
        Ok(Response::new(electionpb::ResignResponse {
            header: election_header(&self.0, rev),
        }))
    }
}
