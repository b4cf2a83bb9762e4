//! etcd's Watch service (SPEC E4): many watches on one bidirectional stream.
//!
//! Each stream is two tokio tasks, no thread: one reads the client's requests as they come
//! (a bounded amount ahead), the other handles them and forwards the events of the watchers
//! the engine reports ready (each watcher's `on_ready` callback
//! queues its ID, so a stream of 10 000 watches looks only at those with something to say) to
//! the gRPC response stream, through a small bounded queue of responses of bounded size. A
//! client that does not read fills that queue; the task then waits, the engine's per-watcher
//! queues fill (bounded in events and bytes) and the engine cancels those watchers (the client
//! gets `canceled` with the revision to resume from). Writers never wait on a watcher. A client
//! that closes its sending side keeps its watches until it closes the stream (as etcd).

use std::collections::HashMap;
use std::sync::Arc;

use etcd_client::proto::{PbEvent, PbWatchRequest, PbWatchRequestUnion, PbWatchResponse};
use prost::Message;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_stream::{wrappers::ReceiverStream, StreamExt};
use tonic::{Response, Status, Streaming};

use super::convert;
use super::errors;
use super::service::{BoxStream, Ctx};
use crate::error::Error;
use crate::etcd::errors::EtcdError;
use crate::etcd::WatchStart;
use crate::kv::watch::WatchOptions;
use crate::kv::watch::Watcher;
use crate::types::Event;
use crate::types::EventKind;

/// Default of `--max-watches-per-stream`; more → the create is answered canceled.
pub const MAX_WATCHES_PER_STREAM: usize = 10_000;
/// Most events in one response.
const EVENTS_PER_RESPONSE: usize = 1000;
/// A response is sent once its events' keys and values reach this many bytes (a single
/// larger event goes alone), so what a stream holds for a slow client stays small.
const RESPONSE_BYTES: usize = 16 * 1024;
/// Responses queued for a slow client before the stream's task waits.
const RESPONSE_QUEUE: usize = 2;
/// Bytes of requests a stream reads ahead of handling them, each charged its encoded size plus
/// [`REQUEST_OVERHEAD`] (what it takes in memory). h2 closes a connection whose
/// peer leaves too many small DATA frames unread (GOAWAY `too_many_data_frames`), so a
/// client that pipelines thousands of creates on many streams must find them read at once,
/// however long handling them takes.
const READ_AHEAD_BYTES: u32 = 64 * 1024;
/// What a decoded request costs beyond its encoded bytes (the structs and their buffers).
const REQUEST_OVERHEAD: usize = 128;

type Out = mpsc::Sender<Result<PbWatchResponse, Status>>;

/// etcd's Watch service: many watches on one stream.
#[derive(Clone, Debug)]
pub struct Watch(pub Arc<Ctx>);

#[tonic::async_trait]
impl etcd_client::proto::PbWatchService for Watch {
    type WatchStream = BoxStream<PbWatchResponse>;

    async fn watch(
        &self,
        req: tonic::Request<Streaming<PbWatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let (out, out_rx) = mpsc::channel(RESPONSE_QUEUE);
        let (ready_tx, ready) = mpsc::unbounded_channel();
        let stream = Stream {
            ctx: self.0.clone(),
            out,
            watchers: HashMap::new(),
            ready_tx,
            ready,
            next_id: 0,
        };
        let (requests_tx, requests) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_ahead(req.into_inner(), requests_tx));
        tokio::spawn(async move {
            stream.run(requests).await;
            reader.abort();
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out_rx))))
    }
}

struct Registered {
    watcher: Watcher,
    no_put: bool,
    no_delete: bool,
}

/// One watch stream's state, owned by its task.
struct Stream {
    ctx: Arc<Ctx>,
    out: Out,
    watchers: HashMap<i64, Registered>,
    /// IDs of watchers with something to report, queued by their `on_ready` callbacks (at
    /// most once per watcher until it is drained) and by a drain that stopped at a full
    /// response.
    ready_tx: mpsc::UnboundedSender<i64>,
    ready: mpsc::UnboundedReceiver<i64>,
    next_id: i64,
}

/// A create request, as read off the wire.
struct Create {
    id: i64,
    key: Vec<u8>,
    range_end: Vec<u8>,
    opts: WatchOptions,
    no_put: bool,
    no_delete: bool,
}

