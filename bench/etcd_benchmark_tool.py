#!/usr/bin/env python3
"""etcd's own `benchmark` tool (etcd 3.4, tools/benchmark) against `tenure serve` and a real etcd
in one run (BENCHMARKS.md section 16, `make bench-serve-etcdtool`).

The tool is built offline in GOPATH mode, as bench/etcd-lessor-bench.sh builds etcd's lessor
tests: everything it imports comes from Debian's golang-etcd-server-dev and the golang-*-dev
packages it pulls in. Debian does not ship tools/benchmark itself, so its source comes from
etcd's repository at the tag of Debian's etcd (v3.4.23): ETCD_SRC=DIR (a source tree holding
tools/benchmark) or ETCD_GIT=DIR (a clone of etcd's repository; the tag is read from it). Nothing
of it is kept in this repository.

Both servers run at once on loopback, each with its data on the same file system, durable on
every write (tenure: immediate; etcd: its default fsync per commit). Each point runs REPS times,
the two servers alternating, so both see the same load; a ratio is tenure / etcd per repetition
(median, and the min–max of the repetitions as its spread). Latencies are the tool's own
percentiles.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ETCD_TAG = "v3.4.23"
SCRATCH = Path(os.environ.get("SCRATCH", Path.home() / ".cache" / "tenure-etcd-benchmark"))
GOCODE = Path("/usr/share/gocode/src")

# (row name, benchmark arguments, total requests per client level): each point is sized to
# take a few seconds on 2 loaded cores.
WORKLOADS: list[tuple[str, list[str], dict[int, int]]] = [
    (
        "put (256 B values)",
        ["put", "--key-size=8", "--val-size=256", "--sequential-keys", "--key-space-size=100000"],
        {1: 400, 16: 3000, 64: 6000},
    ),
    ("range (linearizable)", ["range", "bench-range-key", "--consistency=l"], {1: 2000, 16: 10000, 64: 20000}),
    (
        "txn-put (1 put per txn)",
        ["txn-put", "--key-size=8", "--val-size=256", "--txn-ops=1", "--key-space-size=100000"],
        {1: 400, 16: 3000, 64: 6000},
    ),
    ("lease-keepalive", ["lease-keepalive"], {1: 2000, 16: 10000, 64: 20000}),
    (
        "stm (stm locker, 1000 keys, 2 per txn, repeatable read)",
        ["stm", "--keys=1000", "--keys-per-txn=2", "--isolation=r", "--stm-locker=stm"],
        {1: 300, 16: 1500, 64: 3000},
    ),
    (
        "stm (v3lock: lock-client)",
        ["stm", "--keys=1000", "--keys-per-txn=2", "--isolation=r", "--stm-locker=lock-client"],
        {1: 300, 16: 1500, 64: 3000},
    ),
    # Every client watches one key; each put is timed until every watcher has it. --total puts
    # at --put-rate per second: throughput is fixed by the rate, latency is the figure.
    ("watch-latency (200 puts/s)", ["watch-latency", "--put-rate=200"], {1: 400, 16: 400, 64: 400}),
]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def source() -> Path:
    """A directory holding etcd 3.4's tools/benchmark."""
    src = os.environ.get("ETCD_SRC")
    if src:
        if not (Path(src) / "tools/benchmark/main.go").exists():
            sys.exit(f"ETCD_SRC={src} has no tools/benchmark/main.go")
        return Path(src)
    out = SCRATCH / "src"
    if (out / "tools/benchmark/main.go").exists():
        return out
    git = os.environ.get("ETCD_GIT")
    if not git:
        sys.exit(
            "etcd's tools/benchmark is not in Debian's packages: set ETCD_GIT to a clone of "
            f"etcd's repository (tag {ETCD_TAG} is built) or ETCD_SRC to an etcd 3.4 source tree"
        )
    out.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", f"--git-dir={git}", "archive", ETCD_TAG, "tools/benchmark"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def build() -> Path:
    """The benchmark binary, built once into SCRATCH (GOPATH mode, no network)."""
    exe = SCRATCH / "benchmark"
    if exe.exists():
        return exe
    if shutil.which("go") is None or not (GOCODE / "go.etcd.io/etcd/clientv3").is_dir():
        subprocess.run(
            "apt-get update -qq && apt-get install -y -qq golang-go golang-etcd-server-dev",
            shell=True,
            check=True,
        )
    src = source()
    gopath = SCRATCH / "gopath"
    etcd = gopath / "src/go.etcd.io/etcd"
    etcd.mkdir(parents=True, exist_ok=True)
    # Debian's tree, linked entry by entry so tools/ can be added beside it.
    for d in GOCODE.iterdir():
        if d.name != "go.etcd.io" and not (gopath / "src" / d.name).exists():
            (gopath / "src" / d.name).symlink_to(d)
    for d in (GOCODE / "go.etcd.io").iterdir():
        if d.name != "etcd" and not (gopath / "src/go.etcd.io" / d.name).exists():
            (gopath / "src/go.etcd.io" / d.name).symlink_to(d)
    for d in (GOCODE / "go.etcd.io/etcd").iterdir():
        if not (etcd / d.name).exists():
            (etcd / d.name).symlink_to(d)
    shutil.rmtree(etcd / "tools", ignore_errors=True)
    shutil.copytree(src / "tools", etcd / "tools")
    env = dict(
        os.environ,
        GOPATH=str(gopath),
        GO111MODULE="off",
        GOFLAGS="",
        GOPROXY="off",
        GOCACHE=str(SCRATCH / "gocache"),
    )
    log(f"building etcd's benchmark tool ({ETCD_TAG}) offline into {exe}")
    subprocess.run(
        ["go", "build", "-o", str(exe), "."], cwd=etcd / "tools/benchmark", env=env, check=True
    )
    return exe


