"""The read-write lock (SPEC S8) from Python, sync and asyncio: shared readers, a writer alone,
FIFO (a waiting writer holds later readers back), a holder whose session ends. Results of other
threads arrive on queues; nothing sleeps."""

from __future__ import annotations

import asyncio
import queue
import threading

import pytest

import tenure
import tenure.aio
from conftest import WAIT, wait_until


def in_thread(call: object) -> queue.Queue[object]:
    q: queue.Queue[object] = queue.Queue()

    def run() -> None:
        try:
            q.put(call())  # type: ignore[operator]
        except BaseException as e:  # noqa: BLE001 - handed to the test
            q.put(e)

    threading.Thread(target=run, daemon=True).start()
    return q


@pytest.mark.everywhere
def test_S8_readers_share_a_writer_is_alone_and_later_readers_wait_behind_it(
    db: tenure.Tenure,
) -> None:
    a, b, c = db.session(ttl=30), db.session(ttl=30), db.session(ttl=30)
    with a.rwlock("cfg").read(timeout=WAIT) as r1:
        assert not r1.is_write and r1.is_held()
        with b.rwlock("cfg").try_read():
            with pytest.raises(tenure.Locked):
                c.rwlock("cfg").try_write()
        writer = in_thread(lambda: c.rwlock("cfg").write(timeout=WAIT))
        wait_until(lambda: len(db.range("cfg/write/")) == 1)
        with pytest.raises(tenure.Locked):
            b.rwlock("cfg").try_read()  # a writer waits before it
    w = writer.get(timeout=WAIT)
    assert isinstance(w, tenure.RwLockGuard) and w.is_write and w.is_held()
    w.unlock()
    with pytest.raises(tenure.NotLeader):
        w.unlock()
    assert db.range("cfg/") == []
    for s in (a, b, c):
        s.close()


@pytest.mark.everywhere
def test_S8_a_reader_whose_session_ends_frees_the_lock_for_a_writer(db: tenure.Tenure) -> None:
    a, b = db.session(ttl=30), db.session(ttl=30)
    r = a.rwlock("cfg").read(timeout=WAIT)
    writer = in_thread(lambda: b.rwlock("cfg").write(timeout=WAIT))
    wait_until(lambda: len(db.range("cfg/")) == 2)
    a.close()
    w = writer.get(timeout=WAIT)
    assert isinstance(w, tenure.RwLockGuard) and w.is_held()
    assert not r.is_held()
    w.unlock()
    b.close()


@pytest.mark.asyncio
async def test_S8_asyncio_read_write_and_a_cancelled_wait_leaves_no_key() -> None:
    async with tenure.aio.open() as adb:
        async with adb.session(ttl=30) as a, adb.session(ttl=30) as b:
            async with await a.rwlock("cfg").read(timeout=WAIT) as r:
                async with await b.rwlock("cfg").read(timeout=WAIT):
                    assert r.is_held()
                waiter = asyncio.create_task(b.rwlock("cfg").write())
                while len(await adb.range("cfg/")) < 2:
                    await asyncio.sleep(0.001)
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter
                assert [kv.key for kv in await adb.range("cfg/")] == [r.key]
            async with await b.rwlock("cfg").write(timeout=WAIT) as w:
                assert w.is_write
            assert await adb.range("cfg/") == []
