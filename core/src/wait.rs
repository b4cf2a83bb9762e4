//! The one vocabulary for waiting: a [`Wait`] is an optional deadline plus an optional
//! [`Stop`] token. Every blocking call of the crate takes one (`impl Into<Wait>`: `None`, a
//! `Duration`, `Some(duration)`, a `&Stop` or a built `Wait` all convert).
//!
//! Invariants:
//! - A deadline never overflows: a timeout too large for `Instant` means no deadline.
//! - A raised `Stop` stays raised; raising it wakes every wait that holds it, on any thread:
//!   condition-variable sleepers, `select!` waits (its channel disconnects) and registered
//!   callbacks (how an event loop or a C caller is woken without a thread per wait).
//! - A stopped wait fails with `Timeout`, like one whose deadline passed: the caller chose to
//!   stop waiting, nothing failed.
//!
//! The waits that take turns or follow a stream are also [`Pollable`]: a state machine that
//! advances without blocking and names what it waits on (receivers, a deadline). The blocking
//! call is [`block_on`] of that state machine; a [`WaitPool`] serves any number of pending
//! waits from one thread (an event loop's waits, without a thread per wait).

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{after, bounded, never, unbounded, Receiver, Select, Sender, TryRecvError};

use crate::clock::Clock;
use crate::error::Error;
use crate::locks::{Condvar, Mutex};

type Callback = Box<dyn FnOnce() + Send>;

struct Inner {
    raised: AtomicBool,
    /// Guards the flag's transitions for condvar sleepers, the callbacks and the sender.
    lock: Mutex<Callbacks>,
    cv: Condvar,
    /// Disconnects (every clone) when raised: the `select!` form of the flag.
    rx: Receiver<()>,
    next_id: AtomicU64,
}

struct Callbacks {
    /// Dropped when raised.
    tx: Option<Sender<()>>,
    pending: Vec<(u64, Callback)>,
}

/// A stop (cancel) token: raised once, from any thread; cloning shares it. Waits holding it
/// end with `Timeout` when it is raised; long-running loops (keep-alives, the leader elector)
/// return.
///
/// ```
/// use tenure::sync::Stop;
///
/// let stop = Stop::new();
/// let worker = {
///     let stop = stop.clone();
///     std::thread::spawn(move || stop.wait(None)) // e.g. a leader's work, until told to stop
/// };
/// stop.stop();
/// worker.join().unwrap();
/// assert!(stop.is_stopped());
/// ```
#[derive(Clone)]
pub struct Stop {
    inner: Arc<Inner>,
}

impl Default for Stop {
    fn default() -> Stop {
        let (tx, rx) = bounded(0);
        Stop {
            inner: Arc::new(Inner {
                raised: AtomicBool::new(false),
                lock: Mutex::new(Callbacks {
                    tx: Some(tx),
                    pending: Vec::new(),
                }),
                cv: Condvar::new(),
                rx,
                next_id: AtomicU64::new(0),
            }),
        }
    }
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop")
            .field("stopped", &self.is_stopped())
            .finish()
    }
}

/// Keeps a callback registered with [`Stop::on_stop`]; dropping it unregisters the callback.
#[must_use = "dropping the registration unregisters the callback"]
pub struct StopCallback {
    stop: Stop,
    id: u64,
}

impl std::fmt::Debug for StopCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopCallback")
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for StopCallback {
    fn drop(&mut self) {
        let mut c = self.stop.inner.lock.lock();
        c.pending.retain(|(id, _)| *id != self.id);
    }
}

impl Stop {
    /// A token not yet raised.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Raises the token and wakes everything waiting on it. Idempotent.
    pub fn stop(&self) {
        let callbacks = {
            let mut c = self.inner.lock.lock();
            if self.inner.raised.swap(true, Ordering::SeqCst) {
                return;
            }
            c.tx = None; // disconnects every receiver
            self.inner.cv.notify_all();
            std::mem::take(&mut c.pending)
        };
        for (_, f) in callbacks {
            f();
        }
    }

    /// Whether the token is raised.
    pub fn is_stopped(&self) -> bool {
        self.inner.raised.load(Ordering::SeqCst)
    }

