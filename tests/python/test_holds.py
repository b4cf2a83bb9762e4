"""Bounded holds of the mutex (SPEC S9) from Python, sync and asyncio: `lock_delay` after a
holder's session ends without unlocking, never after a voluntary unlock; `max_hold` ending a
hold while its session lives. Embedded tests move a ManualClock; the `everywhere` ones measure
short real durations. Results of other threads arrive on queues; nothing sleeps."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

import pytest

import tenure
import tenure.aio
from conftest import WAIT, wait_until


def queued_and_watching(db: tenure.Tenure, embedded: bool, before: int) -> Callable[[], bool]:
    """b's entry is in the queue and, embedded, b watches its own entry and the one ahead (two
    more watchers than ``before``), so the holder's end cannot fall between b's put and b's
    first look: an in-memory engine keeps no history to read that look at b's own revision;
    remote places do (SPEC S9)."""
    return lambda: len(db.range("m/")) == 2 and (
        not embedded or db.stats()["watchers"] >= before + 2
    )


def lock_in_thread(s: tenure.Session, **opts: float) -> queue.Queue[object]:
    q: queue.Queue[object] = queue.Queue()

    def run() -> None:
        try:
            q.put(s.lock("m", timeout=WAIT, **opts))
        except BaseException as e:  # noqa: BLE001 - handed to the test
            q.put(e)

    threading.Thread(target=run, daemon=True).start()
    return q


@pytest.mark.everywhere
def test_S9_lock_delay_holds_the_lock_back_after_an_involuntary_end_only(
    db: tenure.Tenure, place: str, request: pytest.FixtureRequest
) -> None:
    # Embedded, the engine runs on a ManualClock: time moves by hand there.
    clock: tenure.ManualClock | None = (
        request.getfixturevalue("clock") if place == "embedded" else None
    )
    a, b = db.session(ttl=30), db.session(ttl=30)
    held = a.lock("m", timeout=WAIT)
    before = db.stats()["watchers"] if clock is not None else 0
    waiting = lock_in_thread(b, lock_delay=0.4)
    wait_until(queued_and_watching(db, clock is not None, before))
    ended = time.monotonic()
    db.revoke(a.lease_id)  # a's session ends without unlocking
    moved = 0.0
    while clock is not None and waiting.empty() and moved < 5.0:
        clock.advance(0.05)
        moved += 0.05
        time.sleep(0.001)  # lets b's wait run; the bound below does not depend on it
    gb = waiting.get(timeout=WAIT)
    assert isinstance(gb, tenure.LockGuard), gb
    if clock is None:
        assert time.monotonic() - ended >= 0.4
    else:
        assert moved >= 0.4 - 1e-9
    assert gb.fencing_token > held.fencing_token

    # A voluntary unlock, even with the session closed right after: no delay (an hour's
    # delay would outlast the wait).
    c = db.session(ttl=30)
    waiting = lock_in_thread(c, lock_delay=3600.0)
    wait_until(lambda: len(db.range("m/")) == 2)
    gb.unlock()
    b.close()  # at once: b's lock_delay marked its unlock "released"
    gc_ = waiting.get(timeout=WAIT)
    assert isinstance(gc_, tenure.LockGuard), gc_
    gc_.unlock()
    c.close()


@pytest.mark.everywhere
def test_S9_options_must_be_positive_seconds(db: tenure.Tenure) -> None:
    s = db.session(ttl=30)
    for kwargs, named in [
        ({"lock_delay": 0.0}, "lock_delay"),
        ({"max_hold": -1.0}, "max_hold"),
        ({"max_hold": float("inf")}, "max_hold"),
    ]:
        with pytest.raises(tenure.InvalidArgument, match=named):
            s.mutex("m", **kwargs)
        with pytest.raises(tenure.InvalidArgument, match=named):
            s.lock("m", timeout=0.0, **kwargs)
    assert db.range("m/") == []
    s.close()


def test_S9_max_hold_ends_the_hold_on_the_engine_clock(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    a, b = db.session(ttl=60), db.session(ttl=60)
    with a.mutex("m", max_hold=10.0).lock(timeout=WAIT) as g:
        clock.advance(9.999)
        assert g.is_held()
        clock.advance(0.001)
        wait_until(lambda: not g.is_held())
        wait_until(lambda: db.range("m/") == [])
    assert not a.done, "the hold ended, not the session"
    with pytest.raises(tenure.NotLeader):
        g.unlock()
    gb = b.mutex("m").try_lock()
    assert gb.fencing_token > g.fencing_token
    gb.unlock()


def test_S9_lock_delay_counts_on_the_engine_clock(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    a, b = db.session(ttl=60), db.session(ttl=60)
    held = a.lock("m", timeout=WAIT)
    before = db.stats()["watchers"]
    waiting = lock_in_thread(b, lock_delay=5.0)
    wait_until(queued_and_watching(db, True, before))
    db.revoke(a.lease_id)
    # Time moves in 0.1 s steps until b has the lock: never before 5 s have passed (b's 60 s
    # lease outlives the at most 30 s moved).
    moved = 0.0
    while waiting.empty() and moved < 30.0:
        clock.advance(0.1)
        moved += 0.1
        time.sleep(0.001)  # lets b's wait run; the bound below does not depend on it
    gb = waiting.get(timeout=WAIT)
    assert isinstance(gb, tenure.LockGuard), gb
    assert moved >= 5.0 - 1e-9
    assert gb.fencing_token > held.fencing_token


@pytest.mark.asyncio
async def test_S9_aio_lock_and_mutex_take_the_options(clock: tenure.ManualClock) -> None:
    async with tenure.aio.open(clock=clock) as adb, adb.session(ttl=60.0) as s:
        with pytest.raises(tenure.InvalidArgument, match="lock_delay"):
            s.mutex("m", lock_delay=0.0)
        g = await s.lock("m", timeout=WAIT, max_hold=10.0)
        assert g.is_held()
        clock.advance(10.0)
        wait_until(lambda: not g.is_held())
        async with s.lock("m", timeout=WAIT, lock_delay=1.0) as g2:
            assert g2.fencing_token > g.fencing_token
        assert await adb.range("m/") == []
