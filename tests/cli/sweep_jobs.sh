#!/bin/bash
# The same rows, in the documented order, whatever -j is; CSV and JSON Lines.
set -u
. "$(dirname "$0")/lib.sh"

args=(synthetic --param lps=2,4 --param events=300,600,900 --param seed=1,2
	--set pe_cost_model.r_cycles_per_byte=0.0625,0.125 --quiet)
for j in 1 2 4; do
	"$KB" sweep "${args[@]}" -j $j --out "$TMP/j$j.csv" || fail "sweep -j $j exited $?"
	"$KB" sweep "${args[@]}" -j $j --out "$TMP/j$j.jsonl" || fail "sweep -j $j jsonl exited $?"
	strip_wall "$TMP/j$j.csv" >"$TMP/j$j.csv.s"
	strip_wall_jsonl "$TMP/j$j.jsonl" >"$TMP/j$j.jsonl.s"
done
[ "$(wc -l <"$TMP/j1.csv")" -eq 25 ] || fail "expected a header and 24 rows"
[ "$(wc -l <"$TMP/j1.jsonl")" -eq 24 ] || fail "expected 24 JSON lines"
for j in 2 4; do
	cmp "$TMP/j1.csv.s" "$TMP/j$j.csv.s" || fail "-j 1 and -j $j CSV rows differ"
	cmp "$TMP/j1.jsonl.s" "$TMP/j$j.jsonl.s" || fail "-j 1 and -j $j JSONL rows differ"
done

# Header and order: --param keys then --set keys; last key fastest.
head -1 "$TMP/j1.csv" | grep -qx 'bench,lps,events,seed,pe_cost_model.r_cycles_per_byte,sim_time_ns,dispatch_per_tile_ns,commands,result.events,wall_s,oplog_sha256,status,error' ||
	fail "unexpected header: $(head -1 "$TMP/j1.csv")"
cut -d, -f1-5 "$TMP/j1.csv" | sed 1d >"$TMP/order"
exp=$(for l in 2 4; do for e in 300 600 900; do for s in 1 2; do for r in 0.0625 0.125; do
	echo "synthetic,$l,$e,$s,$r"; done; done; done; done)
[ "$(cat "$TMP/order")" = "$exp" ] || fail "rows are not in odometer order"
grep -c ',ok,$' "$TMP/j1.csv" | grep -qx 24 || fail "not every point succeeded"

# Standard output gets the same CSV as --out.
"$KB" sweep "${args[@]}" -j 3 >"$TMP/stdout.csv" || fail "sweep to stdout exited $?"
strip_wall "$TMP/stdout.csv" | cmp -s - "$TMP/j1.csv.s" || fail "stdout rows differ"

# A sweep equals the runs it is made of (same sim time and op_log hash).
"$KB" run synthetic --param lps=4 --param events=600 --param seed=2 --threads 1 \
	--set pe_cost_model.r_cycles_per_byte=0.125 --json >"$TMP/one.json" || fail "run failed"
sha=$(grep -o '"oplog_sha256":"[0-9a-f]*"' "$TMP/one.json" | cut -d'"' -f4)
grep -q "^synthetic,4,600,2,0.125,.*,$sha,ok,\$" "$TMP/j1.csv" || fail "the sweep row differs from run"

# A string-valued topology key sweeps like a number (each value a point).
"$KB" sweep gqa_decode_opt2 --param S_kv=256 --set pe.scheduler.policy=strict_fifo,rw_aware \
	--quiet >"$TMP/pol.csv" || fail "sweeping pe.scheduler.policy exited $?"
grep -c ',ok,$' "$TMP/pol.csv" | grep -qx 2 || fail "the policy sweep has not two ok rows"
grep -q '^gqa_decode_opt2,256,rw_aware,' "$TMP/pol.csv" || fail "no rw_aware row"
echo PASS
