//! When a failed call is tried again (SPEC R3, P14): while the server is unreachable, with a
//! short doubling backoff, until the call's deadline. A call that is safe to repeat (a read, a
//! renew, a time-to-live, a revoke, a status, a watch's creation) is retried on any
//! `Unavailable`; any other (a put, a txn that writes, a grant) only when the failure proves the
//! request never reached the server, since a lost answer may hide an applied write. etcd's Go
//! client decides the same way (its retry interceptor: `isSafeRetry`).

use std::time::Duration;

use etcd_client as etcd;

use crate::error::Error;

/// The first pause: a restarted server (a shared-mode takeover) is back within milliseconds.
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(5);
/// The longest pause: a server that comes back is seen within this.
pub(super) const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// The pauses between attempts: `FIRST_BACKOFF`, doubling, at most `MAX_BACKOFF`.
#[derive(Debug)]
pub(super) struct Backoff {
    next: Duration,
}

impl Backoff {
    pub(super) fn new() -> Backoff {
        Backoff {
            next: FIRST_BACKOFF,
        }
    }

    /// The pause before the next attempt, with `left` of the deadline; `None` if the deadline
    /// would pass first.
    pub(super) fn pause(&mut self, left: Duration) -> Option<Duration> {
        let pause = self.next;
        self.next = (self.next * 2).min(MAX_BACKOFF);
        (left > pause).then_some(pause)
    }
}

/// Whether a call that failed with `err` is tried again: `repeatable` (safe to repeat) or
/// `unsent` (the request never reached the server), and only while the server is
/// unavailable.
pub(super) fn worth_retrying(repeatable: bool, unsent: bool, err: &Error) -> bool {
    matches!(err, Error::Unavailable(_)) && (repeatable || unsent)
}

/// Whether `e` proves that the request never reached the server: the connection could not be
/// made (refused, the socket missing), hyper dropped the request before writing it (its
/// connection had closed), or the server refused the stream unprocessed (HTTP/2
/// `REFUSED_STREAM`, as after a GOAWAY).
pub(super) fn unsent(e: &etcd::Error) -> bool {
    let top: &(dyn std::error::Error + 'static) = match e {
        etcd::Error::GRpcStatus(s) => match std::error::Error::source(s) {
            Some(src) => src,
            None => return false,
        },
        etcd::Error::TransportError(t) => t,
        etcd::Error::IoError(io) => io,
        _ => return false,
    };
    let mut next = Some(top);
    while let Some(err) = next {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if never_connected(io.kind()) || closed_before(io) {
                return true;
            }
        }
        if err
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_canceled)
        {
            return true;
        }
        if err
            .downcast_ref::<h2::Error>()
            .and_then(h2::Error::reason)
            .is_some_and(|r| r == h2::Reason::REFUSED_STREAM)
        {
            return true;
        }
        next = err.source();
    }
    false
}

/// Whether `io` is h2's refusal to open a stream on a connection it already saw closed (the
/// error of the connection, given to every request made after it; a stream that was open
/// gets "stream closed because of a broken pipe" instead). h2 says it in words only.
fn closed_before(io: &std::io::Error) -> bool {
    io.kind() == std::io::ErrorKind::BrokenPipe
        && io.to_string() == "connection closed because of a broken pipe"
}

/// The kinds of I/O error only a connect can give: nothing was sent.
fn never_connected(kind: std::io::ErrorKind) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        kind,
        K::ConnectionRefused | K::NotFound | K::AddrNotAvailable
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p14_the_backoff_doubles_from_5_ms_up_to_100_ms_within_the_deadline() {
        let mut b = Backoff::new();
        let long = Duration::from_secs(5);
        let pauses: Vec<_> = (0..7).map(|_| b.pause(long).unwrap()).collect();
        let ms = |n| Duration::from_millis(n);
        assert_eq!(
            pauses,
            [ms(5), ms(10), ms(20), ms(40), ms(80), ms(100), ms(100)]
        );
        assert_eq!(b.pause(ms(100)), None, "the deadline would pass first");
    }

    #[test]
    fn p14_a_write_is_retried_only_when_it_was_never_sent() {
        let down = Error::Unavailable("no answer".into());
        assert!(worth_retrying(true, false, &down), "a read");
        assert!(worth_retrying(false, true, &down), "a write never sent");
        assert!(
            !worth_retrying(false, false, &down),
            "a write maybe applied"
        );
        let refused = Error::PermissionDenied("no".into());
        assert!(!worth_retrying(true, true, &refused), "an answer");
    }

    #[test]
    fn p14_only_a_failed_connect_or_an_unwritten_request_proves_nothing_was_sent() {
        use std::io::{Error as Io, ErrorKind as K};
        let status = |e: Box<dyn std::error::Error + Send + Sync>| {
            etcd::Error::GRpcStatus(tonic::Status::from_error(e))
        };
        let io = |k: K| status(Box::new(Io::from(k)));
        assert!(unsent(&io(K::ConnectionRefused)));
        assert!(unsent(&io(K::NotFound)));
        assert!(unsent(&etcd::Error::IoError(Io::from(
            K::ConnectionRefused
        ))));
        assert!(!unsent(&io(K::ConnectionReset)));
        assert!(!unsent(&io(K::BrokenPipe)));
        let closed = |m: &str| status(Box::new(Io::new(K::BrokenPipe, m.to_owned())));
        assert!(unsent(&closed(
            "connection closed because of a broken pipe"
        )));
        assert!(!unsent(&closed("stream closed because of a broken pipe")));
        let refused = h2::Error::from(h2::Reason::REFUSED_STREAM);
        assert!(unsent(&status(Box::new(refused))));
        let cancelled = h2::Error::from(h2::Reason::CANCEL);
        assert!(!unsent(&status(Box::new(cancelled))));
        let plain = etcd::Error::GRpcStatus(tonic::Status::unavailable("gone"));
        assert!(!unsent(&plain));
    }
}
