//! Sessions bound to their process (shared mode, SPEC P10–P13), the server's side: which leases
//! each bound keep-alive stream (one marked with the client's `tenure-bound-session` header)
//! kept alive, and which of them to revoke when a stream ends. A pure account, no I/O: the
//! Lease service (`service.rs`) renews and revokes.
//!
//! A stream that ends cleanly (the client half-closed it: a session closed, or kept its lease,
//! on purpose) revokes nothing. One that breaks (the connection closed under it without
//! END_STREAM, or the client reset it: its process died) revokes the leases it kept that no
//! other live bound stream keeps.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio::sync::watch;

use crate::locks::Mutex;

/// Most leases one bound stream binds (a session's stream renews one); renews of more leases
/// on it are answered but bind nothing.
pub(crate) const MAX_BOUND_LEASES_PER_STREAM: usize = 1024;

/// How a bound stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The client half-closed it (END_STREAM): on purpose.
    Clean,
    /// The server ended it (shutdown, not primary): nobody's fault.
    Server,
    /// It broke (connection closed or stream reset by the client): the process died.
    Broken,
}

/// The leases bound streams keep, across every stream of one Lease service.
#[derive(Debug)]
pub(crate) struct Bindings {
    /// Lease ID → how many live bound streams renewed it.
    kept: Mutex<HashMap<i64, u32>>,
    /// Live bound streams, counted until each one's revokes are done.
    live: watch::Sender<usize>,
}

impl Default for Bindings {
    fn default() -> Self {
        Bindings {
            kept: Mutex::new(HashMap::new()),
            live: watch::Sender::new(0),
        }
    }
}

impl Bindings {
    /// A new bound stream's account.
    pub(crate) fn stream(self: &Arc<Self>) -> StreamLeases {
        self.live.send_modify(|n| *n += 1);
        StreamLeases {
            bindings: self.clone(),
            leases: HashSet::new(),
            ended: false,
        }
    }

    /// The number of live bound streams, as it changes.
    pub(crate) fn live(&self) -> watch::Receiver<usize> {
        self.live.subscribe()
    }

    fn forget(&self, id: i64) -> bool {
        let mut kept = self.kept.lock();
        match kept.get_mut(&id) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                kept.remove(&id);
                true
            }
            None => false,
        }
    }
}

/// What one bound stream kept alive. Dropped without [`end`](StreamLeases::end) (its task
/// failed), it ends as `Server`: nothing revoked.
#[derive(Debug)]
pub(crate) struct StreamLeases {
    bindings: Arc<Bindings>,
    leases: HashSet<i64>,
    ended: bool,
}

impl StreamLeases {
    /// A renew on this stream found lease `id` live: it is bound to the stream. False if the
    /// stream already binds its most leases.
    pub(crate) fn renewed(&mut self, id: i64) -> bool {
        if self.leases.contains(&id) {
            return true;
        }
        if self.leases.len() >= MAX_BOUND_LEASES_PER_STREAM {
            return false;
        }
        self.leases.insert(id);
        *self.bindings.kept.lock().entry(id).or_insert(0) += 1;
        true
    }

    /// A renew on this stream found lease `id` gone: nothing left to bind.
    pub(crate) fn gone(&mut self, id: i64) {
        if self.leases.remove(&id) {
            self.bindings.forget(id);
        }
    }

    /// The stream ended `how`: the leases to revoke now (only when it broke: those no other
    /// live bound stream keeps). Call [`done`](StreamLeases::done) once they are revoked.
    pub(crate) fn end(&mut self, how: End) -> Vec<i64> {
        self.ended = true;
        let mut revoke = Vec::new();
        for id in std::mem::take(&mut self.leases) {
            if self.bindings.forget(id) && how == End::Broken {
                revoke.push(id);
            }
        }
        revoke.sort_unstable();
        revoke
    }

    /// The stream's revokes are done: it no longer counts as live.
    pub(crate) fn done(self) {}
}

impl Drop for StreamLeases {
    fn drop(&mut self) {
        if !self.ended {
            self.end(End::Server);
        }
        self.bindings.live.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p10_p11_a_broken_stream_revokes_what_it_kept_and_a_clean_one_nothing() {
        let b = Arc::new(Bindings::default());
        let mut clean = b.stream();
        let mut broken = b.stream();
        assert_eq!(*b.live().borrow(), 2);
        assert!(clean.renewed(1));
        assert!(broken.renewed(2));
        assert!(broken.renewed(2));
        broken.renewed(3);
        broken.gone(3);
        assert_eq!(clean.end(End::Clean), Vec::<i64>::new());
        clean.done();
        assert_eq!(broken.end(End::Broken), vec![2], "3 was gone already");
        assert_eq!(*b.live().borrow(), 1, "live until its revokes are done");
        broken.done();
        assert_eq!(*b.live().borrow(), 0);
    }

    #[test]
    fn p13_a_lease_another_live_stream_keeps_is_not_revoked() {
        let b = Arc::new(Bindings::default());
        let (mut old, mut new) = (b.stream(), b.stream());
        old.renewed(7);
        new.renewed(7);
        assert_eq!(old.end(End::Broken), Vec::<i64>::new());
        assert_eq!(new.end(End::Broken), vec![7]);
    }

    #[test]
    fn p13_the_server_ending_a_stream_revokes_nothing_and_leases_per_stream_are_bounded() {
        let b = Arc::new(Bindings::default());
        let mut s = b.stream();
        for id in 0..MAX_BOUND_LEASES_PER_STREAM as i64 {
            assert!(s.renewed(id));
        }
        assert!(!s.renewed(-1), "one too many");
        assert!(s.renewed(0), "a bound lease renews as before");
        assert_eq!(s.end(End::Server), Vec::<i64>::new());
        drop(s);
        assert!(b.kept.lock().is_empty());
        let mut dropped = b.stream();
        dropped.renewed(1);
        drop(dropped);
        assert!(
            b.kept.lock().is_empty(),
            "a dropped account forgets its leases"
        );
        assert_eq!(*b.live().borrow(), 0);
    }
}
