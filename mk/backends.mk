# One test suite, three places (SPEC R1): the Rust contract tests that `cargo test` runs on the
# embedded engine (core/tests: spec_keys, spec_leases, spec_watch, spec_sync, spec_sync_seam)
# run again, the same binaries, against one `tenure serve` and one real etcd (Debian's
# etcd-server) started on loopback random ports with temporary data and stopped by PID
# (tests/backends/run.py). Tests that need the engine itself live in `mod embedded_only` in
# each file; the run lists them.
#
#   make test-backends    the serve and etcd passes (part of `make test`, after test-rust,
#                         whose binaries it reuses)

.PHONY: test-backends

EXTRA_TESTS += test-backends
test: test-backends

test-backends: serve-tools
	CARGO=$(CARGO) $(PYTHON) tests/backends/run.py rust