    /// Runs `f` once when the token is raised (at once, on this thread, if it already is).
    /// For waking an event loop or a foreign caller; `f` must not block.
    pub fn on_stop(&self, f: impl FnOnce() + Send + 'static) -> StopCallback {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let reg = StopCallback {
            stop: self.clone(),
            id,
        };
        let mut c = self.inner.lock.lock();
        if self.is_stopped() {
            drop(c);
            f();
        } else {
            c.pending.push((id, Box::new(f)));
        }
        reg
    }

    /// Blocks until the token is raised or `wait` runs out; true if raised.
    pub fn wait(&self, wait: impl Into<Wait>) -> bool {
        let wait = wait.into();
        let mut c = self.inner.lock.lock();
        loop {
            if self.is_stopped() {
                return true;
            }
            if wait.is_stopped() || wait.is_expired() {
                return false;
            }
            // A Stop in `wait` is another token: poll it at a bounded period rather than
            // linking the two (linking would need callbacks in both directions).
            let slice = wait.stop.as_ref().map(|_| Instant::now() + POLL);
            match min_instant(wait.deadline, slice) {
                Some(at) => {
                    self.inner.cv.wait_until(&mut c, at);
                }
                None => self.inner.cv.wait(&mut c),
            }
        }
    }

    /// Blocks until the token is raised or `timeout` passes; true if raised.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.wait(timeout)
    }

    /// The receiver that disconnects when the token is raised.
    pub(crate) fn channel(&self) -> &Receiver<()> {
        &self.inner.rx
    }

    /// Whether a clone of this token exists besides this one.
    pub(crate) fn is_shared(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
    }

    /// Wakes condvar sleepers so they re-read the clock (a `ManualClock` moved).
    pub(crate) fn wake(&self) {
        let _g = self.inner.lock.lock();
        self.inner.cv.notify_all();
    }

    /// Sleeps until `clock` reaches `t` or the token is raised; true if raised. Reaching
    /// `deadline` (real time) raises the token.
    pub(crate) fn sleep_until(
        &self,
        clock: &dyn Clock,
        t: Duration,
        deadline: Option<Instant>,
    ) -> bool {
        let mut c = self.inner.lock.lock();
        loop {
            if self.is_stopped() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                drop(c);
                self.stop();
                return true;
            }
            if clock.now() >= t {
                return false;
            }
            match min_instant(clock.instant_at(t), deadline) {
                Some(at) => {
                    self.inner.cv.wait_until(&mut c, at);
                }
                None => self.inner.cv.wait(&mut c),
            }
        }
    }
}

/// How often [`Stop::wait`] re-checks a second token.
const POLL: Duration = Duration::from_millis(20);

