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
    on_main_thread = threading.current_thread() is threading.main_thread()
    if on_main_thread and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        # SIGINT as the binary has it (Python's own handler undone; an inherited "ignore"
        # kept): ``tenure serve`` shuts down cleanly on it, like on SIGTERM, and an offline
        # command stops, with no KeyboardInterrupt raised after the command returns.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    return _cli_main(["tenure", *args])


if __name__ == "__main__":
    sys.exit(main())
