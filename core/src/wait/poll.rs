//! Waits as state machines (I-W4): `Pollable`, what they wait on (`Interest`), the blocking
//! form `block_on`, and `Next`, the next item of a stream.

use std::time::Instant;

use crossbeam_channel::{Receiver, Select, TryRecvError};

use super::{min_instant, Wait};
use crate::error::Error;

/// A wait as a state machine. [`poll`](Pollable::poll) advances it as far as it can without
/// waiting (it may read or write the store); [`register`](Pollable::register) names what may let
/// it advance further. The blocking form of every such wait is [`block_on`] of it, so a wait
/// served by a [`WaitPool`](crate::WaitPool) runs the very same algorithm.
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
    /// `connect`): a [`WaitPool`](crate::WaitPool) then runs each such poll on one of its network threads, so a
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
    pub(super) owner: usize,
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
    pub(super) fn new() -> Interest<'a> {
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
        self.until(wait.deadline());
        if let Some(r) = stopped {
            self.recv(r);
        }
    }

    /// Blocks until a registered receiver is ready (its owner) or the deadline passes (`None`).
    pub(super) fn ready(mut self) -> Option<usize> {
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
    type Wakeup;

    /// The next item if one is there; `Err` when the stream failed or ended.
    fn try_next(&mut self) -> Result<Option<Self::Item>, Error>;

    /// The receiver that becomes ready when an item may have come. Asked again after each
    /// [`try_next`](Source::try_next) (a stream may renew it).
    fn wakeup(&self) -> &Receiver<Self::Wakeup>;
}

impl<T: Send> Source for Receiver<T> {
    type Item = T;
    type Wakeup = T;

    /// `Closed` once every sender is gone.
    fn try_next(&mut self) -> Result<Option<T>, Error> {
        match self.try_recv() {
            Ok(v) => Ok(Some(v)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(Error::Closed("the channel".into())),
        }
    }

    fn wakeup(&self) -> &Receiver<T> {
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
        interest.recv(self.source.wakeup());
        interest.wait(&self.wait, &self.stopped);
    }
}

impl<S: Source + ?Sized> Source for &mut S {
    type Item = S::Item;
    type Wakeup = S::Wakeup;

    fn try_next(&mut self) -> Result<Option<S::Item>, Error> {
        (**self).try_next()
    }

    fn wakeup(&self) -> &Receiver<S::Wakeup> {
        (**self).wakeup()
    }
}
