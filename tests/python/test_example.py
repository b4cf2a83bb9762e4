"""The Python example runs and shows TTL keys, a watch and a keep-alive."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import PYTHON, python_env

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "service_registry.py"


def test_the_service_registry_example_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [PYTHON, str(EXAMPLE), str(tmp_path / "registry.tenure")],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "expired, deleted [b'services/batch']" in done.stdout
    assert "still registered: ['services/api']" in done.stdout
    assert "delete services/batch" in done.stdout
    assert "claimed jobs/1: True" in done.stdout
