# tooz's etcd3+http:// driver suite (SPEC E21): tooz and etcd3gw from PyPI, pinned in
# tests/tooz/requirements.txt (a venv in build/tooz-venv), tooz's own functional tests run
# against a real etcd and `tenure serve` started by tests/backends/run.py; tenure must pass
# every test etcd passes.
#
#   make test-tooz

.PHONY: test-tooz

EXTRA_TESTS += test-tooz
test: test-tooz

test-tooz: serve-tools
	CARGO=$(CARGO) $(PYTHON) tests/backends/run.py exec -- $(PYTHON) tests/tooz/run.py