fn min_instant(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// How long a blocking call may wait: an optional deadline and an optional [`Stop`] token.
/// Cheap to clone; build it once and pass it on.
#[derive(Clone, Debug, Default)]
pub struct Wait {
    deadline: Option<Instant>,
    stop: Option<Stop>,
    /// The timeout as given, for the `Timeout` message ("after 5 s").
    given: Option<Duration>,
}

impl Wait {
    /// No deadline, no token: waits until the awaited thing happens (or fails).
    pub fn forever() -> Wait {
        Wait::default()
    }

    /// At most `timeout` from now. A timeout beyond what `Instant` can hold means no deadline
    /// (it saturates, it never panics).
    pub fn timeout(timeout: Duration) -> Wait {
        Wait {
            deadline: Instant::now().checked_add(timeout),
            stop: None,
            given: Some(timeout),
        }
    }

    /// Until `deadline`.
    pub fn until(deadline: Instant) -> Wait {
        Wait {
            deadline: Some(deadline),
            stop: None,
            given: Some(deadline.saturating_duration_since(Instant::now())),
        }
    }

    /// This wait, also ended (with `Timeout`) as soon as `stop` is raised.
    pub fn with_stop(mut self, stop: &Stop) -> Wait {
        self.stop = Some(stop.clone());
        self
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The stop token, if any.
    pub fn stop_token(&self) -> Option<&Stop> {
        self.stop.as_ref()
    }

    /// Time left until the deadline (`None`: no deadline; zero once passed).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// The `Timeout` of this wait, naming what it waited for and the timeout given (`what`:
    /// `lock "jobs/nightly"`, `a watch event`).
    pub fn timed_out(&self, what: &str) -> Error {
        Error::timeout(what, self.given.unwrap_or_default())
    }

    /// Whether the deadline has passed.
    pub fn is_expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether the stop token is raised.
    pub fn is_stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(Stop::is_stopped)
    }

    /// Whether the wait is over (deadline passed or token raised).
    pub fn is_over(&self) -> bool {
        self.is_expired() || self.is_stopped()
    }

    /// A channel that fires at the deadline (never without one), for `select!`.
    pub(crate) fn timer(&self) -> Receiver<Instant> {
        match self.remaining() {
            Some(d) => after(d),
            None => never(),
        }
    }

    /// The receiver that disconnects when the token is raised, if there is one: kept by a
    /// [`Pollable`] wait to register it.
    pub fn stop_channel(&self) -> Option<Receiver<()>> {
        self.stop.as_ref().map(|s| s.channel().clone())
    }

    /// A channel that disconnects when the token is raised (never without one), for `select!`.
    pub(crate) fn stopped(&self) -> Receiver<()> {
        match &self.stop {
            Some(s) => s.channel().clone(),
            None => never(),
        }
    }
}

impl From<Duration> for Wait {
    fn from(d: Duration) -> Wait {
        Wait::timeout(d)
    }
}

impl From<Option<Duration>> for Wait {
    fn from(d: Option<Duration>) -> Wait {
        d.map_or_else(Wait::forever, Wait::timeout)
    }
}

impl From<&Stop> for Wait {
    fn from(s: &Stop) -> Wait {
        Wait::forever().with_stop(s)
    }
}

impl From<&Wait> for Wait {
    fn from(w: &Wait) -> Wait {
        w.clone()
    }
}

/// A wait as a state machine. [`poll`](Pollable::poll) advances it as far as it can without
/// waiting (it may read or write the store); [`register`](Pollable::register) names what may let
/// it advance further. The blocking form of every such wait is [`block_on`] of it, so a wait
/// served by a [`WaitPool`] runs the very same algorithm.
pub trait Pollable: Send {
    /// What the wait produces.
    type Output;

    /// `Ok(Some(v))` or `Err(e)` once the wait is over (it is not polled again), `Ok(None)`
    /// while it must wait for something it registers.
    fn poll(&mut self) -> Result<Option<Self::Output>, Error>;

    /// Adds every receiver whose message or disconnection may let `poll` advance, and the
    /// deadline, if any. A receiver that is ready must be consumed (or no longer registered)
    /// by the next `poll`, or the wait spins.
    fn register<'a>(&'a self, interest: &mut Interest<'a>);

    /// Whether `poll` may wait on the network (its reads and writes go to a server, over
    /// `connect`): a [`WaitPool`] then runs each such poll on one of its network threads, so a
    /// slow or stopped server never delays the pool's other waits.
    fn polls_the_network(&self) -> bool {
        false
    }
}

impl<P: Pollable + ?Sized> Pollable for &mut P {
    type Output = P::Output;

    fn poll(&mut self) -> Result<Option<P::Output>, Error> {
        (**self).poll()
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        (**self).register(interest)
    }

    fn polls_the_network(&self) -> bool {
        (**self).polls_the_network()
    }
}

/// What pending waits wait on, gathered for one `Select`: receivers (each tagged with the wait
/// it belongs to) and the earliest deadline.
pub struct Interest<'a> {
    sel: Select<'a>,
    /// The owner of each registered operation, by operation index.
    owners: Vec<usize>,
    owner: usize,
    deadline: Option<Instant>,
}

