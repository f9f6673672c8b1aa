#!/bin/sh
# `make check-valgrind`: every Check suite (CK_FORK=no, so the tests run in
# the process valgrind watches) and a few kernbench runs under memcheck.
# Any memory error or definite leak fails; exit 77 when valgrind is missing.
B=${abs_top_builddir:-.}
VALGRIND=${VALGRIND:-valgrind}
LIBTOOL=${LIBTOOL:-$B/libtool}
if [ -z "$VALGRIND" ] || ! command -v "$VALGRIND" >/dev/null 2>&1; then
	echo "check-valgrind: valgrind not found; skipped"
	exit 77
fi
SUITES=${SUITES:-"topology numerics sim oplog tl pe bench data parallel api"}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kbvg.XXXXXX") || exit 99
trap 'rm -rf "$TMP"' EXIT
VG="$VALGRIND --quiet --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite --num-callers=30"
failed=0

# vg NAME EXPECTED_STATUS COMMAND...: memcheck reports exit with status 1
# (the exit status of a failing test too); a command expected to fail with
# 1 runs with --error-exitcode=97 instead, so the two stay apart.
vg() {
	name=$1
	want=$2
	shift 2
	code=1
	[ "$want" -eq 1 ] && code=97
	printf 'check-valgrind: %s ... ' "$name"
	# libtool wrapper scripts run the real program through --mode=execute.
	$LIBTOOL --mode=execute $VG --error-exitcode=$code --log-file="$TMP/$name.log" "$@" \
		>"$TMP/$name.out" 2>&1
	got=$?
	if [ "$got" -eq "$want" ]; then
		echo ok
	else
		echo "FAILED (exit $got, expected $want)"
		cat "$TMP/$name.log" "$TMP/$name.out" | tail -n 80
		failed=$((failed + 1))
	fi
}

export CK_FORK=no CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-600}
for s in $SUITES; do
	vg "suite-$s" 0 "$B/tests/check_all" "$s"
done
vg run-synthetic 0 "$B/kernbench" run synthetic --param events=2000 --threads 2
vg run-gemm 0 "$B/kernbench" run gemm --param M=128 --param K=128 --param N=128 --threads 1 \
	--op-log "$TMP/gemm.jsonl" --trace "$TMP/gemm.trace.json"
vg run-gemm-data 0 "$B/kernbench" run gemm --data --param M=64 --param K=64 --param N=64 \
	--dump "$TMP/dump"
vg run-decode 0 "$B/kernbench" run gqa_decode_opt2 --param S_kv=256 --threads 0
vg run-error 1 "$B/kernbench" run gqa_decode_opt2 --param S_kv=64 --param d=4096 --param G=4096
vg sweep 0 "$B/kernbench" sweep synthetic --param events=100 --param lps=1,2 -j 2 --quiet \
	--out "$TMP/s.csv"
[ "$failed" -eq 0 ] || { echo "check-valgrind: $failed run(s) failed"; exit 1; }
echo "check-valgrind: all clean"
