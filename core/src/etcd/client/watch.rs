//! Watches over etcd: created before `watch` returns (as the engine's), a start revision checked
//! for compaction, events pumped into a [`Watcher`] by a task on the connection's runtime.

use etcd_client as etcd;

use super::convert::event;
use super::errors::{map_err, unavailable};
use super::Remote;
use crate::error::{Error, Result};
use crate::etcd::errors::EtcdError;
use crate::kv::watch::{WatchFeed, WatchOptions, Watcher};
use crate::limits::check_start_revision;

impl Remote {
    pub(crate) fn watch(&self, key: &[u8], opts: &WatchOptions) -> Result<Watcher> {
        let mut o = etcd::WatchOptions::new();
        if opts.prefix {
            o = o.with_prefix();
        }
        if let Some(r) = opts.start_revision {
            o = o.with_start_revision(check_start_revision(r)?);
        }
        if opts.prev_kv {
            o = o.with_prev_key();
        }
        // The server's first answer says the watch exists (or why not): only then does a write
        // made after `watch` returns reach it, as with the embedded engine.
        let (stream, created) = self.call(true, None, None, |mut c| {
            let o = o.clone();
            async move {
                let mut stream = c.watch(key, Some(o)).await?;
                let created = stream.message().await?;
                Ok((stream, created))
            }
        })?;
        let created = created.ok_or_else(|| unavailable("the watch stream ended"))?;
        let start = opts.start_revision.unwrap_or(0);
        refused(&created, start)?;
        let early = created.events().to_vec();
        let current = created.header().map_or(0, etcd::ResponseHeader::revision);
        if start > 0 && start <= current {
            self.past_start(key, start)?;
        }
        let (feed, watcher) = WatchFeed::new();
        for e in &early {
            if let Some(ev) = event(e) {
                feed.send(ev);
            }
        }
        let guard = self.rt.read().unwrap_or_else(|p| p.into_inner());
        let rt = guard
            .as_ref()
            .ok_or_else(|| Error::Closed("(etcd connection)".into()))?;
        rt.spawn(pump(stream, feed));
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

/// Moves an etcd watch stream's events into a watcher until either ends.
async fn pump(mut stream: etcd::WatchStream, feed: WatchFeed) {
    loop {
        let msg = match stream.message().await {
            Ok(Some(m)) => m,
            Ok(None) => return feed.fail(unavailable("the watch stream ended")),
            Err(e) => return feed.fail(map_err(e, None)),
        };
        if msg.compact_revision() > 0 {
            return feed.fail(Error::Compacted {
                revision: msg.compact_revision(),
                compact_revision: msg.compact_revision(),
                reason: "compacted on the server".into(),
            });
        }
        if msg.canceled() {
            return feed.fail(cancelled(
                "watch cancelled by the server",
                msg.cancel_reason(),
            ));
        }
        for e in msg.events() {
            if let Some(ev) = event(e) {
                if !feed.send(ev) {
                    return;
                }
            }
        }
        if feed.is_dropped() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
