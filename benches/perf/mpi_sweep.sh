#!/bin/bash
# The cost of the MPI path: a 32-point sweep (uneven points) with
# `mpirun -np 2 kernbench sweep ... -j 1` against `kernbench sweep ... -j 2`
# on the same cores. Prints the wall time of each (median of REPS runs,
# mpirun's start-up included), the overhead of MPI in percent (goal: at most
# 5 %), and checks that both files hold the same rows (wall_s aside).
#
#   benches/perf/mpi_sweep.sh [KERNBENCH]     (default: ./kernbench)
#
# Environment: REPS (default 3), EVENTS (events of the small points, default
# 400000: about 0.7 s; the big ones have twice as many, so a run lasts
# about 17 s on 2 cores and mpirun's fixed start-up of ~0.5 s stays small),
# MPIRUN (default mpirun).
set -u
KB=${1:-./kernbench}
case $KB in */*) ;; *) KB=./$KB ;; esac
REPS=${REPS:-3}
EVENTS=${EVENTS:-400000}
MPIRUN=${MPIRUN:-mpirun}
[ -x "$KB" ] || { echo "mpi_sweep.sh: $KB not found (give the kernbench command)" >&2; exit 2; }
command -v "$MPIRUN" >/dev/null || { echo "mpi_sweep.sh: $MPIRUN not found" >&2; exit 2; }
flags=(--oversubscribe --bind-to none --mca btl self,vader)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kbmpibench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

args=(synthetic --param seed=$(seq -s, 1 16) --param events=$EVENTS,$((2 * EVENTS)) --quiet)

now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

: >"$tmp/plain.t"
: >"$tmp/mpi.t"
for r in $(seq 1 "$REPS"); do
	t0=$(now)
	"$KB" sweep "${args[@]}" -j 2 --out "$tmp/plain.csv" || { echo "plain sweep failed" >&2; exit 1; }
	t1=$(now)
	"$MPIRUN" "${flags[@]}" -np 2 "$KB" sweep "${args[@]}" -j 1 --out "$tmp/mpi.csv" ||
		{ echo "mpirun sweep failed" >&2; exit 1; }
	t2=$(now)
	echo "$t1 - $t0" | bc -l >>"$tmp/plain.t"
	echo "$t2 - $t1" | bc -l >>"$tmp/mpi.t"
	printf 'run %d: kernbench sweep -j 2: %.2f s   mpirun -np 2 ... -j 1: %.2f s\n' "$r" \
		"$(tail -1 "$tmp/plain.t")" "$(tail -1 "$tmp/mpi.t")"
done
strip() { cut -d, -f1-7,9- "$1"; }   # drop wall_s (column 8 of this sweep)
cmp -s <(strip "$tmp/plain.csv") <(strip "$tmp/mpi.csv") || { echo "rows differ" >&2; exit 1; }
plain=$(median <"$tmp/plain.t")
mpi=$(median <"$tmp/mpi.t")
pct=$(echo "($mpi / $plain - 1) * 100" | bc -l)
printf '32 points (%d rows identical), %d cores\n' "$(($(wc -l <"$tmp/mpi.csv") - 1))" "$(nproc)"
printf 'median: kernbench sweep -j 2: %.2f s; mpirun -np 2 kernbench sweep -j 1: %.2f s\n' "$plain" "$mpi"
printf 'MPI overhead: %+.1f %% (goal: at most 5 %%)\n' "$pct"
