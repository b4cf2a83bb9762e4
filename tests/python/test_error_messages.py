"""Errors a person can act on: each message names its object (which lock and which holder,
which database, what timed out after how long, which session, which file); a refused TTL shows
the TTL given, in the one wording of every language; storage errors are OSErrors."""

from __future__ import annotations

import errno
import math
from pathlib import Path

import pytest

import tenure

TTL_WORDING = "lease TTL must be more than 0 and at most 9000000000 s, got"


def test_s2_locked_names_the_lock_and_its_holder(db: tenure.Tenure) -> None:
    with db.session(ttl=30.0) as a, db.session(ttl=30.0) as b:
        with a.lock("jobs/nightly", timeout=5.0):
            with pytest.raises(tenure.Locked) as exc:
                b.mutex("jobs/nightly").try_lock()
    assert str(exc.value) == f'lock "jobs/nightly" is held by lease {a.lease_id}'


def test_s2_a_lock_timeout_names_the_lock_and_how_long(db: tenure.Tenure) -> None:
    with db.session(ttl=30.0) as a, db.session(ttl=30.0) as b:
        with a.lock("jobs/nightly", timeout=5.0):
            with pytest.raises(tenure.Timeout) as exc:
                b.lock("jobs/nightly", timeout=0.25)
    assert isinstance(exc.value, TimeoutError)
    assert str(exc.value) == 'timed out after 250 ms waiting for lock "jobs/nightly"'


def test_waits_on_watches_and_expiry_say_what_timed_out(db: tenure.Tenure) -> None:
    with db.watch("k") as w:
        with pytest.raises(tenure.Timeout, match="^timed out after 250 ms waiting for a watch event$"):
            w.recv(timeout=0.25)
    with pytest.raises(tenure.Timeout, match="^timed out after 250 ms waiting for an expired lease$"):
        db.expired().recv(timeout=0.25)


def test_s1_a_closed_session_is_session_expired_naming_it(db: tenure.Tenure) -> None:
    s = db.session(ttl=30.0)
    s.close()
    for attempt in (lambda: s.lock("x"), lambda: s.election("svc").campaign("a")):
        with pytest.raises(tenure.SessionExpired, match=f"^session {s.lease_id} has ended"):
            attempt()


def test_d7_closed_names_the_database(tmp_path: Path) -> None:
    path = tmp_path / "app.tenure"
    db = tenure.open(path)
    db.close()
    with pytest.raises(tenure.Closed) as exc:
        db.put("k", "v")
    assert str(exc.value) == f"database {path} is closed"
    mem = tenure.open(None)
    mem.close()
    with pytest.raises(tenure.Closed, match=r"^database \(in memory\) is closed$"):
        mem.grant(ttl=1.0)


@pytest.mark.parametrize(
    "ttl, shown, cls",
    [
        (0.0, "0", tenure.InvalidArgument),
        (-1.5, "-1.5", tenure.InvalidArgument),
        (math.nan, "NaN", tenure.InvalidArgument),
        (9e9 + 1, "9000000001", tenure.LeaseTtlTooLarge),
        (math.inf, "inf", tenure.LeaseTtlTooLarge),
    ],
)
def test_l2_ttl_refusals_show_the_ttl_given_in_one_wording(
    db: tenure.Tenure, ttl: float, shown: str, cls: type[tenure.TenureError]
) -> None:
    for call in (lambda: db.grant(ttl=ttl), lambda: db.session(ttl=ttl)):
        with pytest.raises(cls) as exc:
            call()
        assert str(exc.value).endswith(f"{TTL_WORDING} {shown} s"), str(exc.value)


def test_d5_opening_a_directory_is_an_is_a_directory_error(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError) as exc:
        tenure.open(tmp_path)
    e = exc.value
    assert isinstance(e, tenure.StorageError) and type(e).__name__ == "StorageError"
    assert e.errno == errno.EISDIR
    assert e.filename == str(tmp_path)
    assert "is a directory" in str(e).lower() and str(tmp_path) in str(e)


def test_d5_an_empty_path_is_refused_as_such() -> None:
    with pytest.raises(tenure.InvalidArgument, match="path must not be empty"):
        tenure.open("")


def test_d6_storage_errors_are_oserrors_with_errno_and_filename(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "app.tenure"
    with pytest.raises(FileNotFoundError) as exc:
        tenure.open(path)
    e = exc.value
    assert isinstance(e, tenure.StorageError) and isinstance(e, tenure.TenureError)
    assert e.errno == errno.ENOENT and e.filename == str(path)
    assert e.code == tenure.StorageError.code == 11
    assert str(e).startswith("storage error: cannot ") and str(path) in str(e)
    # Without an OS error number it is a plain StorageError, still an OSError.
    assert issubclass(tenure.StorageError, OSError)
