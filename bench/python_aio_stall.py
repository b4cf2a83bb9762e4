#!/usr/bin/env python3
"""Event-loop stall of tenure.aio while N leases (default 10 000) expire at once.

A ticker task sleeps 1 ms in a loop and records how much later than asked each wake-up came;
meanwhile an `async for` over `db.expired()` receives every batch. The clock is a ManualClock
advanced past every TTL at once, so the whole expiry happens during the measurement. Reported:
the worst and p99 lateness with the expiry, and the same ticker alone (the machine's noise);
and the longest the loop thread itself was busy between two ticks (its CPU time: what the loop
ran, without the time the OS gave other threads or processes).
Run: `build/venv-wheel/bin/python bench/python_aio_stall.py` after `make test-python` (the
release abi3 wheel is installed there).
"""
import argparse
import asyncio
import time

import tenure
import tenure.aio


async def measure(n: int, expire: bool) -> tuple[list[float], float]:
    clock = tenure.ManualClock()
    async with tenure.aio.open(clock=clock) as db:
        for _ in range(n):
            db.sync.grant(1.0)
        it = db.expired(timeout=30.0)
        loop = asyncio.get_running_loop()
        late: list[float] = []
        busy = 0.0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal busy
            last, cpu = loop.time(), time.thread_time()
            while not stop.is_set():
                await asyncio.sleep(0.001)
                now, cpu_now = loop.time(), time.thread_time()
                late.append(now - last - 0.001)
                busy = max(busy, cpu_now - cpu)
                last, cpu = now, cpu_now

        t = asyncio.create_task(ticker())
        await asyncio.sleep(0.02)
        if expire:
            clock.advance(2.0)
            count = 0
            async for batch in it:
                count += len(batch)
                if count >= n:
                    break
        else:
            await asyncio.sleep(0.2)
        stop.set()
        await t
        return sorted(late), busy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--leases", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    for expire in (True, False):
        for _ in range(a.runs):
            late, busy = asyncio.run(measure(a.leases, expire))
            p99 = late[int(len(late) * 0.99)]
            what = f"{a.leases} leases expiring" if expire else "idle (ticker alone)"
            print(
                f"{what}: ticks {len(late)}, worst {late[-1]*1e3:.2f} ms, p99 {p99*1e3:.2f} ms, "
                f"loop busy at most {busy*1e3:.2f} ms"
            )


if __name__ == "__main__":
    main()
