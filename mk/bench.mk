# Benchmarks: `make bench` runs etcd's lessor workloads through tenure's public API
# (criterion, core/benches/lessor.rs), the benchmarks beyond etcd (bench/ binaries) and, when
# bench/etcd-lessor-bench.sh can build it, etcd's own benchmarks in the same session.
# Results land in target/bench/results.txt; BENCHMARKS.md explains each figure.
#
#   make bench                 everything (about 3 minutes on 2 cores, etcd included)
#   make bench ETCD=0          without etcd
#   make bench-python          tenure's Python binding vs cachetools.TTLCache
#   make bench-shared          several processes on one file (BENCHMARKS.md section 13): lock
#                              hand-off next to filelock and etcd, a non-owner's round trips,
#                              takeover after SIGKILL of the owner. OWNER=serve: `tenure serve`
#                              stands in for the owning process; SHARED_ARGS=... passes options.
#
# `make test` only builds and smoke-runs the benches (`cargo test --all-targets` runs each
# criterion bench once on a small fixture); nothing here is part of it.

.PHONY: bench bench-python bench-shared

bench:
	ETCD=$(or $(ETCD),1) CARGO=$(CARGO) bash bench/run.sh

BENCH_PY := build/bench-py

bench-python: python-wheel
	$(PY_BIN)/python -m pip install --quiet --force-reinstall --no-deps $(PY_WHEELS)/tenure-*-abi3-*.whl
	@PYTHONPATH=$(BENCH_PY) $(PY_BIN)/python -c "import cachetools" 2>/dev/null || \
		$(PY_BIN)/python -m pip install --quiet --target $(BENCH_PY) 'cachetools>=5'
	PYTHONPATH=$(BENCH_PY) $(PY_BIN)/python bench/python_vs_ttlcache.py

# filelock (the hand-off's Python side) lives in its own venv, made here once.
BENCH_SHARED_VENV := build/bench-shared

bench-shared: serve-tools
	$(CARGO) build -q --profile profiling -p tenure-bench -p tenure-server
	@test -x $(BENCH_SHARED_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_SHARED_VENV)
	@$(BENCH_SHARED_VENV)/bin/python -c "import filelock" 2>/dev/null || \
		$(BENCH_SHARED_VENV)/bin/python -m pip install --quiet 'filelock>=3.12'
	@mkdir -p $(C_TARGET_DIR)/bench
	$(C_TARGET_DIR)/profiling/shared --owner $(or $(OWNER),shared) \
		--python $(BENCH_SHARED_VENV)/bin/python $(SHARED_ARGS) | tee $(C_TARGET_DIR)/bench/shared.txt
