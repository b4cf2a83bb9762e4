//! `WaitPool`: one thread serving any number of pending waits, with network polls on a bounded
//! set of reused threads (I-W4, I-W5).

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, Sender, TryRecvError};

use super::{Interest, Pollable};
use crate::error::Error;
use crate::locks::{Condvar, Mutex};

/// A pending wait of a [`WaitPool`] with what to do with its end.
trait Job: Send {
    /// Polls once (a network poll on one of `net`'s threads); true when the wait is over (its
    /// end has been handed on).
    fn step(&mut self, net: &NetThreads) -> bool;
    fn register<'a>(&'a self, interest: &mut Interest<'a>);
}

/// How a wait served by a [`WaitPool`] ended: its result, or the panic that ended it.
pub type WaitResult<T> = thread::Result<Result<T, Error>>;

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
    F: FnOnce(WaitResult<P::Output>) + Send,
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
        F: FnOnce(WaitResult<P::Output>) + Send + 'static,
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
    use crate::wait::Next;

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
}
