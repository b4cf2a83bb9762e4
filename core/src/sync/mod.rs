//! Coordination recipes built on leases and TTL keys (SPEC S1–S6): sessions, a fair mutex,
//! elections, a fence gate and record locks. Every acquisition carries a fencing token: the
//! create revision of the acquiring key, strictly increasing per name (S3).
//!
//! They use only the public engine API plus a lease-loss notification, exactly as the etcd
//! `concurrency` package uses the etcd client.

mod election;
mod elector;
mod fence;
mod mutex;
mod record;
mod session;
mod wait;

pub use election::{Election, Leadership, Observer};
pub use elector::{ElectorCallbacks, ElectorConfig, LeaderElector, Stop, JITTER};
pub use fence::FenceGate;
pub use mutex::{LockGuard, Mutex};
pub use record::RecordLock;
pub use session::{Session, SessionOptions};
