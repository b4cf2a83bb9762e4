"""The exception model: one class per C result code, all under tenure.TenureError (docs/SPEC.md,
"Errors"); a panic surfaces as TenureError; wrong argument types as TypeError."""

from __future__ import annotations

from typing import Callable

import pytest

import tenure
from tenure import _tenure, txn

# Test hooks: only in the test build (cargo feature `test-hooks`), never in the stubs or the
# wheel users install (tests/python/release_wheel.py checks that).
_raise_for_test: Callable[[str], None] = getattr(_tenure, "_raise_for_test")
_panic_for_test: Callable[[str], None] = getattr(_tenure, "_panic_for_test")

# The error table of docs/SPEC.md: Rust variant -> (Python class, C code, extra base class).
TABLE: list[tuple[str, type[tenure.TenureError], int, type[BaseException] | None]] = [
    ("InvalidArgument", tenure.InvalidArgument, 1, ValueError),
    ("LeaseNotFound", tenure.LeaseNotFound, 3, None),
    ("LeaseExists", tenure.LeaseExists, 4, None),
    ("LeaseExpired", tenure.LeaseExpired, 5, None),
    ("LeaseTtlTooLarge", tenure.LeaseTtlTooLarge, 6, ValueError),
    ("NotPrimary", tenure.NotPrimary, 7, None),
    ("Compacted", tenure.Compacted, 8, None),
    ("AlreadyOpen", tenure.AlreadyOpen, 9, None),
    ("Corrupt", tenure.Corrupt, 10, None),
    ("Storage", tenure.StorageError, 11, None),
    ("Closed", tenure.Closed, 12, None),
    ("Timeout", tenure.Timeout, 13, TimeoutError),
    ("Locked", tenure.Locked, 14, None),
    ("SessionExpired", tenure.SessionExpired, 15, None),
    ("NotLeader", tenure.NotLeader, 16, None),
    ("StaleToken", tenure.StaleToken, 17, None),
    ("Unsupported", tenure.Unsupported, 19, None),
    ("Unavailable", tenure.Unavailable, 20, ConnectionError),
    ("PermissionDenied", tenure.PermissionDenied, 21, PermissionError),
    ("Unauthenticated", tenure.Unauthenticated, 22, None),
    ("FutureRevision", tenure.FutureRevision, 23, None),
    ("QuotaExceeded", tenure.QuotaExceeded, 24, None),
]


@pytest.mark.parametrize("variant, cls, code, extra", TABLE, ids=[t[0] for t in TABLE])
def test_each_engine_error_raises_its_own_class(
    variant: str, cls: type[tenure.TenureError], code: int, extra: type[BaseException] | None
) -> None:
    with pytest.raises(cls) as exc:
        _raise_for_test(variant)
    assert type(exc.value) is cls
    assert isinstance(exc.value, tenure.TenureError)
    assert exc.value.code == code == cls.code
    if extra is not None:
        assert isinstance(exc.value, extra)
    assert str(exc.value)  # carries the engine's message


def test_the_classes_are_distinct_and_exported() -> None:
    classes = [t[1] for t in TABLE]
    assert len(set(classes)) == len(classes)
    for cls in classes:
        assert getattr(tenure, cls.__name__) is cls
        assert cls.__module__ == "tenure"
        assert issubclass(cls, tenure.TenureError)
    assert issubclass(tenure.TenureError, Exception)


def test_only_the_documented_classes_have_extra_bases() -> None:
    for _, cls, _, extra in TABLE:
        if extra is None:
            assert not issubclass(cls, (ValueError, TimeoutError))


def test_k13_the_revisions_an_error_carries_are_attributes() -> None:
    with pytest.raises(tenure.Compacted) as compacted:
        _raise_for_test("Compacted")
    assert (compacted.value.revision, compacted.value.compact_revision) == (1, 2)
    with pytest.raises(tenure.FutureRevision) as future:
        _raise_for_test("FutureRevision")
    assert (future.value.revision, future.value.current_revision) == (9, 4)
    assert "required revision is a future revision" in str(future.value)


def test_a_panic_raises_tenure_error_and_the_interpreter_goes_on() -> None:
    with pytest.raises(tenure.TenureError, match="boom") as exc:
        _panic_for_test("boom")
    assert type(exc.value) is tenure.TenureError
    assert exc.value.code == 18
    # Still usable afterwards.
    with tenure.open() as db:
        assert db.put("k", "v") == 1


def test_messages_name_the_subject(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.LeaseNotFound, match="lease 31337 not found"):
        db.revoke(31337)


def test_exceptions_can_be_raised_and_caught_by_users() -> None:
    with pytest.raises(tenure.TenureError):
        raise tenure.Closed("custom")


HUGE_INTS = [2**63, 2**64, -(2**63) - 1, 10**400]
DOCUMENTED = (tenure.TenureError, TypeError, ValueError)


def _raises_documented(call: Callable[[], object]) -> None:
    # OverflowError is neither a TenureError nor a ValueError: it must not escape.
    with pytest.raises(DOCUMENTED) as info:
        call()
    assert not isinstance(info.value, OverflowError), repr(info.value)


@pytest.mark.parametrize("n", HUGE_INTS)
def test_huge_ints_raise_the_documented_errors_not_overflow_error(
    db: tenure.Tenure, n: int
) -> None:
    db.put("k", "v")
    _raises_documented(lambda: db.range("k", limit=n))
    _raises_documented(lambda: db.watch("k", start_revision=n))
    _raises_documented(lambda: tenure.FenceGate().admit(n))
    _raises_documented(lambda: txn.version("k") == n)
    _raises_documented(lambda: txn.create_revision("k") < n)
    _raises_documented(lambda: txn.mod_revision("k") > n)
    _raises_documented(lambda: txn.range("k", limit=n))
    _raises_documented(lambda: db.grant(n * 10**400))
    _raises_documented(lambda: db.watch("k", timeout=n * 10**400))
    _raises_documented(
        lambda: tenure.open(None, durability="buffered", flush_interval=n * 10**400)
    )
    _raises_documented(lambda: tenure.open(None, checkpoint_interval=n * 10**400))
    _raises_documented(lambda: db.session(ttl=n * 10**400))
    _raises_documented(lambda: db.session(keepalive_interval=-abs(n) * 10**400))
    _raises_documented(lambda: tenure.RecordLock.try_acquire(db, "r", "me", n * 10**400))
    with db.session() as s:
        _raises_documented(lambda: s.lock("x", timeout=-abs(n) * 10**400))


def test_manual_clock_saturates_instead_of_overflowing(db: tenure.Tenure) -> None:
    clock = tenure.ManualClock()
    clock.advance(1)
    clock.advance(10**400)  # saturates (before: OverflowError or "too large")
    at_limit = clock.now
    clock.advance(1e300)
    assert clock.now == at_limit
