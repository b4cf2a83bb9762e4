#!/usr/bin/env python3
"""Checks the one wheel in DIR against TAG (e.g. manylinux_2_17_x86_64, musllinux_1_2_aarch64):
its file name carries TAG, and `auditwheel show` (PyPI auditwheel, run by the interpreter that
runs this script) reads from the wheel's ELF files a platform tag at least as compatible, so it
installs wherever TAG promises. Exit 1 with auditwheel's words when not.

    check_tag.py DIR TAG"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

# manylinux_2_17_x86_64 -> (manylinux, 2, 17, x86_64)
TAG = re.compile(r"(manylinux|musllinux)_(\d+)_(\d+)_(\w+)")


def main(folder: str, tag: str) -> int:
    want = TAG.fullmatch(tag)
    if not want:
        return fail(f"not a platform tag: {tag}")
    wheels = sorted(Path(folder).glob("*.whl"))
    if len(wheels) != 1:
        return fail(f"expected one wheel in {folder}, found {[w.name for w in wheels]}")
    wheel = wheels[0]
    if tag not in wheel.name:
        return fail(f"{wheel.name} is not tagged {tag}")
    shown = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(wheel)],
        capture_output=True, text=True, check=False)
    words = " ".join((shown.stdout + shown.stderr).split())
    # auditwheel names the most compatible tag the wheel's symbols allow.
    found = re.search(r"consistent with the following platform tag: \"?([\w.]+?)\"?[. ]", words)
    if shown.returncode != 0 or not found:
        return fail(f"auditwheel show {wheel.name} gave no platform tag: {words}")
    got = TAG.fullmatch(found.group(1))
    ok = (got is not None and got.group(1, 4) == want.group(1, 4)
          and (int(got.group(2)), int(got.group(3))) <= (int(want.group(2)), int(want.group(3))))
    if not ok:
        return fail(f"auditwheel: {wheel.name} needs {found.group(1)}, not {tag}: {words}")
    print(f"{wheel.name}: auditwheel: consistent with {found.group(1)} (wanted {tag})")
    return 0


def fail(message: str) -> int:
    print(f"check_tag: {message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
