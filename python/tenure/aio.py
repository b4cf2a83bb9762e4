"""tenure for asyncio: the whole API with awaitable methods and async iterators.

Waits (a queued lock, a campaign, the next watch event, expired batch or leadership change,
a session's end) never block the event loop and take no thread each: every pending wait of the
process is served by one native thread, which hands each result to its loop with
``loop.call_soon_threadsafe``. Cancelling the awaiting task (``task.cancel()``,
``asyncio.wait_for``, ``asyncio.timeout``) raises the wait's stop token: a cancelled lock wait
or campaign withdraws its key before the cancellation completes, and a receive cancelled on an
iterator loses nothing (the item comes with the next receive).

Calls that write (grant, put, txn, revoke, session, unlock...) may fsync, so they run on the
loop's default executor; reads (get, range, leases, time_to_live...) answer from memory inline,
except over ``connect()``, where every call is a network round trip and runs on the executor.
Errors are the classes of ``tenure`` itself.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import pathlib
from collections.abc import Awaitable, Callable, Generator, Iterable
from types import TracebackType
from typing import Any, Generic, ParamSpec, Self, TypeVar, final, overload

from . import _tenure
from ._errors import Closed, NotLeader, Timeout
from ._tenure import Compare, Event, ExpiredLease, KeyValue, LeaseInfo, Op, TxnResponse

__all__ = [
    "Election",
    "ExpiredIterator",
    "Leadership",
    "Lease",
    "LeaderElector",
    "LockGuard",
    "Semaphore",
    "SemaphoreGuard",
    "RwLock",
    "RwLockGuard",
    "Mutex",
    "Observer",
    # queues (S10), barriers (S11).
    "Barrier",
    "DoubleBarrier",
    # groups (S12).
    "Group",
    "GroupWatch",
    "Partitioner",
    "PriorityQueue",
    "Queue",
    "Session",
    "Tenure",
    "Watcher",
    "connect",
    "open",
]

_T = TypeVar("_T")
_R = TypeVar("_R")
_P = ParamSpec("_P")
_Key = str | bytes | bytearray
_Wake = Callable[[bool, Any], None]


async def _run(call: Callable[[], _T]) -> _T:
    """Runs a call that may fsync on the loop's default executor."""
    return await asyncio.get_running_loop().run_in_executor(None, call)


async def _wait(start: Callable[[_Wake], _tenure._Pending], keep: Callable[[Any], None]) -> Any:
    """Awaits a native wait started by ``start(wake)``. On cancellation the wait's stop token is
    raised and its end awaited; a value it still produced goes to ``keep`` (dropping it releases
    a lock or a leadership; an iterator keeps an item for the next receive)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def deliver(ok: bool, value: Any) -> None:
        if fut.done():
            if ok:
                keep(value)
        elif ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def wake(ok: bool, value: Any) -> None:  # on the engine's wait-pool thread
        try:
            loop.call_soon_threadsafe(deliver, ok, value)
        except RuntimeError:
            pass  # the loop is closed: the value is dropped (a guard unlocks when collected)

    pending = start(wake)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        pending.cancel()
        try:
            value = await fut
        except BaseException:
            pass
        else:
            keep(value)
            del value
        raise


def _ignore(_value: object) -> None:
    """Drops a value that needs no release (an answer that came after its wait was cancelled)."""


def _let_go(guard: _tenure._Guard) -> None:
    """Releases a lock, permit or hold won in a race with the cancellation of its wait."""
    guard.__exit__(None, None, None)


def _resign(leadership: _tenure.Leadership) -> None:
    """Resigns a leadership won in a race with the cancellation of its campaign."""
    leadership.resign()


class _Opening(Generic[_T]):
    """What ``open()``-like calls return: awaitable, or an async context manager that closes."""

    def __init__(self, make: Callable[[], Awaitable[_T]], close: Callable[[_T], Awaitable[None]]):
        self._make = make
        self._close = close
        self._value: _T | None = None

    def __await__(self) -> Generator[Any, None, _T]:
        return self._make().__await__()

    async def __aenter__(self) -> _T:
        self._value = await self._make()
        return self._value

    async def __aexit__(self, *exc: object) -> None:
        if self._value is not None:
            await self._close(self._value)


def _repr(sync: object) -> str:
    """The repr of a ``tenure.aio`` object: its ``tenure`` object's, under ``tenure.aio``
    (``tenure.aio.Lease(id=1, ttl=2.0)``)."""
    return "tenure.aio." + repr(sync).removeprefix("tenure.")


def _lease_id(lease: Lease | _tenure.Lease | int) -> int:
    return int(lease)


class _Attr(Generic[_T]):
    """A read-only attribute answered by the attribute of the same name of the wrapped ``sync``
    object (no wait: it is read in memory)."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> _T: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> _T | Self:
        if obj is None:
            return self
        value: _T = getattr(getattr(obj, "sync"), self._name)
        return value


def _options_of(sync: Callable[_P, object]) -> Callable[[Callable[..., _R]], Callable[_P, _R]]:
    """Gives the decorated function the parameters of the native ``sync`` (one list of options,
    the native module's): for type checkers through ``_P``, for ``inspect.signature`` and
    ``help()`` through ``__signature__``, where a native default shown as ``...`` is the core's
    constant ``DEFAULT_<NAME>``."""

    def default(p: inspect.Parameter) -> inspect.Parameter:
        if p.default is not Ellipsis:
            return p
        return p.replace(default=getattr(_tenure, "DEFAULT_" + p.name.upper()))

    def decorate(f: Callable[..., _R]) -> Callable[_P, _R]:
        native = inspect.signature(sync)
        params = [default(p) for p in native.parameters.values()]
        setattr(f, "__signature__", native.replace(parameters=params))
        return f

    return decorate


