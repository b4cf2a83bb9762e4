#!/usr/bin/env python3
"""The README's quick starts, pasted as written into fresh projects, run and print what it says.

README.md marks each checked block with an HTML comment on the line before its fence:

    <!-- readme-check NAME KIND -->

KIND is the language of a program (`rust`, `c`, `python`), `output` for what program NAME
prints, `dependency` for the Cargo.toml lines of the Rust projects, or `build` for the shell
commands that build the C programs. Usage:

    check.py rust                 each Rust program as a binary of one fresh Cargo project that
                                  depends on core/ through the README's dependency line
    check.py c PREFIX             each C program built by the README's commands against a
                                  `make install` into PREFIX (which must be HOME/.local)
    check.py python PYTHON        each Python program run by PYTHON (a fresh venv's)

Each program runs in a fresh empty directory; its stdout must equal its `output` block.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(r"^<!-- readme-check (\S+) (\S+) -->\n```[^\n]*\n(.*?)^```$", re.S | re.M)
PLACEHOLDER = "path/to/tenure"


def blocks() -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    for m in MARK.finditer((ROOT / "README.md").read_text()):
        key = (m[1], m[2])
        if key in found:
            sys.exit(f"README.md: two blocks marked {key}")
        found[key] = m[3]
    return found


def programs(lang: str) -> dict[str, tuple[str, str]]:
    """NAME -> (source, expected output) for every program in `lang`."""
    all_blocks = blocks()
    out = {}
    for (name, kind), text in all_blocks.items():
        if kind != lang:
            continue
        if (name, "output") not in all_blocks:
            sys.exit(f"README.md: program {name} has no `readme-check {name} output` block")
        out[name] = (text, all_blocks[(name, "output")])
    if not out:
        sys.exit(f"README.md: no {lang} program marked readme-check")
    return out


def run(name: str, cmd: list[str], expected: str, env: dict[str, str] | None = None) -> bool:
    with tempfile.TemporaryDirectory(prefix=f"readme-{name}-") as cwd:
        r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if r.returncode == 0 and r.stdout == expected:
        print(f"readme: {name}: ok")
        return True
    print(f"readme: {name}: exit {r.returncode}, output differs from README.md:")
    sys.stdout.writelines(
        difflib.unified_diff(
            expected.splitlines(True), r.stdout.splitlines(True), "README.md", name
        )
    )
    if r.stderr:
        print(f"stderr:\n{r.stderr}")
    return False


def check_rust(work: Path) -> bool:
    dependency = blocks().get(("rust", "dependency"))
    if dependency is None or PLACEHOLDER not in dependency:
        sys.exit(f"README.md: no `readme-check rust dependency` block naming {PLACEHOLDER}")
    project = work / "quickstart"
    (project / "src" / "bin").mkdir(parents=True)
    (project / "Cargo.toml").write_text(
        '[package]\nname = "readme-quickstart"\nversion = "0.0.0"\nedition = "2021"\n'
        "publish = false\n\n[workspace]\n\n" + dependency.replace(PLACEHOLDER, str(ROOT))
    )
    # The workspace's lock file: the same dependency versions, offline, and built once.
    shutil.copy(ROOT / "Cargo.lock", project / "Cargo.lock")
    progs = programs("rust")
    for name, (src, _) in progs.items():
        (project / "src" / "bin" / f"{name}.rs").write_text(src)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")).resolve()
    cargo = os.environ.get("CARGO", "cargo")
    subprocess.run(
        [cargo, "build", "-q", "--bins", "--target-dir", str(target)], cwd=project, check=True
    )
    return all(
        [run(name, [str(target / "debug" / name)], out) for name, (_, out) in progs.items()]
    )


def check_c(work: Path, prefix: Path) -> bool:
    home = prefix.parent
    build = blocks().get(("c", "build"))
    if build is None:
        sys.exit("README.md: no `readme-check c build` block")
    env = dict(os.environ, HOME=str(home))
    env.pop("PKG_CONFIG_PATH", None)
    ok = True
    for name, (src, out) in programs("c").items():
        d = work / name
        d.mkdir()
        (d / "app.c").write_text(src)
        subprocess.run(["sh", "-euc", build], cwd=d, env=env, check=True)
        ok &= run(name, [str(d / "app")], out, env=env)
    return ok


def check_python(python: str) -> bool:
    return all(
        [
            run(name, [python, "-c", src], out)
            for name, (src, out) in programs("python").items()
        ]
    )


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("rust", "c", "python"):
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory(prefix="readme-check-") as work:
        if argv[0] == "rust":
            ok = check_rust(Path(work))
        elif argv[0] == "c":
            ok = check_c(Path(work), Path(argv[1]).resolve())
        else:
            ok = check_python(argv[1])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
