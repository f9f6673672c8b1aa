#!/bin/bash
# make bench-peer's script (benches/peer/bench_peer.py, issue 13) at a small
# S_kv, one run each: without python3-simpy (hidden here by a SimPy package
# that fails to import, first on PYTHONPATH) it prints the SKIP line and
# still every kernbench row; with SimPy, the peer rows and the ratio too.
# Figures are not checked (a benchmark, not a timed test), only that each
# row is there and well formed.
set -u
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3   # the script's own interpreter (its #! and the peer's)
[ -x "$PY" ] || { echo "SKIP: $PY not found" >&2; exit 77; }
script="$SRCDIR/benches/peer/bench_peer.py"

kb_rows() { # output file: the kernbench rows every run prints
	for b in opt2 opt3; do
		grep -Eq "^  $b kernbench: [0-9.]+ s  [0-9]+ events \([0-9]+ records\)  [0-9.]+ M events/s .* CPU/wall [0-9.]+$" "$1" ||
			fail "no well-formed '$b kernbench' row"
		grep -Eq "^  linearity $b: .*: [0-9.]+x \(goal <= 4.2x\)$" "$1" || fail "no linearity row for $b"
	done
	grep -Eq "^  sweep -j 1, 8 points .*CPU/wall [0-9.]+ \(range [0-9.]+-[0-9.]+, goal <= 1.05\)$" "$1" ||
		fail "no sweep -j 1 row"
	grep -Eq "^  peak RSS (opt2: [0-9]+ kB|: SKIP)" "$1" || fail "no peak RSS row"
}

mkdir -p "$TMP/shadow/SimPy"
echo 'raise ImportError("hidden by tests/cli/bench_peer.sh")' >"$TMP/shadow/SimPy/__init__.py"
PYTHONPATH="$TMP/shadow" KB_PEER_SKV=4096 "$PY" "$script" "$KB" 1 >"$TMP/skip.txt" 2>&1 ||
	{ cat "$TMP/skip.txt"; fail "bench_peer.py without SimPy exited $?"; }
cat "$TMP/skip.txt"
grep -q '^bench-peer: SKIP peer: python3-simpy is not installed' "$TMP/skip.txt" || fail "no SKIP line without SimPy"
grep -q 'ratio simpy/kernbench' "$TMP/skip.txt" && fail "a ratio row without SimPy"
kb_rows "$TMP/skip.txt"

if "$PY" -c 'import SimPy.Simulation' 2>/dev/null; then
	KB_PEER_SKV=4096 "$PY" "$script" "$KB" 1 >"$TMP/peer.txt" 2>&1 ||
		{ cat "$TMP/peer.txt"; fail "bench_peer.py exited $?"; }
	cat "$TMP/peer.txt"
	grep -q 'SKIP peer' "$TMP/peer.txt" && fail "SKIP line although SimPy imports"
	for b in opt2 opt3; do
		grep -Eq "^  $b ratio simpy/kernbench: [0-9.]+x \(goal >= 100x\)" "$TMP/peer.txt" ||
			fail "no ratio row for $b"
		grep -Eq "^  $b simpy: +[0-9.]+ s  [0-9]+ records" "$TMP/peer.txt" || fail "no peer row for $b"
	done
	kb_rows "$TMP/peer.txt"
else
	echo "(SimPy not installed: the peer rows were not run)"
fi
exit 0
