"""Ctrl-C during a blocking wait raises KeyboardInterrupt promptly (the waits are sliced and
check for signals between slices)."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import time

import pytest

from conftest import PYTHON, WAIT, python_env

BLOCKERS = {
    "expired": "next(db.expired())",
    "expired_recv": "db.expired().recv()",
    "watch": "next(iter(db.watch('k')))",
    "watch_recv": "db.watch('k').recv()",
}


@pytest.mark.parametrize("blocker", list(BLOCKERS), ids=list(BLOCKERS))
def test_sigint_interrupts_a_blocking_wait_within_100ms(blocker: str) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time, tenure
        db = tenure.open()
        print("ready", flush=True)
        start = time.monotonic()
        try:
            {BLOCKERS[blocker]}
        except KeyboardInterrupt:
            print("interrupted after", time.monotonic() - start, flush=True)
            sys.exit(0)
        print("returned", flush=True)
        sys.exit(1)
        """
    )
    proc = subprocess.Popen(
        [PYTHON, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=python_env(),
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        # Part of the scenario, not synchronisation: let the child sit in the wait a while.
        # The child reports how long it waited, which proves it was inside the wait.
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = proc.stdout.readline()
        reacted = time.monotonic() - sent
        proc.wait(WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert line.startswith("interrupted after"), (line, proc.stderr.read() if proc.stderr else "")
    waited = float(line.split()[-1])
    assert waited >= 0.4
    # Slices are 50 ms; allow for process scheduling on a loaded 2-core machine.
    assert reacted < 0.5, f"KeyboardInterrupt took {reacted:.3f} s"
    assert proc.returncode == 0
