"""Lease.keep_alive(): a native thread renewing at TTL/3, as a context manager (SPEC S1's
keepalive; L14: driven by the ManualClock)."""

from __future__ import annotations

import logging

import pytest

import tenure
from conftest import WAIT, native_threads, wait_until


def renewed(db: tenure.Tenure) -> int:
    return db.stats()["renewed"]


def test_keep_alive_renews_at_a_third_of_the_ttl(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    lease = db.grant(3.0)
    with lease.keep_alive() as ka:
        assert isinstance(ka, tenure.KeepAlive)
        assert ka.lease_id == lease.id and ka.is_alive
        clock.advance(0.9)
        # Nothing due yet: the expiry stays at 3 s from the grant.
        assert lease.time_to_live().remaining == pytest.approx(2.1)
        for n in range(1, 10):
            clock.advance(0.1 if n == 1 else 1.0)
            wait_until(lambda: renewed(db) >= n)
            # Each renew puts the deadline a full TTL ahead of the clock.
            assert lease.time_to_live().remaining == pytest.approx(3.0)
        # Nine seconds in: three TTLs, and the lease is alive.
        assert ka.is_alive and ka.error is None
    assert not ka.is_alive
    count = renewed(db)
    expired = db.expired(timeout=WAIT)
    clock.advance(3.5)
    assert [e.id for e in next(expired)] == [lease.id]
    assert renewed(db) == count  # no renew after the block


def test_keep_alive_with_an_explicit_interval(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    lease = db.grant(10.0)
    with lease.keep_alive(interval=2.0):
        clock.advance(1.9)
        assert lease.time_to_live().remaining == pytest.approx(8.1)
        clock.advance(0.1)
        wait_until(lambda: renewed(db) == 1)
        assert lease.time_to_live().remaining == pytest.approx(10.0)


def test_keep_alive_of_an_unknown_lease_raises_lease_not_found(db: tenure.Tenure) -> None:
    lease = db.grant(1.0)
    lease.revoke()
    with pytest.raises(tenure.LeaseNotFound):
        lease.keep_alive()


@pytest.mark.parametrize("interval", [-1.0, 0.0, float("nan")])
def test_keep_alive_with_a_bad_interval_raises_invalid_argument(
    db: tenure.Tenure, interval: float
) -> None:
    with pytest.raises(tenure.InvalidArgument):
        db.grant(3.0).keep_alive(interval=interval)


def test_a_lost_lease_ends_the_keep_alive_with_its_error(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    lease = db.grant(3.0)
    ka = lease.keep_alive()
    lease.revoke()
    clock.advance(1.0)
    wait_until(lambda: not ka.is_alive)
    assert isinstance(ka.error, tenure.LeaseNotFound)
    ka.stop()


def test_closing_the_engine_ends_the_keep_alive(clock: tenure.ManualClock) -> None:
    db = tenure.open(clock=clock)
    ka = db.grant(3.0).keep_alive()
    db.close()
    clock.advance(1.0)
    wait_until(lambda: not ka.is_alive)
    assert isinstance(ka.error, tenure.Closed)


def test_stop_is_idempotent_and_leaves_the_lease(db: tenure.Tenure) -> None:
    lease = db.grant(3.0)
    ka = lease.keep_alive()
    ka.stop()
    ka.stop()
    assert not ka.is_alive and ka.error is None
    assert lease.time_to_live().id == lease.id
    assert repr(ka) == f"tenure.KeepAlive(lease_id={lease.id}, is_alive=False)"


def keepalive_threads() -> int:
    return native_threads("tenure-keepaliv")


def test_a_garbage_collected_keep_alive_stops_its_thread(db: tenure.Tenure) -> None:
    lease = db.grant(3.0)
    assert keepalive_threads() == 0
    ka = lease.keep_alive()
    # (A new thread shows its name once it runs.) With a manual clock that does not move,
    # the thread would wait for ever: only a stop ends it.
    wait_until(lambda: keepalive_threads() == 1)
    del ka  # dropping it stops the thread
    wait_until(lambda: keepalive_threads() == 0)
    assert lease.time_to_live().id == lease.id


def test_leaving_the_block_stops_the_thread(db: tenure.Tenure) -> None:
    with db.grant(3.0).keep_alive():
        wait_until(lambda: keepalive_threads() == 1)
    wait_until(lambda: keepalive_threads() == 0)


def test_S1_a_lost_session_lease_is_logged_on_the_tenure_logger(
    db: tenure.Tenure, clock: tenure.ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tenure")
    closed = db.session(ttl=3.0)
    closed.close()  # a session ended on purpose: nothing to warn about
    s = db.session(ttl=3.0)
    db.revoke(s.lease_id)  # lost behind the session's back
    assert s.wait_done(WAIT)
    clock.advance(1.0)  # the keep-alive's next renew finds the lease gone

    def lost() -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "tenure" and f"lease {s.lease_id} lost" in r.getMessage()
        ]

    wait_until(lambda: bool(lost()))
    (record,) = lost()
    assert record.levelno == logging.WARNING
    assert "not found" in record.getMessage()
    assert not [r for r in caplog.records if f"lease {closed.lease_id} " in r.getMessage()]
