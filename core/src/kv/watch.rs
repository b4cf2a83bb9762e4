//! Watches (SPEC K6): a registry of watchers, a bounded history of committed events for
//! resuming, and fan-out that never blocks a writer.
//!
//! Events enter the hub only after the write that made them is durable (the committer calls
//! [`WatchHub::dispatch`] after the commit), in revision order. A watcher whose queue is full is
//! cancelled with [`Error::Compacted`] naming the revision it can resume from.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::locks::Mutex;
use crossbeam_channel::{unbounded, Receiver, Sender, TryRecvError};

use crate::wait::{block_on, Next, Source, Wait};

use crate::error::{Error, Result};
use crate::kv::range::KeyRange;
use crate::types::Event;

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

#[derive(Debug)]
struct WatchShared {
    /// Why the hub cancelled this watcher, read after the channel disconnects.
    error: Mutex<Option<Error>>,
    /// Set when the `Watcher` is dropped; the hub forgets it at its next access (no lock is
    /// taken in `Drop`, which may run anywhere). Its queued events were freed with it.
    dropped: AtomicBool,
    /// `Closed`, naming the database: what a watcher reports once it has ended.
    closed: Error,
}

struct Registered {
    range: KeyRange,
    prev_kv: bool,
    start: i64,
    /// Unbounded channel: it grows with the events actually queued, never reserved up front;
    /// `cap` bounds it (the queue limit plus the replay it started with).
    tx: Sender<Event>,
    cap: usize,
    shared: Arc<WatchShared>,
}

impl Registered {
    fn dropped(&self) -> bool {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    fn matches(&self, ev: &Event) -> bool {
        ev.revision() >= self.start && self.range.contains(&ev.kv.key)
    }

    fn prepare(&self, ev: &Event) -> Event {
        Event {
            kind: ev.kind,
            kv: ev.kv.clone(),
            prev_kv: if self.prev_kv {
                ev.prev_kv.clone()
            } else {
                None
            },
        }
    }
}

/// The watcher registry and event history. Guarded by the engine's hub mutex.
///
/// Watchers of one key (every lock or campaign wait has two) are indexed by that key, so a
/// commit costs a lookup per key it wrote, not a check per watcher; only range and prefix
/// watchers are checked one by one.
pub(crate) struct WatchHub {
    /// Range and prefix watchers.
    watchers: Vec<Registered>,
    /// Single-key watchers by their key (no empty list is kept).
    by_key: HashMap<Vec<u8>, Vec<Registered>>,
    /// Watchers registered since dropped ones were last forgotten everywhere: a full prune runs
    /// when this passes the number then alive, so dropped watchers of keys nobody writes never
    /// hold more than about as much again as the live ones.
    since_prune: usize,
    live_at_prune: usize,
    history: VecDeque<Event>,
    history_cap: usize,
    queue_cap: usize,
    /// Highest revision no longer (fully) in `history`.
    compacted: i64,
    /// The engine's `Closed` error (it names the database), for every watcher.
    closed: Error,
}

impl WatchHub {
    pub(crate) fn new(
        history_cap: usize,
        queue_cap: usize,
        revision: i64,
        closed: Error,
    ) -> WatchHub {
        WatchHub {
            closed,
            watchers: Vec::new(),
            by_key: HashMap::new(),
            since_prune: 0,
            live_at_prune: 0,
            history: VecDeque::new(),
            history_cap,
            queue_cap: queue_cap.max(1),
            compacted: revision,
        }
    }

    /// Whether writes need to record events at all.
    pub(crate) fn wants_events(&self) -> bool {
        self.history_cap > 0 || !self.watchers.is_empty() || !self.by_key.is_empty()
    }

    pub(crate) fn watcher_count(&mut self) -> usize {
        self.prune();
        self.watchers.len() + self.by_key.values().map(Vec::len).sum::<usize>()
    }

    /// Forgets dropped watchers.
    fn prune(&mut self) {
        self.watchers.retain(|w| !w.dropped());
        self.by_key.retain(|_, list| {
            list.retain(|w| !w.dropped());
            !list.is_empty()
        });
        self.since_prune = 0;
        self.live_at_prune =
            self.watchers.len() + self.by_key.values().map(Vec::len).sum::<usize>();
    }

