"""Expiry and the expired() iterator (SPEC L10–L12), driven by a ManualClock."""

from __future__ import annotations

import threading

import pytest

import tenure
from conftest import WAIT


def test_an_expired_lease_is_revoked_with_its_keys_and_delivered(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    expired = db.expired(timeout=WAIT)
    lease = db.grant(5.0)
    db.put("svc/a", "1", lease=lease)
    db.put("svc/b", "2", lease=lease)
    clock.advance(4.9)
    with pytest.raises(tenure.Timeout):
        expired.recv(timeout=0.1)
    clock.advance(0.2)
    batch = next(expired)
    assert isinstance(batch, list)
    assert [(e.id, e.ttl, e.keys) for e in batch] == [(lease.id, 5.0, [b"svc/a", b"svc/b"])]
    assert isinstance(batch[0], tenure.ExpiredLease)
    assert "ExpiredLease(" in repr(batch[0])
    assert db.get("svc/a") is None and db.get("svc/b") is None
    with pytest.raises(tenure.LeaseNotFound):
        db.time_to_live(lease)
    assert db.stats()["expired"] == 1


def test_many_leases_expiring_together_all_arrive(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    expired = db.expired(timeout=WAIT)
    ids = {db.grant(1.0).id for _ in range(50)}
    clock.advance(2.0)
    seen: set[int] = set()
    while seen != ids:
        seen.update(e.id for e in next(expired))
    assert db.leases() == []


def test_renewing_keeps_a_lease_from_expiring(db: tenure.Tenure, clock: tenure.ManualClock) -> None:
    lease = db.grant(3.0)
    for _ in range(5):
        clock.advance(2.0)
        lease.renew()
    with pytest.raises(tenure.Timeout):
        next(db.expired(timeout=0.2))
    assert lease.time_to_live().remaining == pytest.approx(3.0)


def test_manual_revoke_delivers_and_redelivers_until_revoked(clock: tenure.ManualClock) -> None:
    with tenure.open(clock=clock, auto_revoke=False, expired_retry_interval=2.0) as db:
        expired = db.expired(timeout=WAIT)
        lease = db.grant(1.0)
        db.put("k", "v", lease=lease)
        clock.advance(1.5)
        first = next(expired)
        assert [e.id for e in first] == [lease.id] and first[0].keys == [b"k"]
        # Still held: the key exists, renew refuses it (L5), time_to_live still knows it.
        assert db.get("k") is not None
        with pytest.raises(tenure.LeaseExpired):
            db.renew(lease)
        # Not revoked within the retry interval: delivered again (L12).
        clock.advance(2.5)
        again = next(expired)
        assert [e.id for e in again] == [lease.id]
        db.revoke(lease)
        assert db.get("k") is None
        clock.advance(10.0)
        with pytest.raises(tenure.Timeout):
            expired.recv(timeout=0.2)


def test_next_with_timeout_raises_timeout_also_a_timeout_error(db: tenure.Tenure) -> None:
    it = db.expired(timeout=0.05)
    with pytest.raises(tenure.Timeout) as exc:
        next(it)
    assert isinstance(exc.value, TimeoutError)


def test_timeout_zero_polls(db: tenure.Tenure, clock: tenure.ManualClock) -> None:
    with pytest.raises(tenure.Timeout):
        next(db.expired(timeout=0))
    lease = db.grant(1.0)
    it = db.expired(timeout=WAIT)
    clock.advance(2.0)
    assert [e.id for e in next(it)] == [lease.id]


def test_negative_timeout_raises_invalid_argument(db: tenure.Tenure) -> None:
    with pytest.raises(tenure.InvalidArgument):
        db.expired(timeout=-1.0)


def test_iteration_stops_when_the_engine_closes(clock: tenure.ManualClock) -> None:
    db = tenure.open(clock=clock)
    it = db.expired()
    got: list[object] = []
    done = threading.Event()

    def consume() -> None:
        for batch in it:  # blocks without a timeout
            got.append(batch)
        done.set()

    t = threading.Thread(target=consume)
    t.start()
    db.close()
    assert done.wait(WAIT), "the iterator did not stop on close"
    t.join(WAIT)
    assert got == []
    with pytest.raises(tenure.Closed):
        it.recv(timeout=0.1)


def test_a_waiting_iterator_receives_from_another_thread(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    result: list[list[tenure.ExpiredLease]] = []
    it = db.expired(timeout=WAIT)
    t = threading.Thread(target=lambda: result.append(next(it)))
    t.start()
    lease = db.grant(1.0)
    clock.advance(1.5)
    t.join(WAIT)
    assert [e.id for e in result[0]] == [lease.id]


def test_the_iterator_keeps_the_engine_open(clock: tenure.ManualClock) -> None:
    it = tenure.open(clock=clock).expired(timeout=0.1)
    # The handle itself is gone; the iterator still holds the engine: no StopIteration.
    with pytest.raises(tenure.Timeout):
        next(it)


def test_l16_metrics_text_shows_an_expiry_and_its_lateness(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    expired = db.expired(timeout=WAIT)
    db.grant(1.0)
    clock.advance(1.3)  # found due 300 ms after its deadline
    next(expired)
    lines = db.metrics_text().splitlines()
    assert "tenure_leases_expired_total 1" in lines
    assert 'tenure_expiry_lateness_seconds_bucket{le="0.25"} 0' in lines
    assert 'tenure_expiry_lateness_seconds_bucket{le="0.5"} 1' in lines
    assert "tenure_expiry_lateness_seconds_count 1" in lines
