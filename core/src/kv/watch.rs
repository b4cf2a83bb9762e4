//! Watches (SPEC K6): a registry of watchers indexed by key, a bounded history of committed
//! events for resuming, and fan-out that never blocks a writer.
//!
//! Events enter the hub only after the write that made them is durable (the committer calls
//! [`WatchHub::dispatch`] after the commit), in revision order. Each event is stored once and
//! shared (an `Arc`, made when a queue first takes it) by the history and every queue it
//! enters, so a thousand watchers of one key cost one copy of each event, and an event no one
//! watches costs no allocation of its own. A watcher whose queue would exceed its bound (events or
//! bytes) is cancelled with [`Error::Compacted`] naming the revision it can resume from.
//!
//! Finding the watchers of an event costs a hash lookup for single-key watches, one per
//! distinct prefix length for prefix watches, an ordered-map walk over the from-key watches
//! that match, and a scan of the (rare) bounded ranges that are not prefixes; a new watch costs
//! a hash insert plus a binary search of the history and the events it replays.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::{unbounded, Receiver, Sender, TryRecvError};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::locks::Mutex;
use crate::wait::{block_on, Next, Source, Wait};

use crate::error::{Error, Result};
use crate::kv::range::KeyRange;
use crate::types::{Event, KeyValue};

/// How to watch (see [`Tenure::watch`](crate::Tenure::watch)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// Watch every key starting with the given key, not just the key itself.
    pub prefix: bool,
    /// Start from this revision (replayed from the retained history); `None` = from now.
    pub start_revision: Option<i64>,
    /// Include the previous key-value in each event.
    pub prev_kv: bool,
}

/// How much the hub keeps: the history and each watcher's queue, in events and in bytes
/// (as [`event_bytes`] counts them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WatchLimits {
    pub(crate) history: usize,
    pub(crate) history_bytes: usize,
    pub(crate) queue: usize,
    pub(crate) queue_bytes: usize,
}

/// What an event is charged beyond its keys and values: the `Event`, its `KeyValue`s, the
/// `Arc` and a queue slot, rounded up.
const EVENT_OVERHEAD: usize = 192;

fn kv_bytes(kv: &KeyValue) -> usize {
    kv.key.len() + kv.value.len()
}

/// The bytes one event is charged in a queue (with or without its previous key-value) or
/// in the history (with).
pub(crate) fn event_bytes(ev: &Event, prev_kv: bool) -> usize {
    let prev = match &ev.prev_kv {
        Some(p) if prev_kv => kv_bytes(p),
        _ => 0,
    };
    EVENT_OVERHEAD + kv_bytes(&ev.kv) + prev
}

/// What a watcher's owner is told: a callback (see [`Watcher::on_ready`]) and whether it is
/// armed (the owner found the queue empty since the last call).
#[derive(Default)]
struct Ready {
    armed: bool,
    callback: Option<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ready")
            .field("armed", &self.armed)
            .field("callback", &self.callback.is_some())
            .finish()
    }
}

#[derive(Debug)]
struct WatchShared {
    /// Why the hub cancelled this watcher, read after the channel disconnects.
    error: Mutex<Option<Error>>,
    /// Set when the `Watcher` is dropped (its queued events are freed with its receiver).
    dropped: AtomicBool,
    /// `Closed`, naming the database: what a watcher reports once it has ended.
    closed: Error,
    /// Whether the watcher's events carry their previous key-value.
    prev_kv: bool,
    /// Bytes queued and not yet read: the hub adds before it sends, the reader subtracts.
    /// `None`: a queue nobody bounds (fed from outside the hub).
    queued_bytes: Option<AtomicUsize>,
    ready: Mutex<Ready>,
    /// The watcher's id and the hub's graveyard: a dropped watcher sends its id there (no lock),
    /// and the hub forgets it at its next access.
    graveyard: Option<(u64, Sender<u64>)>,
}

impl WatchShared {
    fn new(closed: Error, prev_kv: bool, graveyard: Option<(u64, Sender<u64>)>) -> WatchShared {
        WatchShared {
            error: Mutex::new(None),
            dropped: AtomicBool::new(false),
            closed,
            prev_kv,
            queued_bytes: graveyard.as_ref().map(|_| AtomicUsize::new(0)),
            ready: Mutex::new(Ready::default()),
            graveyard,
        }
    }

