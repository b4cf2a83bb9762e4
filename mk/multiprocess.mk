# Several processes on one file in shared mode (issue 25, SPEC P21): the counter test. Python
# and C workers (tests/multiprocess/counter_worker.{py,c}) increment a counter in a plain file
# under one mutex while tests/multiprocess/run.py kills random ones, the owner of the file
# among them, with SIGKILL and starts replacements; about 30 s.
#
#   make test-multiprocess    the counter test (part of `make test`); the C worker is built by
#                             the C tests' rule below, against the same debug libtenure.a; and
#                             examples/c/shared_counter.c, two at once on one file

.PHONY: test-multiprocess

EXTRA_TESTS += test-multiprocess
test: test-multiprocess

$(C_BUILD)/counter-worker: tests/multiprocess/counter_worker.c include/tenure.h ffi-test-hooks | c-tools
	@mkdir -p $(C_BUILD)
	$(CC) $(C_WARN) -g -O1 -Iinclude $< $(C_TARGET_DIR)/debug/libtenure.a $(C_STATIC_LIBS) -o $@

$(C_BUILD)/shared-counter: examples/c/shared_counter.c include/tenure.h ffi-test-hooks | c-tools
	@mkdir -p $(C_BUILD)
	$(CC) $(C_WARN) -g -O1 -Iinclude $< $(C_TARGET_DIR)/debug/libtenure.a $(C_STATIC_LIBS) -o $@

test-c: $(C_BUILD)/counter-worker $(C_BUILD)/shared-counter

test-multiprocess: python-wheel-venv $(C_BUILD)/counter-worker $(C_BUILD)/shared-counter
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(C_BUILD)/shared-counter "$$tmp/count.tenure" 50 >/dev/null & first=$$!; \
	$(C_BUILD)/shared-counter "$$tmp/count.tenure" 50 >/dev/null; wait $$first; \
	out=$$($(C_BUILD)/shared-counter "$$tmp/count.tenure" 0); \
	echo "examples/c/shared_counter.c, two at once, then one: $$out"; \
	test "$$out" = "count 100 (owned the file)"
	env PATH="$(PY_TEST_PATH)" RUST_BACKTRACE=0 python tests/multiprocess/run.py \
		--python "$(abspath $(PY_TEST_BIN))/python" --c-worker "$(abspath $(C_BUILD))/counter-worker"