def wait_serving(endpoint: str, proc: subprocess.Popen[bytes], name: str) -> None:
    until = time.monotonic() + 60
    while time.monotonic() < until:
        if proc.poll() is not None:
            sys.exit(f"{name} exited with {proc.returncode}")
        r = subprocess.run(
            ["etcdctl", f"--endpoints={endpoint}", "--command-timeout=2s", "put", "bench-range-key", "v"],
            capture_output=True,
        )
        if r.returncode == 0:
            return
        time.sleep(0.1)
    sys.exit(f"{name} did not serve at {endpoint} within 60 s")


def start_tenure(tenure: str, dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    addr = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [tenure, "serve", str(dir / "db.tenure"), "--listen", addr, "--log-level", "error"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_serving(addr, proc, "tenure serve")
    return proc, addr


def start_etcd(dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    addr = f"127.0.0.1:{free_port()}"
    peer = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [
            "etcd", "--name", "b", "--data-dir", str(dir / "etcd"),
            "--listen-client-urls", f"http://{addr}", "--advertise-client-urls", f"http://{addr}",
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"b={peer}", "--log-level", "error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_serving(addr, proc, "etcd")
    return proc, addr


LINE_RPS = re.compile(r"Requests/sec:\s+([0-9.eE+-]+)")
LINE_SLOWEST = re.compile(r"Slowest:\s+([0-9.eE+-]+) secs")
LINE_PCT = re.compile(r"^\s*(\d+(?:\.\d+)?)% in ([0-9.eE+-]+) secs", re.M)


def run_one(exe: Path, endpoint: str, args: list[str], clients: int, total: int) -> dict[str, float]:
    cmd = [
        # --precise: the percentiles in full (else 4 decimals of a second, 0.1 ms).
        str(exe), f"--endpoints={endpoint}", f"--conns={clients}", f"--clients={clients}", "--precise",
        *args, f"--total={total}",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    rps = LINE_RPS.search(r.stdout)
    pct = {p: float(s) * 1000 for p, s in LINE_PCT.findall(r.stdout)}
    slowest = LINE_SLOWEST.search(r.stdout)
    if rps is None or "50" not in pct or slowest is None:
        raise RuntimeError(f"no summary in the output of {' '.join(cmd)}:\n{r.stdout[-2000:]}")
    # The tool prints no 99 % line below 100 samples: the slowest stands in.
    p99 = pct.get("99", float(slowest.group(1)) * 1000)
    return {"rps": float(rps.group(1)), "p50": pct["50"], "p99": p99}


def fmt_ratio(values: list[float]) -> str:
    med = statistics.median(values)
    return f"{med:.2f}x ({min(values):.2f}–{max(values):.2f})" if len(values) > 1 else f"{med:.2f}x"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tenure", default="target/release/tenure", help="the tenure binary")
    ap.add_argument("--reps", type=int, default=int(os.environ.get("REPS", "3")))
    ap.add_argument("--clients", default=os.environ.get("CLIENTS", "1,16,64"))
    ap.add_argument("--only", default=os.environ.get("ONLY", ""), help="comma-separated row prefixes")
    ap.add_argument("--scale", type=float, default=float(os.environ.get("SCALE", "1")))
    a = ap.parse_args()
    exe = build()
    levels = [int(c) for c in a.clients.split(",")]
    only = [o for o in a.only.split(",") if o]
    rows = [w for w in WORKLOADS if not only or any(w[0].startswith(o) for o in only)]
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tenure-etcdtool-") as tmp:
        t_dir, e_dir = Path(tmp, "tenure"), Path(tmp, "etcd")
        t_dir.mkdir()
        e_dir.mkdir()
        tenure, t_addr = start_tenure(a.tenure, t_dir)
        etcd, e_addr = start_etcd(e_dir)
        try:
            log(f"tenure serve at {t_addr}, etcd at {e_addr}; {a.reps} repetitions per point")
            table = []
            for name, args, totals in rows:
                for c in levels:
                    total = max(50, int(totals.get(c, totals[max(totals)]) * a.scale))
                    per: dict[str, list[dict[str, float]]] = {"tenure": [], "etcd": []}
                    for rep in range(a.reps):
                        order = [("tenure", t_addr), ("etcd", e_addr)]
                        if rep % 2:
                            order.reverse()
                        for who, ep in order:
                            per[who].append(run_one(exe, ep, args, c, total))
                    t, e = per["tenure"], per["etcd"]
                    ratios = [x["rps"] / y["rps"] for x, y in zip(t, e)]
                    p50r = [y["p50"] / x["p50"] for x, y in zip(t, e) if x["p50"] > 0]
                    row = (
                        name, c, total,
                        statistics.median(x["rps"] for x in t), statistics.median(x["rps"] for x in e),
                        fmt_ratio(ratios),
                        statistics.median(x["p50"] for x in t), statistics.median(x["p50"] for x in e),
                        fmt_ratio(p50r) if p50r else "-",
                        statistics.median(x["p99"] for x in t), statistics.median(x["p99"] for x in e),
                    )
                    table.append(row)
                    log(
                        f"{name} c={c}: tenure {row[3]:.0f}/s p50 {row[6]:.3f} ms p99 {row[9]:.3f} ms; "
                        f"etcd {row[4]:.0f}/s p50 {row[7]:.3f} ms p99 {row[10]:.3f} ms; ratio {row[5]}"
                    )
        finally:
            for p in (tenure, etcd):
                p.terminate()
            for p in (tenure, etcd):
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
    load1 = os.getloadavg()
    print(
        f"etcd's benchmark ({ETCD_TAG}), {a.reps} repetitions per point, {os.cpu_count()} cores; "
        f"load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end\n"
    )
    print(
        "| workload | clients | requests | tenure req/s | etcd req/s | throughput ratio (spread) "
        "| tenure p50 ms | etcd p50 ms | p50 etcd/tenure (spread) | tenure p99 ms | etcd p99 ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in table:
        print(
            f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.0f} | {r[4]:.0f} | {r[5]} | {r[6]:.3f} | {r[7]:.3f} "
            f"| {r[8]} | {r[9]:.3f} | {r[10]:.3f} |"
        )


if __name__ == "__main__":
    main()
