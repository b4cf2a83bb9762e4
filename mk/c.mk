# C ABI: libtenure.so / libtenure.a, include/tenure.h, `make install`, and the C tests.
#
#   make header       regenerate include/tenure.h from ffi/src (cbindgen, ffi/cbindgen.toml)
#   make install      install the release libraries (stripped), tenure.h, tenure.hpp (C++17),
#                     tenure.pc and the CMake package (LIBDIR/cmake/tenure) under PREFIX; into
#                     the system (no DESTDIR) it also refreshes the loader cache. REMOTE=0: a
#                     lean libtenure without the etcd network client (tenure_connect answers
#                     TENURE_ERR_UNSUPPORTED; same ABI and header)
#   make uninstall    remove what `make install` installed (same PREFIX/DESTDIR)
#   make test-c       C tests under ASan+UBSan (leak checking on), the same tests under
#                     valgrind, the C++ wrapper's tests under ASan+UBSan, the C and C++ examples
#                     built against a temporary install (pkg-config and CMake), and the lean
#                     REMOTE=0 library
#
# Everything the tests need (a C/C++ compiler, valgrind, pkg-config, cmake) is installed here
# when missing, idempotently.

CC ?= cc
CXX ?= c++
DESTDIR ?=
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
CMAKEDIR ?= $(LIBDIR)/cmake/tenure
# REMOTE=0 builds libtenure without the cargo feature `remote` (the etcd client: tokio, tonic,
# rustls), for a smaller library.
REMOTE ?= 1
FFI_FEATURES := $(if $(filter 0,$(REMOTE)),--no-default-features)
INSTALL_PROFILE ?= release
C_TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
C_BUILD := build/c

# The version comes from the generated header, the one source of truth for C.
C_VERSION_PART = $(shell sed -n 's/^\#define TENURE_VERSION_$(1) \([0-9]*\).*/\1/p' include/tenure.h)
C_MAJOR = $(call C_VERSION_PART,MAJOR)
C_MINOR = $(call C_VERSION_PART,MINOR)
C_PATCH = $(call C_VERSION_PART,PATCH)
C_VERSION = $(C_MAJOR).$(C_MINOR).$(C_PATCH)
# Must match ffi/build.rs: libtenure.so.0.MINOR before 1.0, libtenure.so.MAJOR after.
C_SONAME = libtenure.so.$(if $(filter 0,$(C_MAJOR)),0.$(C_MINOR),$(C_MAJOR))
# What a static link needs besides libtenure.a (rustc --print native-static-libs).
C_STATIC_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
# The same list for the CMake package's INTERFACE_LINK_LIBRARIES: `gcc_s;util;…`.
C_EMPTY :=
C_CMAKE_STATIC_LIBS := $(subst $(C_EMPTY) $(C_EMPTY),;,$(patsubst -l%,%,$(C_STATIC_LIBS)))

