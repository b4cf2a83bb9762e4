"""Shared fixtures. Time-dependent tests drive a tenure.ManualClock and wait for results on
blocking iterators with generous timeouts; nothing sleeps to synchronise."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tenure

# Generous bound for anything that happens on an engine thread after a trigger.
WAIT = 10.0


# One suite, three places (SPEC R1): a test marked `everywhere` runs with `db` in memory, over
# `tenure.connect` to `tenure serve`, and over `tenure.connect` to a real etcd (ids [embedded],
# [serve], [etcd]); every other test is embedded-only. tests/backends/run.py starts the two
# servers for the run and names them in TENURE_TEST_SERVE_URL / TENURE_TEST_ETCD_URL
# (`make test-python` does, and sets TENURE_TEST_REQUIRE_BACKENDS so none is skipped).
PLACES = ["embedded", "serve", "etcd"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("everywhere"):
        metafunc.parametrize("place", PLACES, indirect=True)


@pytest.fixture
def place(request: pytest.FixtureRequest) -> str:
    """Where `db` lives: "embedded" unless the test is marked `everywhere`."""
    return getattr(request, "param", "embedded")


@pytest.fixture
def clock(place: str) -> tenure.ManualClock:
    if place != "embedded":
        pytest.fail("a test marked `everywhere` cannot drive a ManualClock (embedded only)")
    return tenure.ManualClock()


@pytest.fixture
def db(request: pytest.FixtureRequest, place: str) -> Iterator[tenure.Tenure]:
    """An in-memory engine on a manual clock; or, for a test marked `everywhere`, also a
    connection to `tenure serve` and to etcd, each server emptied first (such tests take
    revisions relative to where they start)."""
    if place == "embedded":
        clock: tenure.ManualClock = request.getfixturevalue("clock")
        with tenure.open(clock=clock) as d:
            yield d
        return
    url = os.environ.get(f"TENURE_TEST_{place.upper()}_URL")
    if not url:
        if os.environ.get("TENURE_TEST_REQUIRE_BACKENDS"):
            pytest.fail(f"TENURE_TEST_{place.upper()}_URL is not set")
        pytest.skip(f"no {place} server: run under tests/backends/run.py exec (make test-python)")
    with tenure.connect(url, timeout=10.0) as d:
        d.delete_prefix("")
        for info in d.leases():
            try:
                d.revoke(info.id)
            except tenure.LeaseNotFound:
                pass
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


def interrupt_in_child(script: str) -> tuple[str, float, str, int]:
    """Runs `script` in a child interpreter until it prints "ready", lets it sit in its wait,
    sends SIGINT and returns (its next line, seconds until that line, its stderr, its exit
    code). The child installs Python's SIGINT handler itself: a suite started with SIGINT
    ignored (`nohup`, `&` in a non-interactive shell) passes that on, and Python leaves an
    ignored SIGINT ignored, so the wait would never be interrupted. A child that does not
    answer within WAIT is killed (its line is then "")."""
    prologue = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    proc = subprocess.Popen(
        [PYTHON, "-c", prologue + script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=python_env(),
    )

    def line_within(limit: float) -> str:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], limit)
        return proc.stdout.readline() if ready else ""

    try:
        first = line_within(WAIT)
        if first.strip() != "ready":
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"the child did not get ready: {first!r} {err}")
        # Part of the scenario, not synchronisation: let the child sit in the wait a while
        # (the child reports how long it waited, which proves it was inside the wait).
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = line_within(WAIT)
        reacted = time.monotonic() - sent
        if not line:
            proc.kill()
        _, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return line, reacted, err, proc.returncode
