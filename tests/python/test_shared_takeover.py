"""A change of owner seen from a surviving process (SPEC P5, P15, P16), sync and asyncio: the
owner is a child interpreter (shared_child.py own), killed with SIGKILL; this process is the
only other one, so it takes the file over. Its watch sees every event once, in order (the
revisions of its puts, contiguous), and its session keeps its lease and its lock past several
TTLs with the new owner serving."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest

import tenure
from conftest import WAIT
from test_shared import child

TTL = 2.0
# Three TTLs with the new owner serving: the lease lives only if it is renewed there.
KEPT_FOR = 3 * TTL


def test_p5_p15_p16_a_survivor_takes_over_with_its_watch_and_its_lock(path: Path) -> None:
    with child("own", str(path)) as (p, report):
        assert report["owner"] is True
        with tenure.open(path, shared=True) as db:
            assert db.stats()["owner"] is False
            w = db.watch("w/", prefix=True)
            with db.session(ttl=TTL) as s, s.lock("jobs", timeout=WAIT) as guard:
                for i in range(5):
                    db.put(f"w/{i}", "before")
                p.kill()
                p.wait()
                killed = time.monotonic()
                # Calls wait through the change of owner (P14) and succeed.
                for i in range(5, 10):
                    db.put(f"w/{i}", "after")
                assert db.stats()["owner"] is True
                revs = [w.recv(timeout=WAIT).revision for _ in range(10)]
                assert revs == list(range(revs[0], revs[0] + 10)), revs
                checks = 0
                while time.monotonic() - killed < KEPT_FOR:
                    assert not s.done
                    with db.session(ttl=TTL) as other, pytest.raises(tenure.Locked):
                        other.mutex("jobs").try_lock()
                    checks += 1
                assert checks > 0
                assert db.time_to_live(s.lease_id).ttl > 0
                assert guard.is_held()


def test_p5_p15_p16_asyncio_a_survivor_takes_over_with_its_watch_and_its_lock(
    path: Path,
) -> None:
    async def main(p: subprocess.Popen[str]) -> None:
        async with tenure.aio.open(path, shared=True) as db:
            assert (await db.stats())["owner"] is False
            w = db.watch("w/", prefix=True)
            async with db.session(ttl=TTL) as s, s.lock("jobs", timeout=WAIT) as guard:
                for i in range(5):
                    await db.put(f"w/{i}", "before")
                p.kill()
                await asyncio.to_thread(p.wait)
                killed = time.monotonic()
                for i in range(5, 10):
                    await db.put(f"w/{i}", "after")
                assert (await db.stats())["owner"] is True
                revs = [(await w.recv(timeout=WAIT)).revision for _ in range(10)]
                assert revs == list(range(revs[0], revs[0] + 10)), revs
                checks = 0
                while time.monotonic() - killed < KEPT_FOR:
                    assert not s.done
                    async with db.session(ttl=TTL) as other:
                        with pytest.raises(tenure.Locked):
                            await other.mutex("jobs").try_lock()
                    checks += 1
                assert checks > 0
                assert guard.is_held()

    with child("own", str(path)) as (p, report):
        assert report["owner"] is True
        asyncio.run(main(p))
