//! One call to the server: under the handle's deadline, retried with backoff while the server
//! is unreachable when that is safe (see `retry`).

use std::future::Future;
use std::time::{Duration, Instant};

use etcd_client as etcd;

use super::errors::{at_endpoints, map_err, unavailable};
use super::retry::{unsent, worth_retrying, Backoff};
use super::Remote;
use crate::error::{Error, Result};
use crate::types::LeaseId;

impl Remote {
    /// Runs one call under the deadline (at most `limit`), retrying while the server is
    /// unavailable if `repeatable`, or, whatever the call, while the request provably never
    /// reached the server (SPEC P14).
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
        let mut backoff = Backoff::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let call = f(self.client.clone());
            let out = rt.block_on(async { tokio::time::timeout(left, call).await });
            let (err, never_sent) = match out {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => {
                    let never_sent = unsent(&e);
                    let err = match map_err(e, lease) {
                        e @ (Error::PermissionDenied(_) | Error::Unauthenticated(_)) => {
                            at_endpoints(e, &self.endpoints.join(","))
                        }
                        e => e,
                    };
                    (err, never_sent)
                }
                Err(_) => (
                    unavailable(format!(
                        "no answer from {} within {budget:?}",
                        self.endpoints.join(",")
                    )),
                    false,
                ),
            };
            if !worth_retrying(repeatable, never_sent, &err) || self.is_closed() {
                return Err(err);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(pause) = backoff.pause(left) else {
                return Err(err);
            };
            // A backoff, not a wait for an event: the server gives no sign that it is back.
            std::thread::sleep(pause);
        }
    }
}