impl std::fmt::Debug for Interest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interest")
            .field("receivers", &self.owners.len())
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl<'a> Interest<'a> {
    fn new() -> Interest<'a> {
        Interest {
            sel: Select::new(),
            owners: Vec::new(),
            owner: 0,
            deadline: None,
        }
    }

    /// Wakes the wait when `r` has a message or is disconnected.
    pub fn recv<T>(&mut self, r: &'a Receiver<T>) {
        let index = self.sel.recv(r);
        debug_assert_eq!(index, self.owners.len());
        self.owners.push(self.owner);
    }

    /// Wakes the wait at `at` (the earliest of all registered deadlines counts).
    pub fn until(&mut self, at: Option<Instant>) {
        self.deadline = min_instant(self.deadline, at);
    }

    /// Registers a [`Wait`]'s deadline and the receiver of its stop token (kept by the caller,
    /// see [`Wait::stop_channel`]).
    pub fn wait(&mut self, wait: &Wait, stopped: &'a Option<Receiver<()>>) {
        self.until(wait.deadline);
        if let Some(r) = stopped {
            self.recv(r);
        }
    }

    /// Blocks until a registered receiver is ready (its owner) or the deadline passes (`None`).
    fn ready(mut self) -> Option<usize> {
        let index = match self.deadline {
            Some(at) => self.sel.ready_deadline(at).ok()?,
            None if self.owners.is_empty() => return None, // nothing to wait on: poll again
            None => self.sel.ready(),
        };
        Some(self.owners[index])
    }
}

/// Runs a [`Pollable`] wait to its end on this thread: the blocking form of the wait.
pub fn block_on<P: Pollable>(mut p: P) -> Result<P::Output, Error> {
    loop {
        if let Some(v) = p.poll()? {
            return Ok(v);
        }
        let mut interest = Interest::new();
        p.register(&mut interest);
        interest.ready();
    }
}

/// A stream read without blocking ([`try_next`](Source::try_next)) whose next item is
/// signalled by a receiver (a message or its disconnection): a watch, an observer, a channel.
pub trait Source: Send {
    /// What the stream yields.
    type Item;
    /// What the signalling receiver carries.
    type Signal;

    /// The next item if one is there; `Err` when the stream failed or ended.
    fn try_next(&mut self) -> Result<Option<Self::Item>, Error>;

    /// The receiver that becomes ready when an item may have come. Asked again after each
    /// [`try_next`](Source::try_next) (a stream may renew it).
    fn signal(&self) -> &Receiver<Self::Signal>;
}

impl<T: Send> Source for Receiver<T> {
    type Item = T;
    type Signal = T;

    /// `Closed` once every sender is gone.
    fn try_next(&mut self) -> Result<Option<T>, Error> {
        match self.try_recv() {
            Ok(v) => Ok(Some(v)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(Error::Closed("the channel".into())),
        }
    }

    fn signal(&self) -> &Receiver<T> {
        self
    }
}

/// The next item of a [`Source`] within a [`Wait`]: an item that is there wins over a wait
/// that is over; otherwise `Timeout` (naming `what`) once the wait runs out or is stopped.
#[derive(Debug)]
pub struct Next<S> {
    source: S,
    wait: Wait,
    stopped: Option<Receiver<()>>,
    what: &'static str,
}

impl<S: Source> Next<S> {
    /// The next item of `source` within `wait`; `what` names it in the `Timeout` (`a watch
    /// event`).
    pub fn new(source: S, wait: impl Into<Wait>, what: &'static str) -> Next<S> {
        let wait = wait.into();
        Next {
            source,
            stopped: wait.stop_channel(),
            wait,
            what,
        }
    }
}

impl<S: Source> Pollable for Next<S> {
    type Output = S::Item;

    fn poll(&mut self) -> Result<Option<S::Item>, Error> {
        if let Some(v) = self.source.try_next()? {
            return Ok(Some(v));
        }
        if self.wait.is_over() {
            return Err(self.wait.timed_out(self.what));
        }
        Ok(None)
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        interest.recv(self.source.signal());
        interest.wait(&self.wait, &self.stopped);
    }
}

impl<S: Source + ?Sized> Source for &mut S {
    type Item = S::Item;
    type Signal = S::Signal;

    fn try_next(&mut self) -> Result<Option<S::Item>, Error> {
        (**self).try_next()
    }

