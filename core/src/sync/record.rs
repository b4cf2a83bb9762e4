use std::time::Duration;

use crate::error::{Error, Result};
use crate::kv::txn::{Compare, CompareOp, Op, OpResponse, Txn};
use crate::sync::backend::Backend;
use crate::types::LeaseId;

/// Owner-checked record locks (SPEC S6), the embedded form of Redis's `SET key owner NX PX ttl`
/// and of SQL lock tables: a key holding the owner's name, bound to a lease of `ttl`.
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::RecordLock;
/// use tenure::Error;
///
/// let db = tenure::Tenure::in_memory()?;
/// let ttl = Duration::from_secs(30);
/// let token = RecordLock::try_acquire(&db, "reports/daily", "worker-a", ttl)?;
/// let taken = RecordLock::try_acquire(&db, "reports/daily", "worker-b", ttl).unwrap_err();
/// assert!(matches!(taken, Error::Locked { .. }));
/// RecordLock::refresh(&db, "reports/daily", "worker-a")?; // another 30 s
/// RecordLock::release(&db, "reports/daily", "worker-a")?;
/// assert!(RecordLock::try_acquire(&db, "reports/daily", "worker-b", ttl)? > token);
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RecordLock;

fn owned_lease(db: &dyn Backend, key: &[u8], owner: &[u8]) -> Result<LeaseId> {
    match db.get(key)? {
        Some(kv) if kv.value == owner => kv.lease.ok_or(Error::NotLeader),
        _ => Err(Error::NotLeader),
    }
}

impl RecordLock {
    /// Takes `key` for `owner` for `ttl` if it is free; returns the fencing token (the key's
    /// create revision). `Locked` if anyone (including `owner`) holds it.
    pub fn try_acquire<B: Backend>(
        db: &B,
        key: impl AsRef<[u8]>,
        owner: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<i64> {
        let key = key.as_ref();
        let lease = db.grant(ttl)?;
        let r = db.txn(
            Txn::new()
                .when([Compare::version(key, CompareOp::Equal, 0)])
                .then([Op::put(key, owner.as_ref(), Some(lease))]),
        );
        match r {
            Ok(r) if r.succeeded => Ok(r.revision),
            other => {
                let _ = db.revoke(lease);
                let holder = db
                    .get(key)?
                    .and_then(|kv| kv.lease)
                    .unwrap_or(LeaseId::new(0));
                other.and(Err(Error::Locked {
                    name: String::from_utf8_lossy(key).into_owned(),
                    holder,
                }))
            }
        }
    }

    /// Extends the hold by a full TTL; `NotLeader` unless `owner` holds `key`.
    pub fn refresh<B: Backend>(
        db: &B,
        key: impl AsRef<[u8]>,
        owner: impl AsRef<[u8]>,
    ) -> Result<()> {
        let lease = owned_lease(db, key.as_ref(), owner.as_ref())?;
        match db.renew(lease) {
            Ok(_) => Ok(()),
            // Released and re-taken in between: lease IDs are never reused.
            Err(Error::LeaseNotFound(_) | Error::LeaseExpired(_)) => Err(Error::NotLeader),
            Err(e) => Err(e),
        }
    }

    /// Releases `key` if `owner` holds it; `NotLeader` otherwise.
    pub fn release<B: Backend>(
        db: &B,
        key: impl AsRef<[u8]>,
        owner: impl AsRef<[u8]>,
    ) -> Result<()> {
        let key = key.as_ref();
        let r = db.txn(
            Txn::new()
                .when([Compare::value(key, CompareOp::Equal, owner.as_ref())])
                .then([Op::get(key), Op::delete(key)]),
        )?;
        if !r.succeeded {
            return Err(Error::NotLeader);
        }
        if let Some(OpResponse::Get(Some(kv))) = r.responses.first() {
            if let Some(lease) = kv.lease {
                match db.revoke(lease) {
                    Ok(()) | Err(Error::LeaseNotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}
