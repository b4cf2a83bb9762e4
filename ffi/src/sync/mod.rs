//! Coordination recipes (SPEC S1–S6): sessions, mutexes, elections, the leader elector, fence
//! gates, record locks and keep-alives. Every function converts its arguments and calls
//! `tenure_core::sync` (or `Tenure::keep_alive`); the recipes themselves live in the core.
//!
//! Cancellation: each object with blocking calls (session, observer, elector) owns a core `Stop`
//! token that every blocking call on it waits with; `tenure_session_cancel`,
//! `tenure_observer_cancel` and `tenure_elector_stop` raise it from any thread. Closing a
//! session ends its waits through the core's lease-loss signal (`TENURE_ERR_SESSION_EXPIRED`).
//!
//! One file per recipe, as in `tenure_core::sync`; the declaration order below is the order of
//! their declarations in the generated header.

use std::sync::Mutex;

mod session;
pub use session::*;
mod mutex;
pub use mutex::*;
mod election;
pub use election::*;
mod elector;
pub use elector::*;
mod fence;
pub use fence::*;
mod record;
pub use record::*;
mod keepalive;
pub use keepalive::*;
// The semaphore and the read-write lock (S7–S9).
mod semaphore;
pub use semaphore::*;
mod rwlock;
pub use rwlock::*;
// queues (S10), barriers (S11).
mod queue;
pub use queue::*;
mod barrier;
pub use barrier::*;
// groups and the partitioner (S12).
mod group;
pub use group::*;

/// Locks a std mutex, ignoring poisoning (no code here panics while holding one).
fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
