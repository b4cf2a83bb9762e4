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

/// Waits until no key under `prefix` was created before `my_rev` (etcd's `waitDeletes`),
/// watching only the immediate predecessor each time (no thundering herd).
/// `cancel` ends the wait with `Timeout` when it receives or disconnects; a demote of the engine
/// ends it with `NotPrimary` (L9).
pub(crate) fn wait_turn(
    db: &Tenure,
    gone: &Receiver<()>,
    prefix: &[u8],
    me: &[u8],
    my_rev: i64,
    deadline: Option<Instant>,
    cancel: Option<&Receiver<()>>,
) -> Result<()> {
    let timer = match deadline {
        Some(d) => after(d.saturating_duration_since(Instant::now())),
        None => never(),
    };
    let never_cancel = never();
    let cancel = cancel.unwrap_or(&never_cancel);
    let demoted = db.demotion();
    loop {
        let Some(pred) = predecessor(db, prefix, me, my_rev)? else {
            return Ok(());
        };
        wait_deleted(
            db,
            gone,
            &pred.key,
            pred.create_revision,
            &timer,
            cancel,
            &demoted,
        )?;
    }
}

/// Waits until `key` (created at `rev`) is deleted.
fn wait_deleted(
    db: &Tenure,
    gone: &Receiver<()>,
    key: &[u8],
    rev: i64,
    timer: &Receiver<Instant>,
    cancel: &Receiver<()>,
    demoted: &Receiver<()>,
) -> Result<()> {
    let mut w = db.watch(key, Default::default())?;
    // Registered first, then checked: a delete in between is either seen here or in the watch.
    if db.get(key)?.is_none_or(|kv| kv.create_revision != rev) {
        return Ok(());
    }
    loop {
        select! {
            recv(w.channel()) -> ev => match ev {
                Ok(ev) if ev.kind == EventKind::Delete => return Ok(()),
                Ok(_) => {}
                Err(_) => return match w.ended() {
                    Error::Closed => Err(Error::Closed),
                    _ => Ok(()), // fell behind: the caller re-checks from the store
                },
            },
            recv(gone) -> _ => {
                return Err(if db.is_closed() { Error::Closed } else { Error::SessionExpired });
            }
            recv(timer) -> _ => return Err(Error::Timeout),
            recv(cancel) -> _ => return Err(Error::Timeout),
            recv(demoted) -> _ => return Err(Error::NotPrimary),
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
