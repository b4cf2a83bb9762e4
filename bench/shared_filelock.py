"""One side of the lock hand-off ping-pong of `shared` (bench/src/bin/shared.rs), on filelock.

`filelock.FileLock` as users take it: fcntl's flock on Linux, `acquire()` with its default
polling (a failed try sleeps `poll_interval`, 0.05 s, then tries again). The protocol and the
output are those of the Rust peers (`shared --role peer`), so one parent pairs every release
with the acquisition that follows it:

- acquisitions k = 0..=handoffs alternate between the two peers (parity 0 takes the even ones);
- before acquisition k the acquirer waits until the other holds k-1 (its `A` on the FIFO), says
  `W` (about to wait) and calls `acquire()`; at once after it returns it records t1 and says `A`;
- the holder waits for `W`, holds for a random time in [hold-min, hold-max] µs (so the waiter's
  polling phase is random against the release, as between independent processes), records t0
  and releases.

t0 and t1 are CLOCK_MONOTONIC (system-wide), printed as `rel K NS` / `acq K NS` at the end,
with `done K NS` when the release call returned.
"""

import argparse
import os
import random
import time

from filelock import FileLock


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parity", type=int, choices=[0, 1], required=True)
    p.add_argument("--fifo-in", required=True)
    p.add_argument("--fifo-out", required=True)
    p.add_argument("--handoffs", type=int, required=True)
    p.add_argument("--hold-min-us", type=int, required=True)
    p.add_argument("--hold-max-us", type=int, required=True)
    p.add_argument("--lockfile", required=True)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    rng = random.Random(a.seed * 2 + a.parity)
    # O_RDWR: a FIFO opened so never blocks on the other end (Linux).
    fin = os.open(a.fifo_in, os.O_RDWR)
    fout = os.open(a.fifo_out, os.O_RDWR)
    lock = FileLock(a.lockfile)
    now = time.monotonic_ns  # CLOCK_MONOTONIC on Linux, as the Rust peers' clock

    def recv(expected: bytes) -> None:
        got = os.read(fin, 1)
        if got != expected:
            raise SystemExit(f"filelock peer {a.parity}: expected {expected!r}, got {got!r}")

    acq, rel, done = [], [], []
    if a.parity == 0:
        lock.acquire()
        os.write(fout, b"A")
    for k in range(1, a.handoffs + 1):
        if k % 2 == a.parity:
            recv(b"A")
            os.write(fout, b"W")
            lock.acquire()
            acq.append((k, now()))
            os.write(fout, b"A")
        else:
            recv(b"W")
            time.sleep(rng.uniform(a.hold_min_us, a.hold_max_us) / 1e6)
            rel.append((k, now()))
            lock.release()
            done.append((k, now()))
    if lock.is_locked:
        lock.release()
    for k, t in acq:
        print(f"acq {k} {t}")
    for k, t in rel:
        print(f"rel {k} {t}")
    for k, t in done:
        print(f"done {k} {t}")


if __name__ == "__main__":
    main()
