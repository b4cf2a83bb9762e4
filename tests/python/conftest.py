"""Shared fixtures. Time-dependent tests drive a tenure.ManualClock and wait for results on
blocking iterators with generous timeouts; nothing sleeps to synchronise."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tenure

# Generous bound for anything that happens on an engine thread after a trigger.
WAIT = 10.0


@pytest.fixture
def clock() -> tenure.ManualClock:
    return tenure.ManualClock()


@pytest.fixture
def db(clock: tenure.ManualClock) -> Iterator[tenure.Tenure]:
    """An in-memory engine on a manual clock."""
    with tenure.open(clock=clock) as d:
        yield d


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "test.tenure"


@pytest.fixture
def file_db(path: Path, clock: tenure.ManualClock) -> Iterator[tenure.Tenure]:
    """A file-backed engine (immediate durability) on a manual clock."""
    with tenure.open(path, clock=clock) as d:
        yield d


def wait_until(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    """Polls a condition that an engine thread makes true, failing after `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not reached within {timeout} s")
        time.sleep(0.002)


def native_threads(name_prefix: str) -> int:
    """How many threads of this process have a name starting with `name_prefix` (Linux names
    are cut to 15 bytes: "tenure-keepaliv", "tenure-expiry", "tenure-commit")."""
    count = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            if (task / "comm").read_text().strip().startswith(name_prefix):
                count += 1
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return count


def python_env() -> dict[str, str]:
    """Environment for child interpreters: the same tenure, no Rust backtraces on stderr."""
    env = dict(os.environ)
    env["RUST_BACKTRACE"] = "0"
    env["PYTHONUNBUFFERED"] = "1"
    return env


PYTHON = sys.executable
