"""What Python users expect of every public name (compare redis-py, python-etcd3, filelock): a
docstring on each class, method, property and function of ``tenure``, ``tenure.aio`` and
``tenure.txn``, times in seconds said so, errors named; and one ``repr()`` convention for every
class: ``<module>.<Class>(<fields>)`` (a named constructor may follow the class:
``tenure.txn.Op.put(...)``), values as Python writes them."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

import tenure
import tenure.aio
from tenure import txn

MODULES = (tenure, tenure.aio, txn)
ERRORS = {
    name
    for name in tenure.__all__
    if isinstance(getattr(tenure, name), type) and issubclass(getattr(tenure, name), BaseException)
}
# Parameters that are durations: their doc (or their class's) says "second".
DURATIONS = {
    "ttl",
    "timeout",
    "interval",
    "keepalive_interval",
    "remaining",
    "extend",
    "flush_interval",
    "min_ttl",
    "checkpoint_interval",
    "expired_retry_interval",
    "lease_duration",
    "renew_deadline",
    "retry_period",
    "seconds",
}
# What waits or can fail in an engine call; each names its errors.
RAISING = re.compile(
    r"\b(lock|try_lock|campaign|recv|grant|renew|revoke|put|txn|delete|delete_prefix|attach|"
    r"detach|checkpoint|promote|proclaim|unlock|open|connect|session|resume_session|"
    r"resume|admit|try_acquire|refresh|release|keep_alive|run|stop|time_to_live)\Z"
)


def public_classes(module: ModuleType) -> Iterator[type]:
    for name in getattr(module, "__all__", dir(module)):
        obj = getattr(module, name)
        if isinstance(obj, type) and not name.startswith("_"):
            yield obj


def members(cls: type) -> Iterator[tuple[str, Any]]:
    """The class's own public members (inherited ones from tenure's bases included)."""
    for klass in cls.__mro__:
        if klass is object or not klass.__module__.startswith("tenure"):
            continue
        for name, member in vars(klass).items():
            if not name.startswith("_"):
                yield name, member


def functions() -> Iterator[tuple[str, Callable[..., Any]]]:
    for module in MODULES:
        for name in getattr(module, "__all__", dir(module)):
            obj = getattr(module, name)
            if callable(obj) and not isinstance(obj, type) and not name.startswith("_"):
                yield f"{module.__name__}.{name}", obj


def doc_of(member: Any) -> str:
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    return inspect.getdoc(member) or ""


def parameters(member: Any) -> list[str]:
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    try:
        return list(inspect.signature(member).parameters)
    except (TypeError, ValueError):
        return []


def test_every_public_name_has_a_docstring() -> None:
    missing = []
    for module in MODULES:
        assert module.__doc__, module.__name__
        for cls in public_classes(module):
            if not inspect.getdoc(cls):
                missing.append(f"{module.__name__}.{cls.__name__}")
            for name, member in members(cls):
                if not doc_of(member):
                    missing.append(f"{module.__name__}.{cls.__name__}.{name}")
    missing += [name for name, f in functions() if not doc_of(f)]
    assert missing == []


def test_durations_are_documented_in_seconds() -> None:
    unsaid = []
    for module in MODULES:
        for cls in public_classes(module):
            for name, member in [("__init__", getattr(cls, "__init__")), *members(cls)]:
                if DURATIONS & set(parameters(member)):
                    doc = doc_of(member) + (inspect.getdoc(cls) or "")
                    if "second" not in doc:
                        unsaid.append(f"{module.__name__}.{cls.__name__}.{name}")
    for name, f in functions():
        if DURATIONS & set(parameters(f)) and "second" not in doc_of(f):
            unsaid.append(name)
    assert unsaid == []


def test_calls_that_wait_or_fail_name_their_errors() -> None:
    unnamed = []
    for module in MODULES:
        for cls in public_classes(module):
            if issubclass(cls, BaseException):
                continue
            for name, member in members(cls):
                if RAISING.match(name) and not inspect.isdatadescriptor(member):
                    doc = doc_of(member)
                    named = "Raises" in doc or "never raises" in doc
                    if not named and not any(e in doc for e in ERRORS):
                        unnamed.append(f"{module.__name__}.{cls.__name__}.{name}")
    for name, f in functions():
        doc = doc_of(f)
        if RAISING.match(name.rsplit(".", 1)[1]) and not any(e in doc for e in ERRORS):
            unnamed.append(name)
    assert unnamed == []


REPR = re.compile(r"(?P<cls>[\w.]+?)(\.[a-z_]+)?\((?P<args>.*)\)\Z", re.S)


def check_repr(obj: object, *fields: str) -> None:
    """`repr(obj)` is `<module>.<Class>(...)` naming `fields` (`name=` or a positional value)."""
    cls = type(obj)
    text = repr(obj)
    m = REPR.match(text)
    assert m, text
    assert m["cls"] == f"{cls.__module__}.{cls.__name__}", text
    for f in fields:
        assert f in m["args"], (f, text)


def keyword_fields(text: str) -> dict[str, str]:
    """The top-level `name=value` arguments of a repr `Class(...)` (nested reprs skipped)."""
    inner = text[text.index("(") + 1 : -1]
    out: dict[str, str] = {}
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(inner + ","):
        if quote:
            if ch == quote and inner[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            arg = inner[start:i].strip()
            start = i + 1
            name, eq, value = arg.partition("=")
            if eq and name.isidentifier():
                out[name] = value
    return out


def check_repr_fields_are_attributes(obj: object) -> None:
    """Every `name=value` a repr shows is an attribute of the object with that value (a query
    method, such as `is_leader`, called); in a repr that names a constructor
    (`tenure.txn.Op.put(b'k', b'v', lease=None)`), a parameter of that constructor."""
    text = repr(obj)
    m = REPR.match(text)
    assert m, text
    if m.group(2):
        ctor = getattr(type(obj), m.group(2)[1:])
        params = inspect.signature(ctor).parameters
        for name in keyword_fields(text):
            assert name in params, f"{text}: {name}= is no parameter of {ctor.__qualname__}"
        return
    for name, shown in keyword_fields(text).items():
        assert hasattr(obj, name), f"{type(obj).__qualname__}: repr shows {name}= but no .{name}"
        value = getattr(obj, name)
        if callable(value):
            value = value()
        if isinstance(value, os.PathLike):
            value = os.fspath(value)  # shown as the string it names
        assert repr(value) == shown, (type(obj).__qualname__, name, shown, value)


def test_keyword_fields_parse_only_the_top_level() -> None:
    text = "tenure.X(a=1, b=[tenure.Y(c=2)], d='e=f, g', h=(1, 2))"
    assert keyword_fields(text) == {"a": "1", "b": "[tenure.Y(c=2)]", "d": "'e=f, g'", "h": "(1, 2)"}


def test_every_class_has_one_repr_convention(tmp_path: Any) -> None:
    seen: set[type] = set()

    def check(obj: object, *fields: str) -> None:
        seen.add(type(obj))
        check_repr(obj, *fields)
        check_repr_fields_are_attributes(obj)

    clock = tenure.ManualClock()
    check(clock, "now=0.0")
    with tenure.open(tmp_path / "r.tenure", clock=clock) as db:
        check(db, "path=", "closed=False")
        lease = db.grant(5.0)
        check(lease, f"id={lease.id}", "ttl=5.0")
        db.put("k", "v", lease=lease)
        check(db.get("k"), "key=b'k'", "value=b'v'", f"lease={lease.id}")
        check(lease.time_to_live(), f"id={lease.id}", "keys=[b'k']")
        check(db.txn(success=[txn.get("k")]), "succeeded=True", "responses=[tenure.KeyValue(")
        check(db.snapshot(str(tmp_path / "copy.tenure")), "revision=", "bytes=", "keys=1")
        check(db.storage_size(), "file_bytes=", "in_use_bytes=")
        check(tenure.Alarm(3, "NOSPACE"), "member=3", "kind='NOSPACE'")
        check(txn.value("k"), "'k'", "'value'")
        check(txn.value("k") == "v", "b'k'", "'=='", "b'v'")
        check(txn.put("k", "v"), "b'k'", "lease=None")
        with lease.keep_alive() as ka:
            check(ka, f"lease_id={lease.id}", "alive=True")
        with db.watch("w", timeout=5.0) as w:
            check(w, "timeout=5.0", "cancelled=False")
            db.put("w", "1")
            check(next(w), "type='put'", "key=b'w'")
        it = db.expired(timeout=5.0)
        check(it, "timeout=5.0")
        short = db.grant(1.0)
        clock.advance(2.0)
        check(next(it)[0], f"id={short.id}", "ttl=1.0")
        with db.session(ttl=30.0) as s:
            check(s, f"lease_id={s.lease_id}", "done=False")
            m = s.mutex("jobs/1")
            check(m, "name='jobs/1'", "key=b'jobs/1/")
            with m.lock(5.0) as g:
                check(g, "name='jobs/1'", f"fencing_token={g.fencing_token}")
            e = s.election("svc")
            check(e, "name='svc'", f"lease_id={s.lease_id}")
            with db.observe_election("svc", timeout=5.0) as o:
                check(o, "name='svc'", "timeout=5.0")
            with e.campaign("a", 5.0) as leading:
                check(leading, "name='svc'", f"fencing_token={leading.fencing_token}")
            # The semaphore and the read-write lock (S7, S8).
            sem = s.semaphore("pool", 2)
            check(sem, "name='pool'", "permits=2")
            with sem.acquire(5.0) as permit:
                check(permit, "name='pool'", f"fencing_token={permit.fencing_token}")
            rwl = s.rwlock("cfg")
            check(rwl, "name='cfg'")
            with rwl.read(5.0) as hold:
                check(hold, "name='cfg'", f"fencing_token={hold.fencing_token}")
        stop = tenure.Stop()
        check(stop, "is_set=False")
        elector = tenure.LeaderElector(db, "leader/x", "a", 6.0, 4.0, 1.0)
        check(elector, "name='leader/x'", "identity='a'", "is_leader=False")
        gate = tenure.FenceGate()
        check(gate, "highest=0")
        # queues, barriers, groups and the partitioner (S10-S12).
        check(db.queue("q"), "name='q'")
        check(db.priority_queue("pq"), "name='pq'")
        check(db.barrier("b"), "name='b'")
        check(db.watch_group("g"), "name='g'")
        check(db.partitioner("g", 2), "group='g'", "replicas=2")
        with db.session(ttl=30.0) as s2:
            check(s2.double_barrier("db", 2), "name='db'", "count=2")
            check(s2.group("g"), "name='g'")

        async def aio() -> None:
            adb = tenure.aio.Tenure(db)
            check(adb, "closed=False")
            alease = await adb.grant(5.0)
            check(alease, f"id={alease.id}")
            check(adb.expired(), "timeout=")
            async with adb.watch("w") as aw:
                check(aw, "cancelled=False")
            async with adb.observe_election("svc") as ao:
                check(ao, "name='svc'")
            async with adb.session(ttl=30.0) as asess:
                check(asess, f"lease_id={asess.lease_id}")
                am = asess.mutex("jobs/2")
                check(am, "name='jobs/2'")
                async with await am.lock(5.0) as ag:
                    check(ag, "fencing_token=")
                ae = asess.election("svc")
                check(ae, "name='svc'")
                async with await ae.campaign("b", 5.0) as al:
                    check(al, "fencing_token=")
                # The semaphore and the read-write lock (S7, S8).
                asem = asess.semaphore("pool2", 1)
                check(asem, "name='pool2'")
                async with await asem.acquire(5.0) as ap:
                    check(ap, "fencing_token=")
                arw = asess.rwlock("cfg2")
                check(arw, "name='cfg2'")
                async with await arw.write(5.0) as ah:
                    check(ah, "fencing_token=")
            check(adb.queue("q"), "name='q'")
            check(adb.priority_queue("pq"), "name='pq'")
            check(adb.barrier("b"), "name='b'")
            check(adb.watch_group("g"), "name='g'")
            check(adb.partitioner("g", 2), "group='g'", "replicas=2")
            async with adb.session(ttl=30.0) as asess2:
                check(asess2.double_barrier("db", 2), "name='db'", "count=2")
                check(asess2.group("g"), "name='g'")
            ael = tenure.aio.LeaderElector(adb, "leader/y", "b", 6.0, 4.0, 1.0)
            check(ael, "identity='b'")

        asyncio.run(aio())
    # Every public class with instances was checked (RecordLock only has static methods;
    # exceptions keep Python's own repr).
    expected = {
        cls
        for module in MODULES
        for cls in public_classes(module)
        if not issubclass(cls, BaseException) and cls is not tenure.RecordLock
    }
    assert expected - seen == set()
