#!/usr/bin/env python3
"""The `rust-version` each published crate states is one its dependencies allow, and is built
with when that toolchain is installed.

    check_msrv.py            both checks below (part of `make test`, through mk/publish.mk)

1. Always: every package a published crate builds with all its features (normal and build
   dependencies, every target platform, the versions in Cargo.lock) declares a `rust-version`
   no newer than the crate's own (read from `cargo metadata`); a newer one fails, named.
2. Where `rustup toolchain list` has the stated version: `cargo build --all-features` of the
   crate with that toolchain. Otherwise it says it is skipped and why.

Published crates are the workspace members without `publish = false`.
Environment: CARGO (default cargo).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

# An object of `cargo metadata`'s JSON output.
Json = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
CARGO = os.environ.get("CARGO", "cargo")
# `cargo tree --prefix none -f '{p}'`: "name vX.Y.Z" then, for some, " (path)" or " (*)".
TREE_LINE = re.compile(r"^(\S+) v(\S+)")


def version_key(v: str) -> tuple[int, ...]:
    parts = [int(x) for x in v.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def cargo(*args: str) -> str:
    r = subprocess.run([CARGO, *args], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stdout.write(r.stderr)
        sys.exit(f"msrv: `cargo {' '.join(args)}` failed (exit {r.returncode})")
    return r.stdout


def published(meta: Json) -> list[Json]:
    members = set(meta["workspace_members"])
    # `publish = false` is reported as an empty list of registries.
    return [p for p in meta["packages"] if p["id"] in members and p["publish"] != []]


def build_graph(name: str) -> set[tuple[str, str]]:
    """(name, version) of every package `name` builds with all its features, itself excluded."""
    out = cargo("tree", "-p", name, "--all-features", "-e", "normal,build", "--target", "all",
                "--prefix", "none", "-f", "{p}")
    found = set()
    for line in out.splitlines():
        m = TREE_LINE.match(line)
        if m and m[1] != name:
            found.add((m[1], m[2]))
    return found


def check_declared(meta: Json, crate: Json) -> bool:
    stated = crate["rust_version"]
    if stated is None:
        print(f"msrv: {crate['name']} states no rust-version")
        return False
    by_id: dict[tuple[str, str], list[Json]] = {}
    for p in meta["packages"]:
        by_id.setdefault((p["name"], p["version"]), []).append(p)
    deps = build_graph(crate["name"])
    if not deps:
        print(f"msrv: {crate['name']}: `cargo tree` listed no dependencies")
        return False
    undeclared = []
    newer = []
    highest = ("0", "")
    for key in sorted(deps):
        for p in by_id.get(key, []):
            rv = p["rust_version"]
            if rv is None:
                undeclared.append(p["name"])
                continue
            if version_key(rv) > version_key(highest[0]):
                highest = (rv, f"{p['name']} {p['version']}")
            if version_key(rv) > version_key(stated):
                newer.append((p, rv))
    for p, rv in newer:
        print(f"msrv: {crate['name']} states rust-version {stated}, but its dependency "
              f"{p['name']} {p['version']} needs {rv} "
              f"(cargo tree -p {crate['name']} --all-features -i {p['name']}@{p['version']})")
    print(f"msrv: {crate['name']} (rust-version {stated}): {len(deps)} dependencies, the "
          f"newest declared {highest[0]} ({highest[1]}); {len(undeclared)} declare none")
    return not newer


def installed_toolchain(version: str) -> tuple[str | None, str]:
    """The rustup toolchain named for `version` (1.90 matches 1.90.0-x86_64-…), or why none."""
    if shutil.which("rustup") is None:
        return None, "rustup is not installed"
    out = subprocess.run(["rustup", "toolchain", "list"], capture_output=True, text=True).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    want = version if version.count(".") == 2 else version + ".0"
    for name in names:
        if name == version or name.startswith((version + "-", want + "-")):
            return name, ""
    return None, f"rustup has no {version} toolchain (installed: {', '.join(names) or 'none'})"


def build_with_msrv(crate: Json) -> bool:
    stated = crate["rust_version"]
    toolchain, why = installed_toolchain(stated)
    if toolchain is None:
        print(f"msrv: building {crate['name']} with Rust {stated} skipped: {why}; "
              f"`rustup toolchain install {stated}` enables it")
        return True
    cmd = ["rustup", "run", toolchain, "cargo", "build", "-q", "--locked", "-p", crate["name"],
           "--all-features"]
    print(f"msrv: {' '.join(cmd)}", flush=True)
    if subprocess.run(cmd, cwd=ROOT).returncode != 0:
        print(f"msrv: {crate['name']} does not build with its rust-version {stated}")
        return False
    print(f"msrv: {crate['name']} builds with Rust {stated} ({toolchain})")
    return True


def main() -> int:
    meta = json.loads(cargo("metadata", "--format-version", "1", "--locked"))
    crates = published(meta)
    if not crates:
        print("msrv: no published crate in the workspace")
        return 1
    ok = True
    for crate in crates:
        ok = check_declared(meta, crate) and ok
    if ok:
        for crate in crates:
            ok = build_with_msrv(crate) and ok
    print("msrv: ok" if ok else "msrv: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
