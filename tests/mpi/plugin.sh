#!/bin/bash
# A plugin's bench under MPI (issue 16): every rank loads the same plugins
# (same argv, same environment) before the sweep is split between ranks,
# so `mpirun -np N kernbench --plugin P sweep ...` writes the rows of the
# single-process sweep (wall_s aside), --resume included; a broken plugin
# stops every rank with exit status 1.
set -u
. "$(dirname "$0")/lib.sh"

B=${abs_top_builddir:-.}
PLUGIN=$B/doc/examples/plugin/.libs/libsplitk.so
[ -f "$PLUGIN" ] || { echo "SKIP: $PLUGIN not built (make check builds it)" >&2; exit 77; }
unset KERNBENCH_PLUGIN_PATH

args=(splitk_gemm --param M=16 --param N=16 --param splits=1,2,4 --param K=64,128 --data --quiet)
"$KB" --plugin "$PLUGIN" sweep "${args[@]}" -j 2 --out "$TMP/ref.csv" || fail "single-process sweep exited $?"
strip_wall "$TMP/ref.csv" >"$TMP/ref.s"
[ "$(wc -l <"$TMP/ref.csv")" -eq 7 ] || fail "expected a header and 6 rows"

# --plugin after the command's options: every rank takes it out the same way.
mpirun_kb 2 sweep "${args[@]}" -j 1 --out "$TMP/m2.csv" --plugin "$PLUGIN" ||
	fail "mpirun -np 2 sweep ... --plugin exited $?"
strip_wall "$TMP/m2.csv" | cmp -s - "$TMP/ref.s" || fail "-np 2: rows differ from the single-process sweep"
head -n 3 "$TMP/ref.csv" >"$TMP/part.csv"
KERNBENCH_PLUGIN_PATH=$(dirname "$PLUGIN") mpirun_kb 3 sweep "${args[@]}" -j 1 --out "$TMP/part.csv" \
	--resume || fail "mpirun --resume through KERNBENCH_PLUGIN_PATH exited $?"
strip_wall "$TMP/part.csv" | cmp -s - "$TMP/ref.s" || fail "-np 3 --resume: the file differs"

mpirun_kb 2 --plugin "$B/tests/plugins/.libs/libkbt_dup.so" sweep "${args[@]}" --out "$TMP/bad.csv" \
	2>"$TMP/err"
[ $? -eq 1 ] || fail "mpirun with a broken plugin: exit status not 1"
grep -q "libkbt_dup.so" "$TMP/err" || fail "mpirun with a broken plugin: the file is not named"
echo "PASS: the plugin's sweep under mpirun -np 2 and 3 (resume) matches the single process"
