# `tenure serve` and the offline `tenure` subcommands (server/, binary `tenure`).
#
#   make test-serve    the server's tests only (etcdctl and the Rust etcd-client against it)
#   make install       also installs the `tenure` binary under $(BINDIR) (`make uninstall` removes it)
#   make bench-serve   the same client workload against `tenure serve` and a real etcd
#   make bench-serve-etcdtool   etcd 3.4's own `benchmark` tool against both (BENCHMARKS 16)
#
# Building the server needs protoc (etcd's .proto files are compiled by the etcd-client crate);
# its tests need etcdctl and etcd (the Python TLS tests make their certificates with the
# openssl command), the benchmark etcd itself: these Debian packages are installed
# here when missing, before anything builds.

BINDIR ?= $(PREFIX)/bin

.PHONY: serve-tools test-serve install-serve uninstall-serve bench-serve bench-serve-etcdtool

serve-tools:
	@missing=""; \
	command -v protoc >/dev/null 2>&1 || missing="$$missing protobuf-compiler"; \
	command -v etcdctl >/dev/null 2>&1 || missing="$$missing etcd-client"; \
	command -v etcd >/dev/null 2>&1 || missing="$$missing etcd-server"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# Every target that compiles the workspace compiles the server.
test-python test-c header ffi-debug ffi-release python-wheel: serve-tools
all lint test-rust: serve-tools

test-serve: serve-tools
	$(CARGO) test -p tenure-server --all-targets

install: install-serve

install-serve: serve-tools
	$(CARGO) build -q -p tenure-server $(if $(filter release,$(INSTALL_PROFILE)),--release)
	install -d $(DESTDIR)$(BINDIR)
	install -m 755 $(C_TARGET_DIR)/$(INSTALL_PROFILE)/tenure $(DESTDIR)$(BINDIR)/tenure
	$(STRIP) --strip-unneeded $(DESTDIR)$(BINDIR)/tenure

uninstall: uninstall-serve

uninstall-serve:
	rm -f $(DESTDIR)$(BINDIR)/tenure

# Prints a markdown table of tenure-vs-etcd ratios (also in target/bench/serve.md); about
# 2 minutes. BENCH_SECS=N per point (default 2), ETCD=0 for tenure alone.
bench-serve: serve-tools
	@mkdir -p $(C_TARGET_DIR)/bench
	$(CARGO) bench -q -p tenure-server --bench serve | tee $(C_TARGET_DIR)/bench/serve.md

# etcd 3.4's own `benchmark` tool (tools/benchmark), built offline from Debian's Go source, against
# `tenure serve` (release) and a real etcd in one run; a markdown table in
# target/bench/serve-etcdtool.md (about 15 minutes). Debian ships no tools/benchmark: ETCD_GIT=DIR
# (a clone of etcd's repository) or ETCD_SRC=DIR (an etcd 3.4 source tree) gives its source.
# REPS=N repetitions per point (3), CLIENTS=1,16,64, ONLY=put,range (row prefixes), SCALE=0.5.
bench-serve-etcdtool: serve-tools
	$(CARGO) build -q --release -p tenure-server
	@mkdir -p $(C_TARGET_DIR)/bench
	$(PYTHON) bench/etcd_benchmark_tool.py --tenure $(C_TARGET_DIR)/release/tenure \
		| tee $(C_TARGET_DIR)/bench/serve-etcdtool.md
