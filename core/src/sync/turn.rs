//! Waiting for one's turn under a prefix, etcd's `waitDeletes`: watch only the newest key
//! created before mine, until none is left (no thundering herd, no polling). The delete of my
//! own key, the session's lost-lease token, the caller's [`Wait`] and the demotion signal end
//! it early.

use crossbeam_channel::{never, select, Receiver};

use crate::error::{Error, Result};
use crate::sync::backend::{Backend, CreateOrder, RangeOptions};
use crate::types::{EventKind, KeyValue, LeaseId};
use crate::wait::{Stop, Wait};

/// `name/` as bytes: the prefix of a mutex's or an election's keys.
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

/// The entries of `prefix`'s own name, not of names nested under it: `jobs/<lease>` belongs
/// to `jobs`, `jobs/nightly/<lease>` to `jobs/nightly` only.
pub(crate) fn own_entries(
    db: &dyn Backend,
    prefix: &[u8],
    opts: RangeOptions,
) -> Result<Vec<KeyValue>> {
    let limit = opts.limit;
    // The limit is applied after the filter: nested names may come first.
    let mut kvs = db.range(
        prefix,
        RangeOptions {
            limit: None,
            ..opts
        },
    )?;
    kvs.retain(|kv| !kv.key[prefix.len()..].contains(&b'/'));
    if let Some(n) = limit {
        kvs.truncate(n);
    }
    Ok(kvs)
}

/// The first entry of `prefix` by create revision (the holder, the leader).
pub(crate) fn first_entry(db: &dyn Backend, prefix: &[u8]) -> Result<Option<KeyValue>> {
    Ok(own_entries(
        db,
        prefix,
        RangeOptions {
            order: CreateOrder::Oldest,
            limit: Some(1),
            ..RangeOptions::default()
        },
    )?
    .pop())
}

/// What ends a wait besides the awaited deletes.
pub(crate) struct Interrupts<'a> {
    /// The session's lost-lease token: `SessionExpired` (or `Closed`).
    pub(crate) lost: &'a Stop,
    /// The caller's deadline and stop token: `Timeout`.
    pub(crate) wait: &'a Wait,
    /// The engine's demotion signal, taken *before* the contender's key was put so that no
    /// demote is missed: `NotPrimary` (L9).
    pub(crate) demoted: Option<Receiver<()>>,
    /// The session waiting, named by `SessionExpired`.
    pub(crate) session: LeaseId,
    /// What is awaited, named by `Timeout` (`lock "jobs/nightly"`).
    pub(crate) what: &'a str,
}

/// Waits until no entry of `prefix` created before `my_rev` is left, then checks that `me`
/// itself still exists with `my_rev` (`SessionExpired` otherwise, etcd#11051).
pub(crate) fn wait_turn(
    db: &dyn Backend,
    prefix: &[u8],
    me: &[u8],
    my_rev: i64,
    stop: &Interrupts<'_>,
) -> Result<()> {
    let timer = stop.wait.timer();
    let cancelled = stop.wait.stopped();
    let demoted = stop.demoted.clone().unwrap_or_else(never);
    let expired = Error::SessionExpired(stop.session);
    let lost = |db: &dyn Backend| {
        if db.is_closed() {
            db.closed_error()
        } else {
            expired.clone()
        }
    };
    // My own key, watched throughout: its delete (lease lost) ends the wait on any backend.
    let mut mine = db.watch(me, Default::default())?;
    loop {
        if stop.lost.is_stopped() {
            return Err(lost(db));
        }
        // Mine first: a lease lost while waiting deleted it (etcd#11051).
        if db.get(me)?.is_none_or(|kv| kv.create_revision != my_rev) {
            return Err(expired);
        }
        let newer_first = RangeOptions {
            order: CreateOrder::Newest,
            max_create_revision: Some(my_rev - 1),
            limit: Some(1),
        };
        let Some(pred) = own_entries(db, prefix, newer_first)?.pop() else {
            // Checked again after the predecessors: mine may have gone between the check above
            // and the range. No older entry can reappear, so "none older and mine exists" holds
            // at the moment of this read.
            return match db.get(me)? {
                Some(kv) if kv.create_revision == my_rev => Ok(()),
                _ => Err(expired),
            };
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
                        e @ Error::Closed(_) => return Err(e),
                        _ => break, // fell behind: re-check from the store
                    },
                },
                recv(mine.channel()) -> ev => match ev {
                    Ok(ev) if ev.kind == EventKind::Delete => return Err(expired),
                    Ok(_) => {}
                    Err(_) => match mine.ended() {
                        e @ Error::Closed(_) => return Err(e),
                        _ => {
                            mine = db.watch(me, Default::default())?;
                            break; // re-check from the store
                        }
                    },
                },
                recv(stop.lost.channel()) -> _ => return Err(lost(db)),
                recv(timer) -> _ => return Err(stop.wait.timed_out(stop.what)),
                recv(cancelled) -> _ => return Err(stop.wait.timed_out(stop.what)),
                recv(demoted) -> _ => return Err(Error::NotPrimary),
            }
        }
    }
}
