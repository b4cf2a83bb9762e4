"""The `tenure` command in the wheel (issue 28): the venv's `tenure` script and `python -m tenure`
run the standalone binary's code (`tenure serve`, the offline commands) with no Rust toolchain.
Servers listen on 127.0.0.1 with a port the kernel picks, on a temporary file, and are stopped
by their PID."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tenure

from conftest import WAIT, python_env

# The console script pip wrote next to this interpreter (not a `tenure` binary from cargo).
SCRIPT = Path(sys.executable).parent / "tenure"
COMMANDS = {"script": [str(SCRIPT)], "module": [sys.executable, "-m", "tenure"]}


@pytest.fixture(params=sorted(COMMANDS))
def command(request: pytest.FixtureRequest) -> list[str]:
    return COMMANDS[request.param]


def run(cmd: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, env=python_env(), timeout=WAIT * 3
    )


def test_the_venv_has_a_tenure_script_that_is_python_not_the_binary() -> None:
    first_line = SCRIPT.read_bytes().split(b"\n", 1)[0]
    assert first_line.startswith(b"#!") and b"python" in first_line


def test_help_lists_the_binary_commands(command: list[str]) -> None:
    out = run(command, "--help")
    assert out.returncode == 0, out.stderr
    assert "Usage: tenure" in out.stdout
    for sub in ("serve", "leases", "get", "dump", "stats", "snapshot"):
        assert re.search(rf"^\s+{sub}\b", out.stdout, re.M), (sub, out.stdout)


def test_version_is_the_package_version(command: list[str]) -> None:
    out = run(command, "--version")
    assert out.returncode == 0 and out.stdout.split() == ["tenure", tenure.__version__]


def test_bad_usage_exits_2_with_the_error_on_stderr(command: list[str]) -> None:
    out = run(command, "no-such-command")
    assert out.returncode == 2
    assert "no-such-command" in out.stderr and out.stdout == ""


def test_offline_get_reads_a_file_the_test_wrote(command: list[str], tmp_path: Path) -> None:
    path = tmp_path / "offline.tenure"
    with tenure.open(path) as db:
        db.put("svc/a", "10.0.0.1")
        db.put("svc/b", b"10.0.0.2")
    out = run(command, "get", str(path), "svc/a")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["svc/a", "10.0.0.1"]
    out = run(command, "get", str(path), "svc/", "--prefix")
    assert out.stdout.splitlines() == ["svc/a", "10.0.0.1", "svc/b", "10.0.0.2"]
    # The binary's exit code for "no key matched".
    assert run(command, "get", str(path), "svc/none").returncode == 3
    stats = run(command, "stats", str(path), "--json")
    assert stats.returncode == 0 and '"keys":2' in stats.stdout.replace(" ", "")


def test_offline_get_of_a_missing_file_is_an_error(command: list[str], tmp_path: Path) -> None:
    out = run(command, "get", str(tmp_path / "absent.tenure"), "k")
    assert out.returncode == 1
    assert "absent.tenure" in out.stderr


class Served:
    """`tenure serve FILE --listen 127.0.0.1:0` started by `cmd`; `url` once it serves."""

    def __init__(self, cmd: list[str], file: Path) -> None:
        self.proc = subprocess.Popen(
            [*cmd, "serve", str(file), "--listen", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=python_env(),
        )
        self.log: list[str] = []
        assert self.proc.stderr is not None
        # The server logs its URL once every listener is bound and its signal handlers are
        # installed; reading stops at that line (EOF if the process dies first).
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"serving .* on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
                return
        self.proc.wait()
        raise AssertionError(f"tenure serve did not start: {''.join(self.log)}")

    def stop(self, sig: signal.Signals) -> tuple[int, str]:
        """Sends `sig` to the server's PID; its exit code and the rest of its log."""
        self.proc.send_signal(sig)
        assert self.proc.stderr is not None
        # Read through the same buffered stream as the start (EOF when the process exits).
        rest = self.proc.stderr.read()
        return self.proc.wait(timeout=WAIT), "".join(self.log) + rest

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def served(command: list[str], tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    file = tmp_path / "served.tenure"
    server = Served(command, file)
    try:
        yield server, file
    finally:
        server.kill()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_from_the_wheel_answers_and_stops_cleanly_on_a_signal(
    served: tuple[Served, Path], sig: signal.Signals
) -> None:
    server, file = served
    with tenure.connect(server.url, timeout=WAIT) as db:
        lease = db.grant(30)
        rev = db.put("wheel/k", "v", lease)
        kv = db.get("wheel/k")
        assert kv is not None and kv.value == b"v" and kv.mod_revision == rev
    code, log = server.stop(sig)
    # A clean stop: the signal named, the file checkpointed and closed, exit 0 (no traceback).
    assert code == 0, log
    assert f"{sig.name}: shutting down" in log and "closed" in log, log
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log
    # The server released the file and what it acknowledged is in it.
    with tenure.open(file) as db:
        kv = db.get("wheel/k")
        assert kv is not None and kv.value == b"v"
