//! The one error model shared by Rust, C and Python (see `docs/DESIGN.md`, "Errors").

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::types::LeaseId;

/// Everything that can go wrong in tenure.
///
/// Each variant maps to exactly one C result code and one Python exception; the table lives in
/// [`Error::code`] and is never renumbered.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument is out of its domain (zero TTL, lease ID ≤ 0, empty key, bad option…).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// No live lease has this ID.
    #[error("lease {0} not found")]
    LeaseNotFound(LeaseId),
    /// `grant_with_id` was given an ID that is in use.
    #[error("lease {0} already exists")]
    LeaseExists(LeaseId),
    /// The lease's deadline has passed and it is held for a manual revoke.
    #[error("lease {0} has expired")]
    LeaseExpired(LeaseId),
    /// The TTL is above etcd's `MaxLeaseTTL` (9 000 000 000 s).
    #[error("{}", ttl_refused(human(*.0)))]
    LeaseTtlTooLarge(Duration),
    /// The engine is a standby; only a primary renews and expires leases.
    #[error("this engine is not the primary")]
    NotPrimary,
    /// The requested revision is no longer in the retained history (below the last
    /// compaction), or a watcher fell too far behind and was cancelled; `revision` is where it
    /// can resume.
    #[error("revision {revision} is compacted: {reason}")]
    Compacted {
        /// The first revision that could not be delivered (or read).
        revision: i64,
        /// etcd's `compact_revision`: the compaction point, the oldest revision still kept
        /// (reads and watches from it on are answered). 0 when the error does not say (a
        /// watcher that fell behind; a read over `connect`, whose etcd error carries no number).
        compact_revision: i64,
        /// Why: history too short, or the watcher fell behind.
        reason: String,
    },
    /// A read (or a compaction) at a revision above the current one: etcd's "required
    /// revision is a future revision".
    #[error("{}", future_revision(*.requested, *.current))]
    FutureRevision {
        /// The revision asked for (0 when the server's error did not say).
        requested: i64,
        /// The current revision then (0 when the server's error did not say).
        current: i64,
    },
    /// The database file is held by another engine, in this process or another one. The
    /// message names the ways to share one file (SPEC P2): `shared=True` in every process, or
    /// `tenure serve`.
    #[error(
        "database {} is already open by another engine (in this process or another one); to \
         share one file between processes, open it with shared=True (Rust: \
         Builder::shared(true)) in every one of them, or serve it with `tenure serve` and \
         connect to that",
        .0.display()
    )]
    AlreadyOpen(PathBuf),
    /// The file is not a tenure database, or is damaged; it was not modified.
    #[error("database {} is corrupt or not a tenure database: {detail}", path.display())]
    Corrupt {
        /// The file that was refused.
        path: PathBuf,
        /// What was wrong with it.
        detail: String,
    },
    /// A read or a commit failed in the storage layer. After a failed commit every write fails
    /// with this error until the database is reopened (SPEC D6).
    #[error("storage error: {message}")]
    Storage {
        /// What failed.
        message: String,
        /// The operating system's error number, when the OS gave one (`ENOENT`, `EISDIR`...).
        errno: Option<i32>,
        /// The file concerned, when one is.
        path: Option<PathBuf>,
    },
    /// The engine has been closed; names the database (its path, or `(in memory)`).
    #[error("database {0} is closed")]
    Closed(String),
    /// A blocking call reached its timeout: what it waited for, and for how long.
    #[error("timed out after {} waiting for {what}", human(*.after))]
    Timeout {
        /// What the call waited for, e.g. `lock "jobs/nightly"`.
        what: String,
        /// The timeout it was given.
        after: Duration,
    },
    /// A lock is held by someone else (`try_lock`): which lock, held by which lease.
    #[error("lock {name:?} is held by lease {holder}")]
    Locked {
        /// The lock's name (for a record lock, its key).
        name: String,
        /// The lease of the holder (a session's lease, or a record lock's).
        holder: LeaseId,
    },
    /// The session's lease is gone (expired, revoked, or the session was closed).
    #[error("session {0} has ended: its lease expired or was revoked, or it was closed")]
    SessionExpired(LeaseId),
    /// The caller is not (or no longer) the leader.
    #[error("not the leader")]
    NotLeader,
    /// A fencing token lower than the highest already admitted.
    #[error("stale fencing token {token} (highest seen {highest})")]
    StaleToken {
        /// The token that was refused.
        token: i64,
        /// The highest token admitted so far.
        highest: i64,
    },
    /// The call needs the embedded engine (checkpoint, promote, demote…) and this handle is
    /// connected to an etcd v3 server.
    #[error("not supported over connect: {0}")]
    Unsupported(String),
    /// The etcd v3 server could not be reached within the call's deadline, after bounded
    /// retries; the call may succeed once the server is back.
    #[error("server unavailable: {0}")]
    Unavailable(String),
    /// The etcd v3 server refused the call for this user: authenticated, but its roles grant no
    /// permission on the key (etcd's `PermissionDenied`).
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The connection could not be authenticated: the server's certificate is not trusted
    /// (wrong CA, wrong name), the client certificate is missing, expired or refused, or the
    /// user name or password is wrong. Names the endpoint and the cause; retrying is futile.
    #[error("not authenticated: {0}")]
    Unauthenticated(String),
    /// The database file has reached its space quota (`Builder::quota_backend_bytes`,
    /// `tenure serve --quota-backend-bytes`), or a NOSPACE alarm is raised: the write (a put, a
    /// txn that puts, a grant) was refused and nothing changed. Deletes, reads, revokes and
    /// compaction still work; compact, defragment and disarm the alarm to write again (SPEC E20).
    #[error("database space exceeded: {0}")]
    QuotaExceeded(String),
}

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The stable, language-neutral identity of an [`Error`]: the C `tenure_result` codes.
///
/// These numbers are ABI: they are never renumbered and new codes only get appended.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// Success.
    Ok = 0,
    /// [`Error::InvalidArgument`].
    InvalidArgument = 1,
    /// A NULL pointer crossed the C ABI (`TypeError` in Python; no Rust variant).
    NullPointer = 2,
    /// [`Error::LeaseNotFound`].
    LeaseNotFound = 3,
    /// [`Error::LeaseExists`].
    LeaseExists = 4,
    /// [`Error::LeaseExpired`].
    LeaseExpired = 5,
    /// [`Error::LeaseTtlTooLarge`].
    LeaseTtlTooLarge = 6,
    /// [`Error::NotPrimary`].
    NotPrimary = 7,
    /// [`Error::Compacted`].
    Compacted = 8,
    /// [`Error::AlreadyOpen`].
    AlreadyOpen = 9,
    /// [`Error::Corrupt`].
    Corrupt = 10,
    /// [`Error::Storage`].
    Storage = 11,
    /// [`Error::Closed`].
    Closed = 12,
    /// [`Error::Timeout`].
    Timeout = 13,
    /// [`Error::Locked`].
    Locked = 14,
    /// [`Error::SessionExpired`].
    SessionExpired = 15,
    /// [`Error::NotLeader`].
    NotLeader = 16,
    /// [`Error::StaleToken`].
    StaleToken = 17,
    /// A panic was caught at a language boundary.
    Panic = 18,
    /// [`Error::Unsupported`].
    Unsupported = 19,
    /// [`Error::Unavailable`].
    Unavailable = 20,
    /// [`Error::PermissionDenied`].
    PermissionDenied = 21,
    /// [`Error::Unauthenticated`].
    Unauthenticated = 22,
    /// [`Error::FutureRevision`].
    FutureRevision = 23,
    /// [`Error::QuotaExceeded`].
    QuotaExceeded = 24,
}

