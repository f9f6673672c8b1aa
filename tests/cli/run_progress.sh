#!/bin/bash
# A long `run` shows a progress line on a terminal (simulated time reached,
# records, elapsed), erased before the result; never in a pipe or a file.
set -u
. "$(dirname "$0")/lib.sh"
have_python || { echo "SKIP: python3 not found (needed for a pseudo-terminal)"; exit 77; }

args=(run synthetic --param events=2500000)
on_pty "$TMP/tty.out" "${args[@]}" || fail "run on a terminal failed"
grep -q 'simulated [0-9.]* ns, [0-9]* op_log records' "$TMP/tty.out" ||
	{ cat -A "$TMP/tty.out" >&2; fail "no progress line on a terminal"; }
# What the terminal shows: the text after each line's last carriage return,
# erase-to-end-of-line removed. The summary must stand alone.
tr -d '\033' < "$TMP/tty.out" | sed -e 's/\r$//' -e 's/\[K//g' -e 's/.*\r//' > "$TMP/shown"
grep -q '^bench          synthetic$' "$TMP/shown" || { cat -A "$TMP/tty.out" >&2; fail "summary glued to the progress line"; }
grep -q 'simulated' "$TMP/shown" && fail "the progress line was not erased"

# Pipes and files: no progress.
"$KB" "${args[@]}" 2>"$TMP/err" | cat >"$TMP/out" || fail "run into a pipe failed"
grep -q 'simulated [0-9]' "$TMP/err" "$TMP/out" && fail "progress written to a pipe or file"
grep -q '^bench' "$TMP/out" || fail "no summary in the pipe"
echo PASS
