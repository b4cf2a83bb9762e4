//! Coordination (SPEC S1–S6, module `tenure::sync`): sessions, fair mutexes, elections and their
//! observers, the client-go style leader elector, the fence gate and record locks.
//!
//! The conventions of the rest of the binding hold here too: every engine call goes through
//! `errors::blocking` (GIL released, panics caught, errors mapped by their C code), engine objects live
//! in a `runtime::ForkSafe` (a forked child sees them as `tenure.Closed` and never touches or drops
//! them), and every wait is sliced (≤ `runtime::SLICE`) with signal checks in between.
//!
//! The core waits that cannot be sliced without losing their place (a queued lock or candidacy)
//! run in the shared wait pool (`runtime::pool`, one thread for every pending wait), the
//! elector's run on a thread of its own, each with a `Stop` in its `Wait`, while the calling
//! thread waits for the result with the shared sliced wait (`runtime::interruptible`): on
//! Ctrl-C the `Stop` is raised (the contender withdraws, the elector stops), the wait's end is
//! waited for, and the `KeyboardInterrupt` propagates.
//!
//! One file per recipe, mirroring `core/src/sync/`; `session.rs` sits above `mutex.rs` and
//! `election.rs` (a session makes them; they keep their session as a plain Python object).

mod election;
mod elector;
mod fence;
// What the lock, semaphore and read-write lock guards share.
mod guard;
mod mutex;
mod record;
// The semaphore and the read-write lock (S7–S9).
mod rwlock;
mod semaphore;
mod session;
// queues (S10), barriers (S11).
mod barrier;
mod group;
mod queue;

pub(crate) use election::{
    election_leader, observe_election, PyElection, PyLeadership, PyObserver,
};
pub(crate) use elector::{PyLeaderElector, PyStop};
pub(crate) use fence::PyFenceGate;
pub(crate) use guard::PyGuard;
pub(crate) use mutex::{PyLockGuard, PyMutex};
pub(crate) use record::PyRecordLock;
pub(crate) use rwlock::{_rwlock_async, PyRwLock, PyRwLockGuard};
pub(crate) use semaphore::{_semaphore_acquire_async, PySemaphore, PySemaphoreGuard};
pub(crate) use session::PySession;
// queues (S10), barriers (S11).
pub(crate) use barrier::{
    _double_barrier_async, new_barrier, new_double_barrier, PyBarrier, PyDoubleBarrier,
};
pub(crate) use group::{
    change_tuple, group_members, new_group, new_partitioner, watch_group, PyGroup, PyGroupWatch,
    PyPartitioner,
};
pub(crate) use queue::{new_priority_queue, new_queue, priority_of, PyPriorityQueue, PyQueue};
