//! Distributed queues (SPEC S10), etcd `contrib/recipes` key layouts so Go programs using that
//! package interoperate:
//!
//! - [`Queue`] `name`: an item is the key `name/<unix nanoseconds>` (no lease), put only if
//!   absent; FIFO is the order of create revisions.
//! - [`PriorityQueue`] `name`: an item is `name/<priority %05d>/<sequence %016d>`; a writer
//!   bumps the bookkeeping key `__name/<priority %05d>` in the same transaction, conditioned on
//!   it being unchanged since the last sequence number was read, so sequence numbers increase.
//!   Key order is priority order, then FIFO within a priority.
//!
//! Dequeue claims the first item by deleting it, conditioned on its mod revision: of any number
//! of consumers exactly one delete succeeds, so each item goes to exactly one consumer. A
//! consumer that waits holds nothing; killed while waiting, it removes nothing. The wait
//! watches the prefix (registered before each read, so no put is missed) and reads again after
//! any event.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crossbeam_channel::Receiver;

use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, OpResponse, Txn};
use crate::kv::watch::{WatchOptions, Watcher};
use crate::sync::backend::{Backend, CreateOrder, RangeOptions};
use crate::sync::turn::prefix_of;
use crate::types::KeyValue;
use crate::wait::{block_on, Interest, Pollable, Wait};

/// How a queue's first item is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// Lowest create revision first ([`Queue`]).
    Created,
    /// First key first ([`PriorityQueue`]: the key holds priority then sequence number).
    Key,
}

/// Where a queue's items live and in which order they leave.
#[derive(Debug, Clone)]
struct Items {
    db: Arc<dyn Backend>,
    name: String,
    prefix: Vec<u8>,
    order: Order,
}

impl Items {
    /// The first item, if any.
    fn first(&self) -> Result<Option<KeyValue>> {
        match self.order {
            Order::Created => Ok(self
                .db
                .range(
                    &self.prefix,
                    RangeOptions {
                        order: CreateOrder::Oldest,
                        limit: Some(1),
                        ..RangeOptions::default()
                    },
                )?
                .pop()),
            Order::Key => {
                let r = self
                    .db
                    .txn(Txn::new().then([Op::range(&self.prefix, Some(1))]))?;
                Ok(match r.responses.into_iter().next() {
                    Some(OpResponse::Range(mut kvs)) => kvs.pop(),
                    _ => None,
                })
            }
        }
    }

    /// Claims the first item: deletes it if unchanged since read. `None`: the queue is empty.
    /// Loses races to other consumers by reading again.
    fn try_claim(&self) -> Result<Option<KeyValue>> {
        while let Some(kv) = self.first()? {
            let r = self.db.txn(
                Txn::new()
                    .when([Compare::mod_revision(
                        &kv.key,
                        CompareOp::Equal,
                        kv.mod_revision,
                    )])
                    .then([Op::delete(&kv.key)]),
            )?;
            if r.succeeded {
                return Ok(Some(kv));
            }
        }
        Ok(None)
    }

    fn watch(&self) -> Result<Watcher> {
        self.db.watch(
            &self.prefix,
            WatchOptions {
                prefix: true,
                ..Default::default()
            },
        )
    }

    fn dequeue_wait(&self, wait: Wait) -> DequeueWait {
        DequeueWait {
            items: self.clone(),
            stopped: wait.stop_channel(),
            wait,
            watch: None,
        }
    }
}

/// A FIFO queue (SPEC S10), etcd's `recipe.Queue` layout: many producers, many consumers, each
/// item to exactly one consumer.
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::Queue;
///
/// let db = tenure::Tenure::in_memory()?;
/// let jobs = Queue::new(&db, "jobs");
/// jobs.enqueue("first")?;
/// jobs.enqueue("second")?;
/// assert_eq!(jobs.dequeue(Duration::from_secs(5))?, b"first");
/// assert_eq!(jobs.try_dequeue()?.as_deref(), Some(&b"second"[..]));
/// assert!(matches!(jobs.dequeue(Duration::from_millis(10)), Err(tenure::Error::Timeout { .. })));
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Queue {
    items: Items,
}

