//! etcd's Watch service (SPEC E4): many watches on one bidirectional stream.
//!
//! Each stream has one pump thread that waits on all of its watchers' channels at once
//! (`crossbeam_channel::Select`) and on a control channel, and forwards events to the gRPC
//! response stream through a bounded queue. A client that does not read fills that queue; the
//! pump then blocks, the engine's per-watcher queues fill, and the engine cancels those watchers
//! (the client gets `canceled` with the revision to resume from). Writers never wait on a
//! watcher.

use std::collections::BTreeMap;
use std::sync::Arc;

use crossbeam_channel::{unbounded, Receiver, Select};
use etcd_client::proto::{PbEvent, PbWatchRequest, PbWatchRequestUnion, PbWatchResponse};
use tenure::etcd::errors::EtcdError;
use tenure::etcd::WatchStart;
use tenure::{Error, Event, EventKind, WatchOptions, Watcher};
use tokio::sync::mpsc;
use tokio_stream::{wrappers::ReceiverStream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::convert::{self, Ids};
use crate::errors;
use crate::service::{BoxStream, Ctx};

/// Default of `--max-watches-per-stream`; more → the create is answered canceled.
pub(crate) const MAX_WATCHES_PER_STREAM: usize = 10_000;
/// Most events in one response.
const EVENTS_PER_RESPONSE: usize = 1000;
/// Responses queued for a slow client before the pump blocks.
const RESPONSE_QUEUE: usize = 16;

enum Ctl {
    Add {
        id: i64,
        watcher: Watcher,
        no_put: bool,
        no_delete: bool,
    },
    Cancel(i64),
    Progress,
}

#[derive(Clone)]
pub(crate) struct Watch(pub Arc<Ctx>);

#[tonic::async_trait]
impl etcd_client::proto::PbWatchService for Watch {
    type WatchStream = BoxStream<PbWatchResponse>;

    async fn watch(
        &self,
        req: Request<Streaming<PbWatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let mut input = req.into_inner();
        let ctx = self.0.clone();
        let (out_tx, out_rx) = mpsc::channel::<Result<PbWatchResponse, Status>>(RESPONSE_QUEUE);
        let (ctl_tx, ctl_rx) = unbounded::<Ctl>();
        {
            let (db, ids, out) = (ctx.db.clone(), ctx.ids, out_tx.clone());
            std::thread::Builder::new()
                .name("tenure-watch".into())
                .spawn(move || pump(&db, ids, ctl_rx, out))
                .map_err(|e| Status::unavailable(format!("cannot start a watch stream: {e}")))?;
        }
        let mut shutdown = ctx.shutdown.clone();
        tokio::spawn(async move {
            let mut next_id: i64 = 0;
            let mut ids_in_use = std::collections::BTreeSet::new();
            loop {
                let next = tokio::select! {
                    n = input.next() => n,
                    _ = shutdown.wait_for(|s| *s) => None,
                };
                let Some(Ok(req)) = next else { break };
                match req.request_union {
                    Some(PbWatchRequestUnion::CreateRequest(c)) => {
                        let send = |r: PbWatchResponse| {
                            let out = out_tx.clone();
                            async move { out.send(Ok(r)).await.is_ok() }
                        };
                        let mut id = c.watch_id;
                        if id <= 0 {
                            while ids_in_use.contains(&next_id) {
                                next_id += 1;
                            }
                            id = next_id;
                            next_id += 1;
                        }
                        let rev = ctx.db.revision().unwrap_or_default();
                        let refuse = |reason: &str| PbWatchResponse {
                            header: ctx.ids.header(rev),
                            watch_id: id,
                            created: true,
                            canceled: true,
                            cancel_reason: reason.into(),
                            ..PbWatchResponse::default()
                        };
                        if ids_in_use.contains(&id) {
                            if !send(refuse("etcdserver: duplicate watch ID")).await {
                                break;
                            }
                            continue;
                        }
                        if ids_in_use.len() >= ctx.max_watches {
                            // A row of the one table (the client reads it back exactly); the
                            // bound is `--max-watches-per-stream`.
                            if !send(refuse(EtcdError::TooManyWatches.text())).await {
                                break;
                            }
                            continue;
                        }
                        if c.key.is_empty() {
                            if !send(refuse(EtcdError::KeyNotProvided.text())).await {
                                break;
                            }
                            continue;
                        }
                        let opts = WatchOptions {
                            prefix: false,
                            start_revision: (c.start_revision > 0).then_some(c.start_revision),
                            prev_kv: c.prev_kv,
                        };
                        let started = ctx.db.watch_range(&c.key, &c.range_end, opts);
                        match started {
                            Ok(WatchStart::Started(watcher)) => {
                                ids_in_use.insert(id);
                                // The pump sends `created` before any event of this watch.
                                let _ = ctl_tx.send(Ctl::Add {
                                    id,
                                    watcher,
                                    no_put: c.filters.contains(&0),
                                    no_delete: c.filters.contains(&1),
                                });
                            }
                            Ok(WatchStart::Compacted(floor)) => {
                                let created = PbWatchResponse {
                                    header: ctx.ids.header(rev),
                                    watch_id: id,
                                    created: true,
                                    ..PbWatchResponse::default()
                                };
                                let canceled = PbWatchResponse {
                                    header: ctx.ids.header(rev),
                                    watch_id: id,
                                    canceled: true,
                                    compact_revision: floor,
                                    cancel_reason: EtcdError::Compacted.text().into(),
                                    ..PbWatchResponse::default()
                                };
                                if !send(created).await || !send(canceled).await {
                                    break;
                                }
                            }
                            Err(e) => {
                                let st = errors::status(e);
                                if !send(refuse(st.message())).await {
                                    break;
                                }
                            }
                        }
                    }
                    Some(PbWatchRequestUnion::CancelRequest(c))
                        if ids_in_use.remove(&c.watch_id) =>
                    {
                        let _ = ctl_tx.send(Ctl::Cancel(c.watch_id));
                    }
                    Some(PbWatchRequestUnion::CancelRequest(_)) => {}
                    Some(PbWatchRequestUnion::ProgressRequest(_)) => {
                        let _ = ctl_tx.send(Ctl::Progress);
                    }
                    None => {}
                }
            }
            // Dropping `ctl_tx` stops the pump, which drops every watcher.
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out_rx))))
    }
}

