"""Tenure.snapshot (SPEC D8): a consistent copy while threads write, progress, errors."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import tenure


def test_d8_snapshot_while_threads_write_holds_exactly_the_writes_up_to_its_revision(
    tmp_path: Path,
) -> None:
    acked: list[tuple[str, int]] = []
    lock = threading.Lock()
    stop = threading.Event()
    dest = tmp_path / "copy.tenure"

    with tenure.open(tmp_path / "db.tenure") as db:

        def write(n: int) -> None:
            i = 0
            while not stop.is_set():
                key = f"w{n}/{i:05d}"
                rev = db.put(key, "v")
                with lock:
                    acked.append((key, rev))
                i += 1

        def count() -> int:
            with lock:
                return len(acked)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + 60
            while count() < 40:
                assert time.monotonic() < deadline
                time.sleep(0.001)
            seen: list[tuple[int, int]] = []

            # Not a stop-the-world: during the snapshot the writers get writes acknowledged.
            def progress(done: int, total: int) -> None:
                if not seen:
                    start = count()
                    until = time.monotonic() + 60
                    while count() < start + 20:
                        assert time.monotonic() < until, "writers stalled during the snapshot"
                        time.sleep(0.001)
                seen.append((done, total))

            info = db.snapshot(dest, progress=progress)
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert seen and seen[-1][0] == seen[-1][1]
        assert info.revision < db.revision

    assert info.bytes == dest.stat().st_size
    with tenure.open(dest, primary=False) as copy:
        assert copy.revision == info.revision
        before = 0
        for key, rev in acked:
            kv = copy.get(key)
            if rev <= info.revision:
                before += 1
                assert kv is not None and kv.mod_revision == rev, key
            else:
                assert kv is None, key
        assert copy.stats()["keys"] == before == info.keys


def test_d8_snapshot_keeps_leases_and_reports_what_it_wrote(tmp_path: Path) -> None:
    with tenure.open(tmp_path / "db.tenure") as db:
        lease = db.grant(ttl=3600.0)
        db.put("a", "1", lease=lease)
        db.put("b", "2")
        info = db.snapshot(str(tmp_path / "copy.tenure"))
    assert (info.revision, info.keys, info.leases) == (2, 2, 1)
    assert repr(info).startswith("tenure.SnapshotInfo(revision=2,")
    with tenure.open(tmp_path / "copy.tenure") as copy:
        assert copy.lease_of("a") == lease.id
        ttl = copy.time_to_live(lease.id)
        assert ttl.ttl == 3600.0
        assert ttl.remaining is not None and ttl.remaining > 3500.0


def test_d8_an_exception_in_progress_is_raised_after_the_snapshot(tmp_path: Path) -> None:
    calls = []

    def progress(done: int, total: int) -> None:
        calls.append(done)
        raise RuntimeError("from progress")

    with tenure.open(tmp_path / "db.tenure") as db:
        db.put("k", "v")
        with pytest.raises(RuntimeError, match="from progress"):
            db.snapshot(tmp_path / "copy.tenure", progress=progress)
    assert len(calls) == 1


def test_d8_snapshot_errors_name_their_cause(tmp_path: Path) -> None:
    path = tmp_path / "db.tenure"
    with tenure.open(path) as db:
        dest = tmp_path / "no-such-dir" / "copy.tenure"
        with pytest.raises(tenure.StorageError, match="no-such-dir") as e:
            db.snapshot(dest)
        assert isinstance(e.value, FileNotFoundError)
        assert not dest.exists()
        with pytest.raises(tenure.InvalidArgument, match="the database itself"):
            db.snapshot(path)
    with pytest.raises(tenure.Closed):
        db.snapshot(tmp_path / "after-close")
    with tenure.open() as mem, pytest.raises(tenure.InvalidArgument):
        mem.snapshot(tmp_path / "mem")
