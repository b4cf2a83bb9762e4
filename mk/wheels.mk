# Python wheels for distribution, without Docker: every tool comes from PyPI into the build venv
# (mk/python.mk): maturin, zig (`ziglang`) as the linker, auditwheel as the check.
#
#   make wheels                     build/dist/: the abi3 wheel for x86_64 tagged manylinux2014
#                                   (glibc >= 2.17; auditwheel must agree) and the sdist, which is
#                                   then checked by `pip install`-ing it into a fresh venv (slow:
#                                   a full release build from the sdist's sources)
#   make wheels TARGET=aarch64-unknown-linux-gnu   the same for another Rust target: *-linux-gnu
#                                   gives manylinux2014, *-linux-musl musllinux_1_2. Needs that
#                                   target's Rust standard library (`rustup target add TARGET`)
#                                   and, for glibc, its libgcc_s.so.1 (mk/zig-link.sh says why).
#
# The sdist builds wherever Rust (>= the server's rust-version) and protoc are installed.

TARGET ?= $(PY_HOST)
PY_DIST := build/dist
PY_SDIST_VENV := build/venv-sdist

.PHONY: wheels wheels-target-std wheels-sdist-check

python-test-wheel wheels wheels-sdist-check: serve-tools

wheels: wheels-target-std python-venv
	$(call py_wheel,$(TARGET),$(PY_DIST))
	PATH="$(abspath $(PY_BIN)):$$PATH" $(PY_BIN)/maturin sdist -m python/Cargo.toml \
		--out $(PY_DIST)
	$(MAKE) --no-print-directory wheels-sdist-check
	@ls -l $(PY_DIST)

# A clear refusal instead of cargo's "can't find crate for `std`".
wheels-target-std:
	@test -d "$$(rustc --print sysroot)/lib/rustlib/$(TARGET)/lib" || { \
		echo "make wheels: no Rust standard library for $(TARGET) here;" \
			"install it first: rustup target add $(TARGET)"; exit 1; }

# As a user with Rust would: `pip install` the sdist (pip builds it with maturin; the tools come
# from the local wheelhouse, so offline), then the installed package imports, runs the
# `tenure` command and a put/get. The registry crates already compiled in target/ are reused.
wheels-sdist-check: $(PY_WHEELHOUSE)/.maturin
	$(PYTHON) -m venv --clear $(PY_SDIST_VENV)
	CARGO_TARGET_DIR="$(abspath $(or $(CARGO_TARGET_DIR),target))" \
		$(PY_SDIST_VENV)/bin/python -m pip install --quiet --no-index \
		--find-links $(PY_WHEELHOUSE) $(PY_DIST)/tenure-*.tar.gz
	$(PY_SDIST_VENV)/bin/tenure --version
	$(PY_SDIST_VENV)/bin/python -c "import tenure; \
		db = tenure.open(); db.put('k', 'v'); assert db.get('k').value == b'v'; \
		print('sdist build of tenure', tenure.__version__, 'works')"

# The sdist's build backend (python/pyproject.toml's build-system), downloaded once.
$(PY_WHEELHOUSE)/.maturin: | $(PY_BIN)/python
	$(PY_BIN)/python -m pip download --quiet --dest $(PY_WHEELHOUSE) 'maturin>=1.9.4,<2'
	touch $@
