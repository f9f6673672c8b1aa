#!/bin/bash
# Provenance: run --json ends with "meta" and the trace has it as "metadata" (version, topology hash as
# `topology --hash`, command line, host, date); a --dump folder holds the
# same as meta.json; a sweep writes OUT.meta.json once; --resume refuses an
# output whose record names another topology or version unless --force; the
# op_log carries none of it (byte-identical whatever the command line).
set -u
. "$(dirname "$0")/lib.sh"

h=$("$KB" topology --set pe_cost_model.r_cycles_per_byte=0.25 --hash) || fail "topology --hash"
"$KB" run gemm --param M=64 --threads 1 --set pe_cost_model.r_cycles_per_byte=0.25 --json \
	--op-log "$TMP/a.jsonl" >"$TMP/r.json" || fail "run --json exited $?"
grep -q "\"meta\":{\"kernbench_version\":\"$("$KB" --version | cut -d' ' -f2)\"" "$TMP/r.json" ||
	fail "run --json lacks meta.kernbench_version: $(cat "$TMP/r.json")"
grep -q "\"topology_sha256\":\"$h\"" "$TMP/r.json" || fail "meta lacks the topology hash $h"
grep -q '"command_line":\[[^]]*"run","gemm","--param","M=64"' "$TMP/r.json" || fail "meta lacks the command line"
grep -q '"date_utc":"20[0-9-]*T[0-9:]*Z"' "$TMP/r.json" || fail "meta lacks the UTC date"
grep -q '"host":"' "$TMP/r.json" || fail "meta lacks the host"
# The op_log has no provenance: another command line gives the same bytes.
"$KB" run gemm --threads 2 --param M=64 --set pe_cost_model.r_cycles_per_byte=0.25 \
	--op-log "$TMP/b.jsonl" >/dev/null || fail "second run exited $?"
cmp -s "$TMP/a.jsonl" "$TMP/b.jsonl" || fail "the op_log differs between command lines"
grep -q 'date_utc\|kernbench_version\|host' "$TMP/a.jsonl" && fail "the op_log carries provenance"

# The trace records the same provenance as its "metadata".
"$KB" run gemm --param M=64 --threads 1 --trace "$TMP/t.json" >/dev/null || fail "run --trace exited $?"
grep -q '\],"metadata":{"kernbench_version":"[^"]*","git_revision":[^,]*,"topology_sha256":"[0-9a-f]\{64\}"' \
	"$TMP/t.json" || fail "the trace lacks metadata: $(tail -c 300 "$TMP/t.json")"

"$KB" run gemm --param M=64 --param K=64 --param N=64 --data --dump "$TMP/d" >/dev/null ||
	fail "run --dump exited $?"
[ -f "$TMP/d/meta.json" ] || fail "no meta.json in the dump folder"
grep -q '"topology_sha256": "' "$TMP/d/meta.json" || fail "meta.json lacks the topology hash"

"$KB" sweep synthetic --param events=100,200 -j 1 --quiet --out "$TMP/s.csv" >/dev/null ||
	fail "sweep exited $?"
grep -q "\"topology_sha256\":\"$("$KB" topology --hash)\"" "$TMP/s.csv.meta.json" ||
	fail "no sweep record with the topology hash"
grep -q '"param":\["events=100,200"\]' "$TMP/s.csv.meta.json" || fail "the record lacks the definition"
"$KB" topology --set pe_cost_model.fixed_cycles=41 >"$TMP/t.json"
"$KB" sweep synthetic --param events=100,200,300 -j 1 --quiet --out "$TMP/s.csv" --resume \
	--topology "$TMP/t.json" 2>"$TMP/err" >/dev/null && fail "resume with another topology succeeded"
grep -q 'records another sweep' "$TMP/err" || fail "no reason given: $(cat "$TMP/err")"
[ "$(wc -l <"$TMP/s.csv")" -eq 3 ] || fail "the refused resume touched the output"
"$KB" sweep synthetic --param events=100,200,300 -j 1 --quiet --out "$TMP/s.csv" --resume \
	--topology "$TMP/t.json" --force 2>"$TMP/err" >/dev/null || fail "--force did not resume"
grep -q 'warning' "$TMP/err" || fail "--force gave no warning"
[ "$(wc -l <"$TMP/s.csv")" -eq 4 ] || fail "--force did not add the missing point"
"$KB" sweep synthetic --param events=100,200,300,400 -j 1 --quiet --out "$TMP/s.csv" --resume \
	--topology "$TMP/t.json" >/dev/null || fail "resume of the same sweep failed"
echo PASS