    /// Runs the ready callback if it is armed: called after an event was queued or the queue's
    /// sender dropped.
    fn wake(&self) {
        let mut r = self.ready.lock();
        if r.armed {
            r.armed = false;
            if let Some(f) = &r.callback {
                f();
            }
        }
    }
}

/// Which index a watcher is found through.
#[derive(Debug)]
enum Shape {
    Key(Vec<u8>),
    Prefix(Vec<u8>),
    /// Every key from this one on (etcd's `range_end` `"\0"`; with key `"\0"`: all keys).
    FromKey(Vec<u8>),
    Other,
}

impl Shape {
    fn of(range: &KeyRange) -> Shape {
        if let Some(k) = range.single_key() {
            Shape::Key(k.to_vec())
        } else if let Some(p) = range.as_prefix() {
            Shape::Prefix(p.to_vec())
        } else if let Some(k) = range.open_start() {
            Shape::FromKey(k.to_vec())
        } else {
            Shape::Other
        }
    }
}

/// Watcher ids by what they watch.
#[derive(Default)]
struct Index {
    keys: FxHashMap<Vec<u8>, FxHashSet<u64>>,
    prefixes: FxHashMap<Vec<u8>, FxHashSet<u64>>,
    /// Prefix length → how many distinct prefixes of that length are indexed.
    prefix_lens: BTreeMap<usize, usize>,
    /// By first key: those at or below an event's key all match it.
    from_keys: BTreeMap<Vec<u8>, FxHashSet<u64>>,
    others: FxHashSet<u64>,
}

impl Index {
    fn insert(&mut self, shape: &Shape, id: u64) {
        match shape {
            Shape::Key(k) => {
                self.keys.entry(k.clone()).or_default().insert(id);
            }
            Shape::Prefix(p) => {
                let ids = self.prefixes.entry(p.clone()).or_default();
                if ids.is_empty() {
                    *self.prefix_lens.entry(p.len()).or_default() += 1;
                }
                ids.insert(id);
            }
            Shape::FromKey(k) => {
                self.from_keys.entry(k.clone()).or_default().insert(id);
            }
            Shape::Other => {
                self.others.insert(id);
            }
        }
    }

    fn remove(&mut self, shape: &Shape, id: u64) {
        match shape {
            Shape::Key(k) => {
                if let Some(ids) = self.keys.get_mut(k) {
                    ids.remove(&id);
                    if ids.is_empty() {
                        self.keys.remove(k);
                    }
                }
            }
            Shape::Prefix(p) => {
                if let Some(ids) = self.prefixes.get_mut(p) {
                    ids.remove(&id);
                    if ids.is_empty() {
                        self.prefixes.remove(p);
                        if let Some(n) = self.prefix_lens.get_mut(&p.len()) {
                            *n -= 1;
                            if *n == 0 {
                                self.prefix_lens.remove(&p.len());
                            }
                        }
                    }
                }
            }
            Shape::FromKey(k) => {
                if let Some(ids) = self.from_keys.get_mut(k) {
                    ids.remove(&id);
                    if ids.is_empty() {
                        self.from_keys.remove(k);
                    }
                }
            }
            Shape::Other => {
                self.others.remove(&id);
            }
        }
    }

    /// Calls `f` with every watcher id whose key, prefix or first key matches `key`, and every
    /// id of an other-shaped range (the caller checks those).
    fn candidates(&self, key: &[u8], mut f: impl FnMut(u64)) {
        if let Some(ids) = self.keys.get(key) {
            ids.iter().for_each(|&id| f(id));
        }
        for &len in self.prefix_lens.range(..=key.len()).map(|(l, _)| l) {
            if let Some(ids) = self.prefixes.get(&key[..len]) {
                ids.iter().for_each(|&id| f(id));
            }
        }
        let upto = (Bound::Unbounded, Bound::Included(key));
        for ids in self.from_keys.range::<[u8], _>(upto).map(|(_, ids)| ids) {
            ids.iter().for_each(|&id| f(id));
        }
        self.others.iter().for_each(|&id| f(id));
    }

    fn clear(&mut self) {
        *self = Index::default();
    }
}

