//! The checks of every argument against the bounds of `limits`, each with one wording.

use std::time::Duration;

use super::{
    EMPTY_KEY, LOG_REGION_MAX, LOG_REGION_MIN, MAX_DURATION, MAX_TTL, MAX_TXN_OPS,
    MAX_WATCH_EVENTS, TOO_MANY_TXN_OPS,
};
use crate::error::{human, ttl_refused, Error, ErrorCode, Result};

/// A key that is written, deleted or read by name (K1): not empty.
#[inline]
pub fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::invalid(EMPTY_KEY));
    }
    Ok(())
}

/// A lease ID the caller chose (L1), embedded or over connect: positive.
pub fn check_lease_id(id: i64) -> Result<i64> {
    if id <= 0 {
        return Err(Error::invalid(format!(
            "lease ID must be positive, got {id}"
        )));
    }
    Ok(id)
}

/// What the txn op budget needs to know of a txn (etcd's `TxnRequest`).
pub trait TxnShape {
    /// The operations of this level as etcd counts them: the largest of its compares, success
    /// ops and failure ops.
    fn level_ops(&self) -> usize;
    /// The txns nested directly in either branch.
    fn nested(&self) -> impl Iterator<Item = &Self>;
}

/// A txn within [`MAX_TXN_OPS`] operations in all, its nested txns' included (SPEC E2a): etcd
/// checks each level against what the levels above it left, so siblings each get the rest and a
/// small request can nest tens of thousands of operations; here they share it. Stops at the
/// first level over the budget (each nested txn is an operation of its parent, so the walk is at
/// most `MAX_TXN_OPS` deep).
pub fn check_txn_ops<T: TxnShape>(txn: &T) -> Result<()> {
    fn spend<T: TxnShape>(t: &T, budget: &mut usize) -> bool {
        let Some(left) = budget.checked_sub(t.level_ops()) else {
            return false;
        };
        *budget = left;
        t.nested().all(|n| spend(n, budget))
    }
    let mut budget = MAX_TXN_OPS;
    if spend(txn, &mut budget) {
        Ok(())
    } else {
        Err(Error::invalid(TOO_MANY_TXN_OPS))
    }
}

/// The revision after `revision` (SPEC K7): a store at `i64::MAX` takes no write.
pub(crate) fn next_revision(revision: i64) -> Result<i64> {
    revision.checked_add(1).ok_or_else(|| {
        Error::invalid(
            "the store revision is at i64::MAX: no write can take another (the file can be read, \
             not written)",
        )
    })
}

/// A watch's start revision, embedded or over connect: positive.
pub fn check_start_revision(revision: i64) -> Result<i64> {
    if revision <= 0 {
        return Err(Error::invalid(format!(
            "start revision must be positive, got {revision}"
        )));
    }
    Ok(revision)
}

/// A lease TTL (SPEC L2): zero is `InvalidArgument`, above [`MAX_TTL`] `LeaseTtlTooLarge`.
#[inline]
pub fn check_ttl(ttl: Duration) -> Result<Duration> {
    if ttl.is_zero() || ttl > MAX_TTL {
        return Err(ttl_error(ttl));
    }
    Ok(ttl)
}

// Out of line: grant's path carries only the two comparisons.
#[cold]
#[inline(never)]
fn ttl_error(ttl: Duration) -> Error {
    if ttl.is_zero() {
        Error::invalid(ttl_refused(human(ttl)))
    } else {
        Error::LeaseTtlTooLarge(ttl)
    }
}

/// A TTL given in seconds as a float (what a binding receives): NaN or ≤ 0 breaks
/// `InvalidArgument`, above [`MAX_TTL`] (infinity included) `LeaseTtlTooLarge`. The code of the
/// rule broken comes back so the caller can word the refusal with [`ttl_refused`] and the TTL
/// as its caller wrote it.
pub fn check_ttl_secs(secs: f64) -> std::result::Result<Duration, ErrorCode> {
    if secs.is_nan() || secs <= 0.0 {
        return Err(ErrorCode::InvalidArgument);
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(ttl) if ttl <= MAX_TTL => Ok(ttl),
        _ => Err(ErrorCode::LeaseTtlTooLarge),
    }
}

/// An interval (flush, checkpoint, retry, keep-alive, elector periods): more than zero and at
/// most [`MAX_DURATION`].
pub fn check_interval(d: Duration, what: &str) -> Result<Duration> {
    if d.is_zero() {
        return Err(Error::invalid(format!("{what} must be positive")));
    }
    check_duration(d, what)
}

/// A duration that may be zero (`min_ttl`, a recovery extension): at most [`MAX_DURATION`].
pub fn check_duration(d: Duration, what: &str) -> Result<Duration> {
    if d > MAX_DURATION {
        return Err(Error::invalid(format!(
            "{what} must be at most {} s, got {d:?}",
            MAX_DURATION.as_secs()
        )));
    }
    Ok(d)
}

