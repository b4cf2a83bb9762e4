"""SPEC S10: queues and priority queues from Python (sync and asyncio), in all three places."""

from __future__ import annotations

import asyncio
import threading

import pytest

import tenure
import tenure.aio

WAIT = 10.0


@pytest.mark.everywhere
def test_s10_a_queue_is_fifo_and_try_dequeue_is_none_when_empty(db: tenure.Tenure) -> None:
    q = db.queue("jobs")
    assert q.name == "jobs"
    assert q.try_dequeue() is None
    for v in ("a", b"b", bytearray(b"c")):
        q.enqueue(v)
    assert [q.dequeue(timeout=WAIT) for _ in range(3)] == [b"a", b"b", b"c"]
    with pytest.raises(tenure.Timeout):
        q.dequeue(timeout=0.05)
    assert db.range("jobs/") == []


@pytest.mark.everywhere
def test_s10_a_priority_queue_serves_lower_priorities_first(db: tenure.Tenure) -> None:
    q = db.priority_queue("pq")
    q.enqueue("later", 5)
    q.enqueue("first", 0)
    q.enqueue("second", 0)
    assert db.get("pq/00000/0000000000000001") is not None  # etcd's layout
    assert [q.dequeue(timeout=WAIT) for _ in range(3)] == [b"first", b"second", b"later"]
    with pytest.raises(tenure.InvalidArgument, match="65535"):
        q.enqueue("x", 70000)
    with pytest.raises(tenure.InvalidArgument):
        q.enqueue("x", -1)
    assert q.try_dequeue() is None


@pytest.mark.everywhere
def test_s10_each_item_goes_to_exactly_one_of_many_consumers(db: tenure.Tenure) -> None:
    total, consumers = 40, 4
    got: list[list[bytes]] = [[] for _ in range(consumers)]

    def consume(i: int) -> None:
        q = db.queue("work")
        while True:
            try:
                got[i].append(q.dequeue(timeout=0.5))
            except tenure.Timeout:
                if sum(map(len, got)) >= total:
                    return

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    producer = db.queue("work")
    for i in range(total):
        producer.enqueue(f"item-{i}")
    for t in threads:
        t.join(timeout=60)
    items = [v for g in got for v in g]
    assert len(items) == total
    assert sorted(items) == sorted(f"item-{i}".encode() for i in range(total))


@pytest.mark.everywhere
def test_s10_asyncio_dequeue_waits_and_a_cancelled_one_takes_nothing(db: tenure.Tenure) -> None:
    async def main() -> None:
        adb = tenure.aio.Tenure(db)
        q = adb.queue("aq")
        waiting = asyncio.ensure_future(q.dequeue(timeout=WAIT))
        await q.enqueue("hello")
        assert await waiting == b"hello"
        cancelled = asyncio.ensure_future(q.dequeue())
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        await q.enqueue("kept")
        assert await q.try_dequeue() == b"kept"
        pq = adb.priority_queue("apq")
        await pq.enqueue("low", 9)
        await pq.enqueue("high", 1)
        assert await pq.dequeue(timeout=WAIT) == b"high"
        assert await pq.dequeue(timeout=WAIT) == b"low"

    asyncio.run(main())