struct Registered {
    watcher: Watcher,
    no_put: bool,
    no_delete: bool,
}

fn event(ev: Event) -> PbEvent {
    PbEvent {
        r#type: match ev.kind {
            EventKind::Put => 0,
            EventKind::Delete => 1,
        },
        kv: Some(convert::kv(ev.kv)),
        prev_kv: ev.prev_kv.map(convert::kv),
    }
}

/// Forwards every ready event of one watcher; `false` once the watch ended (cancel sent) or the
/// client is gone.
fn drain(
    db: &tenure::Tenure,
    ids: Ids,
    id: i64,
    w: &mut Registered,
    out: &mpsc::Sender<Result<PbWatchResponse, Status>>,
    alive: &mut bool,
) -> bool {
    loop {
        let mut events = Vec::new();
        let mut ended = None;
        while events.len() < EVENTS_PER_RESPONSE {
            match w.watcher.try_recv() {
                Ok(Some(ev)) => {
                    let skip = match ev.kind {
                        EventKind::Put => w.no_put,
                        EventKind::Delete => w.no_delete,
                    };
                    if !skip {
                        events.push(event(ev));
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    ended = Some(e);
                    break;
                }
            }
        }
        if !events.is_empty() {
            let last = events
                .last()
                .and_then(|e| e.kv.as_ref())
                .map_or(0, |kv| kv.mod_revision);
            let resp = PbWatchResponse {
                header: ids.header(db.durable_revision().max(last)),
                watch_id: id,
                events,
                ..PbWatchResponse::default()
            };
            if out.blocking_send(Ok(resp)).is_err() {
                *alive = false;
                return false;
            }
        }
        if let Some(e) = ended {
            let (compact_revision, reason) = match e {
                Error::Compacted { revision, reason } => {
                    (revision, format!("tenure serve: {reason}"))
                }
                _ => (0, EtcdError::Stopped.text().to_string()),
            };
            let resp = PbWatchResponse {
                header: ids.header(db.durable_revision()),
                watch_id: id,
                canceled: true,
                compact_revision,
                cancel_reason: reason,
                ..PbWatchResponse::default()
            };
            *alive = out.blocking_send(Ok(resp)).is_ok();
            return false;
        }
        if events_pending(&w.watcher) {
            continue;
        }
        return true;
    }
}

fn events_pending(w: &Watcher) -> bool {
    !w.channel().is_empty()
}

fn pump(
    db: &tenure::Tenure,
    ids: Ids,
    ctl: Receiver<Ctl>,
    out: mpsc::Sender<Result<PbWatchResponse, Status>>,
) {
    let mut watchers: BTreeMap<i64, Registered> = BTreeMap::new();
    let mut alive = true;
    while alive {
        let order: Vec<i64> = watchers.keys().copied().collect();
        let ready = {
            let mut sel = Select::new();
            sel.recv(&ctl);
            for id in &order {
                sel.recv(watchers[id].watcher.channel());
            }
            sel.ready()
        };
        if ready == 0 {
            match ctl.try_recv() {
                Ok(Ctl::Add {
                    id,
                    watcher,
                    no_put,
                    no_delete,
                }) => {
                    let created = PbWatchResponse {
                        header: ids.header(db.revision().unwrap_or_default()),
                        watch_id: id,
                        created: true,
                        ..PbWatchResponse::default()
                    };
                    if out.blocking_send(Ok(created)).is_err() {
                        break;
                    }
                    watchers.insert(
                        id,
                        Registered {
                            watcher,
                            no_put,
                            no_delete,
                        },
                    );
                }
                Ok(Ctl::Cancel(id)) => {
                    if watchers.remove(&id).is_some() {
                        let resp = PbWatchResponse {
                            header: ids.header(db.durable_revision()),
                            watch_id: id,
                            canceled: true,
                            ..PbWatchResponse::default()
                        };
                        if out.blocking_send(Ok(resp)).is_err() {
                            break;
                        }
                    }
                }
                Ok(Ctl::Progress) => {
                    // Everything up to `rev` was dispatched before it was read; once every
                    // channel is seen empty after that, all of it has been sent.
                    loop {
                        let rev = db.durable_revision();
                        let mut sent_any = false;
                        let keys: Vec<i64> = watchers.keys().copied().collect();
                        for id in keys {
                            let Some(w) = watchers.get_mut(&id) else {
                                continue;
                            };
                            if events_pending(&w.watcher) {
                                sent_any = true;
                                if !drain(db, ids, id, w, &out, &mut alive) {
                                    watchers.remove(&id);
                                }
                            }
                        }
                        if !alive {
                            break;
                        }
                        if !sent_any {
                            let resp = PbWatchResponse {
                                header: ids.header(rev),
                                watch_id: -1,
                                ..PbWatchResponse::default()
                            };
                            alive = out.blocking_send(Ok(resp)).is_ok();
                            break;
                        }
                    }
                }
                Err(crossbeam_channel::TryRecvError::Disconnected) => break,
                Err(crossbeam_channel::TryRecvError::Empty) => {}
            }
            continue;
        }
        let id = order[ready - 1];
        let Some(w) = watchers.get_mut(&id) else {
            continue;
        };
        if !drain(db, ids, id, w, &out, &mut alive) {
            watchers.remove(&id);
        }
    }
}
