#!/bin/bash
# `make install` into a temporary DESTDIR, then build both examples, as
# installed under $(docdir)/examples, against the installed headers and
# library with `pkg-config --cflags --libs kernbench` and run them. The
# installed headers, docs and man page must not point at files a user of the
# installed library lacks (the source tree's tests, specs and design notes).
set -u
: "${abs_top_builddir:?}" "${abs_top_srcdir:?}"
CC=${CC:-cc}
MAKE=${MAKE:-make}

command -v pkg-config >/dev/null 2>&1 || { echo "SKIP: pkg-config not found"; exit 77; }
command -v "${CC%% *}" >/dev/null 2>&1 || { echo "SKIP: no C compiler ($CC)"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kbinstall.XXXXXX") || exit 1
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# A sub-make of its own: not the jobserver or the targets of the caller.
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL $MAKE -C "$abs_top_builddir" install DESTDIR="$tmp" \
	> "$tmp/install.log" 2>&1; then
	cat "$tmp/install.log"
	echo "FAIL: make install DESTDIR=$tmp"
	exit 1
fi

# The op reference is installed with the library (under $(docdir)).
[ -n "$(find "$tmp" -name commands.md -path '*/doc/kernbench/*' | head -n 1)" ] ||
	{ echo "FAIL: doc/commands.md was not installed under \$(docdir)"; exit 1; }

pc=$(find "$tmp" -name kernbench.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || { echo "FAIL: kernbench.pc was not installed"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"
export PKG_CONFIG_SYSROOT_DIR="$tmp"
unset PKG_CONFIG_LIBDIR 2>/dev/null || true
# pkgconf prefixes variables with the sysroot, pkg-config 0.29 does not.
sysrooted() {
	case "$1" in
	"$tmp"/*) printf '%s\n' "$1" ;;
	*) printf '%s\n' "$tmp$1" ;;
	esac
}
libdir=$(pkg-config --variable=libdir kernbench) || { echo "FAIL: pkg-config kernbench"; exit 1; }
libdir=$(sysrooted "$libdir")
includedir=$(sysrooted "$(pkg-config --variable=includedir kernbench)")

status=0
for f in kernbench.h kernbench/version.h kernbench/common.h kernbench/tl.h kernbench/simulation.h; do
	[ -f "$includedir/$f" ] || { echo "FAIL: $includedir/$f not installed"; status=1; }
done
ls "$libdir"/libkernbench.so* >/dev/null 2>&1 || { echo "FAIL: no libkernbench.so in $libdir"; status=1; }
doc=$(find "$tmp" -type d -path '*/share/doc/kernbench' | head -n 1)
[ -n "$doc" ] || { echo "FAIL: no share/doc/kernbench installed"; exit 1; }
for f in api.md threadsafety.md examples/embed_gemm.c examples/embed_rsweep.c \
	examples/plugin/splitk_gemm.c; do
	[ -f "$doc/$f" ] || { echo "FAIL: $doc/$f not installed"; status=1; }
done
man=$(find "$tmp" -name kernbench.1 | head -n 1)
[ -n "$man" ] || { echo "FAIL: no man page installed"; status=1; }
grep -q 'api\.md' "$man" || { echo "FAIL: the man page's SEE ALSO does not name api.md"; status=1; }
# roff comments (.\") are not shown to the reader.
if grep -v '^\.\\"' "$man" | cat - "$includedir"/kernbench.h "$includedir"/kernbench/*.h \
	"$doc"/*.md "$doc"/examples/*.c |
	grep -nE 'ARCHITECTURE|DDD|ADR-|tests/|seeds|src/|doc/(examples|topology|design)'; then
	echo "FAIL: installed headers or docs refer to files a user of the installed library lacks"
	status=1
fi
[ $status -eq 0 ] || exit 1

flags=$(pkg-config --cflags --libs kernbench) || { echo "FAIL: pkg-config --cflags --libs kernbench"; exit 1; }
echo "pkg-config --cflags --libs kernbench: $flags"
case "$flags" in
*"-I$tmp"*) ;;
*) echo "FAIL: the flags do not point into the installed tree"; exit 1 ;;
esac

for ex in embed_gemm embed_rsweep; do
	# -std=c11 -pedantic: the examples use nothing but the public API.
	# A sanitizer build installs an instrumented library: link the
	# runtime the same way (KB_SAN_FLAGS is empty otherwise).
	if ! $CC -std=c11 -pedantic -Wall -Wextra -Werror ${KB_SAN_FLAGS:-} -o "$tmp/$ex" \
		"$doc/examples/$ex.c" $flags -lm; then
		echo "FAIL: $ex does not build against the installed library"
		status=1
	fi
done
[ $status -eq 0 ] || exit 1

export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The programs must load the installed library, not the build tree's.
if command -v ldd >/dev/null 2>&1; then
	ldd "$tmp/embed_gemm" | grep libkernbench
	ldd "$tmp/embed_gemm" | grep -q "$libdir/libkernbench" ||
		{ echo "FAIL: embed_gemm does not load $libdir/libkernbench.so"; exit 1; }
fi
"$tmp/embed_gemm" || { echo "FAIL: installed embed_gemm"; status=1; }
"$tmp/embed_rsweep" 512 0,0.0625 || { echo "FAIL: installed embed_rsweep"; status=1; }
# The example plugin, built against the installed headers and library
# and loaded by the installed command (the same script as installcheck's).
kb=$(find "$tmp" -name kernbench -type f -path '*/bin/*' | head -n 1)
[ -n "$kb" ] || { echo "FAIL: no kernbench command installed"; exit 1; }
mkdir "$tmp/plugin" || exit 1
sh "$abs_top_srcdir/tests/api/plugin_installed.sh" "$doc" "$kb" "$tmp/plugin" || status=1
[ $status -eq 0 ] && echo "PASS: installed, built with pkg-config and ran both examples and the plugin"
exit $status