class _Scope:
    """``async with`` returns the object and ends it with ``_end()`` on exit."""

    async def _end(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._end()


_N = TypeVar("_N", bound=_tenure._Guard)


class _Guard(_Scope, Generic[_N]):
    """A held lock, permit or read/write hold: the native ``tenure._Guard`` ``sync`` (fencing
    token, name, key) for asyncio. ``async with`` releases it on exit, where one already
    released or lost with its session is no error (as the native guard's ``with``)."""

    def __init__(self, sync: _N) -> None:
        self.sync: _N = sync

    name = _Attr[str]("The lock's or semaphore's name.")

    key = _Attr[bytes]("The key of this acquisition.")

    fencing_token = _Attr[int](
        "The fencing token: the create revision of this acquisition's key, strictly increasing "
        "per name."
    )

    def is_held(self) -> bool:
        """Whether this acquisition's key still exists (the session is alive and it was not
        released)."""
        return self.sync.is_held()

    @classmethod
    async def _acquire(cls, start: Callable[[_Wake], _tenure._Pending]) -> Self:
        """Awaits the native acquisition ``start(wake)``; a cancelled one withdraws its key
        before the cancellation completes, and one won in that race is released."""
        return cls(await _wait(start, _let_go))

    @classmethod
    async def _take(cls, call: Callable[[], _N]) -> Self:
        """The guard of a native ``try_*`` call, run on the executor."""
        return cls(await _run(call))

    async def _end(self) -> None:
        await _run(lambda: self.sync.__exit__(None, None, None))

    def __repr__(self) -> str:
        return _repr(self.sync)


class _Stream(Generic[_T]):
    """An async iterator over a native blocking iterator, subscribed when it was made."""

    def __init__(
        self,
        sync: Any,
        recv_async: Callable[[Any, float | None, _Wake], _tenure._Pending],
        timeout: float | None,
    ) -> None:
        self._sync = sync
        self._recv_async = recv_async
        self._timeout = timeout
        self._buffer: collections.deque[_T] = collections.deque()
        self._pending: _tenure._Pending | None = None

    def __aiter__(self) -> Self:
        return self

    @property
    def timeout(self) -> float | None:
        """The default timeout of each wait in seconds (``None``: no limit)."""
        return self._timeout

    async def __anext__(self) -> _T:
        try:
            return await self.recv(self._timeout)
        except Closed:
            raise StopAsyncIteration from None

    async def recv(self, timeout: float | None = None) -> _T:
        """The next item, waiting at most ``timeout`` seconds (``None``: for ever);
        ``tenure.Timeout`` when none came, ``tenure.Closed`` once the stream ended."""
        if self._buffer:
            return self._buffer.popleft()
        try:
            item: _T = self._sync.recv(0.0)  # already there: no native wait
            return item
        except Timeout:
            pass

        def start(wake: _Wake) -> _tenure._Pending:
            self._pending = self._recv_async(self._sync, timeout, wake)
            return self._pending

        try:
            item = await _wait(start, self._buffer.append)
            return item
        finally:
            self._pending = None

    def _stop_waiting(self) -> None:
        if self._pending is not None:
            self._pending.cancel()

    def __repr__(self) -> str:
        return _repr(self._sync)


@final
class ExpiredIterator(_Stream[list[ExpiredLease]]):
    """Batches of expired leases, as ``Tenure.expired()``; an async iterator (``timeout``:
    seconds per batch)."""


class _Cancellable(_Stream[_T], _Scope):
    """A stream that can be cancelled; ``async with`` cancels it on exit."""

    async def cancel(self) -> None:
        """Cancels the stream; iteration then stops. Idempotent."""
        self._stop_waiting()
        await _run(self._sync.cancel)

    async def _end(self) -> None:
        await self.cancel()


@final
class Watcher(_Cancellable[Event]):
    """A watch on a key or prefix: an async iterator of ``Event``s (``timeout``: seconds per
    event) and an async context manager that cancels the watch on exit."""

    @property
    def cancelled(self) -> bool:
        """Whether the watch is cancelled or ended."""
        return bool(self._sync.cancelled)


@final
class GroupWatch(_Cancellable[tuple[str, str, bytes]]):
    """The joins and leaves of a group (``Tenure.watch_group()``): an async iterator of
    ``("joined", id, capabilities)`` and ``("left", id, b"")`` (``timeout``: seconds per
    change) and an async context manager that cancels the watch on exit."""

    @property
    def name(self) -> str:
        """The group watched."""
        return str(self._sync.name)


@final
class Observer(_Cancellable[KeyValue | None]):
    """Follows an election's leadership: the current leader first (a ``KeyValue`` or ``None``),
    then one item per change; an async iterator (``timeout``: seconds per change) and an async
    context manager."""

    @property
    def name(self) -> str:
        """The observed election's name."""
        return str(self._sync.name)


@final
class Lease:
    """A granted lease (``Tenure.grant()``); usable wherever a lease ID is."""

    def __init__(self, sync: _tenure.Lease) -> None:
        self.sync = sync

    id = _Attr[int]("The lease ID.")

    ttl = _Attr[float]("The granted TTL in seconds.")

    async def renew(self) -> float:
        """Renews the lease; returns its TTL in seconds. ``tenure.LeaseNotFound`` if gone."""
        return await _run(self.sync.renew)

    async def revoke(self) -> None:
        """Revokes the lease and deletes its keys. ``tenure.LeaseNotFound`` if gone."""
        await _run(self.sync.revoke)

    async def time_to_live(self) -> LeaseInfo:
        """The lease's TTL, remaining time (seconds) and keys; ``tenure.LeaseNotFound`` once it
        is gone."""
        return self.sync.time_to_live()

    def keep_alive(self, interval: float | None = None) -> _tenure.KeepAlive:
        """Renews the lease every ``interval`` seconds (default TTL/3) on a native thread until
        stopped; a (sync) context manager. Raises ``tenure.LeaseNotFound`` if the lease is gone,
        ``tenure.InvalidArgument`` for an interval that is not positive or above
        ``tenure.MAX_KEEPALIVE_INTERVAL`` seconds."""
        return self.sync.keep_alive(interval)

    def __int__(self) -> int:
        return self.sync.id

    def __index__(self) -> int:
        return self.sync.id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lease) and other.sync.id == self.sync.id

    def __hash__(self) -> int:
        return hash(self.sync)

    def __repr__(self) -> str:
        return _repr(self.sync)