struct Registered {
    range: KeyRange,
    shape: Shape,
    start: i64,
    /// Unbounded channel: it grows with the events actually queued, never reserved up front;
    /// `cap` and `cap_bytes` bound it (the queue limits plus the replay it started with).
    /// `None` only while being dropped.
    tx: Option<Sender<Arc<Event>>>,
    cap: usize,
    cap_bytes: usize,
    shared: Arc<WatchShared>,
}

impl Drop for Registered {
    /// Ends the watcher: its reader sees the channel disconnect, and is woken to see it.
    fn drop(&mut self) {
        drop(self.tx.take());
        self.shared.wake();
    }
}

/// An event of the history: kept as it came until a queue takes it, shared from then on (so
/// the writes no one watches allocate nothing for the history, BENCHMARKS.md §10).
enum Kept {
    Plain(Event),
    Shared(Arc<Event>),
}

impl Kept {
    /// The event as a watcher's queue takes it: one copy, shared by every queue and the history.
    fn share(&mut self) -> Arc<Event> {
        let shared = match self {
            Kept::Shared(ev) => return ev.clone(),
            Kept::Plain(ev) => Arc::new(Event {
                kind: ev.kind,
                kv: std::mem::take(&mut ev.kv),
                prev_kv: ev.prev_kv.take(),
            }),
        };
        *self = Kept::Shared(shared.clone());
        shared
    }
}

impl std::ops::Deref for Kept {
    type Target = Event;

    fn deref(&self) -> &Event {
        match self {
            Kept::Plain(ev) => ev,
            Kept::Shared(ev) => ev,
        }
    }
}

/// The watcher registry and event history. Guarded by the engine's hub mutex.
pub(crate) struct WatchHub {
    watchers: FxHashMap<u64, Registered>,
    index: Index,
    next_id: u64,
    graveyard: (Sender<u64>, Receiver<u64>),
    history: VecDeque<Kept>,
    /// Sum of [`event_bytes`] (with previous key-values) over `history`.
    history_bytes: usize,
    limits: WatchLimits,
    /// Highest revision no longer (fully) in `history`.
    compacted: i64,
    /// The engine's `Closed` error (it names the database), for every watcher.
    closed: Error,
}

impl WatchHub {
    pub(crate) fn new(limits: WatchLimits, revision: i64, closed: Error) -> WatchHub {
        WatchHub {
            closed,
            watchers: FxHashMap::default(),
            index: Index::default(),
            next_id: 0,
            graveyard: unbounded(),
            history: VecDeque::new(),
            history_bytes: 0,
            limits: WatchLimits {
                queue: limits.queue.max(1),
                ..limits
            },
            compacted: revision,
        }
    }

    /// Whether writes need to record events at all.
    pub(crate) fn wants_events(&self) -> bool {
        self.limits.history > 0 || !self.watchers.is_empty()
    }

    pub(crate) fn watcher_count(&mut self) -> usize {
        self.bury();
        self.watchers.len()
    }

    /// Forgets the watchers dropped since the last call: O(dropped), not O(watchers).
    fn bury(&mut self) {
        while let Ok(id) = self.graveyard.1.try_recv() {
            self.remove(id);
        }
    }

    fn remove(&mut self, id: u64) -> Option<Registered> {
        let w = self.watchers.remove(&id)?;
        self.index.remove(&w.shape, id);
        Some(w)
    }

    /// Registers a watcher. `revision` is the engine's current (applied) revision: "from now"
    /// means every event after it.
    /// With `earlier` events (read from the store's history, in
    /// order, on keys of `range`) queued before the ones from `opts.start_revision` on.
    pub(crate) fn register_after(
        &mut self,
        range: KeyRange,
        opts: &WatchOptions,
        revision: i64,
        earlier: Vec<Event>,
    ) -> Result<Watcher> {
        let start = match opts.start_revision {
            None => revision + 1,
            Some(r) => crate::limits::check_start_revision(r)?,
        };
        let compacted = self.floor(revision) - 1;
        if start <= compacted {
            return Err(Error::Compacted {
                revision: start,
                compact_revision: compacted + 1,
                reason: format!("the watch history starts after revision {compacted}"),
            });
        }
        self.bury();
        let id = self.next_id;
        self.next_id += 1;
        let shared = Arc::new(WatchShared::new(
            self.closed.clone(),
            opts.prev_kv,
            Some((id, self.graveyard.0.clone())),
        ));
        let (tx, rx) = unbounded();
        // The history is in revision order: only its tail from `start` is looked at.
        let from = self.history.partition_point(|e| e.revision() < start);
        let (mut replayed, mut bytes) = (0usize, 0usize);
        for ev in earlier {
            replayed += 1;
            bytes += event_bytes(&ev, opts.prev_kv);
            let _ = tx.send(Arc::new(ev));
        }
        for ev in self.history.range_mut(from..) {
            if range.contains(&ev.kv.key) {
                replayed += 1;
                bytes += event_bytes(ev, opts.prev_kv);
                let _ = tx.send(ev.share());
            }
        }
        if let Some(q) = &shared.queued_bytes {
            q.store(bytes, Ordering::Relaxed);
        }
        let shape = Shape::of(&range);
        self.index.insert(&shape, id);
        self.watchers.insert(
            id,
            Registered {
                range,
                shape,
                start,
                tx: Some(tx),
                cap: self.limits.queue.saturating_add(replayed),
                cap_bytes: self.limits.queue_bytes.saturating_add(bytes),
                shared: shared.clone(),
            },
        );
        Ok(Watcher {
            rx,
            shared,
            finished: false,
        })
    }

