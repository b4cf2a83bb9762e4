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
//!
//! One file per seam: `stop` (the token), `wait` (deadline + token), `poll` (the state-machine
//! form of a wait and `block_on`), `pool` (one thread serving many waits).

mod alarm;
mod poll;
mod pool;
mod stop;
// The module is the vocabulary, `Wait` its main word: `wait::wait` is meant.
#[allow(clippy::module_inception)]
mod wait;

use std::time::Instant;

pub(crate) use alarm::Alarm;
pub use poll::{block_on, Interest, Next, Pollable, Source};
pub use pool::{WaitPool, WaitResult};
pub use stop::{Stop, StopCallback};
pub use wait::Wait;

/// The earlier of two optional instants (`None` is no bound).
fn min_instant(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}
