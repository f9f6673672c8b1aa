#!/bin/bash
# The sweep's progress line: on a terminal it is erased before a row goes to
# the same terminal (no row glued to "... eta 0.4s"), and it never goes to a
# pipe or a file.
set -u
. "$(dirname "$0")/lib.sh"
have_python || { echo "SKIP: python3 not found (needed for a pseudo-terminal)"; exit 77; }

# Rows and progress on one pseudo-terminal, as in an interactive shell.
on_pty "$TMP/tty.out" sweep synthetic --param events=2000,4000,6000,8000 --param lps=4 ||
	fail "sweep on a terminal failed"
grep -q 'eta' "$TMP/tty.out" || fail "no progress line on a terminal"
# What the terminal shows of each line: the text after its last carriage
# return, with erase-to-end-of-line removed. A row must stand alone.
tr -d '\033' < "$TMP/tty.out" | sed -e 's/\r$//' -e 's/\[K//g' -e 's/.*\r//' > "$TMP/shown"
grep -n 'synthetic,' "$TMP/shown" | grep 'eta' && fail "a row is glued to the progress line"
rows=$(grep -c '^synthetic,' "$TMP/shown")
[ "$rows" -eq 4 ] || { cat -A "$TMP/tty.out" >&2; fail "expected 4 rows at the start of a line, saw $rows"; }

# Pipes and files: no progress.
"$KB" sweep synthetic --param events=2000,4000 --param lps=4 2> "$TMP/err" | cat > "$TMP/rows" ||
	fail "sweep into a pipe failed"
grep -q 'eta' "$TMP/err" "$TMP/rows" && fail "progress written to a pipe or file"
echo "PASS: progress erased before rows on a terminal, absent in pipes"
