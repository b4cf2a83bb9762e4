"""The exceptions of tenure: one class per C result code (the error table of docs/SPEC.md).

Every class carries its stable C ``tenure_result`` number as ``code``. The compiled module maps
an engine error to a class through that number, so this file and ``tenure::Error::code()`` are
the whole mapping.
"""

from __future__ import annotations


class TenureError(Exception):
    """Root of every tenure exception; raised as itself for an internal error (a caught panic,
    C ``TENURE_ERR_PANIC``)."""

    code: int = 18


class InvalidArgument(TenureError, ValueError):
    """An argument is out of its domain (TTL ≤ 0 or NaN, lease ID ≤ 0, empty key, bad option)."""

    code = 1


class LeaseNotFound(TenureError):
    """No live lease has this ID."""

    code = 3


class LeaseExists(TenureError):
    """A lease with this ID already exists."""

    code = 4


class LeaseExpired(TenureError):
    """The lease's deadline has passed; it is held for a manual revoke."""

    code = 5


class LeaseTtlTooLarge(TenureError, ValueError):
    """The TTL is above 9 000 000 000 seconds (etcd's MaxLeaseTTL)."""

    code = 6


class NotPrimary(TenureError):
    """The engine is a standby: only a primary renews and expires leases."""

    code = 7


class Compacted(TenureError):
    """The revision is below the compaction point (a read or a watch start), or the watcher
    fell too far behind.

    ``compact_revision`` is etcd's: the compaction point, the oldest revision still kept (reads
    and watches from it on are answered); 0 when the error does not say (a watcher that fell
    behind, a read over ``connect``, whose etcd error carries no number). ``revision`` is the
    first revision that could not be read or delivered."""

    code = 8
    revision: int = 0
    compact_revision: int = 0


class AlreadyOpen(TenureError):
    """The database file is open in another engine, in this process or another one."""

    code = 9


class Corrupt(TenureError):
    """The file is not a tenure database or is damaged; it was left untouched."""

    code = 10


class StorageError(TenureError, OSError):
    """A read or a commit failed; after a failed commit every write fails until reopen.

    An ``OSError``: ``errno`` and ``filename`` are set when the operating system gave them, and
    the exception is then also the matching builtin subclass (``FileNotFoundError``,
    ``PermissionError``, ``IsADirectoryError``...)."""

    code = 11

    def __str__(self) -> str:  # the engine's message, not OSError's "[Errno n] ..." form
        return str(self.args[0]) if self.args else ""


class Closed(TenureError):
    """The engine is closed (or was inherited through ``os.fork()``)."""

    code = 12


class Timeout(TenureError, TimeoutError):
    """A blocking call reached its timeout."""

    code = 13


class Locked(TenureError):
    """A lock is held by someone else."""

    code = 14


class SessionExpired(TenureError):
    """The session's lease is gone."""

    code = 15


class NotLeader(TenureError):
    """The caller is not (or no longer) the leader."""

    code = 16


class StaleToken(TenureError):
    """A fencing token lower than the highest already admitted."""

    code = 17


class Unsupported(TenureError):
    """The call needs the embedded engine (checkpoint, promote, demote…) and this handle is
    connected to an etcd v3 server."""

    code = 19


class Unavailable(TenureError, ConnectionError):
    """The etcd v3 server could not be reached within the call's deadline, after bounded
    retries; the call may succeed once it is back."""

    code = 20


class PermissionDenied(TenureError, PermissionError):
    """The etcd v3 server refused the call: the user's roles grant no permission on the key."""

    code = 21


class Unauthenticated(TenureError):
    """The connection could not be authenticated: the server's certificate is not trusted, the
    client certificate is missing, expired or refused, or the user name or password is wrong.
    The message names the endpoint and the cause."""

    code = 22


class FutureRevision(TenureError):
    """A read (or a compaction) at a revision above the current one: etcd's "required revision
    is a future revision". ``revision`` is the one asked for, ``current_revision`` the current
    one then (0 when the server's error did not say)."""

    code = 23
    revision: int = 0
    current_revision: int = 0


class QuotaExceeded(TenureError):
    """The database file reached its space quota, or a NOSPACE alarm is raised: the write (put,
    txn that puts, grant) was refused and nothing changed. Deletes, reads, revokes and
    compaction still work; compact, defragment and disarm the alarm to write again."""

    code = 24


# Every class above, once: the error table (the package lists them for export).
_CLASSES: tuple[type[TenureError], ...] = (TenureError, *TenureError.__subclasses__())
for _cls in _CLASSES:
    _cls.__module__ = "tenure"

_BY_CODE: dict[int, type[TenureError]] = {c.code: c for c in _CLASSES}

# StorageError joined with each builtin OSError subclass, by errno (made on first use).
_STORAGE_BY_ERRNO: dict[int, type[StorageError]] = {}


def _storage(message: str, errno: int, filename: str | None) -> StorageError:
    """The StorageError for an OS error number: also a FileNotFoundError for ENOENT, etc."""
    cls = _STORAGE_BY_ERRNO.get(errno)
    if cls is None:
        builtin = type(OSError(errno, ""))
        cls = StorageError
        if builtin is not OSError:
            cls = type("StorageError", (StorageError, builtin), {"__module__": "tenure"})
            cls.__qualname__ = "StorageError"
        _STORAGE_BY_ERRNO[errno] = cls
    exc = cls(message)
    exc.errno = errno
    exc.strerror = message
    exc.filename = filename
    return exc
