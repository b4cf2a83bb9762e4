//! Waiting for keys to be deleted, without polling: a watch, the session's lease-loss channel
//! and a timer in one `select!`.

use std::time::Instant;

use crossbeam_channel::{after, never, select, Receiver};

use crate::error::{Error, Result};
use crate::types::{EventKind, KeyValue};
use crate::Tenure;

/// The key under `prefix` that `me` waits for: the one with the highest create revision below
/// `my_rev`. `Ok(None)` when `me` is first. `SessionExpired` when `me` itself is gone (its lease
/// was lost while waiting, etcd#11051).
fn predecessor(db: &Tenure, prefix: &[u8], me: &[u8], my_rev: i64) -> Result<Option<KeyValue>> {
    let all = db.range(prefix, None)?;
    if !all
        .iter()
        .any(|kv| kv.key == me && kv.create_revision == my_rev)
    {
        return Err(Error::SessionExpired);
    }
    Ok(all
        .into_iter()
        .filter(|kv| kv.create_revision < my_rev)
        .max_by_key(|kv| kv.create_revision))
}

/// What ends a wait early, besides the awaited delete.
pub(crate) struct Interrupts<'a> {
    /// The session's lease-loss channel: `SessionExpired` (or `Closed`).
    pub(crate) gone: &'a Receiver<()>,
    /// A caller's cancellation: `Timeout` when it receives or disconnects.
    pub(crate) cancel: Option<&'a Receiver<()>>,
    /// The engine's demotion signal, taken *before* the contender's key was put so that no
    /// demote is missed: `NotPrimary` (L9).
    pub(crate) demoted: &'a Receiver<()>,
    /// `Timeout` at this instant.
    pub(crate) deadline: Option<Instant>,
}

/// Waits until no key under `prefix` was created before `my_rev` (etcd's `waitDeletes`),
/// watching only the immediate predecessor each time (no thundering herd).
pub(crate) fn wait_turn(
    db: &Tenure,
    prefix: &[u8],
    me: &[u8],
    my_rev: i64,
    stop: &Interrupts<'_>,
) -> Result<()> {
    let timer = match stop.deadline {
        Some(d) => after(d.saturating_duration_since(Instant::now())),
        None => never(),
    };
    let never_cancel = never();
    let cancel = stop.cancel.unwrap_or(&never_cancel);
    loop {
        let Some(pred) = predecessor(db, prefix, me, my_rev)? else {
            return Ok(());
        };
        let mut w = db.watch(&pred.key, Default::default())?;
        // Registered first, then checked: a delete in between is seen here or in the watch.
        if db
            .get(&pred.key)?
            .is_none_or(|kv| kv.create_revision != pred.create_revision)
        {
            continue;
        }
        loop {
            select! {
                recv(w.channel()) -> ev => match ev {
                    Ok(ev) if ev.kind == EventKind::Delete => break,
                    Ok(_) => {}
                    Err(_) => match w.ended() {
                        Error::Closed => return Err(Error::Closed),
                        _ => break, // fell behind: re-check from the store
                    },
                },
                recv(stop.gone) -> _ => {
                    return Err(if db.is_closed() { Error::Closed } else { Error::SessionExpired });
                }
                recv(timer) -> _ => return Err(Error::Timeout),
                recv(cancel) -> _ => return Err(Error::Timeout),
                recv(stop.demoted) -> _ => return Err(Error::NotPrimary),
            }
        }
    }
}

/// `name/` as bytes.
pub(crate) fn prefix_of(name: &str) -> Vec<u8> {
    let mut p = name.as_bytes().to_vec();
    p.push(b'/');
    p
}

/// The key of a session's entry under `prefix`: `prefix` + the lease ID in hex (as etcd).
pub(crate) fn key_of(prefix: &[u8], lease: i64) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(format!("{lease:x}").as_bytes());
    k
}
