"""The Python example runs and shows TTL keys, a watch and a keep-alive."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import PYTHON, python_env

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "service_registry.py"


def test_the_service_registry_example_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [PYTHON, str(EXAMPLE), str(tmp_path / "registry.tenure")],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "expired, deleted [b'services/batch']" in done.stdout
    assert "still registered: ['services/api']" in done.stdout
    assert "delete services/batch" in done.stdout
    assert "claimed jobs/1: True" in done.stdout


ASYNC_EXAMPLE = EXAMPLE.with_name("asyncio_service.py")


def test_the_asyncio_service_example_runs_and_ends_by_itself() -> None:
    done = subprocess.run(
        [PYTHON, str(ASYNC_EXAMPLE)],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # a leads, crashes, its registration expires, b takes over; c's cancelled campaign left
    # no candidacy behind.
    # (The watch and b's campaign react to the same expiry, in either order.)
    crashed = lines.index("a: crashed")
    assert crashed < lines.index("peers: services/a is gone, dropping it from the pool")
    assert crashed < next(i for i, l in enumerate(lines) if l.startswith("b: leads periodic-job"))
    assert "b: job run 3" in lines
    assert "c: campaign cancelled, candidates left: ['b']" in lines
    assert not any(l.startswith("c: leads") for l in lines)


POOL_EXAMPLE = EXAMPLE.with_name("shared_pool.py")


def test_the_shared_pool_example_runs_a_pool_on_one_file(tmp_path: Path) -> None:
    done = subprocess.run(
        [PYTHON, str(POOL_EXAMPLE), str(tmp_path / "jobs.tenure")],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "this process owns the file: True",
        "12 jobs done by the pool",
        "sum of squares: 650",
        "jobs left: 0",
    ]
