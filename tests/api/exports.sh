#!/bin/bash
# The shared library exports exactly the kb_ functions listed in
# tests/api/exports.txt: an accidental export or a removal fails. And the
# structs the library fills keep the layouts of tests/api/layouts.txt.
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

# The structs the library fills keep their size field where programs built
# earlier look for it, and the first layouts keep their size (issue 16): a
# field inserted before the end of a first layout, or a size field moved,
# changes tests/api/layouts.txt, which is then updated deliberately (and
# KB_BENCH_ABI and the libtool version with it).
CC=${CC:-cc}
if command -v "${CC%% *}" >/dev/null 2>&1; then
	cat > "$tmp/layouts.c" <<'EOC'
#include <stdio.h>
#include <kernbench.h>
#define ROW(t, v1) printf("%s %zu %zu %zu\n", #t, (size_t)offsetof(t, size), (size_t)(v1), sizeof(t))
int main(void)
{
	ROW(kb_result, KB_RESULT_SIZE_V1);
	ROW(kb_sweep_row, KB_SWEEP_ROW_SIZE_V1);
	ROW(kb_sweep_figures, sizeof(kb_sweep_figures));
	ROW(kb_oplog_record, offsetof(kb_oplog_record, size) + sizeof(size_t));
	/* kb_error: no size (callers leave it uninitialised) but a version
	 * and a size that never changes. */
	printf("kb_error %zu %zu %zu\n", (size_t)offsetof(kb_error, version),
	       (size_t)offsetof(kb_error, version), sizeof(kb_error));
	printf("KB_BENCH_ABI %u\n", KB_BENCH_ABI);
	return 0;
}
EOC
	if ! $CC -std=c11 -I"$abs_top_srcdir/include" -I"$abs_top_builddir/include" \
		-o "$tmp/layouts" "$tmp/layouts.c" || ! "$tmp/layouts" > "$tmp/layouts.txt"; then
		echo "FAIL: cannot build the layout probe against the headers"
		status=1
	elif [ "$(uname -m)" = x86_64 ]; then
		# struct offset-of-size size-of-first-layout sizeof, on x86_64.
		if ! diff -u "$abs_top_srcdir/tests/api/layouts.txt" "$tmp/layouts.txt"; then
			echo "FAIL: the layouts of the structs the library fills differ from tests/api/layouts.txt"
			status=1
		fi
	else
		awk '$1 ~ /^kb_/ && $2 != 0 && $1 != "kb_oplog_record" && $1 != "kb_error" { bad = 1 } END { exit bad }' \
			"$tmp/layouts.txt" || { echo "FAIL: a size field is not the first member"; status=1; }
	fi
fi
[ $status -eq 0 ] && echo "PASS: $(wc -l < "$tmp/actual") exported functions, all kb_*; struct layouts as tests/api/layouts.txt"
exit $status
