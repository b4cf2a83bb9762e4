"""Handles that are garbage-collected (or left open at exit) shut down cleanly."""

from __future__ import annotations

import gc
import subprocess
import textwrap
from pathlib import Path

import tenure
from conftest import PYTHON, WAIT, native_threads, python_env, wait_until


def test_a_collected_handle_closes_flushes_and_releases_the_file(path: Path) -> None:
    def engine_threads() -> int:
        return native_threads("tenure-expiry") + native_threads("tenure-commit")

    gc.collect()  # engines left by earlier tests go first
    base = engine_threads()
    db = tenure.open(path, durability="buffered", flush_interval=3600.0)
    db.put("k", "v")
    wait_until(lambda: engine_threads() == base + 2)  # expiry + committer, once running
    del db
    gc.collect()
    # The threads (which only end on close) end, and the buffered write was flushed: the file
    # opens again with it.
    wait_until(lambda: engine_threads() == base)
    with tenure.open(path) as again:
        kv = again.get("k")
        assert kv is not None and kv.value == b"v"


def test_objects_that_hold_the_engine_keep_it_open(path: Path) -> None:
    db = tenure.open(path)
    lease = db.grant(60.0)
    w = db.watch("k", timeout=WAIT)
    del db
    gc.collect()
    # The lease and the watcher still reach a live engine.
    lease.db.put("k", "v")
    assert next(w).kv.value == b"v"
    del w
    handle = lease.db
    del lease
    handle.close()


def test_a_handle_in_a_reference_cycle_is_collected(path: Path) -> None:
    class Holder:
        pass

    h = Holder()
    h.db = tenure.open(path)  # type: ignore[attr-defined]
    h.self = h  # type: ignore[attr-defined]
    del h
    gc.collect()
    tenure.open(path).close()


def test_handles_left_open_at_exit_are_closed_cleanly(path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import tenure
        db = tenure.open({str(path)!r}, durability="buffered", flush_interval=3600.0)
        lease = db.grant(60.0)
        db.put("k", "v", lease=lease)
        ka = lease.keep_alive()
        w = db.watch("k")
        it = db.expired()
        keep = [db, lease, ka, w, it]  # still referenced at exit
        """
    )
    done = subprocess.run(
        [PYTHON, "-c", script], env=python_env(), timeout=WAIT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    with tenure.open(path) as db:
        kv = db.get("k")
        assert kv is not None and kv.value == b"v"


def test_a_process_exits_promptly_with_a_thread_blocked_in_a_wait() -> None:
    script = textwrap.dedent(
        """
        import threading, tenure
        db = tenure.open()
        it = db.expired()
        started = threading.Event()
        def wait():
            started.set()
            next(it, None)
        threading.Thread(target=wait, daemon=True).start()
        started.wait()
        """
    )
    done = subprocess.run(
        [PYTHON, "-c", script], env=python_env(), timeout=WAIT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