    fn signal(&self) -> &Receiver<S::Signal> {
        (**self).signal()
    }
}

/// A pending wait of a [`WaitPool`] with what to do with its end.
trait Job: Send {
    /// Polls once (a network poll on one of `net`'s threads); true when the wait is over (its
    /// end has been handed on).
    fn step(&mut self, net: &NetThreads) -> bool;
    fn register<'a>(&'a self, interest: &mut Interest<'a>);
}

/// How a wait served by a [`WaitPool`] ended: its result, or the panic that ended it.
pub type WaitOutcome<T> = thread::Result<Result<T, Error>>;

/// One poll's result, or the panic that ended it.
type Polled<T> = thread::Result<Result<Option<T>, Error>>;

struct Entry<P: Pollable, F> {
    /// `None` while a poll of it runs on a network thread (`away`).
    wait: Option<P>,
    done: Option<F>,
    /// The wait and its poll's result, sent back by that thread.
    away: Option<Receiver<(P, Polled<P::Output>)>>,
}

impl<P, F> Entry<P, F>
where
    P: Pollable + 'static,
    P::Output: Send,
{
    /// Polls on this thread, or, for a wait that may wait on the network, hands its poll to a
    /// network thread (`None`: the result comes through `away`).
    fn poll(&mut self, net: &NetThreads) -> Option<Polled<P::Output>> {
        let mut wait = self.wait.take()?;
        if wait.polls_the_network() {
            let (tx, rx) = bounded(1);
            let handed = net.run(Box::new(move || {
                let out = catch_unwind(AssertUnwindSafe(|| wait.poll()));
                let _ = tx.send((wait, out));
            }));
            return match handed {
                Ok(()) => {
                    self.away = Some(rx);
                    None
                }
                // The wait went with the poll: it ends here, saying why.
                Err(e) => Some(Ok(Err(Error::storage(format!(
                    "cannot start a thread for a wait's network poll: {e}"
                ))))),
            };
        }
        let out = catch_unwind(AssertUnwindSafe(|| wait.poll()));
        self.wait = Some(wait);
        Some(out)
    }
}

/// A poll handed to a network thread.
type NetPoll = Box<dyn FnOnce() + Send>;

/// At most this many network polls of one [`WaitPool`] run at once (more wait for a thread).
const NET_THREADS: usize = 32;
/// A network thread without work for this long ends.
const NET_IDLE: Duration = Duration::from_secs(10);

/// The threads a [`WaitPool`] runs network polls on: one is started when a poll finds none
/// idle (up to [`NET_THREADS`]), so a poll stuck on a stopped server never holds up another
/// poll; they are reused, so waits over `connect` do not start a thread per poll; an idle one
/// ends after [`NET_IDLE`].
#[derive(Clone, Default)]
struct NetThreads {
    shared: Arc<NetShared>,
}

#[derive(Default)]
struct NetShared {
    state: Mutex<NetState>,
    /// Signalled (under `state`) when a poll is queued for an idle thread or the pool closes.
    cv: Condvar,
}

#[derive(Default)]
struct NetState {
    /// Polls not yet taken by a thread.
    queue: VecDeque<NetPoll>,
    /// Threads waiting for a poll (each takes one queued poll).
    idle: usize,
    /// Threads started and not ended.
    live: usize,
    /// The pool is gone: idle threads end.
    closed: bool,
}

impl NetThreads {
    /// Runs `poll` on an idle network thread, a new one, or (all [`NET_THREADS`] busy) the
    /// first one to finish. Fails only when no thread exists and none can be started.
    fn run(&self, poll: NetPoll) -> std::io::Result<()> {
        let mut s = self.shared.state.lock();
        s.queue.push_back(poll);
        if s.queue.len() <= s.idle {
            self.shared.cv.notify_one();
            return Ok(());
        }
        if s.live >= NET_THREADS {
            return Ok(());
        }
        let shared = self.shared.clone();
        match thread::Builder::new()
            .name("tenure-wait-io".into())
            .spawn(move || net_thread(&shared))
        {
            Ok(_) => {
                s.live += 1;
                Ok(())
            }
            Err(_) if s.live > 0 => Ok(()), // a running thread takes it when it is free
            Err(e) => {
                let poll = s.queue.pop_back();
                drop(s);
                drop(poll); // the wait's drop may talk to the server: not under the lock
                Err(e)
            }
        }
    }

    /// Lets the idle threads end (the pool's waits are over or dropped).
    fn close(&self) {
        self.shared.state.lock().closed = true;
        self.shared.cv.notify_all();
    }