impl ErrorCode {
    /// Every code, in numeric order (`ALL[n] as i32 == n`): how a number maps back to its code.
    pub const ALL: [ErrorCode; 25] = [
        ErrorCode::Ok,
        ErrorCode::InvalidArgument,
        ErrorCode::NullPointer,
        ErrorCode::LeaseNotFound,
        ErrorCode::LeaseExists,
        ErrorCode::LeaseExpired,
        ErrorCode::LeaseTtlTooLarge,
        ErrorCode::NotPrimary,
        ErrorCode::Compacted,
        ErrorCode::AlreadyOpen,
        ErrorCode::Corrupt,
        ErrorCode::Storage,
        ErrorCode::Closed,
        ErrorCode::Timeout,
        ErrorCode::Locked,
        ErrorCode::SessionExpired,
        ErrorCode::NotLeader,
        ErrorCode::StaleToken,
        ErrorCode::Panic,
        ErrorCode::Unsupported,
        ErrorCode::Unavailable,
        ErrorCode::PermissionDenied,
        ErrorCode::Unauthenticated,
        ErrorCode::FutureRevision,
        ErrorCode::QuotaExceeded,
    ];

    /// The upper-case name used by the C header, e.g. `"TENURE_ERR_LEASE_NOT_FOUND"`.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::Ok => "TENURE_OK",
            ErrorCode::InvalidArgument => "TENURE_ERR_INVALID_ARGUMENT",
            ErrorCode::NullPointer => "TENURE_ERR_NULL_POINTER",
            ErrorCode::LeaseNotFound => "TENURE_ERR_LEASE_NOT_FOUND",
            ErrorCode::LeaseExists => "TENURE_ERR_LEASE_EXISTS",
            ErrorCode::LeaseExpired => "TENURE_ERR_LEASE_EXPIRED",
            ErrorCode::LeaseTtlTooLarge => "TENURE_ERR_LEASE_TTL_TOO_LARGE",
            ErrorCode::NotPrimary => "TENURE_ERR_NOT_PRIMARY",
            ErrorCode::Compacted => "TENURE_ERR_COMPACTED",
            ErrorCode::AlreadyOpen => "TENURE_ERR_ALREADY_OPEN",
            ErrorCode::Corrupt => "TENURE_ERR_CORRUPT",
            ErrorCode::Storage => "TENURE_ERR_STORAGE",
            ErrorCode::Closed => "TENURE_ERR_CLOSED",
            ErrorCode::Timeout => "TENURE_ERR_TIMEOUT",
            ErrorCode::Locked => "TENURE_ERR_LOCKED",
            ErrorCode::SessionExpired => "TENURE_ERR_SESSION_EXPIRED",
            ErrorCode::NotLeader => "TENURE_ERR_NOT_LEADER",
            ErrorCode::StaleToken => "TENURE_ERR_STALE_TOKEN",
            ErrorCode::Panic => "TENURE_ERR_PANIC",
            ErrorCode::Unsupported => "TENURE_ERR_UNSUPPORTED",
            ErrorCode::Unavailable => "TENURE_ERR_UNAVAILABLE",
            ErrorCode::PermissionDenied => "TENURE_ERR_PERMISSION_DENIED",
            ErrorCode::Unauthenticated => "TENURE_ERR_UNAUTHENTICATED",
            ErrorCode::FutureRevision => "TENURE_ERR_FUTURE_REVISION",
            ErrorCode::QuotaExceeded => "TENURE_ERR_QUOTA_EXCEEDED",
        }
    }
}

