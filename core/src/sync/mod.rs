//! Coordination recipes built on leases and TTL keys (SPEC S1–S6): sessions, a fair mutex,
//! elections, a fence gate and record locks; from issue 26 (S7–S9) a counting semaphore and a
//! read-write lock. Every acquisition carries a fencing token: the create revision of the
//! acquiring key, strictly increasing per name (S3).
//!
//! They run over one seam, [`Backend`]: only what etcd's `concurrency` package uses of its
//! client, plus optional fast paths the embedded engine provides (lease loss, demotion).
//! Key layout as etcd's: a mutex or election `name` keeps its entries at `name/<lease hex>`,
//! so a tenure `Mutex` and `etcdctl lock` on the same name exclude each other on one etcd.

mod admit;
mod backend;
mod election;
mod elector;
mod fence;
mod hold;
mod mutex;
mod record;
mod rwlock;
mod semaphore;
// queues (S10), barriers (S11), groups and the partitioner (S12).
mod barrier;
mod group;
mod partition;
mod queue;
mod session;
mod turn;

pub use crate::wait::{block_on, Pollable, Stop, Wait, WaitPool};
pub use backend::{sort_and_bound, Backend, CreateOrder, RangeOptions};
pub use election::{CampaignWait, Election, Leadership, Observer};
pub use elector::{ElectorCallbacks, ElectorConfig, ElectorRun, LeaderElector};
pub use fence::FenceGate;
pub use hold::{MutexOptions, ENDED, RELEASED};
pub use mutex::{LockGuard, LockWait, Mutex};
pub use record::RecordLock;
// queues (S10), barriers (S11), groups and the partitioner (S12).
pub use barrier::{Barrier, DoubleBarrier};
pub use group::{Group, GroupChange, GroupWatch, Member, MAX_MEMBER_LEN};
pub use partition::{Partitioner, Ring, MAX_REPLICAS, POINTS_PER_MEMBER};
pub use queue::{DequeueWait, PriorityQueue, Queue};
pub use session::{Session, SessionOptions};
// The semaphore and the read-write lock (S7–S9).
pub use rwlock::{RwLock, RwLockGuard, RwLockWait};
pub use semaphore::{Semaphore, SemaphoreGuard, SemaphoreWait};