    /// Threads started and not ended.
    #[cfg(test)]
    fn live(&self) -> usize {
        self.shared.state.lock().live
    }
}

fn net_thread(shared: &NetShared) {
    let mut s = shared.state.lock();
    loop {
        if let Some(poll) = s.queue.pop_front() {
            drop(s);
            // The poll catches its own panic; this keeps the count right whatever happens.
            let _ = catch_unwind(AssertUnwindSafe(poll));
            s = shared.state.lock();
            continue;
        }
        if s.closed {
            break;
        }
        let until = Instant::now() + NET_IDLE;
        s.idle += 1;
        shared.cv.wait_until(&mut s, until);
        s.idle -= 1;
        if s.queue.is_empty() && Instant::now() >= until {
            break;
        }
    }
    s.live -= 1;
}

impl<P: Pollable, F> Drop for Entry<P, F> {
    /// A wait whose poll is away is dropped once that poll is back (on the pool's thread, as
    /// every other pending wait when the pool is dropped): a dropped lock or campaign wait has
    /// withdrawn its key by the time the pool's drop returns.
    fn drop(&mut self) {
        if let Some(rx) = self.away.take() {
            let _ = rx.recv();
        }
    }
}

impl<P, F> Job for Entry<P, F>
where
    P: Pollable + 'static,
    P::Output: Send,
    F: FnOnce(WaitOutcome<P::Output>) + Send,
{
    fn step(&mut self, net: &NetThreads) -> bool {
        let polled = match &self.away {
            Some(rx) => match rx.try_recv() {
                Ok((wait, out)) => {
                    self.away = None;
                    self.wait = Some(wait);
                    Some(out)
                }
                Err(TryRecvError::Empty) => return false,
                Err(TryRecvError::Disconnected) => {
                    self.away = None;
                    Some(Ok(Err(Error::storage(
                        "a wait's network poll ended without a result",
                    ))))
                }
            },
            None => self.poll(net),
        };
        let out = match polled {
            None | Some(Ok(Ok(None))) => return false,
            Some(Ok(Ok(Some(v)))) => Ok(Ok(v)),
            Some(Ok(Err(e))) => Ok(Err(e)),
            Some(Err(payload)) => Err(payload),
        };
        if let Some(done) = self.done.take() {
            // A panicking callback must not take the other waits down with it.
            let _ = catch_unwind(AssertUnwindSafe(|| done(out)));
        }
        true
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        match (&self.away, &self.wait) {
            (Some(rx), _) => interest.recv(rx),
            (None, Some(w)) => w.register(interest),
            (None, None) => {}
        }
    }
}

/// One thread serving every wait submitted to it: it polls each [`Pollable`] when something it
/// registered is ready and hands each end to the wait's callback, on that thread. Dropping the
/// pool stops the thread and drops the waits still pending (their callbacks are not called; a
/// dropped lock or campaign wait withdraws its key).
///
/// Polls run one at a time: a poll's store reads and writes (a lock wait's put, a withdrawal)
/// delay the others by that long. A poll that may wait on the network
/// ([`Pollable::polls_the_network`]: a lock or campaign over `connect`) runs on one of the
/// pool's network threads instead (started when none is idle, at most 32, reused, ended after
/// 10 s idle), and the pool waits for its result like for any other signal.
///
/// Each wake-up waits on one `Select` over the receivers of every pending wait: its cost grows
/// with the number of pending waits (the `wait_pool` bench: ~10 µs per wake-up with none
/// pending, ~1.4-1.9 ms with 10 000), which only a process with thousands of waits at once
/// would notice. Nearly all of it is the blocking wait itself (crossbeam registers with every
/// receiver and unregisters after); building the `Select` is about 1 % of it (15 µs at
/// 10 000), so keeping it between wake-ups would not help.
pub struct WaitPool {
    tx: Option<Sender<Box<dyn Job>>>,
    pending: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
    net: NetThreads,
}

impl std::fmt::Debug for WaitPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitPool")
            .field("pending", &self.pending())
            .finish()
    }
}