/// A request read ahead, holding its share of [`READ_AHEAD_BYTES`] until it is handled.
type Request = Result<(PbWatchRequest, OwnedSemaphorePermit), Status>;

/// Reads the client's requests as they come, at most [`READ_AHEAD_BYTES`] ahead of the
/// stream's task; ends when the client closes its side (or the stream's task is gone).
async fn read_ahead(mut input: Streaming<PbWatchRequest>, to: mpsc::UnboundedSender<Request>) {
    let budget = Arc::new(Semaphore::new(READ_AHEAD_BYTES as usize));
    while let Some(next) = input.next().await {
        let next = match next {
            Ok(req) => {
                let bytes = req.encoded_len().saturating_add(REQUEST_OVERHEAD);
                let bytes =
                    u32::try_from(bytes).map_or(READ_AHEAD_BYTES, |b| b.min(READ_AHEAD_BYTES));
                match budget.clone().acquire_many_owned(bytes).await {
                    Ok(permit) => Ok((req, permit)),
                    Err(_) => return,
                }
            }
            Err(st) => Err(st),
        };
        if to.send(next).is_err() {
            return;
        }
    }
}

/// The client is gone: the stream ends.
struct Gone;

impl Stream {
    async fn run(mut self, mut input: mpsc::UnboundedReceiver<Request>) {
        let mut shutdown = self.ctx.shutdown.clone();
        let mut reading = true;
        loop {
            let step = tokio::select! {
                // (The guard `wait_for` returns is not `Send`: drop it inside.)
                _ = async { drop(shutdown.wait_for(|s| *s).await) } => break,
                _ = self.out.closed() => break,
                Some(id) = self.ready.recv() => self.drain(id).await,
                next = input.recv(), if reading => match next {
                    Some(Ok((req, _read_ahead))) => self.request(req).await,
                    // The client closed its side: its watches go on until it closes the stream.
                    None => {
                        reading = false;
                        Ok(())
                    }
                    Some(Err(_)) => break,
                },
            };
            if step.is_err() {
                break;
            }
        }
        // Dropping the watchers cancels them in the engine.
    }

    async fn send(&self, resp: PbWatchResponse) -> Result<(), Gone> {
        self.out.send(Ok(resp)).await.map_err(|_| Gone)
    }

    async fn request(&mut self, req: PbWatchRequest) -> Result<(), Gone> {
        match req.request_union {
            Some(PbWatchRequestUnion::CreateRequest(c)) => {
                let create = Create {
                    id: c.watch_id,
                    no_put: c.filters.contains(&0),
                    no_delete: c.filters.contains(&1),
                    opts: WatchOptions {
                        prefix: false,
                        start_revision: (c.start_revision > 0).then_some(c.start_revision),
                        prev_kv: c.prev_kv,
                    },
                    key: c.key,
                    range_end: c.range_end,
                };
                self.create(create).await
            }
            Some(PbWatchRequestUnion::CancelRequest(c)) => {
                if self.watchers.remove(&c.watch_id).is_none() {
                    return Ok(());
                }
                let resp = PbWatchResponse {
                    header: self.ctx.ids.header(self.ctx.db.durable_revision()),
                    watch_id: c.watch_id,
                    canceled: true,
                    ..PbWatchResponse::default()
                };
                self.send(resp).await
            }
            Some(PbWatchRequestUnion::ProgressRequest(_)) => self.progress().await,
            None => Ok(()),
        }
    }