    /// Delivers committed events (in revision order) and retains them in the history.
    pub(crate) fn dispatch(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        // With no watcher left, the dropped ones wait for the next register or count.
        if !self.watchers.is_empty() {
            self.bury();
        }
        let mut events: Vec<Kept> = events.into_iter().map(Kept::Plain).collect();
        if !self.watchers.is_empty() {
            let mut hits: Vec<(u64, usize)> = Vec::new();
            // One revision at a time, and a revision enters a watcher's queue whole or not at
            // all, so a cancelled watcher resumes exactly at the revision it did not get.
            for group in events.chunk_by_mut(|a, b| a.revision() == b.revision()) {
                hits.clear();
                for (i, ev) in group.iter().enumerate() {
                    self.index.candidates(&ev.kv.key, |id| hits.push((id, i)));
                }
                // By watcher, each watcher's events in order.
                hits.sort_unstable();
                for run in hits.chunk_by(|a, b| a.0 == b.0) {
                    self.deliver(run[0].0, group, run);
                }
            }
        }
        self.retain(events);
    }

    /// Queues the events `run` names (of one revision's `group`) to watcher `id`, or cancels it
    /// if they do not fit.
    fn deliver(&mut self, id: u64, group: &mut [Kept], run: &[(u64, usize)]) {
        let Some(w) = self.watchers.get(&id) else {
            return;
        };
        if w.shared.dropped.load(Ordering::Relaxed) {
            self.remove(id);
            return;
        }
        let revision = group[0].revision();
        let mine = || {
            run.iter()
                .map(|&(_, i)| i)
                .filter(|&i| w.range.contains(&group[i].kv.key))
        };
        if revision < w.start || mine().next().is_none() {
            return;
        }
        let (count, bytes) = mine().fold((0, 0), |(n, b), i| {
            (n + 1, b + event_bytes(&group[i], w.shared.prev_kv))
        });
        let tx = w.tx.as_ref().expect("a registered watcher has its sender");
        let queued = tx.len();
        let queued_bytes = w
            .shared
            .queued_bytes
            .as_ref()
            .map_or(0, |q| q.load(Ordering::Relaxed));
        // A watcher that has read everything always gets the next revision, however large.
        let over = if queued == 0 {
            None
        } else if queued + count > w.cap {
            Some(format!("{} events", self.limits.queue))
        } else if queued_bytes + bytes > w.cap_bytes {
            Some(format!("{} bytes", self.limits.queue_bytes))
        } else {
            None
        };
        if let Some(limit) = over {
            *w.shared.error.lock() = Some(Error::Compacted {
                revision,
                compact_revision: 0,
                reason: format!("the watcher fell more than {limit} behind and was cancelled"),
            });
            self.remove(id);
            return;
        }
        if let Some(q) = &w.shared.queued_bytes {
            q.fetch_add(bytes, Ordering::Relaxed);
        }
        let sent = run.iter().all(|&(_, i)| {
            !w.range.contains(&group[i].kv.key) || tx.send(group[i].share()).is_ok()
        });
        if sent {
            w.shared.wake();
        } else {
            self.remove(id);
        }
    }

