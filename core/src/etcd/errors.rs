//! The one table between tenure's errors and etcd's gRPC statuses, read both ways: `tenure serve`
//! answers an [`Error`] with etcd's code and exact text (Go clients match on the text, etcd's
//! `rpctypes`), and the etcd client turns a status back into the [`Error`]. A row is matched by
//! its whole text, never by a part of it.

use std::borrow::Cow;
use std::time::Duration;

use crate::error::Error;
use crate::etcd::Refusal;
use crate::limits;
use crate::types::LeaseId;

/// A gRPC status code (gRPC's numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
#[allow(missing_docs)] // gRPC's own names
pub enum Code {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

impl Code {
    /// The code of a gRPC number (`Unknown` for a number gRPC does not define).
    pub fn from_i32(n: i32) -> Code {
        use Code::*;
        const ALL: [Code; 17] = [
            Ok,
            Cancelled,
            Unknown,
            InvalidArgument,
            DeadlineExceeded,
            NotFound,
            AlreadyExists,
            PermissionDenied,
            ResourceExhausted,
            FailedPrecondition,
            Aborted,
            OutOfRange,
            Unimplemented,
            Internal,
            Unavailable,
            DataLoss,
            Unauthenticated,
        ];
        usize::try_from(n)
            .ok()
            .and_then(|i| ALL.get(i).copied())
            .unwrap_or(Unknown)
    }
}

/// One of etcd's errors (and `tenure serve`'s few of its own) with a fixed code and text: a row
/// of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EtcdError {
    /// A request without a key.
    KeyNotProvided,
    /// `ignore_value` / `ignore_lease` on a missing key.
    KeyNotFound,
    /// `ignore_value` with a value.
    ValueProvided,
    /// `ignore_lease` with a lease.
    LeaseProvided,
    /// A grant with a TTL ≤ 0.
    TtlZero,
    /// More compares or ops than `--max-txn-ops`.
    TooManyOps,
    /// Two writes of one key in one txn branch.
    DuplicateKey,
    /// A revision below the compacted one.
    Compacted,
    /// A revision above the current one.
    FutureRevision,
    /// No such lease.
    LeaseNotFound,
    /// A grant with an ID in use.
    LeaseExists,
    /// A TTL above etcd's `MaxLeaseTTL`.
    LeaseTtlTooLarge,
    /// A request above the size limit.
    RequestTooLarge,
    /// A range with a sort order or target etcd does not define.
    InvalidSortOption,
    /// No leader: for tenure, a standby engine.
    NoLeader,
    /// The server is stopping (a closed engine).
    Stopped,
    /// The server gave up on the request in time.
    Timeout,
    /// Authenticated, but the user's roles do not allow it.
    PermissionDenied,
    /// Wrong user name or password.
    AuthFailed,
    /// An empty user name.
    UserEmpty,
    /// An unknown or expired auth token.
    InvalidAuthToken,
    /// `tenure serve`: a watch stream holding its most watches refuses another.
    TooManyWatches,
    /// `tenure serve`: `--max-snapshots` snapshots are being streamed already.
    TooManySnapshots,
    /// `tenure serve`: the snapshots being streamed hold `--max-snapshot-disk-bytes`.
    SnapshotDiskFull,
    /// `tenure serve`: a snapshot stream whose client took nothing for too long is ended.
    SnapshotStalled,
    /// The space quota is reached, or a NOSPACE alarm is raised (SPEC E20).
    NoSpace,
    /// A CORRUPT alarm is raised: writes are refused until it is disarmed.
    CorruptCluster,
}

use Code as C;
use EtcdError as E;

