#!/bin/bash
# A swept key named like a column of the row (synthetic's `events`, also a
# figure): the key keeps its name, the figure's CSV column is result.events,
# so the header names every column once (doc/sweep.md). JSON Lines has the
# key inside "keys" and the figure as "events". Resume reads both back.
set -u
. "$(dirname "$0")/lib.sh"

args=(synthetic --param events=200,400,600 --param lps=1,2 --quiet -j 2)
hdr='bench,events,lps,sim_time_ns,dispatch_per_tile_ns,commands,result.events,wall_s,oplog_sha256,status,error'

"$KB" sweep "${args[@]}" --out "$TMP/full.csv" || fail "CSV sweep exited $?"
head -1 "$TMP/full.csv" | grep -qx "$hdr" || fail "unexpected header: $(head -1 "$TMP/full.csv")"
dup=$(head -1 "$TMP/full.csv" | tr , '\n' | sort | uniq -d)
[ -z "$dup" ] || fail "the header names $dup twice"
[ "$(wc -l <"$TMP/full.csv")" -eq 7 ] || fail "expected a header and 6 rows"

# events is the swept value; result.events what the run handled, as run
# --json reports it for the same point.
row=$(sed -n 4p "$TMP/full.csv")
[ "$(echo "$row" | cut -d, -f1-3)" = "synthetic,400,1" ] || fail "row 3 is not events=400 lps=1: $row"
"$KB" run synthetic --param events=400 --param lps=1 --threads 1 --json >"$TMP/one.json" ||
	fail "run exited $?"
want=$(grep -o '"sim_time_ps":[0-9]*,"events":[0-9]*' "$TMP/one.json" | cut -d: -f3)
# A point where the two differ, so the check tells the columns apart.
[ -n "$want" ] && [ "$want" != 400 ] || fail "run --json events '$want'"
[ "$(echo "$row" | cut -d, -f7)" = "$want" ] || fail "result.events is not the run's $want: $row"

# JSON Lines: the same point, the key typed in "keys", the figure "events".
"$KB" sweep "${args[@]}" --out "$TMP/full.jsonl" || fail "JSONL sweep exited $?"
sed -n 3p "$TMP/full.jsonl" | grep -q "^{\"bench\":\"synthetic\",\"keys\":{\"events\":400,\"lps\":1},.*,\"events\":$want," ||
	fail "JSONL row: $(sed -n 3p "$TMP/full.jsonl")"

# Resume of such files, CSV and JSON Lines: cut in the middle of row 3,
# resumed, the same as the uninterrupted sweep (wall_s aside).
for ext in csv jsonl; do
	head -c $(($(head -n 3 "$TMP/full.$ext" | wc -c) + 9)) "$TMP/full.$ext" >"$TMP/cut.$ext"
	"$KB" sweep "${args[@]}" --out "$TMP/cut.$ext" --resume || fail "$ext resume exited $?"
done
cmp <(strip_wall "$TMP/cut.csv") <(strip_wall "$TMP/full.csv") || fail "resumed CSV differs"
cmp <(strip_wall_jsonl "$TMP/cut.jsonl") <(strip_wall_jsonl "$TMP/full.jsonl") ||
	fail "resumed JSONL differs"
echo PASS
