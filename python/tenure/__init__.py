"""tenure: an embedded, in-process lease engine (etcd's lessor, TTL keys and watches, without a
server), persisted in one file.

    import tenure

    with tenure.open("app.tenure") as db:
        lease = db.grant(ttl=10.0)
        db.put("service/a", "10.0.0.1", lease=lease)
        with lease.keep_alive():
            ...
        for batch in db.expired(timeout=1.0): ...

Keys and values are ``str`` (UTF-8) or ``bytes``; results are ``bytes``. Times are float
seconds. Every blocking call releases the GIL. Errors are subclasses of ``tenure.TenureError``.
"""

from __future__ import annotations

from . import txn
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
    StorageError,
    TenureError,
    Timeout,
)
from ._tenure import (
    Event,
    ExpiredIterator,
    ExpiredLease,
    KeepAlive,
    KeyValue,
    Lease,
    LeaseInfo,
    ManualClock,
    Tenure,
    TxnResponse,
    Watcher,
    __version__,
    open,
)

__all__ = [
    "open",
    "Tenure",
    "Lease",
    "LeaseInfo",
    "ExpiredLease",
    "ExpiredIterator",
    "KeyValue",
    "Event",
    "Watcher",
    "KeepAlive",
    "TxnResponse",
    "ManualClock",
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
    "__version__",
]
