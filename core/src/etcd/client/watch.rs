//! Watches over etcd: created before `watch` returns (as the engine's), a start revision checked
//! for compaction, events pumped into a [`Watcher`] by a task on the connection's runtime. A
//! stream that breaks (the server restarted, a shared-mode takeover) is created again where it
//! was, so the watcher sees every event once, in order (SPEC P15).

use std::time::{Duration, Instant};

use etcd_client as etcd;

use super::convert::event;
use super::errors::{map_err, unavailable};
use super::retry::{hopeless, Backoff};
use super::Remote;
use crate::error::{Error, Result};
use crate::etcd::errors::EtcdError;
use crate::kv::watch::{WatchFeed, WatchOptions, Watcher};
use crate::limits::check_start_revision;

/// etcd's options of a watch with `opts`, from `start` (0: from now).
fn etcd_options(opts: &WatchOptions, start: i64) -> etcd::WatchOptions {
    let mut o = etcd::WatchOptions::new();
    if opts.prefix {
        o = o.with_prefix();
    }
    if start > 0 {
        o = o.with_start_revision(start);
    }
    if opts.prev_kv {
        o = o.with_prev_key();
    }
    o
}

impl Remote {
    pub(crate) fn watch(&self, key: &[u8], opts: &WatchOptions) -> Result<Watcher> {
        let start = match opts.start_revision {
            Some(r) => check_start_revision(r)?,
            None => 0,
        };
        let o = etcd_options(opts, start);
        // The server's first answer says the watch exists (or why not): only then does a write
        // made after `watch` returns reach it, as with the embedded engine. Creating a watch
        // changes nothing on the server: it is retried through a change of server.
        let (stream, created) = self.call(true, None, None, |mut c| {
            let o = o.clone();
            async move { open_stream(&mut c, key, o).await }
        })?;
        refused(&created, start)?;
        let early = created.events().to_vec();
        let current = created.header().map_or(0, etcd::ResponseHeader::revision);
        if start > 0 && start <= current {
            self.past_start(key, start)?;
        }
        let (feed, watcher) = WatchFeed::new();
        // Nothing delivered yet: a resumed stream starts where this one did, or right after
        // the revision at which the server created it.
        let mut place = Place::from(if start > 0 { start } else { current + 1 });
        for e in &early {
            if let Some(ev) = event(e) {
                place.admit(ev.revision());
                feed.send(ev);
            }
        }
        let guard = self.rt.read().unwrap_or_else(|p| p.into_inner());
        let rt = guard
            .as_ref()
            .ok_or_else(|| Error::Closed("(etcd connection)".into()))?;
        let again = Reopen {
            client: self.client.clone(),
            key: key.to_vec(),
            opts: opts.clone(),
            timeout: self.timeout,
        };
        rt.spawn(pump(stream, feed, place, again));
        Ok(watcher)
    }

    /// Whether a watch from `start` (at or below the server's revision when it created the
    /// watch) is compacted, decided before `watch` returns as the engine does. etcd creates
    /// such a watch at once and cancels it later (when it catches up), so a read at `start`
    /// answers instead (etcd and `tenure serve` alike keep every revision since the last
    /// compaction, SPEC K9). Nothing is read from the stream: its events are delivered in order.
    fn past_start(&self, key: &[u8], start: i64) -> Result<()> {
        let read = self.call(true, None, None, |mut c| async move {
            let o = etcd::GetOptions::new()
                .with_revision(start)
                .with_count_only();
            c.get(key, Some(o)).await
        });
        match read {
            Ok(_) => Ok(()),
            Err(Error::Compacted { .. }) => Err(compacted(start, None)),
            Err(e) => Err(e),
        }
    }
}

/// A new watch stream of `key` and the server's first answer on it (created, or refused). A
/// stream that ends before answering is gRPC `Unavailable`: the server went away as the watch
/// opened (a shared file's change of owner), retried as a refused connection is.
async fn open_stream(
    client: &mut etcd::Client,
    key: &[u8],
    o: etcd::WatchOptions,
) -> std::result::Result<(etcd::WatchStream, etcd::WatchResponse), etcd::Error> {
    let mut stream = client.watch(key, Some(o)).await?;
    match stream.message().await? {
        Some(created) => Ok((stream, created)),
        None => Err(etcd::Error::GRpcStatus(tonic::Status::unavailable(
            "the watch stream ended before the server created the watch",
        ))),
    }
}

