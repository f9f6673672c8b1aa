#!/bin/bash
# JSON Lines rows give key values typed (issue 19): a bench parameter as its
# type, a numeric topology key as a number, a string-valued topology key as
# a string, a bad value (an error row) as the text given. --resume reads
# the typed rows back.
set -u
. "$(dirname "$0")/lib.sh"

args=(gemm --param M=64,128 --set pe_cost_model.r_cycles_per_byte=0.1,2
      --set pe.scheduler.policy=strict_fifo,rw_aware --quiet -j 1)
"$KB" sweep "${args[@]}" --out "$TMP/t.jsonl" || fail "sweep exited $?"
grep -qF '"keys":{"M":64,"pe_cost_model.r_cycles_per_byte":0.1,"pe.scheduler.policy":"strict_fifo"}' \
	"$TMP/t.jsonl" || fail "first row's keys are not typed: $(head -n 1 "$TMP/t.jsonl")"
grep -qF '"keys":{"M":128,"pe_cost_model.r_cycles_per_byte":2.0,"pe.scheduler.policy":"rw_aware"}' \
	"$TMP/t.jsonl" || fail "last row's keys are not typed: $(tail -n 1 "$TMP/t.jsonl")"

# A value that is not a number of the parameter's type stays its text.
"$KB" sweep gemm --param 'M=64,6x4' --quiet --out "$TMP/bad.jsonl"
grep -qF '"keys":{"M":"6x4"}' "$TMP/bad.jsonl" || fail "bad value typed: $(tail -n 1 "$TMP/bad.jsonl")"

# Resume from a file cut after 3 rows gives the uninterrupted file (wall_s aside).
head -n 3 "$TMP/t.jsonl" >"$TMP/cut.jsonl"
"$KB" sweep "${args[@]}" --out "$TMP/cut.jsonl" --resume || fail "resume exited $?"
cmp <(sed 's/"wall_s":[^,]*//' "$TMP/cut.jsonl") <(sed 's/"wall_s":[^,]*//' "$TMP/t.jsonl") ||
	fail "resumed typed JSONL differs"
echo PASS
