//! `Wait`: how long a blocking call may wait (a deadline and a stop token), saturating (I-W1).

use std::time::{Duration, Instant};

use crossbeam_channel::{after, never, Receiver};

use super::Stop;
use crate::error::Error;

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
    /// [`Pollable`](crate::Pollable) wait to register it.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_timeouts_saturate_to_no_deadline() {
        assert_eq!(Wait::timeout(Duration::MAX).deadline(), None);
        assert_eq!(
            Wait::from(Some(Duration::from_secs(u64::MAX))).deadline(),
            None
        );
        assert!(!Wait::timeout(Duration::MAX).is_over());
    }
}
