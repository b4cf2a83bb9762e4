use std::sync::atomic::{AtomicI64, Ordering};

use crate::error::{Error, Result};

/// Admits fencing tokens in non-decreasing order (SPEC S3): a resource guarded by a lock
/// rejects a writer whose token is lower than the highest it has seen.
///
/// ```
/// use tenure::sync::FenceGate;
/// use tenure::Error;
///
/// let gate = FenceGate::new(); // kept by the guarded resource
/// gate.admit(7)?; // a write from the holder with token 7
/// gate.admit(9)?; // the next holder's
/// // The first holder, back from a long pause, is refused.
/// assert!(matches!(gate.admit(7), Err(Error::StaleToken { token: 7, highest: 9 })));
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct FenceGate {
    highest: AtomicI64,
}

impl FenceGate {
    /// A gate that has seen no token.
    pub fn new() -> FenceGate {
        FenceGate::default()
    }

    /// Admits `token` if it is at least the highest seen so far, else `StaleToken`.
    pub fn admit(&self, token: i64) -> Result<()> {
        self.highest
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                (token >= h).then_some(token)
            })
            .map(|_| ())
            .map_err(|highest| Error::StaleToken { token, highest })
    }

    /// The highest token admitted (0 before any).
    pub fn highest(&self) -> i64 {
        self.highest.load(Ordering::Acquire)
    }
}