impl WaitPool {
    /// Starts the pool's thread, named `name`.
    pub fn new(name: &str) -> std::io::Result<WaitPool> {
        let (tx, rx) = unbounded::<Box<dyn Job>>();
        let pending = Arc::new(AtomicUsize::new(0));
        let count = pending.clone();
        let net = NetThreads::default();
        let threads = net.clone();
        let thread = thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || serve(&rx, &count, &threads))?;
        Ok(WaitPool {
            tx: Some(tx),
            pending,
            thread: Some(thread),
            net,
        })
    }

    /// Adds a wait; `done` gets its end, on the pool's thread (it must not block for long).
    pub fn submit<P, F>(&self, wait: P, done: F)
    where
        P: Pollable + 'static,
        P::Output: Send,
        F: FnOnce(WaitOutcome<P::Output>) + Send + 'static,
    {
        let job = Box::new(Entry {
            wait: Some(wait),
            done: Some(done),
            away: None,
        });
        self.pending.fetch_add(1, Ordering::SeqCst);
        if let Some(tx) = &self.tx {
            // The thread only ends when the pool is dropped, so this cannot fail.
            let _ = tx.send(job);
        }
    }

    /// How many waits are pending (submitted and not over).
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }
}

impl Drop for WaitPool {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Every wait is dropped, so no poll is away any more.
        self.net.close();
    }
}

