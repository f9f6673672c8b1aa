#!/bin/bash
# Exit status and message of the kernbench command for bad inputs: each row
# is "expected status | stderr fragment | arguments" (arguments split on
# spaces; @BAD@ is a file with malformed JSON, @TMP@ the scratch directory).
set -u
. "$(dirname "$0")/lib.sh"

printf '{\n  "schema": "kernbench-topology/1",\n  "clock_freq_ghz": ,\n}\n' > "$TMP/bad.json"

table=$(cat <<'ROWS'
2|missing command|
2|unknown command 'frobnicate'|frobnicate
2|unknown option '--frob'|--frob
2|unknown command 'nosuch'|help nosuch
2|missing BENCH|run
2|unknown bench 'nosuchbench'|run nosuchbench
2|no parameter 'nosuch'|run synthetic --param nosuch=1
2|expected NAME=VALUE|run synthetic --param lps
2|expected NAME=VALUE|run synthetic --param =3
2|expected NAME=VALUE|run synthetic --param lps=
2|--threads 'x'|run synthetic --threads x
2|--threads '-1'|run synthetic --threads -1
2|--threads '1.5'|run synthetic --threads 1.5
2|needs a value|run synthetic --threads
2|given more than once|run synthetic --op-log @TMP@/a --op-log @TMP@/b
2|given more than once|run synthetic --threads 1 --threads 2
2|--dump needs --data|run synthetic --dump @TMP@/d
2|unknown option '--bogus'|run synthetic --bogus
2|one bench only|run synthetic extra
2|takes no value|run synthetic --json=1
2|expected KEY=VALUE|run synthetic --set foo
2|expected KEY=VALUE|run synthetic --set pe_cost_model.fixed_cycles=
1|no.such.key|run synthetic --set no.such.key=1
1|r_cycles_per_byte|run synthetic --set pe_cost_model.r_cycles_per_byte=-1
1|clock_freq_ghz|run synthetic --set clock_freq_ghz=0
1|clock_freq_ghz|run synthetic --set clock_freq_ghz=abc
1|/nonexistent-dir/t.json|run synthetic --topology /nonexistent-dir/t.json
1|seed|run synthetic --param seed=abc
1|nonexistent-dir|run synthetic --param events=10 --op-log /nonexistent-dir/x.jsonl
1|bad.json:3:|topology --topology @BAD@
1|pe_cost_model|topology --set pe_cost_model=1
1|max_composite_logical_bytes|topology --set pe_cost_model.max_composite_logical_bytes=1.5
2|unexpected argument 'extra'|topology extra
2|needs a value|topology --set
2|unknown option '--json'|topology --json
2|unknown option '--bogus'|list --bogus
2|unexpected argument|list extra
2|missing BENCH|sweep
2|unknown bench 'nosuch'|sweep nosuch
2|unknown bench 'nosuch'|sweep synthetic,nosuch
2|empty bench name|sweep synthetic,
2|given twice|sweep synthetic,synthetic
2|no parameter 'nosuch'|sweep synthetic --param nosuch=1,2
2|empty value|sweep synthetic --param lps=1,,2
2|swept twice|sweep synthetic --param lps=1 --param lps=2
2|expected NAME=V1,V2|sweep synthetic --param lps
2|-j 'x'|sweep synthetic -j x
2|-j '-2'|sweep synthetic -j -2
2|--threads '-3'|sweep synthetic --threads -3
2|.csv or .jsonl|sweep synthetic --out @TMP@/rows.txt
2|--resume needs --out|sweep synthetic --resume
2|.svg|sweep synthetic --plot @TMP@/p.png
2|given more than once|sweep synthetic --out @TMP@/a.csv --out @TMP@/b.csv
1|no.such|sweep synthetic --set no.such=1,2
1|nonexistent-dir|sweep synthetic --param events=10 --out /nonexistent-dir/x.csv
2|unknown bench 'gqa_decode_op2' (did you mean 'gqa_decode_opt2'?)|run gqa_decode_op2
2|unknown bench 'gem' (did you mean 'gemm'?)|sweep gem --param M=64,128
2|no parameter 's_kv' (did you mean 'S_kv'?)|run gqa_decode_opt2 --param s_kv=1024
2|no parameter 's_kv' (did you mean 'S_kv'?)|sweep gqa_decode_opt2 --param s_kv=1024,2048
2|unknown option '--thread' (did you mean '--threads'?)|run gemm --thread 2
2|unknown option '--jobz' (did you mean '--jobs'?)|sweep gemm --jobz 2
2|unknown command 'runn' (did you mean 'run'?)|runn gemm
2|unknown option '--verison' (did you mean '--version'?)|--verison
1|did you mean 'pe_cost_model.fixed_cycles'|run gemm --set pe_cost_model.fixed_cycle=3
1|out of range [1, 1048576]|run gemm --param M=0
1|out of range [0, 9000000000000000000]|run synthetic --param seed=-1
ROWS
)

