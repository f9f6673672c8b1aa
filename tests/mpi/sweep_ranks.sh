#!/bin/bash
# `mpirun -np 2|3 kernbench sweep ...` writes the same rows as the
# single-process sweep (wall_s aside), whatever the ranks and -j: CSV, JSON
# Lines, standard output, failing points (exit 1), --resume and --plot.
set -u
. "$(dirname "$0")/lib.sh"

args=(synthetic --param lps=2,4 --param events=300,600,900 --param seed=1,2
	--set pe_cost_model.r_cycles_per_byte=0.0625,0.125 --quiet)
"$KB" sweep "${args[@]}" -j 2 --out "$TMP/ref.csv" || fail "single-process sweep exited $?"
"$KB" sweep "${args[@]}" -j 2 --out "$TMP/ref.jsonl" || fail "single-process jsonl exited $?"
strip_wall "$TMP/ref.csv" >"$TMP/ref.csv.s"
strip_wall_jsonl "$TMP/ref.jsonl" >"$TMP/ref.jsonl.s"
[ "$(wc -l <"$TMP/ref.csv")" -eq 25 ] || fail "expected a header and 24 rows"

for np in 2 3; do
	for j in 1 2; do
		mpirun_kb $np sweep "${args[@]}" -j $j --out "$TMP/m$np.$j.csv" ||
			fail "mpirun -np $np sweep -j $j exited $?"
		strip_wall "$TMP/m$np.$j.csv" | cmp -s - "$TMP/ref.csv.s" ||
			fail "-np $np -j $j: CSV rows differ from the single-process sweep"
	done
	mpirun_kb $np sweep "${args[@]}" -j 1 --out "$TMP/m$np.jsonl" ||
		fail "mpirun -np $np jsonl exited $?"
	strip_wall_jsonl "$TMP/m$np.jsonl" | cmp -s - "$TMP/ref.jsonl.s" ||
		fail "-np $np: JSON Lines rows differ"
	# Rows on standard output (rank 0's) without --out.
	mpirun_kb $np sweep "${args[@]}" -j 1 >"$TMP/stdout$np.csv" ||
		fail "mpirun -np $np to stdout exited $?"
	strip_wall "$TMP/stdout$np.csv" | cmp -s - "$TMP/ref.csv.s" ||
		fail "-np $np: rows on standard output differ"
done

# Failing points are rows with their error; the exit status is 1.
fargs=(synthetic --param events=100,200,300 --set pe_cost_model.r_cycles_per_byte=0.0625,-1
	--param 'seed=1,2"3' --quiet)
"$KB" sweep "${fargs[@]}" -j 2 --out "$TMP/fref.csv"
[ $? -eq 1 ] || fail "single-process failing sweep: exit status not 1"
mpirun_kb 3 sweep "${fargs[@]}" -j 1 --out "$TMP/f3.csv"
[ $? -eq 1 ] || fail "mpirun failing sweep: exit status not 1"
strip_wall "$TMP/f3.csv" | cmp -s - <(strip_wall "$TMP/fref.csv") ||
	fail "failing points: rows differ"
grep -q ',error,' "$TMP/f3.csv" || fail "no failed row"

# --resume: rows cut from the end and from the middle are run again.
head -n 9 "$TMP/ref.csv" >"$TMP/part.csv"
printf 'synthetic,4,3' >>"$TMP/part.csv"   # a row cut while written
mpirun_kb 2 sweep "${args[@]}" -j 1 --out "$TMP/part.csv" --resume || fail "resume exited $?"
strip_wall "$TMP/part.csv" | cmp -s - "$TMP/ref.csv.s" || fail "resumed file differs"
head -n 9 "$TMP/part.csv" | cmp -s - <(head -n 9 "$TMP/ref.csv") || fail "resume rewrote old rows"
sed -e '3d;10,15d' "$TMP/ref.csv" >"$TMP/holes.csv"
mpirun_kb 3 sweep "${args[@]}" -j 2 --out "$TMP/holes.csv" --resume || fail "resume with holes exited $?"
strip_wall "$TMP/holes.csv" | cmp -s - "$TMP/ref.csv.s" || fail "resume with holes differs"
cp "$TMP/ref.csv" "$TMP/full.csv"
mpirun_kb 2 sweep "${args[@]}" --out "$TMP/full.csv" --resume || fail "resume of a full file exited $?"
cmp -s "$TMP/ref.csv" "$TMP/full.csv" || fail "resume of a full file changed it"

# --plot (rank 0) and usage errors (one message, exit 2).
mpirun_kb 2 sweep "${args[@]}" -j 1 --out "$TMP/p.csv" --plot "$TMP/p.svg" || fail "plot exited $?"
grep -q '<svg' "$TMP/p.svg" || fail "no SVG written"
mpirun_kb 2 sweep synthetic --param nosuch=1,2 --quiet >"$TMP/u.out" 2>"$TMP/u.err"
rc=$?
[ $rc -eq 2 ] || fail "usage error under mpirun: exit $rc, expected 2"
[ "$(grep -c 'kernbench: usage' "$TMP/u.err")" -eq 1 ] ||
	fail "the usage error is not printed once: $(cat "$TMP/u.err")"

# The same binary without mpirun is the plain sweep (and so is one rank).
KERNBENCH_MPI=1 "$KB" sweep "${args[@]}" -j 2 --out "$TMP/single.csv" || fail "singleton exited $?"
strip_wall "$TMP/single.csv" | cmp -s - "$TMP/ref.csv.s" || fail "singleton rows differ"
mpirun_kb 1 sweep "${args[@]}" -j 2 --out "$TMP/np1.csv" || fail "-np 1 exited $?"
strip_wall "$TMP/np1.csv" | cmp -s - "$TMP/ref.csv.s" || fail "-np 1 rows differ"
echo PASS