    async fn create(&mut self, c: Create) -> Result<(), Gone> {
        let mut id = c.id;
        if id <= 0 {
            while self.watchers.contains_key(&self.next_id) {
                self.next_id += 1;
            }
            id = self.next_id;
            self.next_id += 1;
        }
        let ctx = self.ctx.clone();
        let rev = ctx.db.revision().unwrap_or_default();
        let refuse = |reason: &str| PbWatchResponse {
            header: ctx.ids.header(rev),
            watch_id: id,
            created: true,
            canceled: true,
            cancel_reason: reason.into(),
            ..PbWatchResponse::default()
        };
        if self.watchers.contains_key(&id) {
            return self.send(refuse("etcdserver: duplicate watch ID")).await;
        }
        if self.watchers.len() >= ctx.max_watches {
            // A row of the one table (the client reads it back exactly); the bound is
            // `--max-watches-per-stream`.
            return self.send(refuse(EtcdError::TooManyWatches.text())).await;
        }
        if c.key.is_empty() {
            return self.send(refuse(EtcdError::KeyNotProvided.text())).await;
        }
        // Inline: registering costs a hash insert and the events it replays.
        match ctx.db.watch_range(&c.key, &c.range_end, c.opts) {
            Ok(WatchStart::Started(watcher)) => {
                let created = PbWatchResponse {
                    header: ctx.ids.header(rev),
                    watch_id: id,
                    created: true,
                    ..PbWatchResponse::default()
                };
                // `created` goes before any event of the watch: events are looked at only
                // once its callback is set.
                self.send(created).await?;
                let ready = self.ready_tx.clone();
                watcher.on_ready(move || {
                    let _ = ready.send(id);
                });
                self.watchers.insert(
                    id,
                    Registered {
                        watcher,
                        no_put: c.no_put,
                        no_delete: c.no_delete,
                    },
                );
                Ok(())
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
                self.send(created).await?;
                self.send(canceled).await
            }
            Err(e) => {
                let st = errors::status(e);
                self.send(refuse(st.message())).await
            }
        }
    }

    /// Sends one response of watcher `id`'s ready events, or its cancel if it ended. A
    /// watcher with more to send is queued again behind the others, so one busy watch cannot
    /// hold the stream.
    async fn drain(&mut self, id: i64) -> Result<(), Gone> {
        let Some(w) = self.watchers.get_mut(&id) else {
            return Ok(()); // canceled since it was queued
        };
        let mut events = Vec::new();
        let mut bytes = 0;
        let mut more = true;
        let mut ended = None;
        while events.len() < EVENTS_PER_RESPONSE && bytes < RESPONSE_BYTES {
            match w.watcher.try_recv() {
                Ok(Some(ev)) => {
                    let skip = match ev.kind {
                        EventKind::Put => w.no_put,
                        EventKind::Delete => w.no_delete,
                    };
                    if !skip {
                        bytes += event_bytes(&ev);
                        events.push(event(ev));
                    }
                }
                Ok(None) => {
                    more = false;
                    break;
                }
                Err(e) => {
                    ended = Some(e);
                    break;
                }
            }
        }
        let db = &self.ctx.db;
        if !events.is_empty() {
            let last = events
                .last()
                .and_then(|e| e.kv.as_ref())
                .map_or(0, |kv| kv.mod_revision);
            let resp = PbWatchResponse {
                header: self.ctx.ids.header(db.durable_revision().max(last)),
                watch_id: id,
                events,
                ..PbWatchResponse::default()
            };
            self.send(resp).await?;
        }
        if let Some(e) = ended {
            self.watchers.remove(&id);
            let (compact_revision, reason) = match e {
                Error::Compacted {
                    revision, reason, ..
                } => (revision, format!("tenure serve: {reason}")),
                _ => (0, EtcdError::Stopped.text().to_string()),
            };
            let resp = PbWatchResponse {
                header: self.ctx.ids.header(db.durable_revision()),
                watch_id: id,
                canceled: true,
                compact_revision,
                cancel_reason: reason,
                ..PbWatchResponse::default()
            };
            return self.send(resp).await;
        }
        if more {
            let _ = self.ready_tx.send(id);
        }
        Ok(())
    }

    /// A progress notification (watch ID -1) at a revision every event up to which has been
    /// sent.
    async fn progress(&mut self) -> Result<(), Gone> {
        // Everything up to `rev` was handed to the watchers, and each of them queued its ID
        // then, before `rev` was read: once the ready queue is empty, all of it is sent.
        let rev = self.ctx.db.durable_revision();
        while let Ok(id) = self.ready.try_recv() {
            self.drain(id).await?;
        }
        let resp = PbWatchResponse {
            header: self.ctx.ids.header(rev),
            watch_id: -1,
            ..PbWatchResponse::default()
        };
        self.send(resp).await
    }
}

/// What an event adds to a response, roughly: its keys and values.
fn event_bytes(ev: &Event) -> usize {
    let kv = |kv: &crate::types::KeyValue| kv.key.len() + kv.value.len();
    kv(&ev.kv) + ev.prev_kv.as_ref().map_or(0, kv)
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
