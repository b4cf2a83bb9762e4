"""The package under test is the abi3 wheel as users install it (one build for every
CPython >= 3.11), not the checkout's sources."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tenure
import tenure._tenure

CHECKOUT = Path(__file__).resolve().parents[2]


def test_the_extension_is_built_for_the_stable_abi() -> None:
    assert Path(tenure._tenure.__file__ or "").name.endswith(".abi3.so")


@pytest.mark.skipif(not os.environ.get("TENURE_EXPECT_WHEEL"), reason="run by make test-python")
def test_the_installed_wheel_is_imported_not_the_checkout() -> None:
    installed = Path(tenure.__file__ or "").resolve()
    assert "site-packages" in installed.parts
    assert CHECKOUT / "python" not in installed.parents
