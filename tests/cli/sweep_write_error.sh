#!/bin/bash
# A write error of the rows (full disk) stops the sweep with exit 1 and a
# message; rows written before stay.
set -u
. "$(dirname "$0")/lib.sh"

if [ -w /dev/full ]; then
	"$KB" sweep synthetic --param events=100,200 --quiet >/dev/full 2>"$TMP/err"
	rc=$?
	[ "$rc" -eq 1 ] || fail "exit $rc writing to /dev/full, expected 1"
	grep -q '^kernbench: error: .*standard output' "$TMP/err" || fail "message: $(cat "$TMP/err")"
	"$KB" topology >/dev/full 2>/dev/null
	[ $? -eq 1 ] || fail "topology to /dev/full did not fail"
	"$KB" list >/dev/full 2>/dev/null
	[ $? -eq 1 ] || fail "list to /dev/full did not fail"
else
	echo "no /dev/full: skipping that part"
fi
# An output file in a directory that does not exist.
"$KB" sweep synthetic --param events=100 --quiet --out "$TMP/no/dir.csv" 2>"$TMP/err"
[ $? -eq 1 ] || fail "an unwritable --out did not fail"
grep -q "no/dir.csv" "$TMP/err" || fail "the error does not name the file"
# The plot, likewise.
"$KB" sweep synthetic --param events=100 --quiet --plot "$TMP/no/p.svg" >/dev/null 2>"$TMP/err"
[ $? -eq 1 ] || fail "an unwritable --plot did not fail"
echo PASS
