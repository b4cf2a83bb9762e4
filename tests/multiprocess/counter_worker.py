"""A worker of the multi-process counter test (run.py; its C twin is counter_worker.c).

    counter_worker.py DB COUNTER LOCK TTL

Opens DB with shared=True and loops: lock LOCK (a session of TTL seconds), read "COUNT TOKEN"
from the plain file COUNTER, check that the lock's fencing token is larger than TOKEN, write
COUNT+1 and the token in place, fsync, print the acknowledged increment
("inc COUNT TOKEN OWNER", OWNER 1 when this process owns DB), unlock. A token not larger than
the file's is a broken mutual exclusion: it prints "violation ..." on stderr and exits 3.
Errors of the database (a takeover in progress: Unavailable, a lost session) end the session
and the loop starts again with a new one. Runs until killed.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys

import tenure

RECORD = 64  # the counter file's one fixed-size record: "COUNT TOKEN", space padded


def read_counter(fd: int) -> tuple[int, int]:
    text = os.pread(fd, RECORD, 0).decode().strip()
    if not text:
        return 0, 0
    count, token = text.split()
    return int(count), int(token)


def write_counter(fd: int, count: int, token: int) -> None:
    # One pwrite of one record: a kill lands before or after it, never inside.
    os.pwrite(fd, f"{count} {token}".ljust(RECORD).encode(), 0)
    os.fsync(fd)


def main(db_path: str, counter: str, name: str, ttl: float) -> None:
    # run.py asks a worker that makes no progress where it is.
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    fd = os.open(counter, os.O_RDWR | os.O_CREAT, 0o600)
    db = tenure.open(db_path, shared=True)
    print(f"start {os.getpid()} {int(bool(db.stats()['owner']))}", flush=True)
    while True:
        try:
            session = db.session(ttl=ttl)
        except tenure.TenureError as e:
            print(f"retry session: {e!r}", file=sys.stderr, flush=True)
            continue
        try:
            while True:
                guard = session.lock(name, timeout=10.0)
                token = guard.fencing_token
                count, last = read_counter(fd)
                if token <= last:
                    print(
                        f"violation: token {token} not above the file's {last} (count {count})",
                        file=sys.stderr,
                        flush=True,
                    )
                    os._exit(3)
                write_counter(fd, count + 1, token)
                owner = int(bool(db.stats()["owner"]))
                print(f"inc {count + 1} {token} {owner}", flush=True)
                guard.unlock()
        except tenure.TenureError as e:
            print(f"retry: {e!r}", file=sys.stderr, flush=True)
        try:
            session.close()
        except tenure.TenureError:
            pass


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
