"""Several processes on one file, `tenure.open(path, shared=True)` (SPEC P18-P21): the other
processes are child interpreters running shared_child.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import tenure
from conftest import PYTHON, WAIT, python_env

CHILD = Path(__file__).with_name("shared_child.py")


# SPEC P20: a dead holder's lock is taken by the next waiter within this many seconds.
DEATH_TO_LOCK = 0.1
# The holder's session TTL: far above DEATH_TO_LOCK, so a lock taken within that was freed by
# the death; short enough that a run without it ends soon.
HOLDER_TTL = 5.0


def run_child(*args: str) -> dict[str, Any]:
    """Runs shared_child.py to its end; its JSON report."""
    done = subprocess.run(
        [PYTHON, str(CHILD), *args],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return report


@contextmanager
def child(*args: str) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """Starts shared_child.py, waits for its report line; on exit closes its stdin (it ends)
    or, if it is still running after that, kills it."""
    p = subprocess.Popen(
        [PYTHON, str(CHILD), *args],
        env=python_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None and p.stdin is not None
    try:
        line = p.stdout.readline()
        assert line, f"child {args} ended without a report (exit {p.wait(WAIT)})"
        yield p, json.loads(line)
    finally:
        if p.poll() is None:
            p.stdin.close()
            try:
                p.wait(WAIT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_p18_shared_is_off_by_default_and_an_engine_owns_its_file(path: Path) -> None:
    with tenure.open() as db:
        assert db.stats()["owner"] is True
    with tenure.open(path) as db:
        assert db.stats()["owner"] is True
    with pytest.raises(tenure.InvalidArgument, match="shared"):
        tenure.open(shared=True)


def test_p18_two_processes_see_one_database(path: Path) -> None:
    with tenure.open(path, shared=True) as db:
        assert db.stats()["owner"] is True
        db.put("shared/a", "from the owner")
        report = run_child("see", str(path))
        assert report["owner"] is False
        assert report["a"] == "from the owner"
        kv = db.get("shared/b")
        assert kv is not None and kv.value == b"from a non-owner"


def test_p18_engine_only_calls_in_a_non_owner_are_unsupported_naming_the_call(
    path: Path,
) -> None:
    with tenure.open(path, shared=True):
        report = run_child("see", str(path))
    assert "promote" in report["promote"]
    assert "demote" in report["demote"]
    assert "expired" in report["expired"]
    assert "checkpoint" in report["checkpoint"]


def test_p18_this_process_as_the_non_owner(path: Path) -> None:
    with child("own", str(path)) as (_, report):
        assert report["owner"] is True
        with tenure.open(path, shared=True) as db:
            assert db.stats()["owner"] is False
            rev = db.put("k", "v")
            kv = db.get("k")
            assert kv is not None and kv.value == b"v" and kv.mod_revision == rev
            with pytest.raises(tenure.Unsupported, match="promote"):
                db.promote()
            with pytest.raises(tenure.Unsupported, match="expired"):
                db.expired()
            # Coordination works through the owner.
            with db.session(ttl=10.0) as s, s.lock("jobs/1", timeout=WAIT) as guard:
                assert guard.fencing_token > rev


def test_p18_asyncio_two_processes_see_one_database(path: Path) -> None:
    async def main() -> None:
        async with tenure.aio.open(path, shared=True) as db:
            assert (await db.stats())["owner"] is True
            await db.put("shared/a", "from the owner")
            report = await asyncio.to_thread(run_child, "see-aio", str(path))
            assert report == {"owner": False, "a": "from the owner", "promote": report["promote"]}
            assert "promote" in report["promote"]
            kv = await db.get("shared/b")
            assert kv is not None and kv.value == b"from a non-owner (asyncio)"

    asyncio.run(main())


def test_p18_asyncio_this_process_as_the_non_owner(path: Path) -> None:
    async def main() -> None:
        async with tenure.aio.open(path, shared=True) as db:
            assert (await db.stats())["owner"] is False
            await db.put("k", "v")
            kv = await db.get("k")
            assert kv is not None and kv.value == b"v"
            with pytest.raises(tenure.Unsupported, match="demote"):
                await db.demote()
            async with db.session(ttl=10.0) as s:
                async with s.lock("jobs/1", timeout=WAIT) as guard:
                    assert guard.fencing_token > 0

    with child("own", str(path)):
        asyncio.run(main())


def test_p19_a_second_plain_open_names_shared_true_and_tenure_serve(path: Path) -> None:
    with tenure.open(path):
        error = run_child("plain", str(path))["error"]
    assert "shared=True" in error
    assert "tenure serve" in error
    # The same when the file is open in shared mode.
    with tenure.open(path, shared=True):
        error = run_child("plain", str(path))["error"]
    assert "shared=True" in error


def test_p20_a_lock_held_by_a_killed_process_is_taken_within_100_ms(path: Path) -> None:
    with tenure.open(path, shared=True) as db, child(
        "hold", str(path), "jobs/m", str(HOLDER_TTL)
    ) as (holder, held):
        assert held["owner"] is False
        taken: dict[str, Any] = {}
        with db.watch("jobs/m/", prefix=True) as queued, db.session(ttl=10.0) as s:

            def wait() -> None:
                guard = s.lock("jobs/m", timeout=WAIT)
                taken["at"] = time.monotonic()
                taken["token"] = guard.fencing_token
                guard.unlock()

            t = threading.Thread(target=wait)
            t.start()
            # The waiter is queued once its key is under the lock's prefix.
            assert next(queued).type == "put"
            killed = time.monotonic()
            holder.send_signal(signal.SIGKILL)
            t.join(WAIT)
            assert not t.is_alive()
        assert taken["at"] - killed < DEATH_TO_LOCK, taken["at"] - killed
        assert taken["token"] > held["token"]
        assert holder.wait(WAIT) == -signal.SIGKILL


def test_p18_a_forked_child_keeps_neither_the_ownership_nor_the_socket(path: Path) -> None:
    db = tenure.open(path, shared=True)
    assert db.stats()["owner"] is True
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child only waits: it inherited the owner's descriptors
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    try:
        db.close()
        # With the child still alive, the next process to open the file owns it.
        with child("own", str(path)) as (_, report):
            assert report["owner"] is True
    finally:
        os.close(w)
        os.waitpid(pid, 0)
