#!/bin/bash
# A data-mode sweep (--data) carries the error figures of `run --data --json`
# (max_abs_err, max_rel_err) in CSV and JSONL columns (issue 19); a sweep
# without --data has no such columns. --resume reads them back.
set -u
. "$(dirname "$0")/lib.sh"

args=(gemm --data --param M=64,128 --quiet -j 1)
"$KB" sweep "${args[@]}" --out "$TMP/d.csv" || fail "data sweep exited $?"
head -n 1 "$TMP/d.csv" | grep -q ',wall_s,max_abs_err,max_rel_err,oplog_sha256,' ||
	fail "no error columns in the CSV header: $(head -n 1 "$TMP/d.csv")"
"$KB" sweep gemm --param M=64 --quiet 2>/dev/null | head -n 1 | grep -q 'max_abs_err' &&
	fail "error columns without --data"
"$KB" sweep "${args[@]}" --out "$TMP/d.jsonl" || fail "data sweep (JSONL) exited $?"
"$KB" run gemm --data --param M=128 --json >"$TMP/run.json" || fail "run --data exited $?"
if have_python; then
	python3 - "$TMP/d.csv" "$TMP/d.jsonl" "$TMP/run.json" <<'PY' || fail "error figures differ from run --json"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
lines = [json.loads(l) for l in open(sys.argv[2])]
run = json.load(open(sys.argv[3]))
for k in ('max_abs_err', 'max_rel_err'):
    want = run[k]
    assert want > 0, (k, want)
    got_csv, got_jsonl = float(rows[1][k]), lines[1][k]
    assert abs(got_csv - want) <= 1e-8 * want, (k, got_csv, want)
    assert abs(got_jsonl - want) <= 1e-8 * want, (k, got_jsonl, want)
PY
else
	grep -q '"max_abs_err":[0-9]' "$TMP/d.jsonl" || fail "no max_abs_err in JSONL"
fi
# Resume of a data-mode CSV cut after its first row gives the same file.
head -n 2 "$TMP/d.csv" >"$TMP/cut.csv"
"$KB" sweep "${args[@]}" --out "$TMP/cut.csv" --resume || fail "data resume exited $?"
cmp <(strip_wall "$TMP/cut.csv") <(strip_wall "$TMP/d.csv") || fail "resumed data CSV differs"
echo PASS
