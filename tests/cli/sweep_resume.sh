#!/bin/bash
# --resume after a kill gives the same file as an uninterrupted sweep
# (wall_s aside): in the background, kill it once some rows are written,
# resume, compare. Then the same with a row cut in the middle (a kill
# mid-write), with JSON Lines, and with a header that does not match.
set -u
. "$(dirname "$0")/lib.sh"

args=(synthetic --param seed=$(seq -s, 101 140) --param events=20000,40000 --quiet -j 2)

"$KB" sweep "${args[@]}" --out "$TMP/full.csv" || fail "uninterrupted sweep exited $?"
strip_wall "$TMP/full.csv" >"$TMP/full.s"
[ "$(wc -l <"$TMP/full.csv")" -eq 81 ] || fail "expected 80 rows"

# Kill once at least 3 rows are in the file (or give up waiting after 20 s).
"$KB" sweep "${args[@]}" --out "$TMP/part.csv" &
pid=$!
for _ in $(seq 1 400); do
	[ -f "$TMP/part.csv" ] && [ "$(wc -l <"$TMP/part.csv")" -ge 4 ] && break
	sleep 0.05
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
rows=$(($(wc -l <"$TMP/part.csv") - 1))
echo "killed after $rows rows"
"$KB" sweep "${args[@]}" --out "$TMP/part.csv" --resume || fail "resume exited $?"
strip_wall "$TMP/part.csv" | cmp - "$TMP/full.s" || fail "resumed file differs"

# Resuming a complete file runs nothing and changes nothing.
cp "$TMP/full.csv" "$TMP/again.csv"
"$KB" sweep "${args[@]}" --out "$TMP/again.csv" --resume || fail "resume of a full file exited $?"
cmp "$TMP/full.csv" "$TMP/again.csv" || fail "resume of a full file changed it"

# A row cut in the middle (killed mid-write) is dropped and run again.
head -c $(($(head -n 10 "$TMP/full.csv" | wc -c) + 17)) "$TMP/full.csv" >"$TMP/cut.csv"
"$KB" sweep "${args[@]}" --out "$TMP/cut.csv" --resume || fail "resume after a cut exited $?"
strip_wall "$TMP/cut.csv" | cmp - "$TMP/full.s" || fail "resume after a cut row differs"
head -n 10 "$TMP/cut.csv" | cmp -s - <(head -n 10 "$TMP/full.csv") ||
	fail "resume rewrote rows it should have kept"

# Rows missing in the middle (an extended sweep): the file ends in order.
sed -e '5d;20,30d' "$TMP/full.csv" >"$TMP/holes.csv"
"$KB" sweep "${args[@]}" --out "$TMP/holes.csv" --resume || fail "resume with holes exited $?"
strip_wall "$TMP/holes.csv" | cmp - "$TMP/full.s" || fail "resume with holes differs"

# Killed while writing the header.
printf 'bench,se' >"$TMP/hdr.csv"
"$KB" sweep "${args[@]}" --out "$TMP/hdr.csv" --resume || fail "resume of a cut header exited $?"
strip_wall "$TMP/hdr.csv" | cmp - "$TMP/full.s" || fail "resume of a cut header differs"

# JSON Lines.
"$KB" sweep "${args[@]}" --out "$TMP/full.jsonl" || fail "JSONL sweep exited $?"
head -c $(($(head -n 7 "$TMP/full.jsonl" | wc -c) + 30)) "$TMP/full.jsonl" >"$TMP/cut.jsonl"
"$KB" sweep "${args[@]}" --out "$TMP/cut.jsonl" --resume || fail "JSONL resume exited $?"
cmp <(strip_wall_jsonl "$TMP/cut.jsonl") <(strip_wall_jsonl "$TMP/full.jsonl") ||
	fail "resumed JSONL differs"

# Another sweep's file is refused, untouched.
cp "$TMP/full.csv" "$TMP/other.csv"
"$KB" sweep synthetic --param lps=1,2 --quiet --out "$TMP/other.csv" --resume 2>"$TMP/err"
[ $? -eq 1 ] || fail "a mismatching header was accepted"
grep -q "other.csv" "$TMP/err" || fail "the header error does not name the file"
cmp -s "$TMP/full.csv" "$TMP/other.csv" || fail "a refused file was changed"
# Rows that are no point of this sweep are refused too.
"$KB" sweep synthetic --param seed=101,999 --param events=20000,40000 --quiet \
	--out "$TMP/other.csv" --resume 2>"$TMP/err"
[ $? -eq 1 ] || fail "rows of another sweep were accepted"
grep -q "other.csv:" "$TMP/err" || fail "the row error does not name the file"
echo PASS
