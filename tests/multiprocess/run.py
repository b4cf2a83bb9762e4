#!/usr/bin/env python3
"""The multi-process counter test (issue 25, SPEC P21): mutual exclusion across kills and
takeovers, with Python and C processes on one file in shared mode.

    run.py --python PY --c-worker BIN [--workers 7] [--seconds 30] [--kill-every 2.5]

Starts WORKERS processes, alternately counter_worker.py (run by PY, which must import tenure)
and the C program BIN (counter_worker.c), all on one database file with shared=True and one
counter file. Each loops: lock one mutex, check the fencing token against the counter file,
write count+1 and the token, fsync, print "inc COUNT TOKEN OWNER", unlock. Every KILL_EVERY
seconds the driver kills one worker with SIGKILL, every other kill the worker that owns the
database file (the last one whose increment said OWNER 1), and starts a replacement of the same
language at once.

How increments are counted. An increment is acknowledged when its "inc" line reached the
driver (the pipe keeps what a killed process wrote before it died; the driver reads each
victim's pipe to its end). A worker prints the line after its fsync, so a worker killed between
its write and its print leaves one increment in the file that nobody acknowledged: at most one
per kill. At the end the driver kills every worker too (those count as kills). So, with A the
acknowledged increments, K the kills and C the count in the file:

    A <= C <= A + K, every acknowledged COUNT is distinct and <= C, and ordered by COUNT the
    acknowledged tokens strictly increase (no two holders at once, across every takeover);

and after every kill, some worker that survived it makes progress again within PROGRESS_BOUND
seconds, and every one that had made progress before does within STUCK_BOUND seconds. Exit
status 0 when all of it holds; the figures are printed either way.
"""

from __future__ import annotations

import argparse
import os
import random
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCK = "counter/lock"
TTL = 3.0  # session TTL of every worker (s): short, it bounds a stall after a lost session
PROGRESS_BOUND = 5.0  # s after a kill within which the surviving workers must progress again
# Each surviving worker must progress again within STUCK_BOUND of a kill too: no queued session
# ahead of it ends only by its TTL any more (a killed non-owner's is revoked when its keep-alive
# stream breaks, SPEC P10; the dead owner's by whoever takes over, P6; the survivors' outlive
# the takeover, P5), so the bound is the takeover plus a pass of the queue, on a loaded machine.
STUCK_BOUND = PROGRESS_BOUND
MIN_OWNER_KILLS = 3


@dataclass
class Worker:
    n: int
    kind: str  # "py" or "c"
    proc: subprocess.Popen[bytes]
    stderr: Path
    buf: bytes = b""
    pid_started: bool = False
    owner: bool = False
    incs: list[tuple[int, int, float]] = field(default_factory=list)  # (count, token, time)
    killed: bool = False
    eof: bool = False

    @property
    def name(self) -> str:
        return f"{self.kind}{self.n}"


@dataclass
class Kill:
    at: float
    victim: str
    owner: bool
    pending: set[str]  # survivors that have not progressed since
    latency: dict[str, float] = field(default_factory=dict)