impl Error {
    /// The C result code (and Python exception) this error maps to: the single mapping table.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidArgument(_) => ErrorCode::InvalidArgument,
            Error::LeaseNotFound(_) => ErrorCode::LeaseNotFound,
            Error::LeaseExists(_) => ErrorCode::LeaseExists,
            Error::LeaseExpired(_) => ErrorCode::LeaseExpired,
            Error::LeaseTtlTooLarge(_) => ErrorCode::LeaseTtlTooLarge,
            Error::NotPrimary => ErrorCode::NotPrimary,
            Error::Compacted { .. } => ErrorCode::Compacted,
            Error::AlreadyOpen(_) => ErrorCode::AlreadyOpen,
            Error::Corrupt { .. } => ErrorCode::Corrupt,
            Error::Storage { .. } => ErrorCode::Storage,
            Error::Closed(_) => ErrorCode::Closed,
            Error::Timeout { .. } => ErrorCode::Timeout,
            Error::Locked { .. } => ErrorCode::Locked,
            Error::SessionExpired(_) => ErrorCode::SessionExpired,
            Error::NotLeader => ErrorCode::NotLeader,
            Error::StaleToken { .. } => ErrorCode::StaleToken,
            Error::Unsupported(_) => ErrorCode::Unsupported,
            Error::Unavailable(_) => ErrorCode::Unavailable,
            Error::PermissionDenied(_) => ErrorCode::PermissionDenied,
            Error::Unauthenticated(_) => ErrorCode::Unauthenticated,
            Error::FutureRevision { .. } => ErrorCode::FutureRevision,
            Error::QuotaExceeded(_) => ErrorCode::QuotaExceeded,
        }
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }

    /// A storage error without an OS error number or a file.
    pub fn storage(message: impl Into<String>) -> Error {
        Error::Storage {
            message: message.into(),
            errno: None,
            path: None,
        }
    }

    /// A storage error from the OS about `path`: `message` then the OS's words.
    pub(crate) fn io(message: impl fmt::Display, path: &Path, e: &std::io::Error) -> Error {
        Error::Storage {
            message: format!("{message} {}: {e}", path.display()),
            errno: e.raw_os_error(),
            path: Some(path.to_path_buf()),
        }
    }

    /// `Closed`, naming the database at `path` (`None`: in memory).
    pub fn closed(path: Option<&Path>) -> Error {
        Error::Closed(match path {
            Some(p) => p.display().to_string(),
            None => "(in memory)".to_owned(),
        })
    }

    /// `Timeout` after `after` waiting for `what`.
    pub fn timeout(what: impl Into<String>, after: Duration) -> Error {
        Error::Timeout {
            what: what.into(),
            after,
        }
    }
}

