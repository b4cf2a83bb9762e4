"""Run by the release wheel's interpreter (make test-readme-python), not by pytest: the wheel
users install carries no test hooks, neither in the module nor in its stubs."""

from __future__ import annotations

import sys
from pathlib import Path

import tenure
from tenure import _tenure

HOOKS = ("_panic_for_test", "_raise_for_test")

found = [h for h in HOOKS if hasattr(_tenure, h)]
stubs = (Path(tenure.__file__).parent / "_tenure.pyi").read_text()
found += [f"{h} in _tenure.pyi" for h in HOOKS if h in stubs]
if found:
    sys.exit(f"the release wheel ships test hooks: {', '.join(found)}")
print(f"release wheel {tenure.__version__}: no test hooks")
