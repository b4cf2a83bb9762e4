"""os.fork(): a child sees inherited handles as closed, never deadlocks on them, can open its
own database and does not keep the parent's file lock."""

from __future__ import annotations

import gc
import multiprocessing
import os
import subprocess
import textwrap
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

import tenure
from conftest import PYTHON, WAIT, python_env

ctx = multiprocessing.get_context("fork")


def run_in_child(target: Callable[[Connection], None]) -> object:
    """Runs `target(conn)` in a forked child and returns what it sent; fails on a hang."""
    parent, child = ctx.Pipe()
    p = ctx.Process(target=target, args=(child,))
    p.start()
    try:
        if not parent.poll(WAIT):
            pytest.fail("the child hung")
        result = parent.recv()
    finally:
        p.join(WAIT)
        if p.is_alive():
            p.kill()
            pytest.fail("the child did not exit")
    assert p.exitcode == 0
    return result


def outcome(call: Callable[[], object]) -> str:
    try:
        call()
        return "ok"
    except Exception as e:  # noqa: BLE001 - reported to the parent
        return type(e).__name__


def test_inherited_handles_raise_closed_in_the_child(path: Path) -> None:
    db = tenure.open(path)
    lease = db.grant(60.0)
    db.put("k", "v", lease=lease)
    w = db.watch("k")
    it = db.expired()

    def child(conn: Connection) -> None:
        conn.send(
            {
                "put": outcome(lambda: db.put("x", "y")),
                "get": outcome(lambda: db.get("k")),
                "grant": outcome(lambda: db.grant(1.0)),
                "renew": outcome(lambda: lease.renew()),
                "revision": outcome(lambda: db.revision),
                "stats": outcome(lambda: db.stats()),
                "keep_alive": outcome(lambda: lease.keep_alive()),
                "watch_next": outcome(lambda: w.recv(timeout=0.1)),
                "expired_next": outcome(lambda: it.recv(timeout=0.1)),
                "closed": db.closed,
                "close": outcome(db.close),
                "cancel": outcome(w.cancel),
            }
        )

    got = run_in_child(child)
    assert got == {
        "put": "Closed",
        "get": "Closed",
        "grant": "Closed",
        "renew": "Closed",
        "revision": "Closed",
        "stats": "Closed",
        "keep_alive": "Closed",
        "watch_next": "Closed",
        "expired_next": "Closed",
        "closed": True,
        "close": "ok",
        "cancel": "ok",
    }
    # The parent's handle is untouched.
    assert db.get("k") is not None and db.put("x", "y") > 0
    db.close()


def test_the_child_drops_inherited_objects_without_deadlock(path: Path) -> None:
    db = tenure.open(path)
    lease = db.grant(60.0)
    ka = lease.keep_alive()
    w = db.watch("k")
    it = db.expired()

    def child(conn: Connection) -> None:
        nonlocal db, lease, ka, w, it
        # The last references go: the engine, keep-alive, watcher and iterator are leaked,
        # never closed or joined (their threads do not exist here, their locks may be held).
        del db, lease, ka, w, it
        gc.collect()
        conn.send("dropped")

    assert run_in_child(child) == "dropped"
    assert ka.is_alive
    ka.stop()
    w.cancel()
    db.close()


def test_fork_while_other_threads_hammer_the_engine_does_not_deadlock_the_child(
    path: Path,
) -> None:
    db = tenure.open(path, durability="buffered", flush_interval=0.001)
    stop = threading.Event()

    def hammer(n: int) -> None:
        i = 0
        while not stop.is_set():
            db.put(f"h{n}", str(i))
            i += 1

    workers = [threading.Thread(target=hammer, args=(n,)) for n in range(2)]
    for t in workers:
        t.start()
    try:
        for _ in range(5):

            def child(conn: Connection) -> None:
                # The parent's writers may hold engine locks at the instant of the fork; the
                # child must not touch them: Closed at once, and exit without closing.
                conn.send(outcome(lambda: db.put("x", "y")))

            assert run_in_child(child) == "Closed"
    finally:
        stop.set()
        for t in workers:
            t.join(WAIT)
    db.close()


def test_the_child_does_not_keep_the_parents_file_lock(path: Path) -> None:
    db = tenure.open(path)
    db.put("k", "v")
    ready, release = ctx.Event(), ctx.Event()

    def child() -> None:
        ready.set()
        release.wait(WAIT)
        os._exit(0)

    p = ctx.Process(target=child)
    p.start()
    try:
        assert ready.wait(WAIT)
        # While the child is alive (holding copies of the parent's descriptors), the parent
        # closes and reopens its database.
        db.close()
        with tenure.open(path) as again:
            assert again.get("k") is not None
    finally:
        release.set()
        p.join(WAIT)


CHILD_OPENS_ITS_OWN = textwrap.dedent(
    """
    import multiprocessing, os, sys, tenure

    base, mode, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    path = os.path.join(base, "parent.tenure")

    def child(conn):
        with tenure.open() as mem:
            mem.put("k", "v")
            ok_mem = mem.get("k") is not None
        with tenure.open(os.path.join(base, f"child-{os.getpid()}.tenure")) as own:
            own.put("k", "v")
            ok_own = own.get("k") is not None
        reopened = None
        if mode == "closed":
            with tenure.open(path) as again:  # the file the parent closed
                reopened = again.get("k").value
        conn.send((ok_mem, ok_own, reopened))

    ctx = multiprocessing.get_context("fork")
    for _ in range(rounds):
        db = tenure.open(path)
        db.put("k", "v")
        lease = db.grant(60.0)
        ka = lease.keep_alive()
        watch = db.watch("k")
        if mode == "closed":
            ka.stop()
            db.close()  # no engine thread is alive at the fork
        a, b = ctx.Pipe()
        p = ctx.Process(target=child, args=(b,))
        p.start()
        if not a.poll(10):
            p.kill()
            print("child hung", flush=True)
            sys.exit(1)
        print(a.recv(), flush=True)
        p.join(10)
        if p.exitcode != 0:
            sys.exit(2)
        ka.stop()
        watch.cancel()
        db.close()
    """
)


def run_child_opens_its_own(tmp_path: Path, parent: str, rounds: int) -> list[str]:
    done = subprocess.run(
        [
            PYTHON,
            "-c",
            CHILD_OPENS_ITS_OWN,
            str(tmp_path),
            parent,
            str(rounds),
        ],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60 + 15 * rounds,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_a_child_opens_its_own_databases_and_the_file_its_parent_closed(tmp_path: Path) -> None:
    # A fresh interpreter, so no engine of another test is alive at the fork.
    lines = run_child_opens_its_own(tmp_path, "closed", 5)
    assert lines == ["(True, True, b'v')"] * 5


def test_a_child_of_a_parent_with_a_live_engine_opens_its_own_databases(tmp_path: Path) -> None:
    lines = run_child_opens_its_own(tmp_path, "open", 50)
    assert lines == ["(True, True, None)"] * 50
