"""An asyncio service on tenure.aio: registration with a TTL key, a leader for a periodic job,
and reacting to peers that expire.

Three instances of a service run as tasks on one engine (in a real deployment, one process
each behind `tenure serve`). Each registers `services/<name>` on its session's lease and
campaigns for `periodic-job`; the leader runs the job. Instance `a` then "crashes": its
session stops renewing, so its registration and its leadership expire after the TTL. A watch
on `services/` reacts to the expiry; `b` takes over the job. The demo ends
by itself once `b` has run the job, cancelling `c`'s campaign (which withdraws its candidacy).

Run: python examples/python/asyncio_service.py [path]   (no path: in memory)
"""

from __future__ import annotations

import asyncio
import sys

import tenure
import tenure.aio

TTL = 2.0  # seconds; the crashed instance is gone this long after its last renewal
RUNS = 3


async def instance(
    db: tenure.aio.Tenure, name: str, done: asyncio.Event, finish: asyncio.Event
) -> None:
    session = await db.session(ttl=TTL)
    await db.put(f"services/{name}", f"{name}.local:8080", lease=session.lease_id)
    print(f"{name}: registered")
    try:
        lead = await session.election("periodic-job").campaign(name)
        print(f"{name}: leads periodic-job (token {lead.fencing_token})")
        for run in range(1, RUNS + 1):
            print(f"{name}: job run {run}")
            await asyncio.sleep(0.05)
        if name == "a":
            session.sync.orphan()  # a crash: renewals stop, everything expires after the TTL
            print("a: crashed")
            await finish.wait()  # still holding its (now expiring) objects
            return
        done.set()
        await finish.wait()
        await lead.resign()
    finally:
        if name != "a":
            await session.close()


async def watch_peers(db: tenure.aio.Tenure) -> None:
    async with db.watch("services/", prefix=True) as w:
        async for ev in w:
            if ev.type == "delete":
                print(f"peers: {ev.kv.key.decode()} is gone, dropping it from the pool")


async def main(path: str | None) -> int:
    async with tenure.aio.open(path) as db:
        done, finish = asyncio.Event(), asyncio.Event()
        watcher = asyncio.create_task(watch_peers(db))
        tasks = {}
        # Start the instances one by one, each once the previous one is a candidate, so that
        # they queue for the job in this order.
        async with db.watch("periodic-job/", prefix=True, timeout=30.0) as candidacies:
            for name in ("a", "b", "c"):
                tasks[name] = asyncio.create_task(instance(db, name, done, finish))
                await candidacies.recv()
        await asyncio.wait_for(done.wait(), 30.0)
        tasks["c"].cancel()  # c still campaigns: cancelling withdraws its candidacy
        await asyncio.gather(tasks["c"], return_exceptions=True)
        print(f"c: campaign cancelled, candidates left: {await candidates(db)}")
        finish.set()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    return 0


async def candidates(db: tenure.aio.Tenure) -> list[str]:
    return [kv.value.decode() for kv in await db.range("periodic-job/")]


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None)))
