#!/usr/bin/env bash
# Paired timing of two kernbench builds (issue 13): N adjacent pairs of
# single runs of BENCH at S_kv (default 262144), --threads 1, alternating
# which build goes first; prints the quartiles of the per-pair task-clock
# ratio B/A and each build's p10 and median. On a VM whose speed swings
# with the host (doc/performance.md, Stop 20), adjacent pairs share the
# swing where separate batches do not.
#
#   benches/perf/pairs.sh N BENCH BUILD_DIR_A BUILD_DIR_B [S_KV]
#   e.g. benches/perf/pairs.sh 150 gqa_decode_opt3 ../base .
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 N BENCH BUILD_DIR_A BUILD_DIR_B [S_KV]" >&2; exit 2; }
n=$1 bench=$2 a=$(cd "$3" && pwd) b=$(cd "$4" && pwd) skv=${5:-262144}
command -v perf >/dev/null || { echo "pairs: needs perf (linux-perf)" >&2; exit 2; }

one() { # build dir: one run's task-clock in ms
	local kb=$1/kernbench
	[ -x "$1/.libs/kernbench" ] && kb=$1/.libs/kernbench
	LD_LIBRARY_PATH=$1/.libs perf stat -x, -e task-clock "$kb" run "$bench" \
		--param S_kv="$skv" --threads 1 --json 2>&1 >/dev/null | awk -F, '/task-clock/ { print $1 }'
}

for i in $(seq "$n"); do
	if [ $((i % 2)) = 0 ]; then ta=$(one "$a"); tb=$(one "$b"); else tb=$(one "$b"); ta=$(one "$a"); fi
	echo "$ta $tb"
done | python3 -c '
import sys
p = [tuple(map(float, l.split())) for l in sys.stdin]
q = lambda v, f: sorted(v)[int(f * (len(v) - 1))]
r = [tb / ta for ta, tb in p]
A = [ta for ta, _ in p]
B = [tb for _, tb in p]
print("%s: %d pairs, ratio B/A q1 %.3f median %.3f q3 %.3f; A p10 %.2f median %.2f ms; B p10 %.2f median %.2f ms"
      % (sys.argv[1], len(p), q(r, .25), q(r, .5), q(r, .75), q(A, .1), q(A, .5), q(B, .1), q(B, .5)))' "$bench"
