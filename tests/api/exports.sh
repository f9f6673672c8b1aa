#!/bin/bash
# The shared library exports exactly the kb_ functions listed in
# tests/api/exports.txt: an accidental export or a removal fails.
# Regenerate the list after an intended change with:
#   nm -D --defined-only .libs/libkernbench.so | awk '$2=="T"{print $3}' | sort > tests/api/exports.txt
set -u
: "${abs_top_builddir:?}" "${abs_top_srcdir:?}"
lib="$abs_top_builddir/.libs/libkernbench.so"
list="$abs_top_srcdir/tests/api/exports.txt"

command -v nm >/dev/null 2>&1 || { echo "SKIP: nm not found"; exit 77; }
[ -f "$lib" ] || { echo "SKIP: no shared library at $lib (static-only build?)"; exit 77; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" | awk '$2=="T"{print $3}' | LC_ALL=C sort > "$tmp/actual" || exit 1
LC_ALL=C sort "$list" > "$tmp/expected" || exit 1

status=0
if ! diff -u "$tmp/expected" "$tmp/actual"; then
	echo "FAIL: exported functions differ from tests/api/exports.txt (- listed, + exported)"
	status=1
fi
# Every defined dynamic symbol, whatever its kind, starts with kb_.
nm -D --defined-only "$lib" | awk '{print $NF}' | grep -v '^kb_' > "$tmp/bad"
if [ -s "$tmp/bad" ]; then
	echo "FAIL: exported symbols without the kb_ prefix:"
	cat "$tmp/bad"
	status=1
fi
[ $status -eq 0 ] && echo "PASS: $(wc -l < "$tmp/actual") exported functions, all kb_*"
exit $status