impl Queue {
    /// The queue `name` on `db`. Queue names must not nest (the items of `jobs/x` are under
    /// `jobs/`, as in etcd).
    pub fn new<B: Backend + Clone>(db: &B, name: &str) -> Queue {
        Queue {
            items: Items {
                db: Arc::new(db.clone()),
                name: name.to_owned(),
                prefix: prefix_of(name),
                order: Order::Created,
            },
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.items.name
    }

    /// Appends `value`; returns the item's key (`name/<unix nanoseconds>`).
    pub fn enqueue(&self, value: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let db = &self.items.db;
        let mut nanos = unix_nanos();
        loop {
            let mut key = self.items.prefix.clone();
            key.extend_from_slice(nanos.to_string().as_bytes());
            let r = db.txn(
                Txn::new()
                    .when([Compare::version(&key, CompareOp::Equal, 0)])
                    .then([Op::put(&key, value.as_ref(), None)]),
            )?;
            if r.succeeded {
                return Ok(key);
            }
            // Another producer took this nanosecond: the next one, or the clock's if later.
            nanos = unix_nanos().max(nanos + 1);
        }
    }

    /// Takes the oldest item, waiting for one as long as `wait` allows (`None`: no limit; a
    /// `Duration`; a [`Wait`]): `Timeout` when it runs out or is stopped. Waiting removes
    /// nothing.
    pub fn dequeue(&self, wait: impl Into<Wait>) -> Result<Vec<u8>> {
        block_on(self.dequeue_wait(wait)).map(|kv| kv.value)
    }

    /// [`dequeue`](Self::dequeue) as a state machine, for a [`WaitPool`](crate::WaitPool): it
    /// yields the item as it was before it was taken (key and value).
    pub fn dequeue_wait(&self, wait: impl Into<Wait>) -> DequeueWait {
        self.items.dequeue_wait(wait.into())
    }

    /// Takes the oldest item if there is one; never waits.
    pub fn try_dequeue(&self) -> Result<Option<Vec<u8>>> {
        Ok(self.items.try_claim()?.map(|kv| kv.value))
    }
}

/// A priority queue (SPEC S10), etcd's `recipe.PriorityQueue` layout: lower priorities leave
/// first, FIFO within a priority; each item to exactly one consumer.
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::PriorityQueue;
///
/// let db = tenure::Tenure::in_memory()?;
/// let q = PriorityQueue::new(&db, "work");
/// q.enqueue("later", 5)?;
/// q.enqueue("urgent", 0)?;
/// q.enqueue("also urgent", 0)?;
/// assert_eq!(q.dequeue(Duration::from_secs(5))?, b"urgent");
/// assert_eq!(q.dequeue(Duration::from_secs(5))?, b"also urgent");
/// assert_eq!(q.dequeue(Duration::from_secs(5))?, b"later");
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct PriorityQueue {
    items: Items,
}

/// How many times an enqueue retries a sequence number lost to other producers before giving
/// up with `Unavailable` (each retry means another producer's enqueue succeeded).
const MAX_SEQUENCE_RETRIES: usize = 1000;

impl PriorityQueue {
    /// The priority queue `name` on `db`. Names must not nest (as for [`Queue::new`]).
    pub fn new<B: Backend + Clone>(db: &B, name: &str) -> PriorityQueue {
        PriorityQueue {
            items: Items {
                db: Arc::new(db.clone()),
                name: name.to_owned(),
                prefix: prefix_of(name),
                order: Order::Key,
            },
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.items.name
    }

    /// Appends `value` with `priority` (0 leaves first); returns the item's key
    /// (`name/<priority %05d>/<sequence %016d>`).
    pub fn enqueue(&self, value: impl AsRef<[u8]>, priority: u16) -> Result<Vec<u8>> {
        let db = &self.items.db;
        let mut prefix = self.items.prefix.clone();
        prefix.extend_from_slice(format!("{priority:05}").as_bytes());
        let mut book = b"__".to_vec();
        book.extend_from_slice(&prefix);
        prefix.push(b'/');
        for _ in 0..MAX_SEQUENCE_RETRIES {
            // The bookkeeping key first: if it is unchanged at the put, no sequence number was
            // taken after this read of the last one.
            let booked = db.get(&book)?.map_or(0, |kv| kv.mod_revision);
            let last = db
                .range(
                    &prefix,
                    RangeOptions {
                        order: CreateOrder::Newest,
                        limit: Some(1),
                        ..RangeOptions::default()
                    },
                )?
                .pop();
            let next = match last {
                Some(kv) => sequence_of(&kv.key)?.saturating_add(1),
                None => 0,
            };
            let mut key = prefix.clone();
            key.extend_from_slice(format!("{next:016}").as_bytes());
            let r = db.txn(
                Txn::new()
                    .when([Compare::mod_revision(&book, CompareOp::Equal, booked)])
                    .then([
                        Op::put(&book, b"", None),
                        Op::put(&key, value.as_ref(), None),
                    ]),
            )?;
            if r.succeeded {
                return Ok(key);
            }
        }
        Err(Error::Unavailable(format!(
            "priority queue {:?}: no sequence number after {MAX_SEQUENCE_RETRIES} tries",
            self.items.name
        )))
    }

    /// Takes the first item (lowest priority, then oldest), waiting for one as long as `wait`
    /// allows: `Timeout` when it runs out or is stopped. Waiting removes nothing.
    pub fn dequeue(&self, wait: impl Into<Wait>) -> Result<Vec<u8>> {
        block_on(self.dequeue_wait(wait)).map(|kv| kv.value)
    }

    /// [`dequeue`](Self::dequeue) as a state machine, for a [`WaitPool`](crate::WaitPool): it
    /// yields the item as it was before it was taken (key and value).
    pub fn dequeue_wait(&self, wait: impl Into<Wait>) -> DequeueWait {
        self.items.dequeue_wait(wait.into())
    }

    /// Takes the first item if there is one; never waits.
    pub fn try_dequeue(&self) -> Result<Option<Vec<u8>>> {
        Ok(self.items.try_claim()?.map(|kv| kv.value))
    }
}

/// The sequence number at the end of a priority queue item's key (Go's `%d` of its last field).
fn sequence_of(key: &[u8]) -> Result<u64> {
    let last = key.rsplit(|&b| b == b'/').next().unwrap_or_default();
    std::str::from_utf8(last)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            Error::invalid(format!(
                "priority queue key {:?} does not end in a sequence number",
                String::from_utf8_lossy(key)
            ))
        })
}

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// A dequeue in progress, from [`Queue::dequeue_wait`] or [`PriorityQueue::dequeue_wait`]:
/// polled to the item taken, as it was before it was deleted (its key and value). Dropped
/// before its end, it has taken nothing.
#[derive(Debug)]
pub struct DequeueWait {
    items: Items,
    wait: Wait,
    stopped: Option<Receiver<()>>,
    /// The watch of the queue's prefix; `None` before the first poll and after it fell behind.
    watch: Option<Watcher>,
}

impl Pollable for DequeueWait {
    type Output = KeyValue;

    fn poll(&mut self) -> Result<Option<KeyValue>> {
        let watch = match &mut self.watch {
            Some(w) => w,
            None => self.watch.insert(self.items.watch()?),
        };
        // Every queued event is consumed: the read below sees what they announced.
        loop {
            match watch.try_recv() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e @ Error::Closed(_)) => return Err(e),
                Err(_) => {
                    // Fell behind: watch again, then read.
                    *watch = self.items.watch()?;
                    break;
                }
            }
        }
        if let Some(v) = self.items.try_claim()? {
            return Ok(Some(v));
        }
        if self.wait.is_over() {
            return Err(self
                .wait
                .timed_out(&format!("an item of queue {:?}", self.items.name)));
        }
        Ok(None)
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        interest.wait(&self.wait, &self.stopped);
        if let Some(w) = &self.watch {
            interest.recv(w.channel());
        }
    }

    fn polls_the_network(&self) -> bool {
        self.items.db.over_network()
    }
}