/// The error a watch start at `start` gets when the server compacted it (`compact_revision`, if
/// it said).
fn compacted(start: i64, compact_revision: Option<i64>) -> Error {
    Error::Compacted {
        revision: start,
        compact_revision: compact_revision.unwrap_or(0),
        reason: match compact_revision {
            Some(c) => format!("history before revision {c} was compacted on the server"),
            None => "the history from that revision was compacted on the server".into(),
        },
    }
}

/// The error of a watch response that cancels (or refuses) the watch from `start`, if it does.
fn refused(m: &etcd::WatchResponse, start: i64) -> Result<()> {
    if m.compact_revision() > 0 {
        return Err(compacted(start, Some(m.compact_revision())));
    }
    if m.canceled() {
        return Err(cancelled("watch refused by the server", m.cancel_reason()));
    }
    Ok(())
}

/// A watch the server cancelled, as the error of the one table: a refusal is not the network
/// (`Unavailable`), it says why (etcd's and tenure serve's reasons).
fn cancelled(what: &str, reason: &str) -> Error {
    if reason.is_empty() {
        // A cancel without a reason: the server let go of the watch (shutting down, say).
        return unavailable(format!("{what} without a reason"));
    }
    let Some(row) = EtcdError::from_text(reason) else {
        return Error::storage(format!("server: {what}: {reason}"));
    };
    match row.error(None) {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{what}: {m}")),
        Error::PermissionDenied(m) => Error::PermissionDenied(format!("{what}: {m}")),
        Error::Unauthenticated(m) => Error::Unauthenticated(format!("{what}: {m}")),
        Error::Unavailable(m) => Error::Unavailable(format!("{what}: {m}")),
        other => other,
    }
}

/// Where a watch stands in the history: what a stream created again must start from, and
/// which of its first events were delivered already. A revision's events may span several
/// responses, so a resumed stream starts at the last delivered revision and skips the events
/// of it already delivered (etcd's Go client resumes at the next revision, which can lose the
/// rest of a revision split across responses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    /// The start when nothing was delivered yet.
    from: i64,
    /// The revision of the last event delivered (0: none), and how many of its events were.
    last: i64,
    of_last: usize,
    /// Events of `last` still to skip on a resumed stream (delivered before the break).
    skip: usize,
}

impl Place {
    fn from(from: i64) -> Place {
        Place {
            from,
            last: 0,
            of_last: 0,
            skip: 0,
        }
    }

    /// The start revision of a stream created again.
    fn resume(&mut self) -> i64 {
        if self.last > 0 {
            self.skip = self.of_last;
            self.last
        } else {
            self.from
        }
    }

    /// Whether an event of `revision` is new (not one delivered before a break); records it.
    fn admit(&mut self, revision: i64) -> bool {
        if self.skip > 0 && revision == self.last {
            self.skip -= 1;
            return false;
        }
        self.skip = 0;
        if revision == self.last {
            self.of_last += 1;
        } else {
            self.last = revision;
            self.of_last = 1;
        }
        true
    }
}

/// What re-creating a broken watch stream needs: the connection, the key and options, and how
/// long to try (the request timeout, counted from the break).
struct Reopen {
    client: etcd::Client,
    key: Vec<u8>,
    opts: WatchOptions,
    timeout: Duration,
}

/// What one response did to the watch.
enum Flow {
    /// Delivered; read on.
    Go,
    /// The watch is over (failed, or the watcher dropped).
    Over,
    /// The server let go of the watch (it stops, say): create it again.
    Broke(Error),
}

/// Hands the events of `m` (a response of a stream started at `start`) to the watcher.
fn deliver(m: &etcd::WatchResponse, start: i64, place: &mut Place, feed: &WatchFeed) -> Flow {
    if m.compact_revision() > 0 {
        let e = compacted(start, Some(m.compact_revision()));
        return Flow::Broke(e);
    }
    if m.canceled() {
        return Flow::Broke(cancelled(
            "watch cancelled by the server",
            m.cancel_reason(),
        ));
    }
    for e in m.events() {
        if let Some(ev) = event(e) {
            if place.admit(ev.revision()) && !feed.send(ev) {
                return Flow::Over;
            }
        }
    }
    if feed.is_dropped() {
        Flow::Over
    } else {
        Flow::Go
    }
}

