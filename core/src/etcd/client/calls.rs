//! One call to the server: under the handle's deadline, retried with backoff while the server
//! is unavailable if it is safe to repeat.

use std::future::Future;
use std::time::{Duration, Instant};

use etcd_client as etcd;

use super::errors::{at_endpoints, map_err, unavailable};
use super::Remote;
use crate::error::{Error, Result};
use crate::types::LeaseId;

/// Attempts of a repeatable call while the server is unavailable (within its deadline).
const ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// The pause before retrying a call whose attempt `attempt` (from 1) failed with `err`, with
/// `left` of its deadline; `None`: give up with `err`. Only a repeatable call is retried, only
/// while the server is unavailable, at most `ATTEMPTS` times, backing off from `FIRST_BACKOFF`
/// by doubling, and only if the pause ends before the deadline.
fn retry_pause(repeatable: bool, err: &Error, attempt: u32, left: Duration) -> Option<Duration> {
    let pause = FIRST_BACKOFF.saturating_mul(1 << (attempt.clamp(1, 16) - 1));
    let retry =
        repeatable && matches!(err, Error::Unavailable(_)) && attempt < ATTEMPTS && left > pause;
    retry.then_some(pause)
}

impl Remote {
    /// Runs one call under the deadline (at most `limit`), retrying while the server is
    /// unavailable if `repeatable`.
    pub(super) fn call<T, F, Fut>(
        &self,
        repeatable: bool,
        limit: Option<Duration>,
        lease: Option<LeaseId>,
        f: F,
    ) -> Result<T>
    where
        F: Fn(etcd::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd::Error>>,
    {
        let guard = self.rt.read().unwrap_or_else(|p| p.into_inner());
        let Some(rt) = guard.as_ref().filter(|_| !self.is_closed()) else {
            return Err(Error::Closed("(etcd connection)".into()));
        };
        let budget = limit.map_or(self.timeout, |l| l.min(self.timeout));
        let deadline = Instant::now() + budget;
        let mut attempt = 1;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let call = f(self.client.clone());
            let out = rt.block_on(async { tokio::time::timeout(left, call).await });
            let err = match out {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => match map_err(e, lease) {
                    e @ (Error::PermissionDenied(_) | Error::Unauthenticated(_)) => {
                        at_endpoints(e, &self.endpoints.join(","))
                    }
                    e => e,
                },
                Err(_) => unavailable(format!(
                    "no answer from {} within {budget:?}",
                    self.endpoints.join(",")
                )),
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(pause) = retry_pause(repeatable, &err, attempt, left) else {
                return Err(err);
            };
            // A backoff, not a wait for an event: the server gives no sign that it is back.
            std::thread::sleep(pause);
            attempt += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(5);

    fn down() -> Error {
        Error::Unavailable("no answer".into())
    }

    #[test]
    fn a_repeatable_call_backs_off_by_doubling_up_to_its_attempts() {
        let pauses: Vec<_> = (1..=ATTEMPTS)
            .map(|a| retry_pause(true, &down(), a, LONG))
            .collect();
        assert_eq!(
            pauses,
            [
                Some(FIRST_BACKOFF),
                Some(FIRST_BACKOFF * 2),
                Some(FIRST_BACKOFF * 4),
                None
            ]
        );
    }

    #[test]
    fn writes_refusals_and_a_spent_deadline_are_not_retried() {
        assert_eq!(retry_pause(false, &down(), 1, LONG), None, "a write");
        let refused = Error::PermissionDenied("no".into());
        assert_eq!(retry_pause(true, &refused, 1, LONG), None, "an answer");
        assert_eq!(
            retry_pause(true, &down(), 1, FIRST_BACKOFF),
            None,
            "no time left"
        );
    }
}