/// The table: every row's code and exact text.
const TABLE: [(EtcdError, Code, &str); 27] = [
    (
        E::KeyNotProvided,
        C::InvalidArgument,
        "etcdserver: key is not provided",
    ),
    (
        E::KeyNotFound,
        C::InvalidArgument,
        "etcdserver: key not found",
    ),
    (
        E::ValueProvided,
        C::InvalidArgument,
        "etcdserver: value is provided",
    ),
    (
        E::LeaseProvided,
        C::InvalidArgument,
        "etcdserver: lease is provided",
    ),
    (E::TtlZero, C::InvalidArgument, "etcdserver: ttl is 0"),
    (E::TooManyOps, C::InvalidArgument, limits::TOO_MANY_TXN_OPS),
    (
        E::DuplicateKey,
        C::InvalidArgument,
        "etcdserver: duplicate key given in txn request",
    ),
    (
        E::Compacted,
        C::OutOfRange,
        "etcdserver: mvcc: required revision has been compacted",
    ),
    (
        E::FutureRevision,
        C::OutOfRange,
        "etcdserver: mvcc: required revision is a future revision",
    ),
    (
        E::LeaseNotFound,
        C::NotFound,
        "etcdserver: requested lease not found",
    ),
    (
        E::LeaseExists,
        C::FailedPrecondition,
        "etcdserver: lease already exists",
    ),
    (
        E::LeaseTtlTooLarge,
        C::OutOfRange,
        "etcdserver: too large lease TTL",
    ),
    (
        E::RequestTooLarge,
        C::InvalidArgument,
        "etcdserver: request is too large",
    ),
    (
        E::InvalidSortOption,
        C::InvalidArgument,
        "etcdserver: invalid sort option",
    ),
    (E::NoLeader, C::Unavailable, "etcdserver: no leader"),
    (E::Stopped, C::Unavailable, "etcdserver: server stopped"),
    (E::Timeout, C::Unavailable, "etcdserver: request timed out"),
    (
        E::PermissionDenied,
        C::PermissionDenied,
        "etcdserver: permission denied",
    ),
    (
        E::AuthFailed,
        C::InvalidArgument,
        "etcdserver: authentication failed, invalid user ID or password",
    ),
    (
        E::UserEmpty,
        C::InvalidArgument,
        "etcdserver: user name is empty",
    ),
    (
        E::InvalidAuthToken,
        C::Unauthenticated,
        "etcdserver: invalid auth token",
    ),
    (
        E::TooManyWatches,
        C::InvalidArgument,
        "tenure serve: too many watches on one stream",
    ),
    (
        E::TooManySnapshots,
        C::ResourceExhausted,
        "tenure serve: too many snapshots in progress",
    ),
    (
        E::SnapshotDiskFull,
        C::ResourceExhausted,
        "tenure serve: the snapshots in progress hold all the disk they may",
    ),
    (
        E::SnapshotStalled,
        C::DeadlineExceeded,
        "tenure serve: the snapshot was not read in time",
    ),
    (
        E::NoSpace,
        C::ResourceExhausted,
        "etcdserver: mvcc: database space exceeded",
    ),
    (
        E::CorruptCluster,
        C::DataLoss,
        "etcdserver: corrupt cluster",
    ),
];

impl EtcdError {
    /// Every row, in the table's order.
    pub fn all() -> impl Iterator<Item = EtcdError> {
        TABLE.iter().map(|r| r.0)
    }

    const fn row(self) -> &'static (EtcdError, Code, &'static str) {
        // The table is in declaration order (checked by a test).
        &TABLE[self as usize]
    }

    /// The gRPC code etcd answers it with.
    pub const fn code(self) -> Code {
        self.row().1
    }

    /// etcd's exact text.
    pub const fn text(self) -> &'static str {
        self.row().2
    }

    /// The row whose text is exactly `text`.
    pub fn from_text(text: &str) -> Option<EtcdError> {
        TABLE.iter().find(|r| r.2 == text).map(|r| r.0)
    }

    /// The row of a refused request.
    pub fn of_refusal(r: Refusal) -> EtcdError {
        match r {
            Refusal::KeyNotFound => E::KeyNotFound,
            Refusal::FutureRevision => E::FutureRevision,
            Refusal::Compacted => E::Compacted,
            Refusal::DuplicateKey => E::DuplicateKey,
        }
    }

    /// The refusal this row reports, if it is one.
    pub fn refusal(self) -> Option<Refusal> {
        Some(match self {
            E::KeyNotFound => Refusal::KeyNotFound,
            E::FutureRevision => Refusal::FutureRevision,
            E::Compacted => Refusal::Compacted,
            E::DuplicateKey => Refusal::DuplicateKey,
            _ => return None,
        })
    }

    /// The row `e` is reported as, if any (else [`status`] words it).
    pub fn of_error(e: &Error) -> Option<EtcdError> {
        Some(match e {
            Error::LeaseNotFound(_) | Error::LeaseExpired(_) => E::LeaseNotFound,
            Error::LeaseExists(_) => E::LeaseExists,
            Error::LeaseTtlTooLarge(_) => E::LeaseTtlTooLarge,
            Error::Compacted { .. } => E::Compacted,
            Error::FutureRevision { .. } => E::FutureRevision,
            Error::NotPrimary => E::NoLeader,
            Error::Closed(_) => E::Stopped,
            Error::Timeout { .. } => E::Timeout,
            Error::QuotaExceeded(_) => E::NoSpace,
            Error::InvalidArgument(m) if m == limits::EMPTY_KEY => E::KeyNotProvided,
            // What the client made of a row goes back as that row.
            Error::InvalidArgument(m)
            | Error::Unavailable(m)
            | Error::PermissionDenied(m)
            | Error::Unauthenticated(m) => return EtcdError::from_text(m),
            _ => return None,
        })
    }

    /// The error the client reports for this row; `lease` is the lease the call was about.
    pub fn error(self, lease: Option<LeaseId>) -> Error {
        let text = || self.text().to_owned();
        let id = lease.unwrap_or(LeaseId::new(0));
        match self {
            E::KeyNotProvided => Error::invalid(limits::EMPTY_KEY),
            E::LeaseNotFound => Error::LeaseNotFound(id),
            E::LeaseExists => Error::LeaseExists(id),
            E::LeaseTtlTooLarge => Error::LeaseTtlTooLarge(Duration::ZERO),
            // etcd's errors carry no numbers: the caller fills in what it knows.
            E::Compacted => Error::Compacted {
                revision: 0,
                compact_revision: 0,
                reason: text(),
            },
            E::FutureRevision => Error::FutureRevision {
                requested: 0,
                current: 0,
            },
            // Retrying may help: as a server that cannot be reached.
            E::NoLeader
            | E::Stopped
            | E::Timeout
            | E::TooManySnapshots
            | E::SnapshotDiskFull
            | E::SnapshotStalled => Error::Unavailable(text()),
            E::PermissionDenied => Error::PermissionDenied(text()),
            E::NoSpace => Error::QuotaExceeded(text()),
            // Retrying helps once the alarm is disarmed.
            E::CorruptCluster => Error::Unavailable(text()),
            E::AuthFailed | E::UserEmpty | E::InvalidAuthToken => Error::Unauthenticated(text()),
            E::KeyNotFound
            | E::ValueProvided
            | E::LeaseProvided
            | E::TtlZero
            | E::TooManyOps
            | E::DuplicateKey
            | E::RequestTooLarge
            | E::InvalidSortOption
            | E::TooManyWatches => Error::InvalidArgument(text()),
        }
    }
}

