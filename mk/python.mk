# Python binding: `make test-python` builds the abi3 wheel (one wheel for every CPython >= 3.11)
# with `maturin build --release --zig` for manylinux2014 (glibc >= 2.17, checked by auditwheel:
# the wheel users get, see mk/wheels.mk), installs it into a fresh venv whose PATH has no cargo (as a
# user who never had Rust meets it) and runs there the pytest suite (sync and asyncio), mypy's
# stubtest against the shipped stubs, and mypy --strict over the tests and examples.
# Everything it needs comes from PyPI and is installed here, idempotently: the tools are
# downloaded once into a local wheelhouse, so each fresh venv installs offline.

PYTHON ?= python3
PY_VENV := build/venv
PY_BIN := $(PY_VENV)/bin
PY_WHEELS := build/wheels
PY_TEST_WHEELS := build/wheels-test
PY_WHEELHOUSE := build/py-wheelhouse
PY_TEST_VENV := build/venv-wheel
PY_TEST_BIN := $(PY_TEST_VENV)/bin
PY_TOOLS := 'pytest>=8' 'pytest-timeout>=2' 'pytest-asyncio>=0.23' 'mypy>=1.10'
# The build venv's tools: maturin; zig (PyPI `ziglang`), which maturin links the extension with
# against old C library symbols (glibc 2.17's for manylinux2014), so no Docker image is needed;
# auditwheel, which reads back from the wheel which platforms it installs on.
PY_BUILD_TOOLS := 'maturin>=1.9.4,<2' 'ziglang>=0.13' 'auditwheel>=6'
# This machine's Rust target: the wheels built for it are the ones installed and tested here.
PY_HOST := $(or $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p'),x86_64-unknown-linux-gnu)
# The test venv's PATH: its own bin and the system's, never ~/.cargo/bin.
PY_TEST_PATH := $(abspath $(PY_TEST_BIN)):/usr/local/bin:/usr/bin:/bin

.PHONY: test-python python-venv python-wheel python-test-wheel python-wheel-venv

EXTRA_TESTS += test-python
# The root Makefile expands $(EXTRA_TESTS) in `test`'s prerequisites before this fragment is
# included, so also attach the suite to `test` directly (make ignores the duplicate).
test: test-python

$(PY_BIN)/python:
	$(PYTHON) -m venv $(PY_VENV)

# The build venv holds the build tools only; installed when missing (a fresh machine), never
# per run.
python-venv: $(PY_BIN)/python
	@$(PY_BIN)/python -c "import maturin, ziglang, auditwheel" 2>/dev/null || \
		$(PY_BIN)/python -m pip install --quiet $(PY_BUILD_TOOLS)

# $(call py_wheel,TARGET,OUT,MATURIN_ARGS): the release build of the abi3 wheel for a Rust
# target into OUT (emptied first), linked by zig for manylinux2014 (glibc 2.17; musl targets:
# musllinux_1_2), then checked: the one wheel in OUT carries that tag and auditwheel finds no
# symbol newer than it allows. The cargo feature `cli` (the `tenure` command) is on by default.
py_compat = $(if $(findstring musl,$(1)),musllinux_1_2,manylinux2014)
py_tag = $(if $(findstring musl,$(1)),musllinux_1_2,manylinux_2_17)_$(firstword $(subst -, ,$(1)))
# glibc targets link through mk/zig-link.sh: the target's libgcc_s.so.1 as the one unwinder.
py_gnu_arch = $(firstword $(subst -, ,$(1)))-linux-gnu
py_libgcc_s = $(firstword $(wildcard $(foreach d,/lib/$(call py_gnu_arch,$(1)) \
	/usr/lib/$(call py_gnu_arch,$(1)) /usr/$(call py_gnu_arch,$(1))/lib,$(d)/libgcc_s.so.1)))
py_linker = $(if $(findstring musl,$(1)),,\
	CARGO_TARGET_$(shell echo '$(1)' | tr 'a-z-' 'A-Z_')_LINKER="$(abspath mk/zig-link.sh)" \
	TENURE_ZIG_TARGET=$(call py_gnu_arch,$(1)).2.17 TENURE_LIBGCC_S="$(call py_libgcc_s,$(1))")
define py_wheel
rm -rf $(2)
$(call py_linker,$(1)) PATH="$(abspath $(PY_BIN)):$$PATH" $(PY_BIN)/maturin build --quiet \
	--release -m python/Cargo.toml --zig --target $(1) --compatibility $(call py_compat,$(1)) \
	--out $(2) $(3)
$(PY_BIN)/python tests/wheels/check_tag.py $(2) $(call py_tag,$(1))
endef

# The test tools as wheels, downloaded once (pip picks them for this interpreter).
$(PY_WHEELHOUSE)/.done: | $(PY_BIN)/python
	$(PY_BIN)/python -m pip download --quiet --dest $(PY_WHEELHOUSE) $(PY_TOOLS)
	touch $@

# One release build of the abi3 wheel from the current sources: the wheel users install, without
# test hooks (mk/readme.mk checks it in a fresh venv).
python-wheel: python-venv
	$(call py_wheel,$(PY_HOST),$(PY_WHEELS))

# The suite's wheel: the same build plus the test hooks (`_panic_for_test`, `_raise_for_test`:
# the cargo feature `test-hooks`), as the C tests link a library with theirs.
python-test-wheel: python-venv
	$(call py_wheel,$(PY_HOST),$(PY_TEST_WHEELS),--features test-hooks)

# A fresh venv every run: the wheel and the tools, nothing from the checkout.
python-wheel-venv: python-test-wheel $(PY_WHEELHOUSE)/.done
	$(PYTHON) -m venv --clear $(PY_TEST_VENV)
	$(PY_TEST_BIN)/python -m pip install --quiet --no-index --find-links $(PY_WHEELHOUSE) \
		$(PY_TOOLS) $(PY_TEST_WHEELS)/tenure-*-abi3-*.whl
	@PATH="$(PY_TEST_PATH)" sh -c '! command -v cargo' >/dev/null || \
		{ echo "cargo is on the test venv's PATH"; exit 1; }

# pytest exits non-zero (5) when it collects no test, which fails the target like any failure.
# The package imported is the installed wheel's, never the checkout's python/ (checked by
# test_wheel.py).
# The tests marked `everywhere` run against a `tenure serve` and an etcd that
# tests/backends/run.py starts for the run (and stops).
test-python: python-wheel-venv
	CARGO=$(CARGO) $(PYTHON) tests/backends/run.py exec -- env PATH="$(PY_TEST_PATH)" \
		TENURE_EXPECT_WHEEL=1 TENURE_TEST_REQUIRE_BACKENDS=1 pytest -q -p no:cacheprovider \
		--timeout 300 tests/python
	PATH="$(PY_TEST_PATH)" python -m mypy.stubtest tenure --allowlist python/stubtest-allowlist.txt
	PATH="$(PY_TEST_PATH)" python -m mypy --strict --cache-dir build/mypy-cache tests/python examples/python \
		python/tenure/aio.py
