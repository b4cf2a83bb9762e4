# tenure: `make demo` runs the tour, `make test` runs every test (Rust, C, Python).
# Each area keeps its targets in mk/<area>.mk; this file only wires them together.

CARGO ?= cargo
PREFIX ?= /usr/local
export CARGO_TERM_COLOR ?= never

.DEFAULT_GOAL := all

# Area fragments first: they add their suites to EXTRA_TESTS, expanded by `test` below.
EXTRA_TESTS :=
-include mk/*.mk

.PHONY: all demo test test-rust lint bench install clean

all:
	$(CARGO) build --workspace --release

demo:
	$(CARGO) run --release -q -p tenure --example tour

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -q -p tenure --no-deps
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -q -p tenure-ffi -p tenure-python -p tenure-server -p tenure-bench --no-deps --document-private-items

test-rust:
	PROPTEST_CASES=$${PROPTEST_CASES:-256} $(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

test: lint test-rust $(EXTRA_TESTS)
	@echo "make test: all suites passed"

clean:
	$(CARGO) clean
	rm -rf build .venv
