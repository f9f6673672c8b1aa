#!/bin/sh
# Replays every fuzz seed (tests/fuzz/corpus/TARGET) and every regression
# (tests/fuzz/regressions/TARGET) through the replay programs, which call
# the fuzz targets' LLVMFuzzerTestOneInput from a plain main(). A crash or
# an abort of a target's own checks fails the test.
B=${abs_top_builddir:-.}
S=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
rc=0
for t in topology set kernel resume; do
	prog=$B/tests/fuzz/replay_$t
	if [ ! -x "$prog" ]; then
		echo "SKIP: $prog not built" >&2
		exit 77
	fi
	if ! "$prog" "$S/tests/fuzz/corpus/$t" "$S/tests/fuzz/regressions/$t"; then
		echo "FAIL: replay of fuzz target $t" >&2
		rc=1
	fi
done
exit $rc
