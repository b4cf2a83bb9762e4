#!/usr/bin/env python3
"""The crates meant for crates.io package what a user needs and build from their packages alone,
each against the packages of the workspace crates it depends on, in dependency order.

    check_package.py         (part of `make test`, through mk/publish.mk)

1. Published crates are the workspace members without `publish = false`; each may depend only
   on published members (else `cargo publish` of it fails), and they are ordered so that a
   crate comes after what it depends on.
2. `cargo package --list -p NAME` names README.md (the manifest's `readme`), LICENSE-MIT and
   LICENSE-APACHE; the manifest states the crates.io metadata (description, license,
   repository, documentation, keywords, categories, rust-version).
3. `cargo package -p A -p B …` packages them all (cargo resolves each one's workspace
   dependencies by version, through a temporary registry of the packages made before it) and
   must do so in the order of 1. In each `.crate`, README and LICENSE files are the real files
   (the crate folders hold symlinks to the root's licenses) and no dependency keeps a `path`.
4. Each `.crate` is unpacked under build/publish/NAME and built there with its packaged
   Cargo.lock, its workspace dependencies patched to their unpacked packages; `cargo metadata`
   confirms the build resolved them to those folders. (Not `cargo package`'s own verification
   of several crates: it unpacks the dependency's package into CARGO_HOME once and treats the
   build of it as a registry build, so after an edit it checks the dependent against a stale
   copy of the dependency.)

The build shares the workspace's target directory. Environment: CARGO (default cargo).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path
from typing import Any

# An object of `cargo metadata`'s JSON output.
Json = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
CARGO = os.environ.get("CARGO", "cargo")
LICENSES = ["LICENSE-MIT", "LICENSE-APACHE"]
METADATA = ["description", "license", "repository", "documentation", "keywords", "categories",
            "rust-version", "readme"]
# crates.io's limits.
MAX_KEYWORDS = 5
MAX_CATEGORIES = 5


def cargo(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([CARGO, *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stdout.write(r.stdout)
        sys.stdout.write(r.stderr)
        sys.exit(f"publish: `cargo {' '.join(args)}` failed (exit {r.returncode})")
    return r


def in_dependency_order(meta: Json) -> list[Json] | None:
    members = set(meta["workspace_members"])
    pkgs = [p for p in meta["packages"] if p["id"] in members]
    by_name = {p["name"]: p for p in pkgs}
    published = [p for p in pkgs if p["publish"] != []]
    names = {p["name"] for p in published}
    needs: dict[str, set[str]] = {}
    ok = True
    for p in published:
        needs[p["name"]] = set()
        for d in p["dependencies"]:
            if d.get("path") is None or d["kind"] == "dev":
                continue
            if d["name"] not in names:
                print(f"publish: {p['name']} depends on {d['name']}, which is publish = false")
                ok = False
            elif d["name"] != p["name"]:
                needs[p["name"]].add(d["name"])
    if not ok:
        return None
    order: list[str] = []
    while needs:
        ready = sorted(n for n, deps in needs.items() if deps <= set(order))
        if not ready:
            print(f"publish: a dependency cycle among {sorted(needs)}")
            return None
        order += ready
        for n in ready:
            del needs[n]
    return [by_name[n] for n in order]


def check_listing(pkg: Json) -> bool:
    name = pkg["name"]
    listed = set(cargo("package", "--list", "--allow-dirty", "-p", name).stdout.split())
    ok = True
    for f in [pkg["readme"] or "README.md", *LICENSES, "Cargo.toml"]:
        if f not in listed:
            print(f"publish: {name}: `cargo package --list` has no {f}")
            ok = False
    for field in METADATA:
        # As cargo metadata reports it: inherited from the workspace where the crate says so.
        if not pkg.get(field.replace("-", "_")):
            print(f"publish: {name}: Cargo.toml states no {field}")
            ok = False
    if len(pkg["keywords"]) > MAX_KEYWORDS or len(pkg["categories"]) > MAX_CATEGORIES:
        print(f"publish: {name}: crates.io takes at most {MAX_KEYWORDS} keywords and "
              f"{MAX_CATEGORIES} categories")
        ok = False
    if ok:
        print(f"publish: {name}: {len(listed)} files listed, README and licenses among them")
    return ok


def package_all(order: list[Json]) -> bool:
    args = ["package", "--no-verify", "--allow-dirty"]
    for p in order:
        args += ["-p", p["name"]]
    r = cargo(*args)
    packaged = re.findall(r"^\s*Packaging (\S+) v", r.stderr, re.M)
    want = [p["name"] for p in order]
    if packaged != want:
        print(f"publish: cargo packaged {packaged}, expected {want} (dependency order)")
        return False
    print(f"publish: packaged in dependency order: {', '.join(packaged)}")
    return True


def check_crate_file(pkg: Json, crate: Path) -> bool:
    name, top = pkg["name"], f"{pkg['name']}-{pkg['version']}"
    crate_dir = Path(pkg["manifest_path"]).parent
    ok = True
    with tarfile.open(crate) as tar:
        members = {m.name: m for m in tar.getmembers()}
        expected = {pkg["readme"] or "README.md": crate_dir / (pkg["readme"] or "README.md")}
        expected.update({lic: ROOT / lic for lic in LICENSES})
        for rel, source in expected.items():
            m = members.get(f"{top}/{rel}")
            if m is None or not m.isfile():
                print(f"publish: {crate.name}: {rel} is missing or not a regular file")
                ok = False
                continue
            f = tar.extractfile(m)
            if f is None or f.read() != source.read_bytes():
                print(f"publish: {crate.name}: {rel} differs from {source.relative_to(ROOT)}")
                ok = False
        f = tar.extractfile(members[f"{top}/Cargo.toml"])
        manifest = tomllib.loads(f.read().decode()) if f else {}
    for table in ("dependencies", "build-dependencies", "dev-dependencies"):
        for dep, spec in manifest.get(table, {}).items():
            if isinstance(spec, dict) and "path" in spec:
                print(f"publish: {crate.name}: [{table}] {dep} keeps path = {spec['path']!r}")
                ok = False
    return ok


def unpack(crate: Path, root: Path) -> Path:
    """Unpacks `crate` into `root`/NAME-VERSION and returns that folder."""
    root.mkdir(parents=True)
    with tarfile.open(crate) as tar:
        tar.extractall(root, filter="data")
    folder = root / crate.name.removesuffix(".crate")
    # A .crate stores one fixed mtime for every file; cargo's freshness check compares
    # mtimes, so the unpacked files take the current time or an edit would go unbuilt.
    now = time.time()
    for path in folder.rglob("*"):
        os.utime(path, (now, now))
    return folder


def build_unpacked(pkg: Json, folder: Path, patched: dict[str, Path], target: Path) -> bool:
    """Builds the unpacked package in `folder` with its packaged Cargo.lock, every crate of
    `patched` taken from its unpacked package."""
    name = pkg["name"]
    direct = {d["name"] for d in pkg["dependencies"] if d.get("path") and d["kind"] != "dev"}
    if direct - patched.keys():
        print(f"publish: {name} not built: no package of {sorted(direct - patched.keys())}")
        return False
    # A workspace one folder up: cargo names a workspace's root package's build after its
    # path relative to the root, so a root package here would share its build (and
    # freshness record) with `cargo package`'s verification of the same crate.
    root = folder.parent
    manifest = root / "Cargo.toml"
    text = f'[workspace]\nmembers = ["{folder.name}"]\nresolver = "2"\n'
    if patched:
        text += "\n[patch.crates-io]\n"
        text += "".join(f'{dep} = {{ path = "{path}" }}\n' for dep, path in patched.items())
    manifest.write_text(text)
    shutil.copy(folder / "Cargo.lock", root / "Cargo.lock")
    started = time.monotonic()
    r = subprocess.run([CARGO, "build", "-q", "--manifest-path", str(manifest), "--target-dir",
                        str(target)], cwd=root, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stdout.write(r.stderr)
        print(f"publish: {name} does not build from its package")
        return False
    meta = json.loads(cargo("metadata", "--format-version", "1", "--manifest-path",
                            str(manifest), cwd=root).stdout)
    ok = True
    for dep in sorted(direct):
        path = patched[dep]
        used = [Path(p["manifest_path"]).parent for p in meta["packages"] if p["name"] == dep]
        if used != [path]:
            print(f"publish: {name} resolved {dep} to {used}, not to its package {path}")
            ok = False
    against = f" against the package of {', '.join(sorted(direct))}" if direct else ""
    if ok:
        print(f"publish: {name} builds from its package{against} "
              f"({time.monotonic() - started:.0f} s)")
    return ok


def main() -> int:
    meta = json.loads(cargo("metadata", "--format-version", "1", "--no-deps").stdout)
    target = Path(meta["target_directory"])
    order = in_dependency_order(meta)
    if not order:
        return 1
    ok = all([check_listing(p) for p in order])
    ok = package_all(order) and ok
    # Outside the target directory: cargo takes files under it for build outputs and does not
    # check their mtimes, so an edit there would go unbuilt.
    scratch = ROOT / "build" / "publish"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    unpacked: dict[str, Path] = {}
    for pkg in order:
        crate = target / "package" / f"{pkg['name']}-{pkg['version']}.crate"
        if not check_crate_file(pkg, crate):
            ok = False
            continue
        folder = unpack(crate, scratch / pkg["name"])
        # Dependency order: every workspace crate it needs is unpacked already, unless its
        # own checks failed.
        if not build_unpacked(pkg, folder, dict(unpacked), target):
            ok = False
        unpacked[pkg["name"]] = folder
    print("publish: ok" if ok else "publish: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