/// A keep-alive interval: more than zero and at most
/// [`MAX_KEEPALIVE_INTERVAL`](super::MAX_KEEPALIVE_INTERVAL)
/// (`InvalidArgument` naming `keepalive_interval` and the bound).
pub fn check_keepalive_interval(d: Duration) -> Result<Duration> {
    check_interval(d, "keepalive_interval")
}

/// A region size of the write-ahead log: a multiple of 8 from [`LOG_REGION_MIN`] to
/// [`LOG_REGION_MAX`].
pub fn check_log_region(bytes: u64) -> Result<u64> {
    let region = LOG_REGION_MIN..=LOG_REGION_MAX;
    if !region.contains(&bytes) || !bytes.is_multiple_of(8) {
        return Err(Error::invalid(format!(
            "log_region_size must be a multiple of 8 in {region:?}, got {bytes}"
        )));
    }
    Ok(bytes)
}

/// A number of watch events (`watch_queue`, `watch_history`): at most [`MAX_WATCH_EVENTS`].
pub fn check_watch_events(n: usize, what: &str) -> Result<usize> {
    if n > MAX_WATCH_EVENTS {
        return Err(Error::invalid(format!(
            "{what} must be at most {MAX_WATCH_EVENTS} events, got {n}"
        )));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{instant_after, FAR_FUTURE, MAX_KEEPALIVE_INTERVAL};
    use std::time::Instant;

    #[test]
    fn l2_ttl_bounds_in_duration_and_in_float_seconds_agree() {
        for (secs, code) in [
            (0.0, Some(ErrorCode::InvalidArgument)),
            (-1.5, Some(ErrorCode::InvalidArgument)),
            (f64::NAN, Some(ErrorCode::InvalidArgument)),
            (0.001, None),
            (9e9, None),
            (9e9 + 1.0, Some(ErrorCode::LeaseTtlTooLarge)),
            (f64::INFINITY, Some(ErrorCode::LeaseTtlTooLarge)),
        ] {
            assert_eq!(check_ttl_secs(secs).err(), code, "{secs} s");
            if secs >= 0.0 && secs.is_finite() {
                let d = Duration::from_secs_f64(secs);
                assert_eq!(check_ttl(d).err().map(|e| e.code()), code, "{secs} s");
            }
        }
    }

    #[test]
    fn k1_keys_lease_ids_and_start_revisions_have_one_wording() {
        assert!(check_key(b"k").is_ok());
        let e = check_key(b"").unwrap_err();
        assert_eq!(e.to_string(), format!("invalid argument: {EMPTY_KEY}"));
        assert_eq!(check_lease_id(1).unwrap(), 1);
        let e = check_lease_id(0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid argument: lease ID must be positive, got 0"
        );
        assert_eq!(check_start_revision(3).unwrap(), 3);
        let e = check_start_revision(-2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid argument: start revision must be positive, got -2"
        );
    }

    #[test]
    fn d5_intervals_are_positive_and_bounded_durations_may_be_zero() {
        assert!(check_interval(Duration::ZERO, "x").is_err());
        assert!(check_interval(MAX_DURATION, "x").is_ok());
        assert!(check_interval(MAX_DURATION + Duration::from_nanos(1), "x").is_err());
        assert!(check_duration(Duration::ZERO, "x").is_ok());
        assert!(check_watch_events(MAX_WATCH_EVENTS, "x").is_ok());
        assert!(check_watch_events(MAX_WATCH_EVENTS + 1, "x").is_err());
        assert!(check_log_region(LOG_REGION_MIN).is_ok());
        assert!(check_log_region(LOG_REGION_MAX).is_ok());
        assert!(check_log_region(LOG_REGION_MIN - 8).is_err());
        assert!(check_log_region(LOG_REGION_MIN + 4).is_err());
        assert!(check_log_region(LOG_REGION_MAX + 8).is_err());
    }

    #[test]
    fn s1_keepalive_intervals_are_positive_and_at_most_the_bound() {
        assert!(check_keepalive_interval(Duration::ZERO).is_err());
        assert!(check_keepalive_interval(MAX_KEEPALIVE_INTERVAL).is_ok());
        let e =
            check_keepalive_interval(MAX_KEEPALIVE_INTERVAL + Duration::from_nanos(1)).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        let m = e.to_string();
        assert!(
            m.contains("keepalive_interval") && m.contains("9000000000 s"),
            "{m}"
        );
    }

    #[test]
    fn s2_a_deadline_beyond_the_clock_saturates_at_the_far_future() {
        let before = Instant::now();
        let at = instant_after(Duration::MAX);
        assert!(at >= before + FAR_FUTURE);
        assert!(instant_after(Duration::from_secs(1)) < before + Duration::from_secs(3600));
    }
}
