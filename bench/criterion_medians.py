#!/usr/bin/env python3
"""Prints the median of each criterion benchmark under a criterion output directory.

Usage: bench/criterion_medians.py [target/criterion]

Each line: `<group>/<param> median_ns=<ns per iteration> mean_ns=<ns>`; an iteration of the
lessor benches is one lease (one group of 50 expired leases for find_expired*).
"""
import json
import pathlib
import sys


def main() -> None:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
    for est in sorted(root.glob("*/*/new/estimates.json")):
        bench = est.parent.parent
        with open(est) as f:
            e = json.load(f)
        median = e["median"]["point_estimate"]
        mean = e["mean"]["point_estimate"]
        print(f"{bench.parent.name}/{bench.name} median_ns={median:.1f} mean_ns={mean:.1f}")


if __name__ == "__main__":
    main()