    /// Prunes once enough watchers came since the last prune (amortised: O(1) per watch).
    fn prune_now_and_then(&mut self) {
        self.since_prune += 1;
        if self.since_prune > self.live_at_prune.max(64) {
            self.prune();
        }
    }

    /// Registers a watcher. `revision` is the engine's current (applied) revision: "from now"
    /// means every event after it.
    pub(crate) fn register(
        &mut self,
        range: KeyRange,
        opts: &WatchOptions,
        revision: i64,
    ) -> Result<Watcher> {
        let start = match opts.start_revision {
            None => revision + 1,
            Some(r) => crate::limits::check_start_revision(r)?,
        };
        let compacted = self.floor(revision) - 1;
        if start <= compacted {
            return Err(Error::Compacted {
                revision: start,
                reason: format!("the watch history starts after revision {compacted}"),
            });
        }
        let mut reg = Registered {
            range,
            prev_kv: opts.prev_kv,
            start,
            tx: unbounded().0, // replaced below
            cap: 0,
            shared: Arc::new(WatchShared {
                error: Mutex::new(None),
                dropped: AtomicBool::new(false),
                closed: self.closed.clone(),
            }),
        };
        let replay: Vec<Event> = self
            .history
            .iter()
            .filter(|e| reg.matches(e))
            .map(|e| reg.prepare(e))
            .collect();
        let (tx, rx) = unbounded();
        reg.cap = self.queue_cap.saturating_add(replay.len());
        for ev in replay {
            let _ = tx.send(ev);
        }
        reg.tx = tx;
        let shared = reg.shared.clone();
        self.prune_now_and_then();
        match reg.range.single_key() {
            Some(key) => self.by_key.entry(key.to_vec()).or_default().push(reg),
            None => self.watchers.push(reg),
        }
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
        let queue_cap = self.queue_cap;
        // One revision at a time, and a revision enters a watcher's queue whole or not at all,
        // so a cancelled watcher resumes exactly at the revision it did not get.
        for group in events.chunk_by(|a, b| a.revision() == b.revision()) {
            self.watchers
                .retain(|w| !w.dropped() && deliver(w, group, queue_cap));
            let mut keys: Vec<&[u8]> = group.iter().map(|ev| ev.kv.key.as_slice()).collect();
            keys.sort_unstable();
            keys.dedup();
            for key in keys {
                if let Some(list) = self.by_key.get_mut(key) {
                    list.retain(|w| !w.dropped() && deliver(w, group, queue_cap));
                    if list.is_empty() {
                        self.by_key.remove(key);
                    }
                }
            }
        }
        if self.history_cap == 0 {
            if let Some(last) = events.last() {
                self.compacted = last.revision();
            }
            return;
        }
        self.history.extend(events);
        if self.history.len() > self.history_cap {
            while self.history.len() > self.history_cap {
                let ev = self.history.pop_front().expect("non-empty");
                self.compacted = ev.revision();
            }
            // Never keep part of a revision.
            while self
                .history
                .front()
                .is_some_and(|e| e.revision() == self.compacted)
            {
                self.history.pop_front();
            }
        }
    }

    /// The oldest revision a watch can start from, given the current one.
    pub(crate) fn floor(&self, revision: i64) -> i64 {
        // Without a history nothing is recorded while no one watches, so no past revision can
        // be replayed: only revisions after the current one are watchable.
        let compacted = if self.history_cap == 0 {
            self.compacted.max(revision)
        } else {
            self.compacted
        };
        compacted + 1
    }

    /// The highest revision no longer in the history (a watch must start after it).
    pub(crate) fn compacted(&self) -> i64 {
        self.compacted
    }

    /// Drops the history up to and including `revision` (etcd's Compact, SPEC E2).
    pub(crate) fn compact(&mut self, revision: i64) {
        while self
            .history
            .front()
            .is_some_and(|e| e.revision() <= revision)
        {
            self.history.pop_front();
        }
        self.compacted = self.compacted.max(revision);
    }

