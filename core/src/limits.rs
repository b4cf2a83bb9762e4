//! Argument bounds, in one place: the core checks every argument against them where it enters,
//! and the C and Python bindings use these constants and checks instead of copies of their own
//! (SPEC L2 for TTLs, D5 for options).

use std::time::Duration;

use crate::error::{human, ttl_refused, Error, ErrorCode, Result};

/// The longest lease TTL: etcd's `MaxLeaseTTL`, 9 000 000 000 s (SPEC L2).
pub const MAX_TTL: Duration = Duration::from_secs(9_000_000_000);

/// The longest duration any option or interval takes (the same bound as a TTL), so no
/// deadline computed from one can overflow.
pub const MAX_DURATION: Duration = MAX_TTL;

/// The most events `watch_queue` and `watch_history` may be set to (16 Mi).
pub const MAX_WATCH_EVENTS: usize = 1 << 24;

/// A lease TTL (SPEC L2): zero is `InvalidArgument`, above [`MAX_TTL`] `LeaseTtlTooLarge`.
pub fn check_ttl(ttl: Duration) -> Result<Duration> {
    if ttl.is_zero() {
        return Err(Error::invalid(ttl_refused(human(ttl))));
    }
    if ttl > MAX_TTL {
        return Err(Error::LeaseTtlTooLarge(ttl));
    }
    Ok(ttl)
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
    fn d5_intervals_are_positive_and_bounded_durations_may_be_zero() {
        assert!(check_interval(Duration::ZERO, "x").is_err());
        assert!(check_interval(MAX_DURATION, "x").is_ok());
        assert!(check_interval(MAX_DURATION + Duration::from_nanos(1), "x").is_err());
        assert!(check_duration(Duration::ZERO, "x").is_ok());
        assert!(check_watch_events(MAX_WATCH_EVENTS, "x").is_ok());
        assert!(check_watch_events(MAX_WATCH_EVENTS + 1, "x").is_err());
    }
}
