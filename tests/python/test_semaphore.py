"""The counting semaphore (SPEC S7) from Python, sync and asyncio: permits, FIFO admission,
`Locked` when full, a mismatched permit count, a holder whose session ends or stops
renewing. Results of other threads arrive on queues; nothing sleeps."""

from __future__ import annotations

import asyncio
import queue
import threading

import pytest

import tenure
import tenure.aio
from conftest import WAIT, wait_until


def acquire_in_thread(s: tenure.Session, permits: int) -> queue.Queue[object]:
    q: queue.Queue[object] = queue.Queue()

    def run() -> None:
        try:
            q.put(s.semaphore("pool", permits).acquire(timeout=WAIT))
        except BaseException as e:  # noqa: BLE001 - handed to the test
            q.put(e)

    threading.Thread(target=run, daemon=True).start()
    return q


@pytest.mark.everywhere
def test_S7_permits_fifo_locked_when_full_and_released_by_the_context_manager(
    db: tenure.Tenure,
) -> None:
    a, b, c = db.session(ttl=30), db.session(ttl=30), db.session(ttl=30)
    with a.semaphore("pool", 2).acquire(timeout=WAIT) as ga:
        gb = b.semaphore("pool", 2).try_acquire()
        assert ga.is_held() and gb.fencing_token > ga.fencing_token
        with pytest.raises(tenure.Locked):
            c.semaphore("pool", 2).try_acquire()
        waiting = acquire_in_thread(c, 2)
        wait_until(lambda: len(db.range("pool/")) == 3)
    gc_ = waiting.get(timeout=WAIT)
    assert isinstance(gc_, tenure.SemaphoreGuard) and gc_.fencing_token > gb.fencing_token
    assert not ga.is_held()
    with pytest.raises(tenure.NotLeader):
        ga.release()
    gb.release()
    gc_.release()
    assert db.range("pool/") == []
    for s in (a, b, c):
        s.close()


@pytest.mark.everywhere
def test_S7_a_mismatched_permit_count_names_both_and_a_closed_holder_frees_its_permit(
    db: tenure.Tenure,
) -> None:
    a, b = db.session(ttl=30), db.session(ttl=30)
    held = a.semaphore("pool", 1).acquire(timeout=WAIT)
    with pytest.raises(tenure.InvalidArgument, match="has 1 permits.*not 2"):
        b.semaphore("pool", 2).acquire(timeout=WAIT)
    with pytest.raises(tenure.InvalidArgument):
        b.semaphore("pool", 0)
    waiting = acquire_in_thread(b, 1)
    wait_until(lambda: len(db.range("pool/")) == 2)
    a.close()  # the holder's session ends without releasing
    got = waiting.get(timeout=WAIT)
    assert isinstance(got, tenure.SemaphoreGuard) and got.is_held()
    assert not held.is_held()
    got.release()
    b.close()


def test_S7_a_holder_that_stops_renewing_frees_its_permit_when_its_lease_expires() -> None:
    """As a crashed holder process: its session stops renewing (orphan), and the engine's
    expiry of the lease (a ManualClock step past the TTL) hands the permit to the waiter."""
    clock = tenure.ManualClock()
    with tenure.open(clock=clock) as db:
        holder, b = db.session(ttl=5), db.session(ttl=60)
        held = holder.semaphore("pool", 1).acquire(timeout=WAIT)
        holder.orphan()
        waiting = acquire_in_thread(b, 1)
        wait_until(lambda: len(db.range("pool/")) == 2)
        clock.advance(6)
        got = waiting.get(timeout=WAIT)
        assert isinstance(got, tenure.SemaphoreGuard) and got.is_held()
        assert not held.is_held()
        got.release()


@pytest.mark.asyncio
async def test_S7_asyncio_acquire_async_with_and_cancellation_leaves_no_key() -> None:
    async with tenure.aio.open() as adb:
        async with adb.session(ttl=30) as a, adb.session(ttl=30) as b:
            sem_a, sem_b = a.semaphore("pool", 1), b.semaphore("pool", 1)
            async with sem_a.acquiring(WAIT) as g:
                assert g.is_held() and g.fencing_token > 0
                with pytest.raises(tenure.Locked):
                    await sem_b.try_acquire()
                waiter = asyncio.create_task(sem_b.acquire())
                while len(await adb.range("pool/")) < 2:
                    await asyncio.sleep(0.001)
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter
                assert [kv.key for kv in await adb.range("pool/")] == [g.key]
            assert not g.is_held()
            async with await sem_b.acquire(timeout=WAIT) as gb:
                assert gb.is_held()
            assert await adb.range("pool/") == []
