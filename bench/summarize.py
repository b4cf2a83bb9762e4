#!/usr/bin/env python3
"""Median of every figure across several `bench/run.sh` result files.

Usage: bench/summarize.py [--spread] RUN1/results.txt RUN2/results.txt ...

A result line is `<bench> [<name>] key=value ...`; identity keys (mode, leases, threads, ...)
name the figure, every other numeric key is a measurement. Prints one line per figure with
the median of each measurement (with --spread also [min..max]) and how many runs it had.
"""
import collections
import statistics
import sys

IDENTITY = {"sched", "mode", "leases", "others", "threads", "keys_per_lease", "spread_ms", "keys"}


def parse(line):
    parts = line.split()
    if not parts or parts[0].startswith("#"):
        return None
    head, values = [parts[0]], {}
    rest = parts[1:]
    if parts[0] == "etcd" and len(parts) == 3:
        return ("etcd", parts[1]), {"ns_per_op": float(parts[2])}
    for p in rest:
        if "=" not in p:
            head.append(p)
            continue
        k, v = p.split("=", 1)
        if k in IDENTITY:
            head.append(p)
            continue
        try:
            values[k] = float(v)
        except ValueError:
            head.append(p)
    return tuple(head), values


def main():
    spread = "--spread" in sys.argv
    sys.argv = [a for a in sys.argv if a != "--spread"]
    figures = collections.OrderedDict()
    for path in sys.argv[1:]:
        with open(path) as f:
            for line in f:
                r = parse(line)
                if r is None:
                    continue
                head, values = r
                fig = figures.setdefault(head, collections.defaultdict(list))
                for k, v in values.items():
                    fig[k].append(v)
    for head, fig in figures.items():
        runs = max(len(v) for v in fig.values()) if fig else 0
        vals = " ".join(
            f"{k}={statistics.median(v):.6g}" + (f"[{min(v):.6g}..{max(v):.6g}]" if spread and len(v) > 1 else "")
            for k, v in fig.items()
        )
        print(f"{' '.join(head)} {vals} runs={runs}")


if __name__ == "__main__":
    main()
