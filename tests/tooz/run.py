#!/usr/bin/env python3
"""tooz's `etcd3+http://` driver suite (SPEC E21), from PyPI and unchanged, against a real etcd
and `tenure serve`: the JSON gateway must pass every test etcd passes.

Run under tests/backends/run.py, which starts both servers (TENURE_TEST_ETCD_URL,
TENURE_TEST_SERVE_URL):

    python3 tests/backends/run.py exec -- python3 tests/tooz/run.py

Creates (once per requirements.txt) a venv in build/tooz-venv with the pinned tooz, etcd3gw and
test tools, runs tooz's own functional tests (tooz.tests.test_coordination, as tooz's tox runs
them: TOOZ_TEST_URL names the server) once per server, and prints each server's counts. Exits 1
if a test that passes on etcd does not pass on tenure."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
VENV = ROOT / "build" / "tooz-venv"
SUITE = "tooz.tests.test_coordination"
TIMEOUT = 1200


def venv() -> Path:
    """The venv's python, made (again) when requirements.txt changed."""
    stamp = VENV / ".requirements-sha256"
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    python = VENV / "bin" / "python"
    if not (stamp.is_file() and stamp.read_text() == digest and python.exists()):
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)],
                       check=True)
        stamp.write_text(digest)
    return python


def outcomes(python: Path, url: str) -> dict[str, str]:
    """Each test's outcome (passed, failed, skipped) against the server at `url`."""
    with tempfile.TemporaryDirectory(prefix="tenure-tooz-") as tmp:
        report = Path(tmp) / "junit.xml"
        host = url.split("://", 1)[1]
        env = {**os.environ, "TOOZ_TEST_URL": f"etcd3+http://{host}"}
        subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"--junitxml={report}", "--pyargs", SUITE],
                       env=env, cwd=tmp, timeout=TIMEOUT, check=False,
                       stdout=subprocess.DEVNULL)
        found: dict[str, str] = {}
        for case in ET.parse(report).iter("testcase"):
            name = f"{case.get('classname')}.{case.get('name')}"
            if case.find("skipped") is not None:
                found[name] = "skipped"
            elif case.find("failure") is not None or case.find("error") is not None:
                found[name] = "failed"
            else:
                found[name] = "passed"
        return found


def counts(found: dict[str, str]) -> str:
    return ", ".join(f"{sum(1 for v in found.values() if v == k)} {k}"
                     for k in ("passed", "failed", "skipped"))


def main() -> int:
    etcd_url = os.environ["TENURE_TEST_ETCD_URL"]
    serve_url = os.environ["TENURE_TEST_SERVE_URL"]
    python = venv()
    etcd = outcomes(python, etcd_url)
    tenure = outcomes(python, serve_url)
    print(f"tooz {SUITE} (etcd3+http://): etcd {counts(etcd)}; tenure serve {counts(tenure)}")
    if not etcd or sum(1 for v in etcd.values() if v == "passed") == 0:
        print("no test passed on etcd: the suite did not run")
        return 1
    worse = sorted(n for n, v in etcd.items() if v == "passed" and tenure.get(n) != "passed")
    for name in worse:
        print(f"passes on etcd, not on tenure serve: {name}")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
