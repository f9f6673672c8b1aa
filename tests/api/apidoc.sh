#!/bin/bash
# Every KB_API function declared in a public header has an entry in
# doc/api.md: a heading or a line that names it as `name(`.
set -u
: "${abs_top_srcdir:?}"
doc="$abs_top_srcdir/doc/api.md"
[ -f "$doc" ] || { echo "FAIL: $doc missing"; exit 1; }

# A KB_API declaration may wrap: join each header into one line per
# declaration (up to ';'), then take the name before the first '('.
# Preprocessor lines (the definition of KB_API itself) are left out.
names=$(for h in "$abs_top_srcdir"/include/kernbench/*.h; do
	grep -v '^[[:space:]]*#' "$h" | sed -e 's,/\*.*\*/,,g' | tr '\n' ' ' | tr ';' '\n' |
		grep 'KB_API' | sed -e 's/.*KB_API//' -e 's/(.*//' | awk '{print $NF}' | tr -d '*'
done | sort -u)
[ -n "$names" ] || { echo "FAIL: no KB_API function found in the headers"; exit 1; }

status=0
n=0
for f in $names; do
	n=$((n + 1))
	if ! grep -q "^#\{2,4\} \`$f(" "$doc"; then
		echo "FAIL: $f has no entry (a heading \"### \`$f(...)\`\") in doc/api.md"
		status=1
	fi
done
[ $status -eq 0 ] && echo "PASS: $n public functions documented"
exit $status
