#!/usr/bin/env python3
"""tenure's Python binding vs cachetools.TTLCache, single thread, N keys (default 100 000).

Workloads (each timed alone, ops/s, best of --runs):
  tenure put+lease   per key: lease = db.grant(60.0); db.put(key, value, lease)   (two calls)
  tenure put shared  per key: db.put(key, value, lease) with one lease for every key
  tenure renew       db.renew(lease) over the N leases of the first workload
  ttlcache insert    cache[key] = value in a TTLCache(maxsize=N, ttl=60)
  ttlcache refresh   cache[key] = value again for a present key (TTLCache's "renew")

tenure runs in memory and on a file with durability="buffered" (flush every 100 ms).
Run: `make bench-python` (builds the binding, installs cachetools into build/bench-py).
"""
import argparse
import os
import tempfile
import time

import cachetools
import tenure


def best(runs, fn):
    """Best ops/s over `runs` calls of fn(), which returns the number of ops it did."""
    out = 0.0
    for _ in range(runs):
        t = time.perf_counter()
        n = fn()
        out = max(out, n / (time.perf_counter() - t))
    return out


def bench_tenure(mode, n, runs, tmp):
    keys = [f"svc/{i:09}" for i in range(n)]
    value = b"10.0.0.1:8080"

    def open_db():
        if mode == "memory":
            return tenure.open(None)
        path = os.path.join(tmp, f"py-{time.monotonic_ns()}.tenure")
        return tenure.open(path, durability="buffered", flush_interval=0.1)

    leases = []

    def put_lease():
        db = open_db()
        leases.clear()
        grant, put = db.grant, db.put
        for k in keys:
            lease = grant(60.0)
            put(k, value, lease)
            leases.append(lease)
        put_lease.db = db
        return n

    def put_shared():
        db = open_db()
        lease = db.grant(60.0)
        put = db.put
        for k in keys:
            put(k, value, lease)
        db.close()
        return n

    r_put = best(runs, put_lease)
    db = put_lease.db
    ids = [lease.id for lease in leases]
    renew = db.renew

    def renew_all():
        for i in ids:
            renew(i)
        return n

    r_renew = best(runs, renew_all)
    db.close()
    r_shared = best(runs, put_shared)
    return r_put, r_shared, r_renew


def bench_ttlcache(n, runs):
    keys = [f"svc/{i:09}" for i in range(n)]
    value = b"10.0.0.1:8080"
    cache = None

    def insert():
        nonlocal cache
        cache = cachetools.TTLCache(maxsize=n, ttl=60)
        for k in keys:
            cache[k] = value
        return n

    def refresh():
        for k in keys:
            cache[k] = value
        return n

    r_insert = best(runs, insert)
    r_refresh = best(runs, refresh)
    return r_insert, r_refresh


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    ins, ref = bench_ttlcache(a.keys, a.runs)
    print(f"python ttlcache keys={a.keys} insert_ops_per_s={ins:.0f} refresh_ops_per_s={ref:.0f}")
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("memory", "buffered"):
            put, shared, renew = bench_tenure(mode, a.keys, a.runs, tmp)
            print(
                f"python tenure mode={mode} keys={a.keys} put_with_new_lease_ops_per_s={put:.0f} "
                f"put_shared_lease_ops_per_s={shared:.0f} renew_ops_per_s={renew:.0f} "
                f"put_vs_ttlcache_insert={put / ins:.2f} renew_vs_ttlcache_refresh={renew / ref:.2f}"
            )


if __name__ == "__main__":
    main()
