"""Ctrl-C during a blocking wait raises KeyboardInterrupt promptly (the waits are sliced and
check for signals between slices)."""

from __future__ import annotations

import textwrap

import pytest

from conftest import interrupt_in_child

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
    line, reacted, err, code = interrupt_in_child(script)
    assert line.startswith("interrupted after"), (line, err)
    waited = float(line.split()[-1])
    assert waited >= 0.4
    # Slices are 50 ms; allow for process scheduling on a loaded 2-core machine.
    assert reacted < 0.5, f"KeyboardInterrupt took {reacted:.3f} s"
    assert code == 0