C_TEST_SRCS := $(wildcard tests/c/*.c)
C_TEST_HDRS := $(wildcard tests/c/*.h) include/tenure.h
C_WARN := -std=c11 -Wall -Wextra -Wpedantic -Werror
# The C++ wrapper is held to more than -Wall -Wextra: users build with such flags too.
CXX_WARN := -std=c++17 -Wall -Wextra -Wpedantic -Werror -Wshadow -Wconversion -Wsign-conversion
C_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
C_SAN_ENV := ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/c/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
LDCONFIG ?= $(shell command -v ldconfig 2>/dev/null || echo /sbin/ldconfig)
STRIP ?= strip

.PHONY: header install uninstall install-ldconfig test-c c-tools ffi-debug ffi-release ffi-test-hooks test-c-asan test-c-valgrind \
	test-c-api-coverage test-c-examples test-c-hpp test-c-cmake test-c-lean

EXTRA_TESTS += test-c
# The root Makefile expands $(EXTRA_TESTS) in `test`'s prerequisites before this fragment is
# included, so also attach the suite to `test` directly (make ignores the duplicate).
test: test-c

header:
	TENURE_UPDATE_HEADER=1 $(CARGO) test -q -p tenure-ffi --test header

ffi-debug:
	$(CARGO) build -q -p tenure-ffi $(FFI_FEATURES)

ffi-release:
	$(CARGO) build -q -p tenure-ffi --release $(FFI_FEATURES)

# The C tests link a debug libtenure.a with the panic test hooks (see ffi/src/test_hooks.rs).
ffi-test-hooks:
	$(CARGO) build -q -p tenure-ffi --features test-hooks

# Installs only what is missing (a fresh machine); `apt-get update` once, before installing.
c-tools:
	@missing=""; \
	command -v $(CC) >/dev/null 2>&1 || missing="$$missing gcc"; \
	command -v $(CXX) >/dev/null 2>&1 || missing="$$missing g++"; \
	command -v valgrind >/dev/null 2>&1 || missing="$$missing valgrind"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	command -v cmake >/dev/null 2>&1 || missing="$$missing cmake"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# The installed copies are stripped of debug info (the release profile has none of its own, but
# libtenure.a carries the standard library's); `make bench` uses the `profiling` profile instead.
install: ffi-$(INSTALL_PROFILE)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	install -m 644 include/tenure.h $(DESTDIR)$(INCLUDEDIR)/tenure.h
	install -m 644 include/tenure.hpp $(DESTDIR)$(INCLUDEDIR)/tenure.hpp
	install -m 644 $(C_TARGET_DIR)/$(INSTALL_PROFILE)/libtenure.a $(DESTDIR)$(LIBDIR)/libtenure.a
	$(STRIP) --strip-debug $(DESTDIR)$(LIBDIR)/libtenure.a
	install -m 755 $(C_TARGET_DIR)/$(INSTALL_PROFILE)/libtenure.so \
		$(DESTDIR)$(LIBDIR)/libtenure.so.$(C_VERSION)
	$(STRIP) --strip-unneeded $(DESTDIR)$(LIBDIR)/libtenure.so.$(C_VERSION)
	ln -sf libtenure.so.$(C_VERSION) $(DESTDIR)$(LIBDIR)/$(C_SONAME)
	ln -sf $(C_SONAME) $(DESTDIR)$(LIBDIR)/libtenure.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
		-e 's|@VERSION@|$(C_VERSION)|' -e 's|@STATIC_LIBS@|$(C_STATIC_LIBS)|' \
		ffi/tenure.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/tenure.pc
	install -d $(DESTDIR)$(CMAKEDIR)
	sed -e "s|@LIBDIR_FROM_CMAKEDIR@|$$(realpath -m --relative-to='$(CMAKEDIR)' '$(LIBDIR)')|" \
		-e "s|@INCLUDEDIR_FROM_CMAKEDIR@|$$(realpath -m --relative-to='$(CMAKEDIR)' '$(INCLUDEDIR)')|" \
		-e 's|@VERSION@|$(C_VERSION)|' -e 's|@SONAME@|$(C_SONAME)|' \
		-e 's|@STATIC_LIBS@|$(C_CMAKE_STATIC_LIBS)|' \
		ffi/cmake/tenureConfig.cmake.in > $(DESTDIR)$(CMAKEDIR)/tenureConfig.cmake
	sed -e 's|@VERSION@|$(C_VERSION)|' -e 's|@MAJOR@|$(C_MAJOR)|' -e 's|@MINOR@|$(C_MINOR)|' \
		-e "s|@SIZEOF_VOID_P@|$$(($$(getconf LONG_BIT) / 8))|" \
		ffi/cmake/tenureConfigVersion.cmake.in > $(DESTDIR)$(CMAKEDIR)/tenureConfigVersion.cmake
	@$(MAKE) --no-print-directory -s install-ldconfig

# Into the system (no DESTDIR) and a directory the loader searches: refresh its cache, else
# programs fail with "cannot open shared object file" until `ldconfig` runs. Anywhere else the
# program needs an rpath (README, "C quick start").
install-ldconfig:
	@if [ -n "$(DESTDIR)" ]; then exit 0; fi; \
	if $(LDCONFIG) -v -N 2>/dev/null | grep -q '^$(LIBDIR):'; then \
		if [ "$$(id -u)" = 0 ]; then $(LDCONFIG) && echo "ldconfig: loader cache refreshed for $(LIBDIR)"; \
		else echo "run 'sudo ldconfig' so the loader finds libtenure in $(LIBDIR)"; fi; \
	else \
		echo "$(LIBDIR) is not on the loader's path: link with -Wl,-rpath,$(LIBDIR)"; \
	fi

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/tenure.h $(DESTDIR)$(INCLUDEDIR)/tenure.hpp \
		$(DESTDIR)$(LIBDIR)/libtenure.a \
		$(DESTDIR)$(LIBDIR)/libtenure.so $(DESTDIR)$(LIBDIR)/$(C_SONAME) \
		$(DESTDIR)$(LIBDIR)/libtenure.so.$(C_VERSION) $(DESTDIR)$(LIBDIR)/pkgconfig/tenure.pc \
		$(DESTDIR)$(CMAKEDIR)/tenureConfig.cmake $(DESTDIR)$(CMAKEDIR)/tenureConfigVersion.cmake
	rmdir $(DESTDIR)$(CMAKEDIR) 2>/dev/null || true
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && \
		$(LDCONFIG) -v -N 2>/dev/null | grep -q '^$(LIBDIR):'; then $(LDCONFIG); fi

$(C_BUILD)/tests-asan: $(C_TEST_SRCS) $(C_TEST_HDRS) ffi-test-hooks | c-tools
	@mkdir -p $(C_BUILD)
	$(CC) $(C_WARN) -g -O1 $(C_SAN) -Iinclude $(C_TEST_SRCS) \
		$(C_TARGET_DIR)/debug/libtenure.a $(C_STATIC_LIBS) -o $@

$(C_BUILD)/tests-plain: $(C_TEST_SRCS) $(C_TEST_HDRS) ffi-test-hooks | c-tools
	@mkdir -p $(C_BUILD)
	$(CC) $(C_WARN) -g -O0 -Iinclude $(C_TEST_SRCS) \
		$(C_TARGET_DIR)/debug/libtenure.a $(C_STATIC_LIBS) -o $@

# Under a `tenure serve` started (and stopped) for the run: the connect round trip of
# tests/c/test_api.c runs against it (TENURE_TEST_CONNECT_URL).
test-c-asan: $(C_BUILD)/tests-asan | serve-tools
	RUST_BACKTRACE=0 $(PYTHON) tests/backends/run.py exec --serve-only -- env $(C_SAN_ENV) \
		$(C_BUILD)/tests-asan

test-c-valgrind: $(C_BUILD)/tests-plain
	RUST_BACKTRACE=0 valgrind -q --error-exitcode=1 --leak-check=full --show-leak-kinds=definite,indirect \
		--errors-for-leak-kinds=definite,indirect --suppressions=tests/c/valgrind.supp \
		$(C_BUILD)/tests-plain

# Every function the header declares is called by some C test, and wrapped by tenure.hpp.
test-c-api-coverage:
	@missing=""; unwrapped=""; \
	for f in $$(sed -n 's/^[a-z0-9_ ]*[ *]\(tenure_[a-z_]*\)(.*/\1/p' include/tenure.h); do \
		grep -qE "(^|[^a-z_])$$f\(" $(C_TEST_SRCS) || missing="$$missing $$f"; \
		grep -qE "(^|[^a-z_])$$f([^a-z_]|$$)" include/tenure.hpp || unwrapped="$$unwrapped $$f"; \
	done; \
	if [ -n "$$missing" ]; then echo "not called by tests/c:$$missing"; exit 1; fi; \
	if [ -n "$$unwrapped" ]; then echo "not used by include/tenure.hpp:$$unwrapped"; exit 1; fi; \
	echo "tests/c call, and tenure.hpp wraps, all $$(sed -n 's/^[a-z0-9_ ]*[ *]\(tenure_[a-z_]*\)(.*/\1/p' include/tenure.h | wc -l) functions of include/tenure.h"

# The examples build against a temporary install, found through pkg-config only.
test-c-examples: ffi-debug | c-tools
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(MAKE) --no-print-directory -s install PREFIX="$$tmp/prefix" INSTALL_PROFILE=debug; \
	export PKG_CONFIG_PATH="$$tmp/prefix/lib/pkgconfig"; \
	echo "pkg-config --cflags --libs tenure: $$(pkg-config --cflags --libs tenure)"; \
	test "$$(pkg-config --modversion tenure)" = "$(C_VERSION)"; \
	if nm -D "$$tmp/prefix/lib/libtenure.so" | grep -q tenure_test_; then \
		echo "installed libtenure.so exports test hooks"; exit 1; fi; \
	for f in "$$tmp/prefix/lib/libtenure.so" "$$tmp/prefix/lib/libtenure.a"; do \
		if readelf -S "$$f" | grep -q '\.debug_info'; then echo "$$f has debug info"; exit 1; fi; done; \
	$(CC) $(C_WARN) examples/c/leases.c $$(pkg-config --cflags --libs tenure) \
		-Wl,-rpath,"$$tmp/prefix/lib" -o "$$tmp/leases-c"; \
	"$$tmp/leases-c"; \
	$(CC) $(C_WARN) examples/c/leases.c $$(pkg-config --cflags tenure) \
		"$$(pkg-config --variable=libdir tenure)/libtenure.a" \
		$$(pkg-config --static --libs-only-l tenure | sed 's/-ltenure//') -o "$$tmp/leases-static"; \
	if readelf -d "$$tmp/leases-static" | grep -q 'libtenure'; then \
		echo "static example still needs libtenure.so"; exit 1; fi; \
	"$$tmp/leases-static" >/dev/null; \
	$(CXX) $(CXX_WARN) examples/cpp/leases.cpp \
		$$(pkg-config --cflags --libs tenure) -Wl,-rpath,"$$tmp/prefix/lib" -o "$$tmp/leases-cpp"; \
	"$$tmp/leases-cpp"; \
	$(CC) $(C_WARN) -pthread examples/c/leader.c $$(pkg-config --cflags --libs tenure) \
		-Wl,-rpath,"$$tmp/prefix/lib" -o "$$tmp/leader-c"; \
	"$$tmp/leader-c"; \
	$(CC) $(C_WARN) -pthread examples/c/semaphore.c $$(pkg-config --cflags --libs tenure) \
		-Wl,-rpath,"$$tmp/prefix/lib" -o "$$tmp/semaphore-c"; \
	"$$tmp/semaphore-c"; \
	$(CC) $(C_WARN) -pthread examples/c/rwlock.c $$(pkg-config --cflags --libs tenure) \
		-Wl,-rpath,"$$tmp/prefix/lib" -o "$$tmp/rwlock-c"; \
	"$$tmp/rwlock-c"; \
	$(CC) $(C_WARN) -pthread examples/c/queue.c $$(pkg-config --cflags --libs tenure) \
		-Wl,-rpath,"$$tmp/prefix/lib" -o "$$tmp/queue-c"; \
	"$$tmp/queue-c"; \
	$(CC) $(C_WARN) -pthread examples/c/barrier.c $$(pkg-config --cflags --libs tenure) \
		-Wl,-rpath,"$$tmp/prefix/lib" -o "$$tmp/barrier-c"; \
	"$$tmp/barrier-c"; \
	$(CC) $(C_WARN) examples/c/bounded_mutex.c $$(pkg-config --cflags --libs tenure) \
		-Wl,-rpath,"$$tmp/prefix/lib" -o "$$tmp/bounded-mutex-c"; \
	"$$tmp/bounded-mutex-c"; \
	$(CC) $(C_WARN) examples/c/groups.c $$(pkg-config --cflags --libs tenure) \
		-Wl,-rpath,"$$tmp/prefix/lib" -o "$$tmp/groups-c"; \
	"$$tmp/groups-c"; \
	$(CXX) $(CXX_WARN) -pthread examples/cpp/coordination.cpp \
		$$(pkg-config --cflags --libs tenure) -Wl,-rpath,"$$tmp/prefix/lib" -o "$$tmp/coordination-cpp"; \
	"$$tmp/coordination-cpp"; \
	$(MAKE) --no-print-directory -s uninstall PREFIX="$$tmp/prefix"; \
	left=$$(find "$$tmp/prefix" -type f -o -type l); \
	if [ -n "$$left" ]; then echo "make uninstall left: $$left"; exit 1; fi

# tenure.hpp's tests, with the C tests' sanitizers and leak checking.
$(C_BUILD)/test-hpp-asan: tests/cpp/test_hpp.cpp include/tenure.hpp include/tenure.h ffi-test-hooks | c-tools
	@mkdir -p $(C_BUILD)
	$(CXX) $(CXX_WARN) -g -O1 $(C_SAN) -pthread -Iinclude tests/cpp/test_hpp.cpp \
		$(C_TARGET_DIR)/debug/libtenure.a $(C_STATIC_LIBS) -o $@

test-c-hpp: $(C_BUILD)/test-hpp-asan
	RUST_BACKTRACE=0 $(C_SAN_ENV) $(C_BUILD)/test-hpp-asan

# The CMake package, installed for PREFIX=/opt/tenure into a DESTDIR staging tree and found
# there (so its paths are relative to itself): a C program against tenure::tenure and
# tenure::tenure_static, and examples/cpp/leases.cpp (tenure.hpp) against tenure::tenure.
test-c-cmake: ffi-debug | c-tools
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(MAKE) --no-print-directory -s install DESTDIR="$$tmp/stage" PREFIX=/opt/tenure INSTALL_PROFILE=debug; \
	prefix="$$tmp/stage/opt/tenure"; \
	if ! cmake -S tests/cmake -B "$$tmp/build" -DCMAKE_PREFIX_PATH="$$prefix" \
		-DCMAKE_C_COMPILER="$(CC)" -DCMAKE_CXX_COMPILER="$(CXX)" -DTENURE_MAJOR=$(C_MAJOR) \
		-DTENURE_MINOR=$(C_MINOR) -DTENURE_PATCH=$(C_PATCH) -DTENURE_EXAMPLES="$(CURDIR)/examples" \
		>"$$tmp/configure.log" 2>&1; then cat "$$tmp/configure.log"; exit 1; fi; \
	grep "tenure $(C_VERSION) from $$prefix/lib/cmake/tenure" "$$tmp/configure.log"; \
	if ! cmake --build "$$tmp/build" >"$$tmp/build.log" 2>&1; then cat "$$tmp/build.log"; exit 1; fi; \
	"$$tmp/build/consumer_shared"; \
	"$$tmp/build/consumer_static"; \
	"$$tmp/build/consumer_cpp" >/dev/null; \
	if ! readelf -d "$$tmp/build/consumer_shared" | grep -q 'NEEDED.*\[$(C_SONAME)\]'; then \
		echo "consumer_shared does not load $(C_SONAME)"; exit 1; fi; \
	if readelf -d "$$tmp/build/consumer_static" | grep -q 'libtenure'; then \
		echo "consumer_static still needs libtenure.so"; exit 1; fi; \
	$(MAKE) --no-print-directory -s uninstall DESTDIR="$$tmp/stage" PREFIX=/opt/tenure; \
	left=$$(find "$$tmp/stage" -type f -o -type l); \
	if [ -n "$$left" ]; then echo "make uninstall left: $$left"; exit 1; fi; \
	echo "test-c-cmake: find_package(tenure) with both targets and tenure.hpp passed"

# REMOTE=0: the same exported functions, tenure_connect answering TENURE_ERR_UNSUPPORTED, and
# a smaller library. The full install goes last, so target/ is left with the default build.
test-c-lean: | c-tools
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(MAKE) --no-print-directory -s install PREFIX="$$tmp/lean" INSTALL_PROFILE=debug REMOTE=0; \
	$(MAKE) --no-print-directory -s install PREFIX="$$tmp/full" INSTALL_PROFILE=debug; \
	for v in lean full; do nm -D --defined-only "$$tmp/$$v/lib/libtenure.so" | \
		awk '$$3 ~ /^tenure_/ {print $$3}' | sort > "$$tmp/$$v.symbols"; done; \
	if ! diff "$$tmp/full.symbols" "$$tmp/lean.symbols"; then \
		echo "REMOTE=0 changed the exported functions"; exit 1; fi; \
	grep -qx tenure_connect "$$tmp/lean.symbols"; \
	$(CC) $(C_WARN) tests/c/lean/connect_unsupported.c \
		$$(PKG_CONFIG_PATH="$$tmp/lean/lib/pkgconfig" pkg-config --cflags --libs tenure) \
		-Wl,-rpath,"$$tmp/lean/lib" -o "$$tmp/connect-lean"; \
	"$$tmp/connect-lean"; \
	full=$$(stat -c %s "$$tmp/full/lib/libtenure.so.$(C_VERSION)"); \
	lean=$$(stat -c %s "$$tmp/lean/lib/libtenure.so.$(C_VERSION)"); \
	echo "stripped debug libtenure.so: $$full bytes, $$lean bytes with REMOTE=0"; \
	if [ "$$lean" -ge "$$full" ]; then echo "the REMOTE=0 library is not smaller"; exit 1; fi; \
	$(MAKE) --no-print-directory -s uninstall PREFIX="$$tmp/lean"; \
	$(MAKE) --no-print-directory -s uninstall PREFIX="$$tmp/full"

test-c: c-tools test-c-api-coverage test-c-asan test-c-valgrind test-c-hpp test-c-examples test-c-cmake \
	test-c-lean
	@echo "test-c: ASan+UBSan, valgrind, tenure.hpp, the installed C/C++ examples (pkg-config, CMake) and REMOTE=0 passed"
