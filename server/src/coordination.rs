//! etcd's `v3lock` and `v3election` services on tenure's recipes (SPEC E5): the same key
//! layouts (`name/<lease hex>`, ordered by create revision) as etcdctl and Go's `concurrency`
//! package, so all of them exclude each other and agree on the leader.
//!
//! The caller's lease is the session's: the server never renews it (the client does). A wait is
//! cancelled when the client goes away (its call future is dropped): the contender's key is then
//! removed, so no one waits behind a caller that left.

use std::sync::Arc;

use tenure::etcd::errors::EtcdError;
use tenure::sync::{Election, Mutex, Session, SessionOptions};
use tenure::{Compare, CompareOp, KeyValue, Op, Stop, Txn, Wait};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status};

use crate::service::{blocking, BoxStream, Ctx};
use crate::{convert, errors};

// Generated code: its items are `pub` by construction.
#[allow(unreachable_pub, missing_debug_implementations)]
pub(crate) mod lockpb {
    tonic::include_proto!("v3lockpb");
}
#[allow(unreachable_pub, missing_debug_implementations)]
pub(crate) mod electionpb {
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

/// A session on the caller's lease that does not renew it.
fn session(ctx: &Ctx, lease: i64) -> Result<Session, Status> {
    if lease <= 0 {
        return Err(errors::etcd(EtcdError::LeaseNotFound));
    }
    let s = Session::resume(&ctx.db, lease, SessionOptions::default()).map_err(errors::status)?;
    s.orphan();
    Ok(s)
}

fn wait_error(e: tenure::Error) -> Status {
    match e {
        tenure::Error::SessionExpired(_) => errors::etcd(EtcdError::LeaseNotFound),
        tenure::Error::Timeout { .. } => Status::cancelled("the caller went away"),
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

/// Raises its token when dropped (with the future of a cancelled call).
struct StopOnDrop(Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

#[derive(Clone)]
pub(crate) struct Lock(pub Arc<Ctx>);

#[tonic::async_trait]
impl lockpb::lock_server::Lock for Lock {
    async fn lock(
        &self,
        req: Request<lockpb::LockRequest>,
    ) -> Result<Response<lockpb::LockResponse>, Status> {
        let req = req.into_inner();
        let name = name_of(&req.name)?;
        let ctx = self.0.clone();
        // Dropped with this call's future: the waiting thread then gives up.
        let cancel = StopOnDrop(Stop::new());
        let wait = Wait::from(&cancel.0);
        let c = ctx.clone();
        let (key, rev) = blocking(move || {
            let s = session(&c, req.lease)?;
            let guard = Mutex::new(&s, &name).lock(wait).map_err(wait_error)?;
            Ok(guard.keep())
        })
        .await?;
        Ok(Response::new(lockpb::LockResponse {
            header: lock_header(&ctx, rev.max(ctx.db.revision().unwrap_or_default())),
            key,
        }))
    }

    async fn unlock(
        &self,
        req: Request<lockpb::UnlockRequest>,
    ) -> Result<Response<lockpb::UnlockResponse>, Status> {
        let key = req.into_inner().key;
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

#[derive(Clone)]
pub(crate) struct Elections(pub Arc<Ctx>);

/// Runs `then` if `leader` still holds its leadership (its key has the same create revision);
/// `false` otherwise.
fn if_leader(
    db: &tenure::Tenure,
    leader: &electionpb::LeaderKey,
    then: Op,
) -> Result<bool, Status> {
    let r = db
        .txn(
            Txn::new()
                .when([Compare::create_revision(
                    &leader.key,
                    CompareOp::Equal,
                    leader.rev,
                )])
                .then([then]),
        )
        .map_err(errors::status)?;
    Ok(r.succeeded)
}

#[tonic::async_trait]
impl electionpb::election_server::Election for Elections {
    async fn campaign(
        &self,
        req: Request<electionpb::CampaignRequest>,
    ) -> Result<Response<electionpb::CampaignResponse>, Status> {
        let req = req.into_inner();
        let name = name_of(&req.name)?;
        let ctx = self.0.clone();
        let cancel = StopOnDrop(Stop::new());
        let wait = Wait::from(&cancel.0);
        let c = ctx.clone();
        let lease = req.lease;
        let (key, rev) = blocking(move || {
            let s = session(&c, lease)?;
            let l = Election::new(&s, &name)
                .campaign(&req.value, wait)
                .map_err(wait_error)?;
            Ok((l.key().to_vec(), l.fencing_token()))
        })
        .await?;
        Ok(Response::new(electionpb::CampaignResponse {
            header: election_header(&ctx, ctx.db.revision().unwrap_or_default()),
            leader: Some(electionpb::LeaderKey {
                name: req.name,
                key,
                rev,
                lease,
            }),
        }))
    }

    async fn proclaim(
        &self,
        req: Request<electionpb::ProclaimRequest>,
    ) -> Result<Response<electionpb::ProclaimResponse>, Status> {
        let req = req.into_inner();
        let leader = req
            .leader
            .ok_or_else(|| Status::invalid_argument("\"leader\" field must be provided"))?;
        let db = self.0.db.clone();
        let rev = blocking(move || {
            let put = Op::put(
                &leader.key,
                &req.value,
                (leader.lease > 0).then(|| leader.lease.into()),
            );
            if !if_leader(&db, &leader, put)? {
                return Err(Status::new(Code::Unknown, NOT_LEADER));
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

    /// One thread per observer, waiting on the recipe's observer; it ends when the client goes
    /// away (the next send fails) or the server shuts down.
    async fn observe(
        &self,
        req: Request<electionpb::LeaderRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        let name = name_of(&req.into_inner().name)?;
        let ctx = self.0.clone();
        let mut observer =
            tenure::sync::Election::observe(&ctx.db, &name).map_err(errors::status)?;
        let (tx, rx) = mpsc::channel(16);
        let shutdown = ctx.shutdown.clone();
        std::thread::Builder::new()
            .name("tenure-observe".into())
            .spawn(move || loop {
                if *shutdown.borrow() || tx.is_closed() {
                    return;
                }
                match observer.recv_timeout(Some(std::time::Duration::from_millis(500))) {
                    Ok(Some(kv)) => {
                        let resp = electionpb::LeaderResponse {
                            header: election_header(&ctx, ctx.db.revision().unwrap_or_default()),
                            kv: Some(election_kv(kv)),
                        };
                        if tx.blocking_send(Ok(resp)).is_err() {
                            return;
                        }
                    }
                    Ok(None) | Err(tenure::Error::Timeout { .. }) => {}
                    Err(e) => {
                        let _ = tx.blocking_send(Err(errors::status(e)));
                        return;
                    }
                }
            })
            .map_err(|e| Status::unavailable(format!("cannot start an observer: {e}")))?;
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn resign(
        &self,
        req: Request<electionpb::ResignRequest>,
    ) -> Result<Response<electionpb::ResignResponse>, Status> {
        let leader = req
            .into_inner()
            .leader
            .ok_or_else(|| Status::invalid_argument("\"leader\" field must be provided"))?;
        let db = self.0.db.clone();
        let rev = blocking(move || {
            let key = leader.key.clone();
            if_leader(&db, &leader, Op::delete(key))?;
            db.revision().map_err(errors::status)
        })
        .await?;
        Ok(Response::new(electionpb::ResignResponse {
            header: election_header(&self.0, rev),
        }))
    }
}