n=0
bad=0
while IFS='|' read -r want frag args; do
	[ -n "$want" ] || continue
	args=${args//@TMP@/$TMP}
	args=${args//@BAD@/$TMP/bad.json}
	# shellcheck disable=SC2086
	"$KB" $args >"$TMP/out" 2>"$TMP/err" </dev/null
	got=$?
	n=$((n + 1))
	if [ "$got" -ne "$want" ]; then
		echo "FAIL: kernbench $args: exit $got, expected $want; stderr:" >&2
		cat "$TMP/err" >&2
		bad=$((bad + 1))
		continue
	fi
	if ! grep -qF -- "$frag" "$TMP/err"; then
		echo "FAIL: kernbench $args: stderr lacks '$frag':" >&2
		cat "$TMP/err" >&2
		bad=$((bad + 1))
		continue
	fi
	kind=error
	[ "$want" -eq 2 ] && kind=usage
	if ! grep -q "^kernbench: $kind: " "$TMP/err"; then
		echo "FAIL: kernbench $args: no 'kernbench: $kind:' line" >&2
		bad=$((bad + 1))
	fi
	if [ "$want" -eq 2 ] && ! grep -qF -- "--help" "$TMP/err"; then
		echo "FAIL: kernbench $args: usage error without a --help hint" >&2
		bad=$((bad + 1))
	fi
done <<<"$table"

# Ranges in 'list' print integers in full, never as 9e+18 or 1.04858e+06.
"$KB" list > "$TMP/list" || fail "kernbench list failed"
if grep -E 'range \[[^]]*e[+-]' "$TMP/list" >&2; then
	fail "kernbench list prints a range in exponent notation"
fi
grep -qF 'range [0, 9000000000000000000]' "$TMP/list" || fail "list lacks the seed range in full"
# 'list --json' is typed: numeric defaults and bounds are numbers (integers
# in full), choices an array.
"$KB" list --json > "$TMP/list.json" || fail "kernbench list --json failed"
if have_python; then
	python3 - "$TMP/list.json" <<'PY' || fail "list --json is not typed"
import json, sys
benches = json.load(open(sys.argv[1]))
for b in benches:
    for p in b["params"]:
        where = b["name"] + "." + p["name"]
        if p["type"] == "string":
            assert isinstance(p["default"], str), where
            assert p["choices"] is None or (isinstance(p["choices"], list) and p["default"] in p["choices"]), where
        else:
            num = int if p["type"] == "int" else (int, float)
            assert isinstance(p["default"], num) and not isinstance(p["default"], bool), where
            assert isinstance(p["min"], num) and isinstance(p["max"], num), where
seed = [p for b in benches if b["name"] == "gemm" for p in b["params"] if p["name"] == "seed"][0]
assert seed["max"] == 9000000000000000000 and isinstance(seed["max"], int), seed
PY
fi
grep -q '9e+18' "$TMP/list.json" && fail "list --json prints 9e+18"

[ "$n" -ge 25 ] || fail "only $n rows in the table"
[ "$bad" -eq 0 ] || fail "$bad of $n rows failed"
echo "PASS: $n bad inputs"
