#!/bin/bash
# The complete plugin of doc/api.md ("Example: a plugin, complete") is
# complete: the C block after its marker builds as a plugin against the
# build tree's headers and library, loads into kernbench, and passes its
# own data-mode check.
set -u
: "${abs_top_builddir:?}" "${abs_top_srcdir:?}"
CC=${CC:-cc}
command -v "${CC%% *}" >/dev/null 2>&1 || { echo "SKIP: no C compiler ($CC)"; exit 77; }
lib="$abs_top_builddir/.libs/libkernbench.so"
[ -f "$lib" ] || { echo "SKIP: no shared library at $lib"; exit 77; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
awk '/<!-- plugin example/ { on = 1; next }
	on && /^```c$/ { inside = 1; next }
	inside && /^```$/ { exit }
	inside { print }' "$abs_top_srcdir/doc/api.md" >"$tmp/mm_relu.c"
[ -s "$tmp/mm_relu.c" ] || { echo "FAIL: no plugin example block in doc/api.md"; exit 1; }
$CC -std=c11 -pedantic -Wall -Wextra -Werror ${KB_SAN_FLAGS:-} -shared -fPIC \
	-I"$abs_top_srcdir/include" -I"$abs_top_builddir/include" -o "$tmp/libmmrelu.so" \
	"$tmp/mm_relu.c" -L"$abs_top_builddir/.libs" -lkernbench ||
	{ echo "FAIL: the plugin example of doc/api.md does not build"; exit 1; }
out=$("$abs_top_builddir/kernbench" --plugin "$tmp/libmmrelu.so" run mm_relu --param M=16 \
	--param K=32 --param N=8 --data --json) ||
	{ echo "FAIL: the plugin example does not run"; exit 1; }
err=$(printf '%s\n' "$out" | sed -e 's/.*"max_abs_err":\([^,}]*\).*/\1/')
awk -v e="$err" 'BEGIN { exit !(e != "null" && e + 0 < 1e-4) }' ||
	{ echo "FAIL: the plugin example's check: max_abs_err $err"; exit 1; }
echo "PASS: the plugin example of doc/api.md builds, runs and checks (max_abs_err $err)"