    /// Keeps `events` in the history, then trims it to its bounds (whole revisions only).
    fn retain(&mut self, events: Vec<Kept>) {
        if self.limits.history == 0 {
            if let Some(last) = events.last() {
                self.compacted = last.revision();
            }
            return;
        }
        for ev in events {
            self.history_bytes += event_bytes(&ev, true);
            self.history.push_back(ev);
        }
        let over = |hub: &WatchHub| {
            hub.history.len() > hub.limits.history || hub.history_bytes > hub.limits.history_bytes
        };
        if over(self) {
            while over(self) {
                self.pop_history();
            }
            // Never keep part of a revision.
            while self
                .history
                .front()
                .is_some_and(|e| e.revision() == self.compacted)
            {
                self.pop_history();
            }
        }
    }

    fn pop_history(&mut self) {
        if let Some(ev) = self.history.pop_front() {
            self.history_bytes -= event_bytes(&ev, true);
            self.compacted = ev.revision();
        }
    }

    /// The oldest revision a watch can start from, given the current one.
    pub(crate) fn floor(&self, revision: i64) -> i64 {
        // Without a history nothing is recorded while no one watches, so no past revision can
        // be replayed: only revisions after the current one are watchable.
        let compacted = if self.limits.history == 0 {
            self.compacted.max(revision)
        } else {
            self.compacted
        };
        compacted + 1
    }

    /// Drops the history up to and including `revision` (etcd's Compact, SPEC E2).
    pub(crate) fn compact(&mut self, revision: i64) {
        while self
            .history
            .front()
            .is_some_and(|e| e.revision() <= revision)
        {
            self.pop_history();
        }
        self.compacted = self.compacted.max(revision);
    }

    /// Ends every watcher (engine closed).
    pub(crate) fn close(&mut self) {
        self.watchers.clear();
        self.index.clear();
        self.history.clear();
        self.history_bytes = 0;
    }
}

/// A stream of [`Event`]s for a key or prefix, in revision order.
///
/// As an iterator it yields `Ok(event)`, then at most one `Err` (the watcher fell behind:
/// [`Error::Compacted`]) and ends; it also ends when the engine closes. Dropping it cancels the
/// watch.
#[derive(Debug)]
pub struct Watcher {
    rx: Receiver<Arc<Event>>,
    shared: Arc<WatchShared>,
    finished: bool,
}

impl Watcher {
    /// A watcher fed by another source: for a [`Backend`](crate::sync::Backend) other than the
    /// embedded engine (its events, in revision order, arrive on `events`; when their sender
    /// is dropped the watcher ends, as on close). Its [`on_ready`](Self::on_ready) callback is
    /// called once, when set: nothing tells it when `events` gets more.
    pub fn from_events(events: Receiver<Arc<Event>>) -> Watcher {
        Watcher {
            rx: events,
            shared: Arc::new(WatchShared::new(
                Error::Closed("the backend".into()),
                true,
                None,
            )),
            finished: false,
        }
    }

    /// The raw event channel, to wait on many watchers at once (`crossbeam_channel::Select`);
    /// read events with [`try_recv`](Self::try_recv), which also reports why a watch ended.
    pub fn channel(&self) -> &Receiver<Arc<Event>> {
        &self.rx
    }

    /// Calls `ready` now and then each time this watcher has something to report (an event, or
    /// its end) after [`try_recv`](Self::try_recv) found nothing: so a reader that drains it
    /// with `try_recv` on each call misses nothing, without a thread waiting on it (an async
    /// task's waker, a queue of ready watchers). `ready` runs on the thread that queues the
    /// event, under the engine's watch lock: it must be quick, must not block and must not
    /// call into the engine or this watcher.
    pub fn on_ready(&self, ready: impl Fn() + Send + Sync + 'static) {
        let mut r = self.shared.ready.lock();
        r.armed = false;
        ready();
        r.callback = Some(Box::new(ready));
    }

    pub(crate) fn ended(&mut self) -> Error {
        self.finished = true;
        let closed = &self.shared.closed;
        self.shared
            .error
            .lock()
            .take()
            .unwrap_or_else(|| closed.clone())
    }