/// The message of [`Error::FutureRevision`]: etcd's words, with the numbers when known.
fn future_revision(requested: i64, current: i64) -> String {
    const ETCD: &str = "required revision is a future revision";
    match (requested, current) {
        (0, _) => ETCD.to_owned(),
        (r, 0) => format!("{ETCD}: revision {r}"),
        (r, c) => format!("{ETCD}: revision {r}, the current one is {c}"),
    }
}

/// The one wording of a refused TTL in every language; `given` is the TTL as the caller wrote
/// it (`"0 ms"` in C, `"inf s"` in Python).
pub fn ttl_refused(given: impl fmt::Display) -> String {
    let max = crate::limits::MAX_TTL.as_secs();
    format!("lease TTL must be more than 0 and at most {max} s, got {given}")
}

/// A duration as a person writes it: `800 ms`, `1.5 s`, `10 s` (what every message uses).
pub fn human(d: Duration) -> String {
    fn trimmed(whole: u128, frac: u128, digits: usize) -> String {
        if frac == 0 {
            return whole.to_string();
        }
        let f = format!("{frac:0digits$}");
        format!("{whole}.{}", f.trim_end_matches('0'))
    }
    let ns = d.as_nanos();
    if ns < 1_000_000_000 {
        format!("{} ms", trimmed(ns / 1_000_000, ns % 1_000_000, 6))
    } else {
        format!(
            "{} s",
            trimmed(ns / 1_000_000_000, ns % 1_000_000_000 / 1_000_000, 3)
        )
    }
}

/// The message of a caught panic, for the error that reports it.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_person_writes_them() {
        assert_eq!(human(Duration::from_millis(800)), "800 ms");
        assert_eq!(human(Duration::from_micros(1500)), "1.5 ms");
        assert_eq!(human(Duration::ZERO), "0 ms");
        assert_eq!(human(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(human(Duration::from_secs(10)), "10 s");
        assert_eq!(human(Duration::from_nanos(10_000_400_000)), "10 s");
    }
}
