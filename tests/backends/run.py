#!/usr/bin/env python3
"""One test suite, three places (SPEC R1): starts one `tenure serve` and one etcd (Debian's
etcd-server) on loopback random ports with temporary data, runs tests against them, and stops
both by PID.

    run.py rust               the Rust contract tests (core/tests: spec_keys, spec_leases,
                              spec_watch, spec_sync, spec_sync_seam), the very binaries
                              `cargo test --workspace` built, against tenure serve and etcd
                              (TENURE_TEST_BACKEND=serve|etcd, TENURE_TEST_URL); prints which
                              tests ran on which backend and which are embedded-only
    run.py exec [--serve-only] -- CMD...
                              CMD with TENURE_TEST_SERVE_URL and TENURE_TEST_ETCD_URL set (and
                              TENURE_TEST_CONNECT_URL = the serve URL, for the C tests);
                              --serve-only starts no etcd

Environment: CARGO (default cargo), TENURE_BIN (default: the `tenure` that
`cargo test --workspace --all-targets` builds).
The embedded run of the same Rust binaries is `cargo test` itself (make test-rust)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CARGO = os.environ.get("CARGO", "cargo")
# The backend-neutral Rust suites (the tests in their `embedded_only` modules are skipped).
RUST_SUITES = ["spec_keys", "spec_leases", "spec_watch", "spec_sync", "spec_sync_seam"]
START_LIMIT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Servers:
    """One `tenure serve` and one etcd, each a child process stopped by its PID."""

    def __init__(self, tenure_bin: str, etcd: bool = True) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="tenure-backends-")
        # etcd fsyncs every write: its data on tmpfs when there is one keeps the runs short.
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
        self.etcd_tmp = tempfile.TemporaryDirectory(prefix="tenure-etcd-", dir=base)
        self.procs: list[subprocess.Popen[bytes]] = []
        try:
            self.serve_url = self._start_serve(tenure_bin)
            self.etcd_url = self._start_etcd() if etcd else ""
        except BaseException:
            self.stop()
            raise

    def _start_serve(self, tenure_bin: str) -> str:
        log = open(Path(self.tmp.name) / "serve.log", "w+b")
        proc = subprocess.Popen(
            [tenure_bin, "serve", str(Path(self.tmp.name) / "db.tenure"),
             "--listen", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL, stderr=log)
        self.procs.append(proc)
        deadline = time.monotonic() + START_LIMIT
        while True:
            log.seek(0)
            m = re.search(rb"http://(127\.0\.0\.1:\d+)", log.read())
            if m:
                return "http://" + m.group(1).decode()
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise SystemExit(f"tenure serve did not start: {log.read().decode(errors='replace')}")
            time.sleep(0.02)

    def _start_etcd(self) -> str:
        for _ in range(3):  # a free port can be taken by another process before etcd binds it
            port, peer = free_port(), free_port()
            url, peer_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{peer}"
            proc = subprocess.Popen(
                ["etcd", "--name", "t", "--data-dir", str(Path(self.etcd_tmp.name) / "etcd"),
                 "--listen-client-urls", url, "--advertise-client-urls", url,
                 "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                 "--initial-cluster", f"t={peer_url}", "--log-level", "error"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(proc)
            deadline = time.monotonic() + START_LIMIT
            while proc.poll() is None and time.monotonic() < deadline:
                health = subprocess.run(
                    ["etcdctl", f"--endpoints={url}", "--command-timeout=1s", "endpoint",
                     "health"], env={**os.environ, "ETCDCTL_API": "3"},
                    capture_output=True, check=False)
                if health.returncode == 0:
                    return url
                time.sleep(0.05)
            proc.kill()
            proc.wait()
            shutil.rmtree(Path(self.etcd_tmp.name) / "etcd", ignore_errors=True)
        raise SystemExit("etcd did not start (is Debian's etcd-server installed?)")

    def env(self) -> dict[str, str]:
        env = {**os.environ, "TENURE_TEST_SERVE_URL": self.serve_url,
               "TENURE_TEST_CONNECT_URL": self.serve_url}
        if self.etcd_url:
            env["TENURE_TEST_ETCD_URL"] = self.etcd_url
        return env

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.etcd_tmp.cleanup()
        self.tmp.cleanup()


def built() -> dict[tuple[str, str], str]:
    """Every executable `cargo test --workspace --all-targets` builds, by (kind, name): the
    very binaries `make test-rust` ran (same features: tenure's `remote` comes from
    tenure-server's dev-dependency), so nothing is compiled twice."""
    out = subprocess.run(
        [CARGO, "test", "--workspace", "--all-targets", "--no-run", "--message-format=json"],
        cwd=ROOT, check=True, stdout=subprocess.PIPE).stdout
    found = {}
    for line in out.splitlines():
        msg = json.loads(line)
        target = msg.get("target") or {}
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            package = msg["package_id"].split("#")[0].rsplit("/", 1)[-1]
            kind = target["kind"][0]
            if kind == "bin" and msg["profile"]["test"]:
                continue  # the binary's own unit tests, not the binary
            found[(package + ":" + kind, target["name"])] = msg["executable"]
    return found


def tenure_bin(exes: dict[tuple[str, str], str] | None = None) -> str:
    path = os.environ.get("TENURE_BIN")
    if path:
        return path
    exes = exes if exes is not None else built()
    return exes[("server:bin", "tenure")]


def rust_binaries(exes: dict[tuple[str, str], str]) -> dict[str, str]:
    """The test executables of RUST_SUITES (core/tests)."""
    found = {name: exes[("core:test", name)] for name in RUST_SUITES if ("core:test", name) in exes}
    missing = sorted(set(RUST_SUITES) - set(found))
    if missing:
        raise SystemExit(f"no test binary for {missing}")
    return found


def list_tests(binary: str) -> list[str]:
    out = subprocess.run([binary, "--list", "--format=terse"], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return [line.rsplit(": ", 1)[0] for line in out.splitlines() if line.endswith(": test")]


def run_rust(servers: Servers, binaries: dict[str, str]) -> int:
    listed = {suite: list_tests(binary) for suite, binary in binaries.items()}
    places = {"serve": servers.serve_url, "etcd": servers.etcd_url}

    def run_place(place: str) -> tuple[str, bool, str]:
        log = []
        ok = True
        for suite in RUST_SUITES:
            env = {**os.environ, "TENURE_TEST_BACKEND": place, "TENURE_TEST_URL": places[place],
                   "RUST_BACKTRACE": "0"}
            # One test at a time: the tests share the server (each empties it first).
            proc = subprocess.run(
                [binaries[suite], "--test-threads=1", "--skip", "embedded_only::"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            summary = [line for line in proc.stdout.splitlines() if line.startswith("test result:")]
            log.append(f"[{place}] {suite}: {summary[-1] if summary else 'no summary'}")
            if proc.returncode != 0:
                ok = False
                log.append(proc.stdout)
        return place, ok, "\n".join(log)

    start = time.monotonic()
    # The two servers are independent: both passes run at once.
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run_place, places))
    for _, _, log in results:
        print(log)
    print(f"serve and etcd passes took {time.monotonic() - start:.1f} s")
    print("Which test ran where (embedded: all of them, in `cargo test`):")
    for suite in RUST_SUITES:
        both = [t for t in listed[suite] if "embedded_only::" not in t]
        only = [t.replace("embedded_only::", "") for t in listed[suite] if "embedded_only::" in t]
        print(f"  {suite}: {len(both)} on embedded, serve and etcd; {len(only)} embedded only")
        for t in only:
            print(f"    embedded only: {t}")
    # The README's "same ten lines" (a doctest) over both servers as well.
    readme = subprocess.run(
        [CARGO, "test", "-q", "--workspace", "--doc", "--", "ReadmeDoctests"], cwd=ROOT,
        env=servers.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(f"README doctests with TENURE_TEST_SERVE_URL and TENURE_TEST_ETCD_URL: exit {readme.returncode}")
    if readme.returncode != 0:
        print(readme.stdout)
        results.append(("README doctests", False, ""))
    failed = [place for place, ok, _ in results if not ok]
    if failed:
        print(f"FAILED on: {', '.join(failed)}")
        return 1
    return 0


def main() -> int:
    args = sys.argv[1:]
    if not args or args[0] not in ("rust", "exec"):
        print(__doc__)
        return 2
    exes = built() if args[0] == "rust" or "TENURE_BIN" not in os.environ else {}
    binaries = rust_binaries(exes) if args[0] == "rust" else {}
    cmd = args[1:]
    serve_only = cmd[:1] == ["--serve-only"]
    if serve_only:
        cmd = cmd[1:]
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    servers = Servers(tenure_bin(exes), etcd=not serve_only)
    try:
        print(f"tenure serve at {servers.serve_url}"
              + (f", etcd at {servers.etcd_url}" if servers.etcd_url else ""), flush=True)
        if args[0] == "rust":
            return run_rust(servers, binaries)
        return subprocess.run(cmd, env=servers.env(), check=False).returncode
    finally:
        servers.stop()


if __name__ == "__main__":
    sys.exit(main())
