#!/bin/bash
# Runs the R-sweep example with a small S_kv, so that it stays fast, and
# checks that it prints one row per R with opt3 costlier per tile than opt2.
set -u
: "${abs_top_builddir:?}"
out=$("$abs_top_builddir/doc/examples/embed_rsweep" 512 0,0.0625,0.25) || { echo "FAIL: embed_rsweep failed"; exit 1; }
printf '%s\n' "$out"
rows=$(printf '%s\n' "$out" | awk 'NR > 2 && $4 + 0 > 1' | wc -l)
[ "$rows" -eq 3 ] || { echo "FAIL: expected 3 rows with an opt3/opt2 ratio above 1, got $rows"; exit 1; }
exit 0
