#!/bin/bash
# A rank that fails or dies ends the run with an error naming it; the rows
# written stay, and --resume (under mpirun or not) completes the file, equal
# to an uninterrupted sweep (wall_s aside).
set -u
. "$(dirname "$0")/lib.sh"

args=(synthetic --param seed=$(seq -s, 101 140) --param events=20000,40000 --quiet)
"$KB" sweep "${args[@]}" -j 2 --out "$TMP/full.csv" || fail "uninterrupted sweep exited $?"
strip_wall "$TMP/full.csv" >"$TMP/full.s"
[ "$(wc -l <"$TMP/full.csv")" -eq 81 ] || fail "expected 80 rows"

# 1. Rank 2 reports an error after 3 rows (a test hook): rank 0 names it.
KERNBENCH_MPI_TEST_FAIL=2:3 mpirun_kb 3 sweep "${args[@]}" -j 1 --out "$TMP/fail.csv" \
	>"$TMP/fail.out" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "a failing rank gave exit status 0"
grep -q 'rank 2 failed' "$TMP/fail.out" || fail "the error does not name rank 2: $(cat "$TMP/fail.out")"
rows=$(($(wc -l <"$TMP/fail.csv") - 1))
echo "rank 2 failed; $rows rows kept; rank 0 said:"
grep '^kernbench' "$TMP/fail.out"
[ "$rows" -lt 80 ] || fail "every row was written although a rank failed"
head -n $((rows + 1)) "$TMP/full.csv" | cut -d, -f1-3 | cmp -s - <(cut -d, -f1-3 "$TMP/fail.csv") ||
	fail "the rows kept are not a prefix of the sweep"
mpirun_kb 3 sweep "${args[@]}" -j 1 --out "$TMP/fail.csv" --resume || fail "resume exited $?"
strip_wall "$TMP/fail.csv" | cmp -s - "$TMP/full.s" || fail "resumed file differs"

# 2. Rank 1 is killed (SIGKILL) once it has sent 3 rows: the run ends with
# an error naming rank 1 (mpirun's), then --resume completes the file. A
# test hook makes rank 1 stop itself (SIGSTOP) after its 3rd row, so it is
# surely alive when killed, however fast or slow the machine is.
export KB_MPI_TEST_TAG=$TMP
KERNBENCH_MPI_TEST_STOP=1:3 mpirun_kb 2 sweep "${args[@]}" -j 1 --out "$TMP/kill.csv" \
	>"$TMP/kill.out" 2>&1 &
mpid=$!
victim=
for _ in $(seq 1 1200); do
	if [ -z "$victim" ]; then
		for e in /proc/[0-9]*/environ; do
			grep -qzx "KB_MPI_TEST_TAG=$TMP" "$e" 2>/dev/null || continue
			grep -qzx 'OMPI_COMM_WORLD_RANK=1' "$e" 2>/dev/null || continue
			victim=$(basename "$(dirname "$e")")
			break
		done
	fi
	# field 3 of /proc/PID/stat is the state: T once the rank has stopped
	[ -n "$victim" ] && [ "$(awk '{print $3}' "/proc/$victim/stat" 2>/dev/null)" = T ] && break
	sleep 0.05
done
[ -n "$victim" ] || { kill "$mpid"; fail "rank 1 not found"; }
[ "$(awk '{print $3}' "/proc/$victim/stat" 2>/dev/null)" = T ] ||
	{ kill "$mpid"; fail "rank 1 did not stop after 3 rows within 60 s"; }
kill -9 "$victim"
wait "$mpid"
rc=$?
[ $rc -ne 0 ] || fail "mpirun exited 0 although rank 1 was killed"
grep -q 'rank 1' "$TMP/kill.out" || fail "the error does not name rank 1: $(cat "$TMP/kill.out")"
rows=$(($(wc -l <"$TMP/kill.csv") - 1))
echo "rank 1 killed; $rows rows kept; mpirun said:"
grep 'rank 1' "$TMP/kill.out"
"$KB" sweep "${args[@]}" -j 2 --out "$TMP/kill.csv" --resume || fail "resume exited $?"
strip_wall "$TMP/kill.csv" | cmp -s - "$TMP/full.s" || fail "resumed file differs after a kill"
echo PASS