class Driver:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.db = work / "counter.tenure"
        self.counter = work / "counter.txt"
        self.sel = selectors.DefaultSelector()
        self.workers: list[Worker] = []
        self.kills: list[Kill] = []
        self.failures: list[str] = []
        self.started = 0

    def start(self, kind: str) -> Worker:
        self.started += 1
        stderr = self.work / f"worker-{kind}{self.started}.err"
        if kind == "py":
            cmd = [self.args.python, str(HERE / "counter_worker.py"), str(self.db),
                   str(self.counter), LOCK, str(TTL)]
        else:
            cmd = [self.args.c_worker, str(self.db), str(self.counter), LOCK,
                   str(int(TTL * 1000))]
        env = dict(os.environ, RUST_BACKTRACE="0", PYTHONUNBUFFERED="1")
        with open(stderr, "wb") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        w = Worker(self.started, kind, proc, stderr)
        self.sel.register(proc.stdout, selectors.EVENT_READ, w)
        self.workers.append(w)
        return w

    def alive(self) -> list[Worker]:
        return [w for w in self.workers if not w.killed and not w.eof]

    def line(self, w: Worker, text: str, now: float) -> None:
        parts = text.split()
        if parts[:1] == ["start"]:
            w.pid_started = True
            w.owner = parts[2] == "1"
        elif parts[:1] == ["inc"] and len(parts) == 4:
            w.incs.append((int(parts[1]), int(parts[2]), now))
            w.owner = parts[3] == "1"
            if w.owner:
                for other in self.workers:
                    if other is not w:
                        other.owner = False
            for k in self.kills:
                if w.name in k.pending:
                    k.pending.discard(w.name)
                    k.latency[w.name] = now - k.at
        else:
            self.failures.append(f"{w.name}: unexpected output {text!r}")

    def read(self, w: Worker, now: float) -> None:
        assert w.proc.stdout is not None
        while True:
            try:
                chunk = os.read(w.proc.stdout.fileno(), 65536)
            except BlockingIOError:
                return
            if not chunk:
                w.eof = True
                self.sel.unregister(w.proc.stdout)
                w.proc.stdout.close()
                code = w.proc.wait()
                if not w.killed:
                    self.failures.append(
                        f"{w.name} exited by itself ({code}): {w.stderr.read_text()[-2000:]}")
                return
            w.buf += chunk
            *lines, w.buf = w.buf.split(b"\n")
            for ln in lines:
                self.line(w, ln.decode(), now)

    def pump(self, timeout: float) -> None:
        for key, _ in self.sel.select(timeout):
            self.read(key.data, time.monotonic())

    def kill(self, w: Worker) -> None:
        w.killed = True
        w.proc.send_signal(signal.SIGKILL)
        # What it printed before it died is an acknowledged increment: read to the end.
        while not w.eof:
            self.pump(1.0)

    def run(self) -> None:
        kinds = ["py" if i % 2 == 0 else "c" for i in range(self.args.workers)]
        for kind in kinds:
            self.start(kind)
        begin = time.monotonic()
        end = begin + self.args.seconds
        next_kill = begin + self.args.kill_every
        while time.monotonic() < end and not self.failures:
            now = time.monotonic()
            self.pump(max(0.0, min(next_kill, end) - now))
            now = time.monotonic()
            for k in self.kills:
                if not k.latency and k.pending and now - k.at > PROGRESS_BOUND:
                    self.failures.append(
                        f"after killing {k.victim} ({'owner' if k.owner else 'non-owner'}), "
                        f"no survivor progressed within {PROGRESS_BOUND} s")
                    k.pending.clear()
                if k.pending and now - k.at > STUCK_BOUND:
                    for w in self.alive():
                        if w.name in k.pending:
                            self.dump_stacks(w)
                    self.failures.append(
                        f"after killing {k.victim} ({'owner' if k.owner else 'non-owner'}), "
                        f"{sorted(k.pending)} made no progress within {STUCK_BOUND} s")
                    k.pending.clear()
            if now >= next_kill:
                next_kill = now + self.args.kill_every
                self.kill_one()
        for w in self.alive():
            self.kill(w)
        self.check()

    def dump_stacks(self, w: Worker) -> None:
        """Has a stuck worker's threads' stacks written to its stderr (diagnostics): Python's by
        faulthandler, C's by gdb when it is installed."""
        if w.kind == "c":
            if shutil.which("gdb"):
                with open(w.stderr, "ab") as err:
                    subprocess.run(["gdb", "-p", str(w.proc.pid), "-batch", "-ex",
                                    "thread apply all bt 12"], stdout=err, stderr=err,
                                   timeout=60, check=False)
            return
        size = w.stderr.stat().st_size
        w.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 2.0
        while w.stderr.stat().st_size == size and time.monotonic() < deadline:
            self.pump(0.05)

    def kill_one(self) -> None:
        alive = self.alive()
        want_owner = len(self.kills) % 2 == 0
        owners = [w for w in alive if w.owner]
        if want_owner and owners:
            victim = owners[0]
        else:
            others = [w for w in alive if not w.owner] or alive
            victim = random.choice(others)
        at = time.monotonic()
        survivors = {w.name for w in alive if w is not victim and w.incs}
        self.kill(victim)
        self.kills.append(Kill(at, victim.name, victim.owner, survivors))
        self.start(victim.kind)

    def check(self) -> None:
        text = self.counter.read_text().split() if self.counter.exists() else []
        count, token = (int(text[0]), int(text[1])) if text else (0, 0)
        acks = sorted((c, t) for w in self.workers for c, t, _ in w.incs)
        a, k = len(acks), sum(1 for w in self.workers if w.killed)
        counts = [c for c, _ in acks]
        owner_kills = sum(1 for x in self.kills if x.owner)
        first = {
            label: [min(x.latency.values()) for x in self.kills if x.owner == o and x.latency]
            for label, o in (("owner", True), ("non-owner", False))
        }
        lat_owner = [max(x.latency.values()) for x in self.kills if x.owner and x.latency]
        lat_other = [max(x.latency.values()) for x in self.kills if not x.owner and x.latency]
        for label, lat in first.items():
            if lat:
                print(f"counter: first survivor's increment after a {label} kill: "
                      f"median {statistics.median(lat) * 1000:.0f} ms, "
                      f"max {max(lat) * 1000:.0f} ms")
        print(f"counter: {len(self.workers)} workers started ({self.args.workers} at a time, "
              f"Python and C), {len(self.kills)} kills during the run ({owner_kills} of the "
              f"owner) + {k - len(self.kills)} at the end; acknowledged {a}, file count {count}, "
              f"file token {token}")
        for label, lat in (("owner", lat_owner), ("non-owner", lat_other)):
            if lat:
                print(f"counter: slowest survivor's next increment after a {label} kill: "
                      f"median {statistics.median(lat) * 1000:.0f} ms, "
                      f"max {max(lat) * 1000:.0f} ms")
        if len(set(counts)) != len(counts):
            dup = sorted({c for c in counts if counts.count(c) > 1})[:10]
            self.failures.append(f"counts acknowledged twice (two holders at once): {dup}")
        if not a <= count <= a + k:
            self.failures.append(f"file count {count} not within [{a}, {a + k}]")
        if counts and counts[-1] > count:
            self.failures.append(f"acknowledged count {counts[-1]} above the file's {count}")
        for (c1, t1), (c2, t2) in zip(acks, acks[1:]):
            if t2 <= t1:
                self.failures.append(f"token {t2} of count {c2} not above {t1} of count {c1}")
                break
        if acks and token < acks[-1][1]:
            self.failures.append(f"file token {token} below the last acknowledged {acks[-1][1]}")
        if owner_kills < MIN_OWNER_KILLS:
            self.failures.append(
                f"only {owner_kills} kills of the owner (want {MIN_OWNER_KILLS}): no worker "
                "reported owning the file (stats()['owner'])")
        if a < 10 * len(self.kills):
            self.failures.append(f"only {a} increments in the run")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", required=True)
    p.add_argument("--c-worker", required=True)
    p.add_argument("--workers", type=int, default=7)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--kill-every", type=float, default=2.5)
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tenure-counter-"))
    d = Driver(args, work)
    try:
        d.run()
    finally:
        for w in d.workers:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
    for f in d.failures:
        print(f"counter: FAILED: {f}")
    if d.failures:
        print(f"counter: worker logs kept in {work}")
        for w in d.workers:
            err = w.stderr.read_text().strip()
            if err:
                print(f"--- {w.name} stderr (last lines):\n" + "\n".join(err.splitlines()[-30:]))
        return 1
    if not args.keep:
        shutil.rmtree(work)
    print("counter: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