@final
class Tenure:
    """An open engine for asyncio (``tenure.aio.open()``); ``sync`` is the ``tenure.Tenure``."""

    def __init__(self, sync: _tenure.Tenure, remote: bool = False) -> None:
        self.sync = sync
        # Over a connection (``connect()``) a read is a network round trip: it runs on the
        # executor too.
        self._remote = remote

    async def _read(self, call: Callable[[], _T]) -> _T:
        return await _run(call) if self._remote else call()

    # leases
    async def grant(self, ttl: float = 10.0, id: Lease | int | None = None) -> Lease:
        """Grants a lease of ``ttl`` seconds (``id``: a chosen ID); see ``tenure.Tenure.grant``.
        Raises ``tenure.InvalidArgument`` for a TTL that is not positive, ``tenure.LeaseExists``
        for a taken ID. Writes raise ``tenure.StorageError`` if the file cannot be written, ``tenure.Closed`` after close."""
        lid = None if id is None else _lease_id(id)
        return Lease(await _run(lambda: self.sync.grant(ttl, lid)))

    async def revoke(self, lease: Lease | int) -> None:
        """Revokes a lease and deletes its keys; ``tenure.LeaseNotFound`` if it is gone.
        Writes raise ``tenure.StorageError`` if the file cannot be written, ``tenure.Closed`` after close."""
        await _run(lambda: self.sync.revoke(_lease_id(lease)))

    async def renew(self, lease: Lease | int) -> float:
        """Renews a lease; returns its TTL in seconds. Raises ``tenure.LeaseNotFound`` once it is
        gone, ``tenure.NotPrimary`` on a standby."""
        return await _run(lambda: self.sync.renew(_lease_id(lease)))

    async def time_to_live(self, lease: Lease | int) -> LeaseInfo:
        """A lease's TTL, remaining time (seconds) and keys; ``tenure.LeaseNotFound`` once it is
        gone."""
        return await self._read(lambda: self.sync.time_to_live(_lease_id(lease)))

    async def leases(self) -> list[LeaseInfo]:
        """Every live lease."""
        return await self._read(self.sync.leases)

    async def attach(self, lease: Lease | int, keys: _Key | Iterable[_Key]) -> None:
        """Attaches existing keys to a lease; ``tenure.LeaseNotFound`` if there is no such lease.
        Writes raise ``tenure.StorageError`` if the file cannot be written, ``tenure.Closed`` after close."""
        await _run(lambda: self.sync.attach(_lease_id(lease), keys))

    async def detach(self, lease: Lease | int, keys: _Key | Iterable[_Key]) -> None:
        """Detaches keys from a lease (they then live on); ``tenure.LeaseNotFound`` if there is
        no such lease. Writes raise ``tenure.StorageError`` if the file cannot be written, ``tenure.Closed`` after close."""
        await _run(lambda: self.sync.detach(_lease_id(lease), keys))

    async def lease_of(self, key: _Key) -> int | None:
        """The lease a key is attached to, or ``None``."""
        return await self._read(lambda: self.sync.lease_of(key))

    async def checkpoint(self, lease: Lease | int, remaining: float) -> None:
        """Persists a lease's remaining time (seconds); ``tenure.LeaseNotFound`` if there is no
        such lease. Writes raise ``tenure.StorageError`` if the file cannot be written, ``tenure.Closed`` after close."""
        await _run(lambda: self.sync.checkpoint(_lease_id(lease), remaining))

    async def promote(self, extend: float = 0.0) -> None:
        """Makes this engine primary, extending every lease by ``extend`` seconds. Raises
        ``tenure.InvalidArgument`` for a negative ``extend``. Writes raise ``tenure.StorageError`` if the file cannot be written, ``tenure.Closed`` after close."""
        await _run(lambda: self.sync.promote(extend))

    async def demote(self) -> None:
        """Makes this engine a standby: leases stop expiring."""
        await _run(self.sync.demote)

    is_primary = _Attr[bool]("Whether leases expire here.")

    def expired(self, timeout: float | None = None) -> ExpiredIterator:
        """Batches of expired leases from now on (subscribed at the call); ``async for`` waits
        at most ``timeout`` seconds per batch, then raises ``tenure.Timeout``."""
        return ExpiredIterator(self.sync.expired(), _tenure._expired_recv_async, timeout)

    # keys
    async def put(self, key: _Key, value: _Key, lease: Lease | int | None = None) -> int:
        """Stores ``value`` at ``key`` (attached to ``lease``); returns the new revision. Raises
        ``tenure.LeaseNotFound`` if the lease is gone. Writes raise ``tenure.StorageError`` if the file cannot be written, ``tenure.Closed`` after close."""
        lid = None if lease is None else _lease_id(lease)
        return await _run(lambda: self.sync.put(key, value, lid))

    async def get(self, key: _Key, revision: int | None = None) -> KeyValue | None:
        """The key's ``KeyValue``, or ``None``; with ``revision``, the key as it was at that
        revision. Raises ``tenure.Compacted`` below the compaction point (its
        ``compact_revision`` tells the point) and ``tenure.FutureRevision`` ("required revision
        is a future revision") above the current revision."""
        call = lambda: self.sync.get(key, revision)  # noqa: E731
        # A read of the past may go to the file: off the event loop.
        return await (self._read(call) if revision is None else _run(call))

    async def range(
        self, prefix: _Key, limit: int | None = None, revision: int | None = None
    ) -> list[KeyValue]:
        """The keys under ``prefix`` in key order, at most ``limit``; with ``revision``, as they
        were at that revision (errors as ``get``)."""
        call = lambda: self.sync.range(prefix, limit, revision)  # noqa: E731
        return await (self._read(call) if revision is None else _run(call))

    async def compact(self, revision: int, physical: bool = False) -> None:
        """etcd's Compact: drops the history below ``revision`` (which stays readable); with
        ``physical=True`` it returns once the freed rows are removed from the file. Raises
        ``tenure.Compacted`` at or below an earlier compaction, ``tenure.FutureRevision`` above
        the current revision, ``tenure.InvalidArgument`` below 1."""
        await _run(lambda: self.sync.compact(revision, physical))

    async def delete(self, key: _Key) -> bool:
        """Deletes a key; whether it existed. Writes raise ``tenure.StorageError`` if the file cannot be written, ``tenure.Closed`` after close."""
        return await _run(lambda: self.sync.delete(key))

    async def delete_prefix(self, prefix: _Key) -> int:
        """Deletes every key under ``prefix``; how many. Writes raise ``tenure.StorageError`` if the file cannot be written, ``tenure.Closed`` after close."""
        return await _run(lambda: self.sync.delete_prefix(prefix))

    revision = _Attr[int]("The current revision.")

    async def txn(
        self,
        compare: Iterable[Compare] | None = None,
        success: Iterable[Op] | None = None,
        failure: Iterable[Op] | None = None,
    ) -> TxnResponse:
        """An atomic compare-then-ops transaction; see ``tenure.Tenure.txn``. Raises
        ``tenure.LeaseNotFound`` if a put names a lease that is gone (nothing applied).
        Writes raise ``tenure.StorageError`` if the file cannot be written, ``tenure.Closed`` after close."""
        return await _run(lambda: self.sync.txn(compare, success, failure))

    def watch(
        self,
        key: _Key,
        prefix: bool = False,
        start_revision: int | None = None,
        prev_kv: bool = False,
        timeout: float | None = None,
    ) -> Watcher:
        """Watches a key or prefix from now (or ``start_revision``), subscribed at the call;
        ``async for`` waits at most ``timeout`` seconds per event (then ``tenure.Timeout``)."""
        w = self.sync.watch(key, prefix, start_revision, prev_kv)
        return Watcher(w, _tenure._watch_recv_async, timeout)

    # coordination
    def session(self, ttl: float = 10.0, keepalive_interval: float | None = None) -> _Opening[Session]:
        """A session (a lease of ``ttl`` seconds renewed natively every ``keepalive_interval``
        seconds, default TTL/3): ``await`` it, or ``async with`` it to revoke the lease on exit.
        Raises ``tenure.InvalidArgument`` for a TTL or interval that is not positive, or an
        interval above ``tenure.MAX_KEEPALIVE_INTERVAL``."""

        async def make() -> Session:
            return Session(await _run(lambda: self.sync.session(ttl, keepalive_interval)))

        return _Opening(make, Session.close)

    async def resume_session(
        self, lease: Lease | int, keepalive_interval: float | None = None
    ) -> Session:
        """A session over an existing lease, renewed every ``keepalive_interval`` seconds
        (default TTL/3, at most ``tenure.MAX_KEEPALIVE_INTERVAL``, else
        ``tenure.InvalidArgument``); ``tenure.LeaseNotFound`` if the lease is gone."""
        lid = _lease_id(lease)
        return Session(await _run(lambda: self.sync.resume_session(lid, keepalive_interval)))

    async def election_leader(self, name: str) -> KeyValue | None:
        """The current leader of election ``name``, or ``None``."""
        return await self._read(lambda: self.sync.election_leader(name))

    def observe_election(self, name: str, timeout: float | None = None) -> Observer:
        """Follows election ``name`` (subscribed at the call); an async iterator whose
        ``async for`` waits at most ``timeout`` seconds per change (then ``tenure.Timeout``)."""
        o = self.sync.observe_election(name)
        return Observer(o, _tenure._observe_recv_async, timeout)

    # queues (S10).
    def queue(self, name: str) -> Queue:
        """The FIFO queue ``name`` (etcd's ``recipe.Queue`` layout); see ``tenure.Queue``."""
        return Queue(self.sync.queue(name))

    def priority_queue(self, name: str) -> PriorityQueue:
        """The priority queue ``name`` (etcd's ``recipe.PriorityQueue`` layout); see
        ``tenure.PriorityQueue``."""
        return PriorityQueue(self.sync.priority_queue(name))

    def barrier(self, name: str) -> Barrier:
        """The barrier ``name`` (etcd's ``recipe.Barrier`` layout); see ``tenure.Barrier``."""
        return Barrier(self.sync.barrier(name))

    # groups (S12).
    async def group_members(self, name: str) -> dict[str, bytes]:
        """The live members of group ``name`` as ``{id: capabilities}``, in ID order."""
        return await self._read(lambda: self.sync.group_members(name))

    def watch_group(self, name: str, timeout: float | None = None) -> GroupWatch:
        """Follows the joins and leaves of group ``name`` from now on (subscribed at the call);
        ``async for`` waits at most ``timeout`` seconds per change (then ``tenure.Timeout``)."""
        return GroupWatch(self.sync.watch_group(name), _tenure._group_watch_recv_async, timeout)

    def partitioner(self, group: str, replicas: int = 1) -> Partitioner:
        """Which live members of ``group`` own a key, ``replicas`` (1–64) of them per key; see
        ``tenure.Partitioner``."""
        return Partitioner(self.sync.partitioner(group, replicas), self._read)

    # alarms and the space quota (SPEC E20, E25)
    async def alarms(self) -> list[_tenure.Alarm]:
        """The raised alarms, in (kind, member) order; see ``tenure.Tenure.alarms``."""
        return await self._read(self.sync.alarms)

    async def raise_alarm(self, alarm: _tenure.Alarm) -> bool:
        """Raises ``alarm`` (etcd's Alarm ACTIVATE), durably; ``False`` if it was raised
        already."""
        return await _run(lambda: self.sync.raise_alarm(alarm))

    async def disarm_alarm(self, alarm: _tenure.Alarm) -> bool:
        """Disarms ``alarm`` (etcd's Alarm DEACTIVATE), durably; ``False`` if it was not
        raised. Compact (``physical=True``) and ``defragment()`` first, or the next write that
        reaches the quota raises NOSPACE again."""
        return await _run(lambda: self.sync.disarm_alarm(alarm))

    member_id = _Attr[int]("The member ID the engine raises its own alarms as.")

    quota_backend_bytes = _Attr[int | None]("The file's space quota in bytes, ``None`` if none.")

    async def storage_size(self) -> _tenure.StorageSize:
        """The file's length and the bytes in use; ``tenure.InvalidArgument`` in memory."""
        return await _run(self.sync.storage_size)

    async def defragment(self) -> _tenure.StorageSize:
        """Gives the file's free pages back to the filesystem; the new size."""
        return await _run(self.sync.defragment)

    # engine
    async def stats(self) -> dict[str, int]:
        """Engine counters."""
        return await self._read(self.sync.stats)

    async def metrics_text(self) -> str:
        """The engine's figures in Prometheus' text format, with the space quota and the
        NOSPACE alarm; see ``tenure.Tenure.metrics_text``."""
        return await self._read(self.sync.metrics_text)

    closed = _Attr[bool]("Whether the engine is closed.")

    path = _Attr[pathlib.Path | None]("The database file, or ``None`` in memory.")

    async def close(self) -> None:
        """Closes the engine (flushes, stops its threads). Idempotent."""
        await _run(self.sync.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return _repr(self.sync)


@_options_of(_tenure.open)
def open(*args: Any, **options: Any) -> Tenure:
    """Opens an engine for asyncio with the options of ``tenure.open`` (times in seconds);
    ``async with`` closes it. Opening reads the file once (no wait). Raises as ``tenure.open``:
    ``tenure.AlreadyOpen``, ``tenure.Corrupt``, ``tenure.StorageError``,
    ``tenure.InvalidArgument``.

    ``shared=True``: several processes open the file so (see ``tenure.open``). In a process
    that does not own the file every call is a round trip over the owner's socket, so each,
    reads included, runs on the loop's default executor, as over ``connect``; the open itself
    connects at once (the owner is up), or waits briefly while the owner starts."""
    sync = _tenure.open(*args, **options)
    return Tenure(sync, remote=bool(options.get("shared")) and not sync.stats()["owner"])


@_options_of(_tenure.connect)
def connect(*args: Any, **options: Any) -> _Opening[Tenure]:
    """Connects to an etcd v3 server (or ``tenure serve``) at ``url``, as ``tenure.connect``
    (``timeout``: the deadline of every call, in seconds; the same TLS and credential options;
    network failures raise ``tenure.Unavailable``, a refused TLS connection or login
    ``tenure.Unauthenticated``): ``await`` it, or ``async with`` it to close on exit. Every
    call, reads included, then runs on the loop's default executor (each is a network round
    trip)."""

    async def make() -> Tenure:
        return Tenure(await _run(lambda: _tenure.connect(*args, **options)), remote=True)

    return _Opening(make, Tenure.close)


@final
class Session(_Scope):
    """A session for asyncio (``Tenure.session()``); ``sync`` is the ``tenure.Session``."""

    def __init__(self, sync: _tenure.Session) -> None:
        self.sync = sync

    lease_id = _Attr[int]("The session's lease ID.")

    id = _Attr[int]("The session's ID (its lease ID).")

    done = _Attr[bool]("Whether the session's lease is lost or the session closed.")

    async def wait_done(self, timeout: float | None = None) -> bool:
        """Waits until the session's lease is lost (expired, revoked, closed, engine closed),
        at most ``timeout`` seconds (``None``: no limit); whether it was lost. Never raises
        ``tenure.Timeout``: a wait that runs out returns ``False``."""
        done: bool = await _wait(
            lambda wake: _tenure._session_done_async(self.sync, timeout, wake), _ignore
        )
        return done

    async def close(self) -> None:
        """Revokes the session's lease (its locks and candidacies go with it). Idempotent."""
        await _run(self.sync.close)

    def lock(
        self,
        name: str,
        timeout: float | None = None,
        lock_delay: float | None = None,
        max_hold: float | None = None,
    ) -> _Opening[LockGuard]:
        """Waits for the lock ``name`` (FIFO), at most ``timeout`` seconds (then
        ``tenure.Timeout``): ``await`` it for a ``LockGuard``, or ``async with`` it to unlock on
        exit. Cancelling the task withdraws the waiter's key. ``lock_delay`` and ``max_hold``
        bound the hold as for ``Session.mutex``."""
        m = self.mutex(name, lock_delay=lock_delay, max_hold=max_hold)
        return _Opening(lambda: m.lock(timeout), LockGuard.unlock)

    def mutex(
        self, name: str, lock_delay: float | None = None, max_hold: float | None = None
    ) -> Mutex:
        """The mutex ``name`` of this session. Bounded holds (SPEC S9), in seconds:
        ``lock_delay`` — after the holder ahead lost its session without unlocking (or ran out
        of ``max_hold``), take the lock only this long after seeing that end; a voluntary unlock
        never delays. ``max_hold`` — a hold ends itself this long after it was taken, even while
        the session lives (``LockGuard.is_held()`` turns false, then the key is deleted)."""
        return Mutex(self.sync.mutex(name, lock_delay=lock_delay, max_hold=max_hold))

    def election(self, name: str) -> Election:
        """The election ``name``, in which this session can campaign."""
        return Election(self.sync.election(name))

    def semaphore(self, name: str, permits: int) -> Semaphore:
        """The semaphore ``name`` of ``permits`` permits; ``tenure.InvalidArgument`` unless
        1 ≤ permits ≤ 4096."""
        return Semaphore(self.sync.semaphore(name, permits))

    def rwlock(self, name: str) -> RwLock:
        """The read-write lock ``name`` of this session."""
        return RwLock(self.sync.rwlock(name))
    # barriers (S11).
    def double_barrier(self, name: str, count: int) -> DoubleBarrier:
        """A participant, through this session, of the double barrier ``name`` for ``count``."""
        return DoubleBarrier(self.sync.double_barrier(name, count))

    # groups (S12).
    def group(self, name: str) -> Group:
        """This session's membership of group ``name``."""
        return Group(self.sync.group(name))

    async def _end(self) -> None:
        await self.close()

    def __repr__(self) -> str:
        return _repr(self.sync)


@final
class Mutex:
    """A fair mutex of one session (``Session.mutex()``)."""

    def __init__(self, sync: _tenure.Mutex) -> None:
        self.sync = sync

    name = _Attr[str]("The mutex's name.")

    key = _Attr[bytes]("This contender's key.")

    async def lock(self, timeout: float | None = None) -> LockGuard:
        """Waits until held, at most ``timeout`` seconds (then ``tenure.Timeout``); a cancelled
        wait withdraws this contender's key before the cancellation completes."""
        return await LockGuard._acquire(
            lambda wake: _tenure._lock_async(self.sync, timeout, wake)
        )

    async def try_lock(self) -> LockGuard:
        """Takes the lock if free, else ``tenure.Locked``."""
        return await LockGuard._take(self.sync.try_lock)

    def __repr__(self) -> str:
        return _repr(self.sync)


@final
class LockGuard(_Guard[_tenure.LockGuard]):
    """A held lock; ``async with`` unlocks on exit."""

    async def unlock(self) -> None:
        """Releases the lock; ``tenure.NotLeader`` if it had been unlocked or lost."""
        await _run(self.sync.unlock)


# queues (S10).
class _Queue:
    """What both queues share: the name, an awaitable dequeue and ``try_dequeue``."""

    sync: _tenure.Queue | _tenure.PriorityQueue

    name = _Attr[str]("The queue's name.")

    async def dequeue(self, timeout: float | None = None) -> bytes:
        """Takes the first item, waiting at most ``timeout`` seconds (then ``tenure.Timeout``).
        Waiting takes nothing; an item taken in the instant the wait was cancelled is put back
        (at the end of the queue, or of its priority)."""
        value, _ = await _wait(
            lambda wake: _tenure._dequeue_async(self.sync, timeout, wake), self._put_back
        )
        return bytes(value)

    async def try_dequeue(self) -> bytes | None:
        """Takes the first item if there is one, else ``None``; never waits."""
        return await _run(self.sync.try_dequeue)

    def _put_back(self, item: tuple[bytes, int | None]) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return _repr(self.sync)


@final
class Queue(_Queue):
    """A FIFO queue (``Tenure.queue()``): each item to exactly one consumer.

    >>> import asyncio, tenure.aio
    >>> async def main() -> bytes:
    ...     async with tenure.aio.open() as db:
    ...         jobs = db.queue("jobs")
    ...         await jobs.enqueue("resize")
    ...         return await jobs.dequeue(timeout=5)
    >>> asyncio.run(main())
    b'resize'
    """

    def __init__(self, sync: _tenure.Queue) -> None:
        self.sync: _tenure.Queue = sync

    async def enqueue(self, value: _Key) -> None:
        """Appends ``value``."""
        await _run(lambda: self.sync.enqueue(value))

    def _put_back(self, item: tuple[bytes, int | None]) -> None:
        self.sync.enqueue(item[0])


@final
class PriorityQueue(_Queue):
    """A priority queue (``Tenure.priority_queue()``): lower priorities first, FIFO within one."""

    def __init__(self, sync: _tenure.PriorityQueue) -> None:
        self.sync: _tenure.PriorityQueue = sync

    async def enqueue(self, value: _Key, priority: int) -> None:
        """Appends ``value`` with ``priority`` (0–65535, lower leaves first)."""
        await _run(lambda: self.sync.enqueue(value, priority))

    def _put_back(self, item: tuple[bytes, int | None]) -> None:
        self.sync.enqueue(item[0], item[1] or 0)


# barriers (S11).
# A barrier's wait holds nothing: it runs on the executor in slices of this many seconds, so a
# cancelled wait stops within one slice.
_BARRIER_SLICE = 0.25


@final
class Barrier:
    """A barrier (``Tenure.barrier()``): held while its key exists."""

    def __init__(self, sync: _tenure.Barrier) -> None:
        self.sync = sync

    name = _Attr[str]("The barrier's name (its key).")

    async def hold(self) -> bool:
        """Holds the barrier; True if this call put its key, False if it was already held."""
        return await _run(self.sync.hold)

    async def release(self) -> None:
        """Releases the barrier. Raises ``tenure.StorageError`` if the file cannot be written,
        ``tenure.Closed`` after close."""
        await _run(self.sync.release)

    async def wait(self, timeout: float | None = None) -> None:
        """Waits until the barrier is released, at most ``timeout`` seconds (then
        ``tenure.Timeout``)."""
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        while True:
            left = None if end is None else max(0.0, end - loop.time())
            step = _BARRIER_SLICE if left is None else min(_BARRIER_SLICE, left)
            try:
                await _run(lambda: self.sync.wait(step))
                return
            except Timeout:
                if left is not None and left <= step:
                    raise

    def __repr__(self) -> str:
        return _repr(self.sync)


@final
class DoubleBarrier:
    """A participant of a double barrier (``Session.double_barrier()``). ``enter`` and
    ``leave`` wait on a native thread of their own; cancelling the task ends the wait at once
    (a cancelled ``enter`` withdraws its entry).

    >>> import asyncio, tenure.aio
    >>> async def main() -> None:
    ...     async with tenure.aio.open() as db, db.session() as s:
    ...         b = s.double_barrier("batch", 1)
    ...         await b.enter(timeout=5)
    ...         await b.leave(timeout=5)
    >>> asyncio.run(main())
    """

    def __init__(self, sync: _tenure.DoubleBarrier) -> None:
        self.sync = sync

    name = _Attr[str]("The barrier's name.")

    count = _Attr[int]("How many participants it waits for.")

    async def enter(self, timeout: float | None = None) -> None:
        """Enters and waits until ``count`` participants have, at most ``timeout`` seconds
        (then ``tenure.Timeout``; see ``tenure.DoubleBarrier``)."""
        await _wait(
            lambda wake: _tenure._double_barrier_async(self.sync, False, timeout, wake), _ignore
        )

    async def leave(self, timeout: float | None = None) -> None:
        """Leaves and waits until every participant has left, at most ``timeout`` seconds."""
        await _wait(
            lambda wake: _tenure._double_barrier_async(self.sync, True, timeout, wake), _ignore
        )

    def __repr__(self) -> str:
        return _repr(self.sync)


# groups (S12).
@final
class Group:
    """A session's membership of a group (``Session.group()``): a member whose session ends
    leaves.

    >>> import asyncio, tenure.aio
    >>> async def main() -> dict[str, bytes]:
    ...     async with tenure.aio.open() as db, db.session() as s:
    ...         await s.group("workers").join("w1", "gpu")
    ...         return await db.group_members("workers")
    >>> asyncio.run(main())
    {'w1': b'gpu'}
    """

    def __init__(self, sync: _tenure.Group) -> None:
        self.sync = sync

    name = _Attr[str]("The group's name.")

    async def join(self, member: str, capabilities: _Key | None = None) -> None:
        """Joins as ``member`` with ``capabilities``; again through the same session, updates
        them. ``tenure.Locked`` if another session is that member, ``tenure.InvalidArgument``
        for an ID empty, over 256 bytes or with '/'."""
        await _run(lambda: self.sync.join(member, capabilities))

    async def leave(self) -> None:
        """Leaves the group (only this membership; nothing if not joined)."""
        await _run(self.sync.leave)

    def __repr__(self) -> str:
        return _repr(self.sync)


@final
class Partitioner:
    """Which live members of a group own a key (``Tenure.partitioner()``), by consistent
    hashing: each call reads the current members (in memory when embedded, one round trip
    over ``connect()``)."""

    def __init__(
        self,
        sync: _tenure.Partitioner,
        read: Callable[[Callable[[], Any]], Awaitable[Any]],
    ) -> None:
        self.sync = sync
        self._read = read

    group = _Attr[str]("The group partitioned.")

    replicas = _Attr[int]("How many members own each key.")

    async def members_for(self, key: _Key) -> set[str]:
        """The members owning ``key`` now: ``replicas`` of them, fewer if the group has fewer."""
        members: set[str] = await self._read(lambda: self.sync.members_for(key))
        return members

    async def primary_for(self, key: _Key) -> str | None:
        """The primary owner of ``key`` now, or ``None`` if the group has no member."""
        primary: str | None = await self._read(lambda: self.sync.primary_for(key))
        return primary

    def __repr__(self) -> str:
        return _repr(self.sync)


@final
class Semaphore:
    """A counting semaphore of one session (``Session.semaphore()``, SPEC S7): at most
    ``permits`` holders at once, admitted in arrival order.

    ``async with await sem.acquire(timeout=5):`` holds a permit for the block;
    ``async with sem.acquiring(5):`` does the same in one step."""

    def __init__(self, sync: _tenure.Semaphore) -> None:
        self.sync = sync

    name = _Attr[str]("The semaphore's name.")

    permits = _Attr[int]("Its number of permits.")

    async def acquire(self, timeout: float | None = None) -> SemaphoreGuard:
        """Waits until this session holds a permit, at most ``timeout`` seconds (then
        ``tenure.Timeout``); a cancelled wait withdraws this contender's key before the
        cancellation completes. ``tenure.InvalidArgument`` if ``permits`` is not the holders'."""
        return await SemaphoreGuard._acquire(
            lambda wake: _tenure._semaphore_acquire_async(self.sync, timeout, wake)
        )

    def acquiring(self, timeout: float | None = None) -> _Opening[SemaphoreGuard]:
        """``acquire`` (at most ``timeout`` seconds) as an ``async with``: the permit is
        released on exit."""
        return _Opening(lambda: self.acquire(timeout), SemaphoreGuard.release)

    async def try_acquire(self) -> SemaphoreGuard:
        """Takes a permit if one is free and no one waits, else ``tenure.Locked``."""
        return await SemaphoreGuard._take(self.sync.try_acquire)

    def __repr__(self) -> str:
        return _repr(self.sync)


@final
class SemaphoreGuard(_Guard[_tenure.SemaphoreGuard]):
    """A held permit; ``async with`` releases it on exit."""

    async def release(self) -> None:
        """Releases the permit; ``tenure.NotLeader`` if it had been released or lost."""
        await _run(self.sync.release)


@final
class RwLock:
    """A read-write lock of one session (``Session.rwlock()``, SPEC S8): many readers or one
    writer, in arrival order. ``async with await lock.read(5):`` holds it for the block."""

    def __init__(self, sync: _tenure.RwLock) -> None:
        self.sync = sync

    name = _Attr[str]("The lock's name.")

    async def read(self, timeout: float | None = None) -> RwLockGuard:
        """Waits until held for reading (after every earlier writer), at most ``timeout``
        seconds (then ``tenure.Timeout``); a cancelled wait withdraws its key."""
        return await RwLockGuard._acquire(
            lambda wake: _tenure._rwlock_async(self.sync, False, timeout, wake)
        )

    async def write(self, timeout: float | None = None) -> RwLockGuard:
        """Waits until held for writing (alone, after everyone earlier), at most ``timeout``
        seconds (then ``tenure.Timeout``); a cancelled wait withdraws its key."""
        return await RwLockGuard._acquire(
            lambda wake: _tenure._rwlock_async(self.sync, True, timeout, wake)
        )

    async def try_read(self) -> RwLockGuard:
        """Takes it for reading if no writer holds or awaits it, else ``tenure.Locked``."""
        return await RwLockGuard._take(self.sync.try_read)

    async def try_write(self) -> RwLockGuard:
        """Takes it for writing if no one holds or awaits it, else ``tenure.Locked``."""
        return await RwLockGuard._take(self.sync.try_write)

    def __repr__(self) -> str:
        return _repr(self.sync)


@final
class RwLockGuard(_Guard[_tenure.RwLockGuard]):
    """A held read or write lock; ``async with`` unlocks it on exit."""

    is_write = _Attr[bool]("Whether this is a write hold.")

    async def unlock(self) -> None:
        """Releases the hold; ``tenure.NotLeader`` if it had been unlocked or lost."""
        await _run(self.sync.unlock)


@final
class Election:
    """An election in which a session campaigns (``Session.election()``)."""

    def __init__(self, sync: _tenure.Election) -> None:
        self.sync = sync

    name = _Attr[str]("The election's name.")

    lease_id = _Attr[int]("The ID of the campaigning session's lease.")

    async def campaign(self, value: _Key, timeout: float | None = None) -> Leadership:
        """Becomes a candidate with ``value`` and waits until leader, at most ``timeout``
        seconds (then ``tenure.Timeout``); a cancelled campaign withdraws the candidacy."""
        leadership = await _wait(
            lambda wake: _tenure._campaign_async(self.sync, value, timeout, wake), _resign
        )
        return Leadership(leadership)

    def __repr__(self) -> str:
        return _repr(self.sync)


@final
class Leadership(_Scope):
    """Leadership won by ``Election.campaign()``; ``async with`` resigns on exit."""

    def __init__(self, sync: _tenure.Leadership) -> None:
        self.sync: _tenure.Leadership = sync

    name = _Attr[str]("The election's name.")

    key = _Attr[bytes]("The leader key.")

    fencing_token = _Attr[int]("The fencing token: strictly increasing per election.")

    def is_leader(self) -> bool:
        """Whether the leader key still exists."""
        return self.sync.is_leader()

    async def proclaim(self, value: _Key) -> None:
        """Publishes a new value as the leader; ``tenure.NotLeader`` if leadership was lost."""
        await _run(lambda: self.sync.proclaim(value))

    async def resign(self) -> None:
        """Gives up leadership. Idempotent."""
        await _run(self.sync.resign)

    async def _end(self) -> None:
        await self.resign()

    def __repr__(self) -> str:
        return _repr(self.sync)


@final
class LeaderElector:
    """A client-go style leader elector (see ``tenure.LeaderElector``) whose callbacks are
    coroutine functions run as tasks on the event loop that started it.

    ``on_started_leading(token, lost)`` runs while this candidate leads: ``lost`` (an
    ``asyncio.Event``) is set and the task cancelled when leadership ends.
    ``on_stopped_leading()`` runs after that; ``on_new_leader(identity)`` on each observed
    change. ``async with`` starts the elector and, on exit, stops it (releasing leadership if
    ``release_on_cancel``) and awaits every callback task. Times are float seconds."""

    def __init__(
        self,
        db: Tenure,
        name: str,
        identity: str,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
        on_started_leading: Callable[[int, asyncio.Event], Awaitable[object]] | None = None,
        on_stopped_leading: Callable[[], Awaitable[object]] | None = None,
        on_new_leader: Callable[[str], Awaitable[object]] | None = None,
        release_on_cancel: bool = True,
    ) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[object]] = set()
        self._leading: tuple[asyncio.Task[object], asyncio.Event] | None = None
        self._started_cb = on_started_leading
        self._stopped_cb = on_stopped_leading
        self._new_cb = on_new_leader
        self.sync = _tenure.LeaderElector(
            db.sync,
            name,
            identity,
            lease_duration,
            renew_deadline,
            retry_period,
            on_started_leading=self._on_started,
            on_stopped_leading=self._on_stopped,
            on_new_leader=self._on_new,
            release_on_cancel=release_on_cancel,
        )

    # The native callbacks run on the elector's thread: they only schedule work on the loop.
    def _post(self, fn: Callable[[], None]) -> None:
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(fn)
            except RuntimeError:
                pass  # the loop is closed

    def _spawn(self, coro: Awaitable[object]) -> asyncio.Task[object]:
        async def run() -> object:
            return await coro

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _on_started(self, token: int, _stop: _tenure.Stop) -> None:
        def start() -> None:
            lost = asyncio.Event()
            if self._started_cb is not None:
                self._leading = (self._spawn(self._started_cb(token, lost)), lost)

        self._post(start)

    def _on_stopped(self) -> None:
        def stop() -> None:
            if self._leading is not None:
                task, lost = self._leading
                self._leading = None
                lost.set()
                task.cancel()
            if self._stopped_cb is not None:
                self._spawn(self._stopped_cb())

        self._post(stop)

    def _on_new(self, identity: str) -> None:
        cb = self._new_cb
        if cb is not None:

            def announce() -> None:
                self._spawn(cb(identity))

            self._post(announce)

    name = _Attr[str]("The record key.")

    identity = _Attr[str]("This candidate's identity.")

    is_leader = _Attr[bool]("Whether this candidate leads now.")

    leader = _Attr[str | None](
        "The identity of the last observed leader, or ``None`` before any."
    )

    def start(self) -> None:
        """Runs the elector on its native thread, its callbacks on the running loop."""
        self._loop = asyncio.get_running_loop()
        self.sync.start()

    async def stop(self) -> None:
        """Stops the elector and awaits its callback tasks (a cancelled leading task ends
        quietly); raises the error that ended the run, if any (e.g. ``tenure.Closed``)."""
        await _run(self.sync.stop)
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def __repr__(self) -> str:
        return _repr(self.sync)
