#!/bin/bash
# A failing point is a row with its error; the other points still run and
# the exit status is 1. CSV cells with commas and quotes are quoted (RFC 4180).
set -u
. "$(dirname "$0")/lib.sh"

"$KB" sweep synthetic --param events=100,200 \
	--set pe_cost_model.r_cycles_per_byte=0.0625,-1 -j 2 --quiet --out "$TMP/f.csv"
rc=$?
[ "$rc" -eq 1 ] || fail "exit $rc with a failing point, expected 1"
[ "$(wc -l <"$TMP/f.csv")" -eq 5 ] || fail "expected 4 rows: $(cat "$TMP/f.csv")"
[ "$(grep -c ',ok,$' "$TMP/f.csv")" -eq 2 ] || fail "the good points did not all run"
[ "$(grep -c ',-1,.*,error,.*r_cycles_per_byte' "$TMP/f.csv")" -eq 2 ] ||
	fail "failed rows lack status or message: $(cat "$TMP/f.csv")"
sed -n 3p "$TMP/f.csv" | grep -q '^synthetic,100,-1,,,,,,,error,' || fail "a failed row has figures"

# Every point good: exit 0.
"$KB" sweep synthetic --param events=100,200 --quiet >/dev/null || fail "all-good sweep exit $?"

# Quoting: a value with a double quote (and so an error message quoting it).
# Every cell must parse back to what was written, and the error cell must be
# the message that `kernbench run` prints for the same point.
"$KB" sweep synthetic --param 'seed=1,2"3' --param events=50 --quiet -j 2 \
	--out "$TMP/q.csv"
[ $? -eq 1 ] || fail "the bad seed did not fail"
grep -q '^synthetic,"2""3",' "$TMP/q.csv" || fail "a cell with a quote is not quoted: $(cat "$TMP/q.csv")"
"$KB" run synthetic --param 'seed=2"3' --param events=50 --threads 1 2>"$TMP/run.err" >/dev/null
msg=$(sed -n 's/^kernbench: error: //p' "$TMP/run.err")
[ -n "$msg" ] || fail "run printed no error"
if have_python; then
	python3 - "$TMP/q.csv" "$msg" <<'PY' || fail "CSV does not parse back"
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline='')))
assert all(len(r) == len(rows[0]) for r in rows), rows
bad = [r for r in rows[1:] if r[rows[0].index('status')] == 'error']
assert len(bad) == 1 and bad[0][1] == '2"3', bad
assert bad[0][-1] == sys.argv[2], (bad[0][-1], sys.argv[2])
PY
fi
# JSON Lines carries the same message (and must be valid JSON).
"$KB" sweep synthetic --param 'seed=1,2"3' --param events=50 --quiet --out "$TMP/q.jsonl"
if have_python; then
	python3 - "$TMP/q.jsonl" "$msg" <<'PY' || fail "JSONL does not parse back"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows[0]['status'] == 'ok' and rows[1]['status'] == 'error', rows
assert rows[1]['error'] == sys.argv[2] and rows[1]['keys']['seed'] == '2"3', rows[1]
assert rows[1]['sim_time_ns'] is None and isinstance(rows[0]['sim_time_ns'], float), rows
PY
fi
echo PASS
