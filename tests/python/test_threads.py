"""Many Python threads on one handle, and the GIL released while the engine blocks."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tenure
from conftest import WAIT


def test_many_threads_share_one_durable_handle(path: Path) -> None:
    threads, per_thread = 8, 50
    with tenure.open(path) as db:

        def work(t: int) -> list[int]:
            lease = db.grant(60.0)
            revs = [db.put(f"t{t}/{i}", str(i), lease=lease) for i in range(per_thread)]
            assert db.get(f"t{t}/0") is not None
            return revs

        with ThreadPoolExecutor(threads) as pool:
            all_revs = [r for revs in pool.map(work, range(threads)) for r in revs]
        # Every write got its own revision; concurrent writers share fsyncs (group commit).
        assert len(set(all_revs)) == threads * per_thread
        assert db.stats()["keys"] == threads * per_thread
        assert len(db.leases()) == threads
    with tenure.open(path) as db:
        assert len(db.range("t")) == threads * per_thread


def test_concurrent_transactions_on_one_key_are_serialised(db: tenure.Tenure) -> None:
    db.put("counter", "0")

    def increment() -> None:
        while True:
            kv = db.get("counter")
            assert kv is not None
            r = db.txn(
                compare=[tenure.txn.mod_revision("counter") == kv.mod_revision],
                success=[tenure.txn.put("counter", str(int(kv.value) + 1))],
            )
            if r.succeeded:
                return

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: increment(), range(100)))
    assert db.get("counter").value == b"100"  # type: ignore[union-attr]


def test_a_thread_blocked_in_a_wait_does_not_hold_the_gil(db: tenure.Tenure) -> None:
    # The waiter blocks up to WAIT seconds; if it held the GIL, this thread could not run
    # Python code (the put that wakes it) until the wait ended.
    w = db.watch("k", timeout=WAIT)
    got: list[tenure.Event] = []
    t = threading.Thread(target=lambda: got.append(next(w)))
    start = time.monotonic()
    t.start()
    spins = 0
    while spins < 1000:  # plain Python work while the other thread waits
        spins += 1
    db.put("k", "v")
    t.join(WAIT)
    assert got and got[0].kv.value == b"v"
    assert time.monotonic() - start < WAIT / 2


def test_other_threads_run_python_code_during_a_timed_wait(db: tenure.Tenure) -> None:
    stop = threading.Event()
    ticks = [0]

    def tick() -> None:
        while not stop.is_set():
            ticks[0] += 1

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        before = ticks[0]
        with db.watch("k") as w:
            try:
                w.recv(timeout=0.3)
            except tenure.Timeout:
                pass
        during = ticks[0] - before
    finally:
        stop.set()
        ticker.join(WAIT)
    # Holding the GIL for the whole wait would allow no tick at all.
    assert during > 1000


def test_one_expired_iterator_shared_by_threads_delivers_each_batch_once(
    db: tenure.Tenure, clock: tenure.ManualClock
) -> None:
    it = db.expired(timeout=1.0)
    seen: list[int] = []
    lock = threading.Lock()

    def drain() -> None:
        try:
            while True:
                batch = next(it)
                with lock:
                    seen.extend(e.id for e in batch)
        except tenure.Timeout:
            pass

    ids = [db.grant(float(1 + i % 3)).id for i in range(30)]
    workers = [threading.Thread(target=drain) for _ in range(3)]
    for w in workers:
        w.start()
    clock.advance(5.0)
    for w in workers:
        w.join(WAIT)
    assert sorted(seen) == sorted(ids)
