"""A tiny service registry on tenure: TTL keys, a watch and a keep-alive.

Two "services" register themselves under services/ with a lease each. One keeps its lease alive
on a native background thread; the other does not, so its key disappears when its TTL runs out.
A watch on the prefix reports every change, including the delete caused by the expiry.

Run: python examples/python/service_registry.py [path]   (no path: a file in a temporary
directory, removed at the end)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import tenure


def main(path: str | None) -> int:
    with tenure.open(path) as db:
        watch = db.watch("services/", prefix=True, timeout=5.0)

        # Two registrations, each a key attached to its own lease (TTL in seconds).
        steady = db.grant(ttl=0.6)
        flaky = db.grant(ttl=0.6)
        db.put("services/api", "10.0.0.1:8080", lease=steady)
        db.put("services/batch", "10.0.0.2:9000", lease=flaky)

        expired = db.expired(timeout=5.0)
        with steady.keep_alive():  # renews every TTL/3 until the block ends
            # Wait (GIL released, Ctrl-C works) for the flaky service's lease to expire.
            for batch in expired:
                gone = [e.keys for e in batch if e.id == flaky.id]
                if gone:
                    print(f"lease {flaky.id} expired, deleted {gone[0]}")
                    break
            alive = [kv.key.decode() for kv in db.range("services/")]
            print("still registered:", alive)
            assert alive == ["services/api"], alive

        # Everything the watch saw, in revision order.
        seen = []
        while True:
            try:
                event = watch.recv(timeout=0.2)
            except tenure.Timeout:
                break
            seen.append((event.type, event.kv.key.decode()))
            print(f"  rev {event.revision}: {event.type} {event.kv.key.decode()}")
        watch.cancel()
        assert ("delete", "services/batch") in seen, seen

        # A compare-and-swap: claim a job only if nobody holds it yet.
        claim = db.txn(
            compare=[tenure.txn.version("jobs/1") == 0],
            success=[tenure.txn.put("jobs/1", "api", lease=steady)],
            failure=[tenure.txn.get("jobs/1")],
        )
        print("claimed jobs/1:", claim.succeeded)
        print("stats:", db.stats())
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(main(sys.argv[1]))
    with tempfile.TemporaryDirectory() as d:
        sys.exit(main(str(Path(d) / "registry.tenure")))
