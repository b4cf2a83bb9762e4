# The crates meant for crates.io (`tenure` in core/, `tenure-server` in server/; the others are
# `publish = false`): what their packages hold and that they build from them alone, in
# dependency order, and that their stated MSRV (`rust-version`) holds.
#
#   make test-publish    both checks below (part of `make test`)
#   make test-msrv       every dependency's declared rust-version against the crate's, and a
#                        build with that toolchain when rustup has it (tests/publish/check_msrv.py)
#   make test-package    `cargo package` of the published crates, their README and LICENSE
#                        files, and a build of each package, the server against the packaged
#                        core (tests/publish/check_package.py; unpacks under build/publish and
#                        shares the workspace's target directory)
#
# Publishing for real: set the workspace's `repository` (a placeholder today), then
# `cargo publish -p tenure` before `cargo publish -p tenure-server`.

.PHONY: test-publish test-msrv test-package

EXTRA_TESTS += test-publish
test: test-publish

test-publish: test-msrv test-package

test-msrv:
	CARGO=$(CARGO) $(PYTHON) tests/publish/check_msrv.py

# The server's build compiles .proto files (protoc).
test-package: serve-tools
	CARGO=$(CARGO) $(PYTHON) tests/publish/check_package.py
