#!/bin/sh
# The linker of the glibc wheels (mk/python.mk, py_wheel): maturin's zig, except that Rust's
# `-lgcc_s` links the target's libgcc_s.so.1 (TENURE_LIBGCC_S) instead of the static libunwind
# maturin's zig wrapper puts there. Why: Python ends daemon threads at exit with pthread_exit,
# whose forced unwind runs in glibc's libgcc_s and calls Rust's personality routine; with a
# second, static unwinder inside the extension that routine reads libgcc_s's context with the
# other unwinder's layout and the process crashes (tests/python/test_gc.py). One unwinder,
# libgcc_s, as native and manylinux-image builds have it (the manylinux2014 policy allows it).
# Env: TENURE_ZIG_TARGET (e.g. x86_64-linux-gnu.2.17), TENURE_LIBGCC_S; maturin on PATH.
set -eu
if [ ! -f "${TENURE_LIBGCC_S:-}" ]; then
	echo "zig-link.sh: no libgcc_s.so.1 for $TENURE_ZIG_TARGET (TENURE_LIBGCC_S=${TENURE_LIBGCC_S:-});" \
		"install the target's libgcc (Debian: libgcc-s1:ARCH or gcc-ARCH-linux-gnu)" >&2
	exit 1
fi
for a in "$@"; do
	shift
	case "$a" in
	-lgcc_s) set -- "$@" "$TENURE_LIBGCC_S" ;;
	@*) sed -i "s|^-lgcc_s\$|$TENURE_LIBGCC_S|" "${a#@}"; set -- "$@" "$a" ;;
	*) set -- "$@" "$a" ;;
	esac
done
exec maturin zig cc -- -g -fno-sanitize=all -target "$TENURE_ZIG_TARGET" "$@"
