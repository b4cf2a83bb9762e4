# Go programs that drive tenure with etcd's own Go packages (etcd 3.4's clientv3, concurrency,
# contrib/recipes), built offline from Debian's golang-etcd-server-dev source in GOPATH mode.
#
#   make go-interop    builds every tests/go/<name>/ into $(GO_BIN)/<name>
#
# Tests that run them find them at target/go/bin/<name> (TENURE_GO_BIN overrides) and fail,
# naming this target, when one is missing.

GO_SCRATCH := $(abspath target/go)
GO_BIN := $(GO_SCRATCH)/bin
GO_PROGRAMS := $(patsubst tests/go/%/,%,$(wildcard tests/go/*/))

.PHONY: go-tools go-interop

go-tools:
	@if ! command -v go >/dev/null 2>&1 || [ ! -d /usr/share/gocode/src/go.etcd.io/etcd/clientv3 ]; then \
		echo "installing: golang-go golang-etcd-server-dev"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq golang-go golang-etcd-server-dev; \
	fi

go-interop: go-tools
	@tests/go/build.sh $(GO_SCRATCH) $(GO_PROGRAMS)

# The Rust and Python suites run the Go programs.
test-rust test-serve test-python: go-interop
