# The README's quick starts, pasted as written into fresh projects, must run and print what the
# README says (tests/readme/check.py): Rust in a fresh Cargo project with a path dependency, C
# built by the README's commands after `make install` into a temporary prefix, Python in a fresh
# venv with the release wheel (which must not carry the test hooks).
#
#   make test-readme     all three (part of `make test`)

.PHONY: test-readme test-readme-rust test-readme-c test-readme-python

EXTRA_TESTS += test-readme
test: test-readme

test-readme: test-readme-rust test-readme-c test-readme-python

test-readme-rust:
	CARGO=$(CARGO) $(PYTHON) tests/readme/check.py rust

test-readme-c: ffi-debug | c-tools
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(MAKE) --no-print-directory -s install PREFIX="$$tmp/.local" INSTALL_PROFILE=debug >/dev/null; \
	$(PYTHON) tests/readme/check.py c "$$tmp/.local"

test-readme-python: python-wheel
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(PYTHON) -m venv "$$tmp/venv"; \
	"$$tmp/venv/bin/python" -m pip install --quiet --no-index --no-deps $(PY_WHEELS)/tenure-*.whl; \
	"$$tmp/venv/bin/python" tests/python/release_wheel.py; \
	$(PYTHON) tests/readme/check.py python "$$tmp/venv/bin/python"
