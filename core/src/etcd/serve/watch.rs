//! etcd's Watch service (SPEC E4): many watches on one bidirectional stream.
//!
//! Each stream is one tokio task that reads the client's requests as they come (a bounded
//! amount ahead), and the response stream itself (SPEC E27): h2 polls it for its next response
//! only when the client's flow-control window has room, and each poll handles the requests read
//! ahead and forwards the events of the watchers the engine reports ready (each watcher's
//! `on_ready` callback queues its ID and wakes the response stream, so a stream of 10 000
//! watches looks only at those with something to say), in responses of bounded size, at most
//! two made ahead of h2 asking. A client that does not read is not polled; the engine's
//! per-watcher queues fill (bounded in events and bytes) and the engine cancels those watchers
//! (the client gets `canceled` with the revision to resume from). Writers never wait on a
//! watcher. A client that closes its sending side keeps its watches until it closes the stream
//! (as etcd); one that resets the stream or closes the connection drops the response stream,
//! and with it its watchers.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use etcd_client::proto::{PbEvent, PbWatchRequest, PbWatchRequestUnion, PbWatchResponse};
use prost::Message;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_stream::StreamExt;
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
/// Requests handled or ready watchers drained in one poll of a stream that found no response
/// to give; then it yields its worker (waking itself), so a stream of watchers whose events are
/// all filtered out cannot hold a worker.
const STEPS_PER_POLL: usize = 64;
/// Bytes of requests a stream reads ahead of handling them, each charged its encoded size plus
/// [`REQUEST_OVERHEAD`] (what it takes in memory). h2 closes a connection whose
/// peer leaves too many small DATA frames unread (GOAWAY `too_many_data_frames`), so a
/// client that pipelines thousands of creates on many streams must find them read at once,
/// however long handling them takes.
const READ_AHEAD_BYTES: u32 = 64 * 1024;
/// What a decoded request costs beyond its encoded bytes (the structs and their buffers).
const REQUEST_OVERHEAD: usize = 128;

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
        Ok(Response::new(responses(self.0.clone(), req.into_inner())))
    }
}

/// The responses of one watch stream whose client sends `requests` (SPEC E4, E27): a stream
/// that handles the requests and the ready watchers as it is polled. Needs a tokio runtime
/// (one task reads `requests` ahead).
pub fn responses<R>(ctx: Arc<Ctx>, requests: R) -> BoxStream<PbWatchResponse>
where
    R: tokio_stream::Stream<Item = Result<PbWatchRequest, Status>> + Send + Unpin + 'static,
{
    let (ready_tx, ready) = mpsc::unbounded_channel();
    let (requests_tx, read) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_ahead(requests, requests_tx));
    let mut shutdown = ctx.shutdown.clone();
    Box::pin(Stream {
        ctx,
        out: VecDeque::new(),
        watchers: HashMap::new(),
        ready_tx,
        ready,
        next_id: 0,
        requests: read,
        reading: true,
        reader,
        // (The guard `wait_for` returns is not `Send`: dropped inside.)
        shutdown: Box::pin(async move { drop(shutdown.wait_for(|s| *s).await) }),
        progress: None,
        requests_first: false,
        ended: false,
    })
}

struct Registered {
    watcher: Watcher,
    no_put: bool,
    no_delete: bool,
}

/// One watch stream: its state and the response stream h2 polls (SPEC E27).
struct Stream {
    ctx: Arc<Ctx>,
    /// Responses made and not yet taken by h2: at most two (a step makes at most two, and
    /// steps are taken only while it is empty).
    out: VecDeque<PbWatchResponse>,
    watchers: HashMap<i64, Registered>,
    /// IDs of watchers with something to report, queued by their `on_ready` callbacks (at
    /// most once per watcher until it is drained) and by a drain that stopped at a full
    /// response.
    ready_tx: mpsc::UnboundedSender<i64>,
    ready: mpsc::UnboundedReceiver<i64>,
    next_id: i64,
    /// The client's requests, read ahead by `reader`.
    requests: mpsc::UnboundedReceiver<Request>,
    /// False once the client closed its sending side.
    reading: bool,
    /// The task reading ahead; aborted when the stream goes.
    reader: JoinHandle<()>,
    /// Done on shutdown: the stream ends.
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// A progress request being answered at this revision: the ready watchers are drained
    /// first, requests wait.
    progress: Option<i64>,
    /// Which source the next step looks at first (they alternate, so neither starves).
    requests_first: bool,
    /// The stream ends once `out` is given.
    ended: bool,
}