    /// An event off the queue, as this watcher reports it.
    fn unqueue(&self, ev: Arc<Event>) -> Event {
        let prev_kv = self.shared.prev_kv;
        if let Some(q) = &self.shared.queued_bytes {
            q.fetch_sub(event_bytes(&ev, prev_kv), Ordering::Relaxed);
        }
        match Arc::try_unwrap(ev) {
            Ok(mut ev) => {
                if !prev_kv {
                    ev.prev_kv = None;
                }
                ev
            }
            Err(ev) => Event {
                kind: ev.kind,
                kv: ev.kv.clone(),
                prev_kv: if prev_kv { ev.prev_kv.clone() } else { None },
            },
        }
    }

    /// Waits for the next event. `Err(Closed)` once the engine is closed; `Err(Compacted)` if the
    /// watcher fell behind.
    pub fn recv(&mut self) -> Result<Event> {
        if self.finished {
            return Err(self.shared.closed.clone());
        }
        match self.rx.recv() {
            Ok(ev) => Ok(self.unqueue(ev)),
            Err(_) => Err(self.ended()),
        }
    }

    /// Like [`recv`](Self::recv), giving up with `Err(Timeout)` when `wait` runs out (its
    /// deadline passes or its stop token is raised). An event already queued wins.
    pub fn recv_timeout(&mut self, wait: impl Into<Wait>) -> Result<Event> {
        block_on(Next::new(self, wait, "a watch event"))
    }

    /// The next event if one is ready.
    pub fn try_recv(&mut self) -> Result<Option<Event>> {
        if self.finished {
            return Err(self.shared.closed.clone());
        }
        let next = match self.rx.try_recv() {
            Err(TryRecvError::Empty) => {
                // Arm the callback, then look again under its lock: what is queued before the
                // lock is seen here, what is queued after finds the callback armed.
                let mut r = self.shared.ready.lock();
                if r.callback.is_none() {
                    return Ok(None);
                }
                r.armed = true;
                let again = self.rx.try_recv();
                if again.is_ok() || again == Err(TryRecvError::Disconnected) {
                    r.armed = false;
                }
                again
            }
            other => other,
        };
        match next {
            Ok(ev) => Ok(Some(self.unqueue(ev))),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(self.ended()),
        }
    }
}

/// The sending end of a [`Watcher`] fed from outside the hub (an etcd watch stream).
#[cfg(feature = "remote")]
#[derive(Debug)]
pub(crate) struct WatchFeed {
    /// `None` only while being dropped.
    tx: Option<Sender<Arc<Event>>>,
    shared: Arc<WatchShared>,
}

#[cfg(feature = "remote")]
impl WatchFeed {
    /// A watcher and the feed that fills it.
    pub(crate) fn new() -> (WatchFeed, Watcher) {
        let (tx, rx) = unbounded();
        let shared = Arc::new(WatchShared::new(
            Error::Closed("(etcd connection)".into()),
            true,
            None,
        ));
        let w = Watcher {
            rx,
            shared: shared.clone(),
            finished: false,
        };
        (
            WatchFeed {
                tx: Some(tx),
                shared,
            },
            w,
        )
    }

    /// Queues an event; false once the watcher is dropped.
    pub(crate) fn send(&self, ev: Event) -> bool {
        let sent = !self.is_dropped()
            && self
                .tx
                .as_ref()
                .is_some_and(|tx| tx.send(Arc::new(ev)).is_ok());
        self.shared.wake();
        sent
    }

    /// Whether the watcher was dropped.
    pub(crate) fn is_dropped(&self) -> bool {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Ends the watch with `e` (read after the queued events).
    pub(crate) fn fail(self, e: Error) {
        *self.shared.error.lock() = Some(e);
    }
}

#[cfg(feature = "remote")]
impl Drop for WatchFeed {
    fn drop(&mut self) {
        drop(self.tx.take());
        self.shared.wake();
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shared.dropped.store(true, Ordering::Relaxed);
        if let Some((id, graveyard)) = &self.shared.graveyard {
            // Lock-free: `drop` may run anywhere, even under the engine's locks.
            let _ = graveyard.send(*id);
        }
    }
}

impl Source for Watcher {
    type Item = Event;
    type Wakeup = Arc<Event>;

    fn try_next(&mut self) -> Result<Option<Event>> {
        self.try_recv()
    }

    fn wakeup(&self) -> &Receiver<Arc<Event>> {
        &self.rx
    }
}

impl Iterator for Watcher {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Result<Event>> {
        match self.recv() {
            Ok(ev) => Some(Ok(ev)),
            Err(Error::Closed(_)) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