/// Server side: the code and text `tenure serve` answers `e` with (a row's, else etcd's
/// `etcdserver: ` prefix on tenure's message).
pub fn status(e: &Error) -> (Code, Cow<'static, str>) {
    if let Some(row) = EtcdError::of_error(e) {
        return (row.code(), Cow::Borrowed(row.text()));
    }
    match e {
        Error::InvalidArgument(m) => (C::InvalidArgument, Cow::Owned(format!("etcdserver: {m}"))),
        // A failed commit (D6) and the rest: never acknowledged.
        other => (C::Internal, Cow::Owned(format!("etcdserver: {other}"))),
    }
}

/// Client side: the error of a status with `code` and `message` (a row's text, else by its
/// code); `lease` is the lease the call was about, for lease errors.
pub fn error(code: Code, message: &str, lease: Option<LeaseId>) -> Error {
    if let Some(row) = EtcdError::from_text(message) {
        // The lock and election services lose etcd's codes but keep its texts: the text decides.
        return row.error(lease);
    }
    let message = message.to_owned();
    match code {
        C::PermissionDenied => Error::PermissionDenied(message),
        C::Unauthenticated => Error::Unauthenticated(message),
        C::Unavailable | C::DeadlineExceeded | C::Cancelled | C::Unknown => {
            Error::Unavailable(message)
        }
        C::InvalidArgument | C::FailedPrecondition | C::OutOfRange => {
            Error::InvalidArgument(message)
        }
        // A server without the service or method (an etcd of another version, a proxy, a gRPC
        // server that is not etcd): the call is not there to be made.
        C::Unimplemented => {
            Error::Unsupported(said("the server does not implement this call", &message))
        }
        _ => Error::storage(said(&format!("server error ({code:?})"), &message)),
    }
}

/// `what`, then the server's `message` if it gave one (tonic's own refusals give none).
fn said(what: &str, message: &str) -> String {
    if message.is_empty() {
        what.to_owned()
    } else {
        format!("{what}: {message}")
    }
}

/// The error of a read or a compaction at `requested` refused with `why`, with the numbers the
/// caller knows (`current`: the current revision, `compacted`: the compaction point; 0 for
/// unknown).
pub fn refused_at(why: Refusal, requested: i64, current: i64, compacted: i64) -> Error {
    match why {
        Refusal::Compacted => Error::Compacted {
            revision: requested,
            compact_revision: compacted,
            reason: E::Compacted.text().to_owned(),
        },
        Refusal::FutureRevision => Error::FutureRevision { requested, current },
        other => EtcdError::of_refusal(other).error(None),
    }
}

