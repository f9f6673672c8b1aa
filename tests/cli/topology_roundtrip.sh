#!/bin/bash
# kernbench topology --set K=V, fed back with --topology, dumps the same
# JSON; and a run with the file gives the same figures as with --set.
set -u
. "$(dirname "$0")/lib.sh"

"$KB" topology >"$TMP/default.json" || fail "topology exited $?"
"$KB" topology --set pe_cost_model.r_cycles_per_byte=0.25 \
	--set pe_cost_model.fixed_cycles=50 >"$TMP/a.json" || fail "topology --set exited $?"
cmp -s "$TMP/default.json" "$TMP/a.json" && fail "--set changed nothing"
grep -q '0.25' "$TMP/a.json" || fail "the dump lacks the value set"
"$KB" topology --topology "$TMP/a.json" >"$TMP/b.json" || fail "topology --topology exited $?"
cmp "$TMP/a.json" "$TMP/b.json" || fail "round trip differs"
"$KB" topology --topology "$TMP/default.json" | cmp -s - "$TMP/default.json" ||
	fail "the default does not round-trip"

# Later --set wins over earlier ones and over the file.
"$KB" topology --topology "$TMP/a.json" --set pe_cost_model.r_cycles_per_byte=0.0625 \
	--set pe_cost_model.fixed_cycles=40 | cmp -s - "$TMP/default.json" ||
	fail "--set after --topology does not restore the default"

# --hash is the SHA-256 of exactly what `topology` prints, and the same
# effective values give the same hash however they were written.
if command -v sha256sum >/dev/null 2>&1; then
	want=$(sha256sum <"$TMP/a.json" | cut -d' ' -f1)
	got=$("$KB" topology --set pe_cost_model.r_cycles_per_byte=0.25 \
		--set pe_cost_model.fixed_cycles=50 --hash) || fail "topology --hash exited $?"
	[ "$got" = "$want" ] || fail "--hash '$got' is not sha256sum of the dump '$want'"
fi
h1=$("$KB" topology --hash) || fail "topology --hash exited $?"
h2=$("$KB" topology --topology "$TMP/a.json" --set pe_cost_model.r_cycles_per_byte=0.0625 \
	--set pe_cost_model.fixed_cycles=40 --hash) || fail "topology --hash exited $?"
[ "$h1" = "$h2" ] || fail "the same effective topology hashes differently ($h1, $h2)"
[[ "$h1" =~ ^[0-9a-f]{64}$ ]] || fail "--hash printed '$h1', not 64 hex digits"
h3=$("$KB" topology --topology "$TMP/a.json" --hash) || fail "topology --hash exited $?"
[ "$h1" != "$h3" ] || fail "different topologies hash the same"

# The same run either way.
# (meta, the provenance, is last: it records the command line, which differs,
# and the topology hash, which must not.)
strip() { sed -e 's/"wall_s":[^,}]*//; s/"events_per_s":[^,}]*//; s/,"meta":.*"topology_sha256":\("[0-9a-f]*"\).*$/,\1}/' ; }
"$KB" run synthetic --param events=200 --threads 1 --json \
	--set pe_cost_model.r_cycles_per_byte=0.25 --set pe_cost_model.fixed_cycles=50 |
	strip >"$TMP/r1" || fail "run with --set failed"
"$KB" run synthetic --param events=200 --threads 1 --json --topology "$TMP/a.json" |
	strip >"$TMP/r2" || fail "run with --topology failed"
cmp "$TMP/r1" "$TMP/r2" || fail "run with --set and with the dumped file differ"
echo PASS
