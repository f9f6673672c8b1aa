#!/bin/bash
# Rule (issue 18 §5): MPI ranks agree on the sweep before they run it. Rank
# 0 sends its sweep's definition; a rank that built another sweep (another
# topology file under the "same" path on its node, other lists) names
# itself and the difference, every rank stops before any point runs, and
# the exit status is 1. Here each rank gets its own path through a shell,
# as nodes without a shared disk would each read their own file.
set -u
. "$(dirname "$0")/lib.sh"

"$KB" topology >"$TMP/t0.json"
"$KB" topology --set clock_freq_ghz=2 >"$TMP/t1.json"
cp "$TMP/t0.json" "$TMP/t2.json"

per_rank() {  # per_rank NP 'ARGS with $R for the rank'
	local np=$1
	shift
	"$MPIRUN" "${MPIRUN_FLAGS[@]}" -np "$np" sh -c \
		"R=\$OMPI_COMM_WORLD_RANK; exec \"$KB\" $*"
}

# 1. Rank 1 read another topology: named, with the topology's hash.
per_rank 2 "sweep synthetic --param events=10,20 --quiet --topology $TMP/t\$R.json \
	--out $TMP/topo.csv" >"$TMP/topo.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "ranks with different topologies: exit $rc, expected 1: $(cat "$TMP/topo.out")"
grep -q "rank 1: this rank's sweep differs from rank 0's .*topology_sha256" "$TMP/topo.out" ||
	fail "the difference is not named: $(cat "$TMP/topo.out")"
grep -q "rank 1 could not set up the sweep" "$TMP/topo.out" || fail "rank 0 does not name rank 1"
[ "$(wc -l <"$TMP/topo.csv")" -le 1 ] || fail "rows were written although the ranks disagree"

# 2. Rank 2 has another list (another number of points): named, with the keys.
per_rank 3 "sweep synthetic --param events=10,20\$( [ \$R = 2 ] && echo ,30) --quiet \
	--topology $TMP/t0.json" >"$TMP/list.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "ranks with different lists: exit $rc, expected 1: $(cat "$TMP/list.out")"
grep -q "rank 2: this rank's sweep differs from rank 0's .*keys" "$TMP/list.out" ||
	fail "the list difference is not named: $(cat "$TMP/list.out")"
grep -q "out of memory" "$TMP/list.out" && fail "a disagreement reported as out of memory"

# 3. The same sweep on every rank (rank 2's file is a copy of rank 0's) runs.
per_rank 3 "sweep synthetic --param events=10,20 --quiet --topology $TMP/t\$(( R == 1 ? 0 : R )).json \
	--out $TMP/same.csv" >"$TMP/same.out" 2>&1 || fail "agreeing ranks failed: $(cat "$TMP/same.out")"
[ "$(wc -l <"$TMP/same.csv")" -eq 3 ] || fail "agreeing ranks: expected 2 rows"
echo PASS