/// The pool's thread: new waits are polled at once; then one `Select` over everything every
/// pending wait registered (and the queue of new ones) says which wait to poll next.
fn serve(rx: &Receiver<Box<dyn Job>>, pending: &AtomicUsize, net: &NetThreads) {
    let mut jobs: Vec<Box<dyn Job>> = Vec::new();
    let finish = |over: bool| {
        if over {
            pending.fetch_sub(1, Ordering::SeqCst);
        }
        over
    };
    loop {
        loop {
            match rx.try_recv() {
                Ok(mut job) => {
                    if !finish(job.step(net)) {
                        jobs.push(job);
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        let ready = {
            let mut interest = Interest::new();
            interest.owner = usize::MAX;
            interest.recv(rx);
            for (i, job) in jobs.iter().enumerate() {
                interest.owner = i;
                job.register(&mut interest);
            }
            interest.ready()
        };
        match ready {
            Some(usize::MAX) => {}
            Some(i) => {
                if finish(jobs[i].step(net)) {
                    jobs.swap_remove(i);
                }
            }
            // A deadline passed: poll every wait (each checks its own).
            None => jobs.retain_mut(|job| !finish(job.step(net))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn huge_timeouts_saturate_to_no_deadline() {
        assert_eq!(Wait::timeout(Duration::MAX).deadline(), None);
        assert_eq!(
            Wait::from(Some(Duration::from_secs(u64::MAX))).deadline(),
            None
        );
        assert!(!Wait::timeout(Duration::MAX).is_over());
    }

    #[test]
    fn stop_wakes_channel_and_callbacks_once_and_is_sticky() {
        let s = Stop::new();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        let _reg = s.on_stop(move || {
            h.fetch_add(1, Ordering::SeqCst);
        });
        let h = hits.clone();
        let dropped = s.on_stop(move || {
            h.fetch_add(100, Ordering::SeqCst);
        });
        drop(dropped);
        let w = Wait::from(&s);
        assert!(!w.is_over());
        s.stop();
        s.stop();
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        assert!(w.stopped().recv().is_err());
        assert!(w.is_stopped());
        let h = hits.clone();
        let _late = s.on_stop(move || {
            h.fetch_add(10, Ordering::SeqCst);
        });
        assert_eq!(hits.load(Ordering::SeqCst), 11);
    }

    #[test]
    fn stop_wait_returns_when_raised_from_another_thread() {
        let s = Stop::new();
        let s2 = s.clone();
        let t = std::thread::spawn(move || s2.wait(Duration::from_secs(30)));
        s.stop();
        assert!(t.join().unwrap());
        assert!(!Stop::new().wait_timeout(Duration::from_millis(1)));
    }

    /// A wait that says it polls the network: each poll notes its thread and takes one
    /// message; it ends once it took `left`. With a `gate`, its first poll blocks until the
    /// gate's sender goes (a server that does not answer).
    struct NetWait {
        rx: Receiver<()>,
        left: usize,
        polls: usize,
        threads: Arc<std::sync::Mutex<std::collections::HashSet<thread::ThreadId>>>,
        gate: Option<Receiver<()>>,
    }

    impl NetWait {
        fn new(messages: usize) -> (NetWait, Sender<()>) {
            let (tx, rx) = unbounded();
            for _ in 0..messages {
                tx.send(()).unwrap();
            }
            let w = NetWait {
                rx,
                left: messages,
                polls: 0,
                threads: Arc::default(),
                gate: None,
            };
            (w, tx)
        }
    }

    impl Pollable for NetWait {
        type Output = usize;

        fn poll(&mut self) -> Result<Option<usize>, Error> {
            self.polls += 1;
            self.threads.lock().unwrap().insert(thread::current().id());
            if let Some(gate) = self.gate.take() {
                let _ = gate.recv();
            }
            if self.rx.try_recv().is_ok() {
                self.left -= 1;
            }
            Ok((self.left == 0).then_some(self.polls))
        }

        fn register<'a>(&'a self, interest: &mut Interest<'a>) {
            interest.recv(&self.rx);
        }

        fn polls_the_network(&self) -> bool {
            true
        }
    }

    /// I-W5: network polls run on a bounded set of reused threads, not a thread per poll, and
    /// the threads end with the pool.
    #[test]
    fn i_w5_network_polls_reuse_a_bounded_set_of_threads() {
        let pool = WaitPool::new("test-wait-pool").unwrap();
        let threads = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
        let (done_tx, done) = unbounded();
        let (waits, per_wait) = (8, 250);
        let mut senders = Vec::new();
        for _ in 0..waits {
            let (mut w, tx) = NetWait::new(per_wait);
            w.threads = threads.clone();
            senders.push(tx);
            let done_tx = done_tx.clone();
            pool.submit(w, move |out| {
                let _ = done_tx.send(out.unwrap().unwrap());
            });
        }
        let mut polls = 0;
        for _ in 0..waits {
            polls += done.recv_timeout(Duration::from_secs(60)).unwrap();
        }
        let distinct = threads.lock().unwrap().len();
        assert!(polls >= waits * per_wait, "{polls} polls");
        assert!(
            distinct <= NET_THREADS,
            "{polls} network polls ran on {distinct} threads (at most {NET_THREADS})"
        );
        assert!(pool.net.live() <= NET_THREADS);
        let net = pool.net.clone();
        drop(pool);
        let until = Instant::now() + Duration::from_secs(10);
        while net.live() > 0 && Instant::now() < until {
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(net.live(), 0, "network threads outlived their pool");
    }

    /// I-W5: a network poll that never returns (a stopped server) delays neither another
    /// network wait nor an embedded wait of the same pool.
    #[test]
    fn i_w5_a_stuck_network_poll_delays_no_other_wait() {
        let pool = WaitPool::new("test-wait-pool").unwrap();
        let (gate_tx, gate) = bounded::<()>(0);
        let (mut stuck, _keep) = NetWait::new(1);
        stuck.gate = Some(gate);
        let (stuck_tx, stuck_done) = bounded(1);
        pool.submit(stuck, move |out| {
            let _ = stuck_tx.send(out.unwrap().unwrap());
        });
        let (other, _keep_other) = NetWait::new(1);
        let (other_tx, other_done) = bounded(1);
        pool.submit(other, move |out| {
            let _ = other_tx.send(out.unwrap().unwrap());
        });
        let (local_tx, local_rx) = unbounded::<u32>();
        let (local_done_tx, local_done) = bounded(1);
        pool.submit(
            Next::new(local_rx, Duration::from_secs(60), "a message"),
            move |out| {
                let _ = local_done_tx.send(out.unwrap().unwrap());
            },
        );
        local_tx.send(7).unwrap();
        let bound = Duration::from_secs(30);
        assert_eq!(local_done.recv_timeout(bound).unwrap(), 7);
        assert!(other_done.recv_timeout(bound).unwrap() >= 1);
        assert!(
            stuck_done.try_recv().is_err(),
            "the stuck poll cannot have ended"
        );
        drop(gate_tx);
        assert!(stuck_done.recv_timeout(bound).unwrap() >= 1);
    }

    #[test]
    fn stop_wait_ends_when_the_waits_own_token_is_raised() {
        let (s, other) = (Stop::new(), Stop::new());
        let o = other.clone();
        let t = std::thread::spawn(move || s.wait(Wait::forever().with_stop(&o)));
        other.stop();
        assert!(!t.join().unwrap());
    }
}