/// Client side: the refusal an error of the client reports, if it is one (etcd's Compact).
pub fn refusal_of(e: &Error) -> Option<Refusal> {
    EtcdError::of_error(e).and_then(EtcdError::refusal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_declaration_order_with_distinct_texts() {
        for (i, row) in TABLE.iter().enumerate() {
            assert_eq!(row.0 as usize, i, "{:?} is out of place", row.0);
            assert_eq!(EtcdError::from_text(row.2), Some(row.0), "{:?}", row.0);
        }
    }

    #[test]
    fn every_row_round_trips_client_then_server() {
        for row in EtcdError::all() {
            let lease = Some(LeaseId::new(7));
            let e = error(row.code(), row.text(), lease);
            assert_eq!(
                status(&e),
                (row.code(), Cow::Borrowed(row.text())),
                "{row:?} came back from {e:?}"
            );
            // The code the client was given does not matter: the text decides.
            assert_eq!(error(Code::Unknown, row.text(), lease).code(), e.code());
            if let Some(r) = row.refusal() {
                assert_eq!(EtcdError::of_refusal(r), row);
                assert_eq!(refusal_of(&e), Some(r), "{row:?}");
            }
        }
    }

    #[test]
    fn every_error_the_server_reports_as_a_row_comes_back_as_the_same_kind() {
        let examples = [
            Error::LeaseNotFound(LeaseId::new(3)),
            Error::LeaseExists(LeaseId::new(3)),
            Error::LeaseTtlTooLarge(Duration::from_secs(1)),
            Error::Compacted {
                revision: 4,
                compact_revision: 4,
                reason: "history".into(),
            },
            Error::FutureRevision {
                requested: 9,
                current: 5,
            },
            Error::invalid(limits::EMPTY_KEY),
        ];
        for e in examples {
            let (code, text) = status(&e);
            let back = error(code, &text, Some(LeaseId::new(3)));
            assert_eq!(back.code(), e.code(), "{e:?} came back as {back:?}");
        }
        // The one wording of an empty key, whichever side decided it.
        assert_eq!(
            error(
                Code::InvalidArgument,
                "etcdserver: key is not provided",
                None
            )
            .to_string(),
            Error::invalid(limits::EMPTY_KEY).to_string()
        );
    }

    #[test]
    fn a_text_outside_the_table_is_mapped_by_its_code() {
        let e = |code| error(code, "something else", None);
        assert!(matches!(e(Code::Unavailable), Error::Unavailable(_)));
        assert!(matches!(e(Code::DeadlineExceeded), Error::Unavailable(_)));
        assert!(matches!(e(Code::OutOfRange), Error::InvalidArgument(_)));
        assert!(matches!(
            e(Code::PermissionDenied),
            Error::PermissionDenied(_)
        ));
        assert!(matches!(
            e(Code::Unauthenticated),
            Error::Unauthenticated(_)
        ));
        assert!(matches!(e(Code::Internal), Error::Storage { .. }));
        // Only the whole text is a row.
        let part = error(
            Code::Unknown,
            "etcdserver: requested lease not found!",
            None,
        );
        assert!(matches!(part, Error::Unavailable(_)), "{part:?}");
    }

    /// SPEC R1: a call the server does not have is Unsupported, saying so even without a
    /// message; other unmapped codes name themselves.
    #[test]
    fn r1_a_call_the_server_does_not_implement_is_unsupported() {
        let missing = error(Code::Unimplemented, "", None);
        assert!(
            matches!(&missing, Error::Unsupported(m) if m == "the server does not implement this call"),
            "{missing:?}"
        );
        let named = error(Code::Unimplemented, "unknown service etcdserverpb.KV", None);
        assert!(
            matches!(&named, Error::Unsupported(m) if m.ends_with(": unknown service etcdserverpb.KV")),
            "{named:?}"
        );
        let internal = error(Code::Internal, "", None);
        assert!(
            internal.to_string().contains("server error (Internal)"),
            "{internal}"
        );
    }

    #[test]
    fn errors_outside_the_table_get_etcds_prefix() {
        let (code, text) = status(&Error::invalid("start revision must be positive, got 0"));
        assert_eq!(code, Code::InvalidArgument);
        assert_eq!(text, "etcdserver: start revision must be positive, got 0");
        let (code, text) = status(&Error::storage("disk full"));
        assert_eq!(code, Code::Internal);
        assert_eq!(text, "etcdserver: storage error: disk full");
        assert_eq!(status(&Error::NotPrimary).1, "etcdserver: no leader");
    }

    #[test]
    fn grpc_numbers_map_to_codes() {
        assert_eq!(Code::from_i32(5), Code::NotFound);
        assert_eq!(Code::from_i32(16), Code::Unauthenticated);
        assert_eq!(Code::from_i32(17), Code::Unknown);
        assert_eq!(Code::from_i32(-1), Code::Unknown);
    }
}
