"""SPEC S11: barriers and double barriers from Python (sync and asyncio), in all three places."""

from __future__ import annotations

import asyncio
import threading

import pytest

import tenure
import tenure.aio

WAIT = 10.0


@pytest.mark.everywhere
def test_s11_a_barrier_holds_its_waiters_until_released(db: tenure.Tenure) -> None:
    gate = db.barrier("deploy")
    assert gate.name == "deploy"
    gate.wait(timeout=WAIT)  # free: passes at once
    assert gate.hold() is True
    assert gate.hold() is False
    assert gate.is_held()
    with pytest.raises(tenure.Timeout):
        gate.wait(timeout=0.05)
    errors: list[BaseException] = []

    def waiter() -> None:
        try:
            gate.wait(timeout=WAIT)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    gate.release()
    t.join(timeout=WAIT)
    assert not t.is_alive() and errors == []
    assert not gate.is_held()


@pytest.mark.everywhere
def test_s11_a_double_barrier_lets_its_participants_in_and_out_together(
    db: tenure.Tenure,
) -> None:
    n = 3
    arrived: list[int] = []
    seen: list[tuple[int, int]] = []
    leaving: list[int] = []
    lock = threading.Lock()

    def participant(i: int) -> None:
        with db.session(ttl=30) as s:
            b = s.double_barrier("batch", n)
            assert b.count == n
            with lock:
                arrived.append(i)
            b.enter(timeout=WAIT)
            with lock:
                in_count = len(arrived)
                leaving.append(i)
            b.leave(timeout=WAIT)
            with lock:
                seen.append((in_count, len(leaving)))

    threads = [threading.Thread(target=participant, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert seen == [(n, n)] * n
    assert db.range("batch/") == []


def test_s11_double_barrier_misuse(db: tenure.Tenure) -> None:
    with db.session() as s:
        with pytest.raises(tenure.InvalidArgument):
            s.double_barrier("b", 0)
        b = s.double_barrier("b", 2)
        with pytest.raises(tenure.InvalidArgument, match="leave before enter"):
            b.leave(timeout=1)
        with pytest.raises(tenure.Timeout):
            b.enter(timeout=0.05)
        assert db.range("b/") == []


@pytest.mark.everywhere
def test_s11_asyncio_barriers(db: tenure.Tenure) -> None:
    async def main() -> None:
        adb = tenure.aio.Tenure(db)
        gate = adb.barrier("agate")
        assert await gate.hold()
        waiting = asyncio.ensure_future(gate.wait(timeout=WAIT))
        await gate.release()
        await waiting
        assert await gate.hold()
        with pytest.raises(tenure.Timeout):
            await gate.wait(timeout=0.05)
        s = db.session(ttl=30)
        try:
            b = tenure.aio.Session(s).double_barrier("abatch", 1)
            await b.enter(timeout=WAIT)
            await b.leave(timeout=WAIT)
        finally:
            s.close()

    asyncio.run(main())


def test_s11_asyncio_a_cancelled_double_barrier_wait_ends_at_once(db: tenure.Tenure) -> None:
    """Neither wait has a timeout: the cancellation alone ends them (the entry is withdrawn
    before the cancellation completes)."""

    async def main() -> None:
        adb = tenure.aio.Tenure(db)
        async with adb.session(ttl=30) as a, adb.session(ttl=30) as b:
            entering = asyncio.ensure_future(a.double_barrier("cb", 2).enter())
            while len(await adb.range("cb/waiters/")) < 1:
                await asyncio.sleep(0.001)
            entering.cancel()
            with pytest.raises(asyncio.CancelledError):
                await entering
            assert await adb.range("cb/") == []

            # b enters first, so a is not the lowest entry: its leave deletes its own key, then
            # waits for b's.
            pa, pb = a.double_barrier("cb", 2), b.double_barrier("cb", 2)
            entering = asyncio.ensure_future(pb.enter(timeout=WAIT))
            while len(await adb.range("cb/waiters/")) < 1:
                await asyncio.sleep(0.001)
            await pa.enter(timeout=WAIT)
            await entering
            leaving = asyncio.ensure_future(pa.leave())
            while len(await adb.range("cb/waiters/")) > 1:
                await asyncio.sleep(0.001)
            leaving.cancel()
            with pytest.raises(asyncio.CancelledError):
                await leaving
            await pb.leave(timeout=WAIT)
            await pa.leave(timeout=WAIT)
            assert await adb.range("cb/") == []

    asyncio.run(main())