    /// Ends every watcher (engine closed).
    pub(crate) fn close(&mut self) {
        self.watchers.clear();
        self.by_key.clear();
        self.history.clear();
    }
}

/// Queues the events of one revision (`group`) that `w` matches, all or none; false when `w`
/// is cancelled (its queue would pass its bound) or gone.
fn deliver(w: &Registered, group: &[Event], queue_cap: usize) -> bool {
    let matching = group.iter().filter(|ev| w.matches(ev)).count();
    if matching == 0 {
        return true;
    }
    let room = w.cap.saturating_sub(w.tx.len());
    if room < matching {
        *w.shared.error.lock() = Some(Error::Compacted {
            revision: group[0].revision(),
            reason: format!(
                "the watcher fell more than {queue_cap} events behind and was cancelled"
            ),
        });
        return false;
    }
    group
        .iter()
        .filter(|ev| w.matches(ev))
        .all(|ev| w.tx.try_send(w.prepare(ev)).is_ok())
}

/// A stream of [`Event`]s for a key or prefix, in revision order.
///
/// As an iterator it yields `Ok(event)`, then at most one `Err` (the watcher fell behind:
/// [`Error::Compacted`]) and ends; it also ends when the engine closes. Dropping it cancels the
/// watch.
#[derive(Debug)]
pub struct Watcher {
    rx: Receiver<Event>,
    shared: Arc<WatchShared>,
    finished: bool,
}

impl Watcher {
    /// A watcher fed by another source: for a [`Backend`](crate::sync::Backend) other than the
    /// embedded engine (its events, in revision order, arrive on `events`; when their sender
    /// is dropped the watcher ends, as on close).
    pub fn from_events(events: Receiver<Event>) -> Watcher {
        Watcher {
            rx: events,
            shared: Arc::new(WatchShared {
                error: Mutex::new(None),
                dropped: AtomicBool::new(false),
                closed: Error::Closed("the backend".into()),
            }),
            finished: false,
        }
    }

    /// The raw event channel, to wait on many watchers at once (`crossbeam_channel::Select`);
    /// read events with [`try_recv`](Self::try_recv), which also reports why a watch ended.
    pub fn channel(&self) -> &Receiver<Event> {
        &self.rx
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

    /// Waits for the next event. `Err(Closed)` once the engine is closed; `Err(Compacted)` if the
    /// watcher fell behind.
    pub fn recv(&mut self) -> Result<Event> {
        if self.finished {
            return Err(self.shared.closed.clone());
        }
        match self.rx.recv() {
            Ok(ev) => Ok(ev),
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
        match self.rx.try_recv() {
            Ok(ev) => Ok(Some(ev)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(self.ended()),
        }
    }
}

/// The sending end of a [`Watcher`] fed from outside the hub (an etcd watch stream).
#[cfg(feature = "remote")]
#[derive(Debug)]
pub(crate) struct WatchFeed {
    tx: Sender<Event>,
    shared: Arc<WatchShared>,
}

#[cfg(feature = "remote")]
impl WatchFeed {
    /// A watcher and the feed that fills it.
    pub(crate) fn new() -> (WatchFeed, Watcher) {
        let (tx, rx) = unbounded();
        let shared = Arc::new(WatchShared {
            error: Mutex::new(None),
            dropped: AtomicBool::new(false),
            closed: Error::Closed("(etcd connection)".into()),
        });
        let w = Watcher {
            rx,
            shared: shared.clone(),
            finished: false,
        };
        (WatchFeed { tx, shared }, w)
    }

    /// Queues an event; false once the watcher is dropped.
    pub(crate) fn send(&self, ev: Event) -> bool {
        !self.shared.dropped.load(Ordering::Relaxed) && self.tx.send(ev).is_ok()
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

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shared.dropped.store(true, Ordering::Relaxed);
    }
}

impl Source for Watcher {
    type Item = Event;
    type Signal = Event;

    fn try_next(&mut self) -> Result<Option<Event>> {
        self.try_recv()
    }

    fn signal(&self) -> &Receiver<Event> {
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
