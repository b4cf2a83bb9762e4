"""A pool of worker processes sharing one tenure file, no server (README "Several processes, no
server"): the parent queues jobs as TTL keys, each worker process opens the file with
shared=True and takes jobs one at a time under a shared lock.

    python examples/python/shared_pool.py [PATH]
"""

import multiprocessing
import os
import sys
import tempfile

import tenure

PATH = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "jobs.tenure")


def work(worker: int) -> int:
    """One worker process: takes jobs until none is left; how many it did."""
    done = 0
    with tenure.open(PATH, shared=True) as db, db.session(ttl=5.0) as s:
        while True:
            with s.lock("claim", timeout=10.0):  # one worker at a time, across processes
                jobs = db.range("jobs/", limit=1)
                if not jobs:
                    break
                db.delete(jobs[0].key)
                n = int(jobs[0].value)
                total = db.get("results/sum")
                db.put("results/sum", str((int(total.value) if total else 0) + n * n))
            done += 1
    return done


if __name__ == "__main__":
    # The pool's processes start first and open the file themselves (a process forked from
    # one that has the file open would inherit its descriptors).
    with multiprocessing.get_context("fork").Pool(4) as pool:
        with tenure.open(PATH, shared=True) as db:
            print("this process owns the file:", db.stats()["owner"])
            batch = db.grant(ttl=60.0)  # jobs nobody took within a minute vanish
            for n in range(1, 13):
                db.put(f"jobs/{n:02}", str(n), lease=batch)
            print(sum(pool.map(work, range(4))), "jobs done by the pool")
            total = db.get("results/sum")
            print("sum of squares:", total.value.decode() if total else None)
            print("jobs left:", len(db.range("jobs/")))
