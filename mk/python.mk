# Python binding: `make test-python` builds the extension with maturin, installs it into
# a private venv and runs the pytest suite, mypy's stubtest against the shipped stubs, and mypy
# --strict over the tests and examples (the stubs as users meet them).
# Everything it needs comes from PyPI and is installed here, idempotently.

PYTHON ?= python3
PY_VENV := build/venv
PY_BIN := $(PY_VENV)/bin
PY_TOOLS := 'maturin>=1.9.4,<2' 'pytest>=8' 'pytest-timeout>=2' 'mypy>=1.10'

.PHONY: test-python python-venv python-install

EXTRA_TESTS += test-python
# The root Makefile expands $(EXTRA_TESTS) in `test`'s prerequisites before this fragment is
# included, so also attach the suite to `test` directly (make ignores the duplicate).
test: test-python

$(PY_BIN)/python:
	$(PYTHON) -m venv $(PY_VENV)

# Installs the tools only when one is missing (a fresh machine), never on every run.
python-venv: $(PY_BIN)/python
	@$(PY_BIN)/python -c "import maturin, pytest, pytest_timeout, mypy" 2>/dev/null || \
		$(PY_BIN)/python -m pip install --quiet $(PY_TOOLS)

# Rebuilds the extension from the current sources every time (--force-reinstall).
python-install: python-venv
	PATH="$(abspath $(PY_BIN)):$$PATH" $(PY_BIN)/python -m pip install --quiet --no-build-isolation --no-deps --force-reinstall ./python

# pytest exits non-zero (5) when it collects no test, which fails the target like any failure.
test-python: python-install
	$(PY_BIN)/pytest -q -p no:cacheprovider --timeout 300 tests/python
	$(PY_BIN)/python -m mypy.stubtest tenure --allowlist python/stubtest-allowlist.txt
	$(PY_BIN)/python -m mypy --strict --cache-dir build/mypy-cache tests/python examples/python
