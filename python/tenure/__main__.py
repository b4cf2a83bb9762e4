"""``tenure`` (the wheel's console script) and ``python -m tenure``: the standalone ``tenure``
command (``tenure serve``, ``tenure leases|get|dump|stats|snapshot``), the same Rust code run in
this interpreter, so no Rust toolchain is needed. ``tenure --help`` lists the commands."""

from __future__ import annotations

import signal
import sys
import threading

from ._tenure import _cli_main


def main(argv: list[str] | None = None) -> int:
    """Runs the command with ``argv`` (default: ``sys.argv[1:]``); returns its exit code."""
    args = sys.argv[1:] if argv is None else argv
    if threading.current_thread() is threading.main_thread():
        # As in the binary: SIGINT is the command's (``tenure serve`` shuts down cleanly on it,
        # like on SIGTERM; an offline command stops), not a KeyboardInterrupt raised after it.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    return _cli_main(["tenure", *args])


if __name__ == "__main__":
    sys.exit(main())