impl Drop for Stream {
    fn drop(&mut self) {
        // Dropping the watchers cancels them in the engine.
        self.reader.abort();
    }
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
async fn read_ahead<R>(mut input: R, to: mpsc::UnboundedSender<Request>)
where
    R: tokio_stream::Stream<Item = Result<PbWatchRequest, Status>> + Unpin,
{
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

/// What a step of the stream handles next.
enum Next {
    Request(PbWatchRequest),
    /// The client closed its sending side: its watches go on until it closes the stream.
    RequestsEnded,
    /// The client's stream broke.
    Failed,
    Ready(i64),
}

impl tokio_stream::Stream for Stream {
    type Item = Result<PbWatchResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        // Once per poll, not per step: every stream's shutdown waits on one shared channel.
        if !this.ended && this.shutdown.as_mut().poll(cx).is_ready() {
            this.ended = true;
        }
        for _ in 0..STEPS_PER_POLL {
            if let Some(resp) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(resp)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            if let Some(rev) = this.progress {
                // Everything up to `rev` was handed to the watchers, and each of them queued
                // its ID then, before `rev` was read: once the ready queue is empty, all of it
                // is sent.
                match this.ready.try_recv() {
                    Ok(id) => this.drain(id),
                    Err(_) => {
                        this.progress = None;
                        this.send(PbWatchResponse {
                            header: this.ctx.ids.header(rev),
                            watch_id: -1,
                            ..PbWatchResponse::default()
                        });
                    }
                }
                continue;
            }
            match this.next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Next::Request(req)) => this.request(req),
                Poll::Ready(Next::RequestsEnded) => this.reading = false,
                Poll::Ready(Next::Failed) => this.ended = true,
                Poll::Ready(Next::Ready(id)) => this.drain(id),
            }
        }
        // A long run of steps with nothing to send: let the worker's other tasks run.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Stream {
    /// The next request or ready watcher, the two sources taken in turn.
    fn next(&mut self, cx: &mut Context<'_>) -> Poll<Next> {
        let requests_first = self.requests_first;
        self.requests_first = !requests_first;
        for requests in [requests_first, !requests_first] {
            if requests {
                if !self.reading {
                    continue;
                }
                if let Poll::Ready(next) = self.requests.poll_recv(cx) {
                    return Poll::Ready(match next {
                        // The read-ahead permit is given back here: the request is handled next.
                        Some(Ok((req, _read_ahead))) => Next::Request(req),
                        None => Next::RequestsEnded,
                        Some(Err(_)) => Next::Failed,
                    });
                }
            } else if let Poll::Ready(Some(id)) = self.ready.poll_recv(cx) {
                return Poll::Ready(Next::Ready(id));
            }
        }
        Poll::Pending
    }

    fn send(&mut self, resp: PbWatchResponse) {
        self.out.push_back(resp);
    }

    fn request(&mut self, req: PbWatchRequest) {
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
                self.create(create)
            }
            Some(PbWatchRequestUnion::CancelRequest(c)) => {
                if self.watchers.remove(&c.watch_id).is_none() {
                    return;
                }
                let resp = PbWatchResponse {
                    header: self.ctx.ids.header(self.ctx.db.durable_revision()),
                    watch_id: c.watch_id,
                    canceled: true,
                    ..PbWatchResponse::default()
                };
                self.send(resp)
            }
            Some(PbWatchRequestUnion::ProgressRequest(_)) => {
                self.progress = Some(self.ctx.db.durable_revision())
            }
            None => {}
        }
    }

    fn create(&mut self, c: Create) {
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
            return self.send(refuse("etcdserver: duplicate watch ID"));
        }
        if self.watchers.len() >= ctx.max_watches {
            // A row of the one table (the client reads it back exactly); the bound is
            // `--max-watches-per-stream`.
            return self.send(refuse(EtcdError::TooManyWatches.text()));
        }
        if c.key.is_empty() {
            return self.send(refuse(EtcdError::KeyNotProvided.text()));
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
                self.send(created);
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
                self.send(created);
                self.send(canceled)
            }
            Err(e) => {
                let st = errors::status(e);
                self.send(refuse(st.message()))
            }
        }
    }

    /// Sends one response of watcher `id`'s ready events, or its cancel if it ended. A
    /// watcher with more to send is queued again behind the others, so one busy watch cannot
    /// hold the stream.
    fn drain(&mut self, id: i64) {
        let Some(w) = self.watchers.get_mut(&id) else {
            return; // canceled since it was queued
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
        if !events.is_empty() {
            let last = events
                .last()
                .and_then(|e| e.kv.as_ref())
                .map_or(0, |kv| kv.mod_revision);
            let resp = PbWatchResponse {
                header: self
                    .ctx
                    .ids
                    .header(self.ctx.db.durable_revision().max(last)),
                watch_id: id,
                events,
                ..PbWatchResponse::default()
            };
            self.send(resp);
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
                header: self.ctx.ids.header(self.ctx.db.durable_revision()),
                watch_id: id,
                canceled: true,
                compact_revision,
                cancel_reason: reason,
                ..PbWatchResponse::default()
            };
            return self.send(resp);
        }
        if more {
            let _ = self.ready_tx.send(id);
        }
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