/// Moves an etcd watch stream's events into a watcher until the watcher is dropped, the
/// server refuses the watch, or no server takes it up again within the request timeout.
async fn pump(mut stream: etcd::WatchStream, feed: WatchFeed, mut place: Place, again: Reopen) {
    let mut start = place.from;
    loop {
        let broke = match stream.message().await {
            Ok(Some(m)) => match deliver(&m, start, &mut place, &feed) {
                Flow::Go => continue,
                Flow::Over => return,
                Flow::Broke(e) => e,
            },
            Ok(None) => unavailable("the watch stream ended"),
            Err(e) => map_err(e, None),
        };
        if !matches!(broke, Error::Unavailable(_)) {
            return feed.fail(broke);
        }
        match again.reopen(&mut place, &feed, broke).await {
            Ok(Some((s, from))) => (stream, start) = (s, from),
            Ok(None) => return,
            Err(e) => return feed.fail(e),
        }
    }
}

impl Reopen {
    /// A new stream of the watch, from where `place` stands, and its start; `Ok(None)` if the
    /// watcher was dropped meanwhile. Tried with backoff until the request timeout, then the
    /// error of the last try (`why` the stream broke, if none answered).
    async fn reopen(
        &self,
        place: &mut Place,
        feed: &WatchFeed,
        why: Error,
    ) -> Result<Option<(etcd::WatchStream, i64)>> {
        let deadline = Instant::now() + self.timeout;
        let mut backoff = Backoff::new();
        let mut last = why;
        loop {
            if feed.is_dropped() {
                return Ok(None);
            }
            let start = place.resume();
            let left = deadline.saturating_duration_since(Instant::now());
            let mut client = self.client.clone();
            let o = etcd_options(&self.opts, start);
            let open = open_stream(&mut client, &self.key, o);
            last = match tokio::time::timeout(left, open).await {
                Ok(Ok((stream, created))) => match deliver(&created, start, place, feed) {
                    Flow::Go => return Ok(Some((stream, start))),
                    Flow::Over => return Ok(None),
                    Flow::Broke(e) => e,
                },
                Ok(Err(e)) if hopeless(&e) => return Err(map_err(e, None)),
                Ok(Err(e)) => map_err(e, None),
                Err(_) => last,
            };
            if !matches!(last, Error::Unavailable(_)) {
                return Err(last);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(pause) = backoff.pause(left) else {
                return Err(unavailable(format!(
                    "the watch could not be resumed within {}: {last}",
                    crate::error::human(self.timeout)
                )));
            };
            tokio::time::sleep(pause).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p15_a_resumed_watch_starts_where_it_was_and_skips_what_it_delivered() {
        let mut p = Place::from(7);
        assert_eq!(p.resume(), 7, "nothing delivered: the watch's own start");
        // Revision 9's three events: two delivered, then the stream broke.
        assert!(p.admit(8) && p.admit(9) && p.admit(9));
        assert_eq!(p.resume(), 9, "the last delivered revision, again");
        assert!(!p.admit(9) && !p.admit(9), "the two delivered are skipped");
        assert!(p.admit(9), "the third is new");
        assert!(p.admit(10));
        // A break right after a whole revision: its events are all skipped.
        assert_eq!(p.resume(), 10);
        assert!(!p.admit(10));
        assert!(p.admit(11));
        // A break with nothing of the last revision coming again (its events all filtered):
        // the first later event ends the skipping.
        assert_eq!(p.resume(), 11);
        assert!(p.admit(12) && p.admit(12));
        assert_eq!(p.resume(), 12);
        assert!(!p.admit(12) && !p.admit(12) && p.admit(13));
    }

    #[test]
    fn a_cancel_reason_is_read_through_the_one_table() {
        let what = "watch refused by the server";
        let e = cancelled(what, EtcdError::KeyNotProvided.text());
        assert_eq!(
            e.to_string(),
            "invalid argument: watch refused by the server: key must not be empty"
        );
        let e = cancelled(what, EtcdError::TooManyWatches.text());
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("too many watches")),
            "{e:?}"
        );
        let e = cancelled(what, EtcdError::PermissionDenied.text());
        assert!(matches!(e, Error::PermissionDenied(_)), "{e:?}");
        assert!(matches!(cancelled(what, ""), Error::Unavailable(_)));
        let e = cancelled(what, "something new");
        assert!(matches!(e, Error::Storage { .. }), "{e:?}");
    }

    #[test]
    fn a_compacted_start_names_the_servers_floor_when_it_said() {
        let e = compacted(3, Some(7));
        assert!(
            matches!(&e, Error::Compacted { revision: 3, compact_revision: 7, reason } if reason.contains("revision 7")),
            "{e:?}"
        );
        assert!(matches!(
            compacted(3, None),
            Error::Compacted {
                revision: 3,
                compact_revision: 0,
                ..
            }
        ));
    }
}
