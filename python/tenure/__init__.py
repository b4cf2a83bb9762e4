"""tenure: an embedded, in-process lease engine (etcd's lessor, TTL keys and watches, without a
server), persisted in one file.

    import tenure

    with tenure.open("app.tenure") as db:
        lease = db.grant(ttl=10.0)
        db.put("service/a", "10.0.0.1", lease=lease)
        with lease.keep_alive():
            ...
        for batch in db.expired(timeout=1.0): ...

        with db.session(ttl=10.0) as s:   # coordination: locks, elections, fencing
            with s.lock("jobs/1", timeout=5.0) as guard:
                ...                           # guard.fencing_token guards the resource

Keys and values are ``str`` (UTF-8) or ``bytes``; results are ``bytes``. Times are float
seconds. Every blocking call releases the GIL. Errors are subclasses of ``tenure.TenureError``.
"""

from __future__ import annotations

from . import aio, txn
from ._errors import (
    AlreadyOpen,
    Closed,
    Compacted,
    Corrupt,
    InvalidArgument,
    LeaseExists,
    LeaseExpired,
    LeaseNotFound,
    LeaseTtlTooLarge,
    Locked,
    NotLeader,
    NotPrimary,
    SessionExpired,
    StaleToken,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
    Unsupported,
    StorageError,
    TenureError,
    Timeout,
)
from ._tenure import (
    Barrier,
    DoubleBarrier,
    Election,
    Group,
    GroupWatch,
    Partitioner,
    Event,
    ExpiredIterator,
    ExpiredLease,
    FenceGate,
    KeepAlive,
    KeyValue,
    LeaderElector,
    Lease,
    LeaseInfo,
    Leadership,
    LockGuard,
    ManualClock,
    Mutex,
    Observer,
    PriorityQueue,
    Queue,
    RecordLock,
    RwLock,
    RwLockGuard,
    Semaphore,
    SemaphoreGuard,
    Session,
    SnapshotInfo,
    Stop,
    Tenure,
    TxnResponse,
    Watcher,
    DEFAULT_CHECKPOINT_INTERVAL,
    DEFAULT_EXPIRED_RETRY_INTERVAL,
    DEFAULT_FLUSH_INTERVAL,
    MAX_DURATION,
    MAX_KEEPALIVE_INTERVAL,
    MAX_TTL,
    __version__,
    connect,
    open,
)

__all__ = [
    "open",
    "connect",
    "Tenure",
    "Lease",
    "LeaseInfo",
    "SnapshotInfo",
    "ExpiredLease",
    "ExpiredIterator",
    "KeyValue",
    "Event",
    "Watcher",
    "KeepAlive",
    "TxnResponse",
    "ManualClock",
    "Session",
    "Mutex",
    "LockGuard",
    "Election",
    "Leadership",
    "Observer",
    "LeaderElector",
    "Stop",
    "FenceGate",
    "RecordLock",
    "Semaphore",
    "SemaphoreGuard",
    "RwLock",
    "RwLockGuard",
    # queues (S10).
    "Queue",
    "PriorityQueue",
    "Barrier",
    "DoubleBarrier",
    "Group",
    "GroupWatch",
    "Partitioner",
    "txn",
    "TenureError",
    "InvalidArgument",
    "LeaseNotFound",
    "LeaseExists",
    "LeaseExpired",
    "LeaseTtlTooLarge",
    "NotPrimary",
    "Compacted",
    "AlreadyOpen",
    "Corrupt",
    "StorageError",
    "Closed",
    "Timeout",
    "Locked",
    "SessionExpired",
    "NotLeader",
    "StaleToken",
    "Unsupported",
    "Unavailable",
    "PermissionDenied",
    "Unauthenticated",
    "__version__",
    "DEFAULT_FLUSH_INTERVAL",
    "DEFAULT_CHECKPOINT_INTERVAL",
    "DEFAULT_EXPIRED_RETRY_INTERVAL",
    "MAX_TTL",
    "MAX_DURATION",
    "MAX_KEEPALIVE_INTERVAL",
]
