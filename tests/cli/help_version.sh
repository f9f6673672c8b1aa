#!/bin/bash
# --help and --version of the command and of each subcommand, and the man
# page documenting every option that --help lists.
set -u
. "$(dirname "$0")/lib.sh"

"$KB" --version >"$TMP/v" 2>"$TMP/e" || fail "--version exited $?"
grep -Eq '^kernbench [0-9]+\.[0-9]+\.[0-9]+$' "$TMP/v" || fail "--version printed: $(cat "$TMP/v")"
[ -s "$TMP/e" ] && fail "--version wrote to stderr"
"$KB" -V | cmp -s - "$TMP/v" || fail "-V differs from --version"

"$KB" --help >"$TMP/h" || fail "--help exited $?"
for cmd in list run sweep topology; do
	grep -q "^  $cmd" "$TMP/h" || fail "--help does not list '$cmd'"
	"$KB" "$cmd" --help >"$TMP/h.$cmd" || fail "$cmd --help exited $?"
	grep -q "^Usage: kernbench $cmd" "$TMP/h.$cmd" || fail "$cmd --help has no usage line"
	"$KB" help "$cmd" | cmp -s - "$TMP/h.$cmd" || fail "'help $cmd' differs from '$cmd --help'"
done
"$KB" -h | cmp -s - "$TMP/h" || fail "-h differs from --help"

# The man page documents every long option that some --help lists.
man="$SRCDIR/doc/kernbench.1"
[ -f "$man" ] || fail "no man page at $man"
for opt in $(cat "$TMP"/h.* | grep -Eo -- '--[a-z][a-z-]+' | sort -u); do
	esc=$(printf '%s' "$opt" | sed 's/-/\\\\-/g')
	grep -Eq -- "$esc|$opt" "$man" || fail "man page lacks $opt"
done
grep -q '^\.TH KERNBENCH 1' "$man" || fail "man page has no .TH KERNBENCH 1"
echo PASS
