#!/bin/bash
# The headline figures of README.md, doc/sweep.md and doc/benches.md are
# what the commands they show print: reruns the R-sweep and the decode runs
# and compares with the numbers parsed out of the documents, so that a code
# change that moves a figure fails here until the documents follow.
set -u
. "$(dirname "$0")/lib.sh"

readme="$SRCDIR/README.md" sweepdoc="$SRCDIR/doc/sweep.md" benchdoc="$SRCDIR/doc/benches.md"
vsdoc="$SRCDIR/doc/opt2-vs-opt3.md"
for f in "$readme" "$sweepdoc" "$benchdoc" "$vsdoc"; do
	[ -f "$f" ] || fail "$f missing"
done

# README's command, rows to a file: the headline lines go to stdout.
"$KB" sweep gqa_decode_opt2,gqa_decode_opt3 \
	--set pe_cost_model.r_cycles_per_byte=0.25,0.0625,0.03125 \
	--out "$TMP/r.csv" >"$TMP/headline.txt" || fail "the README's sweep exited $?"
cat "$TMP/headline.txt"
grep -q 'opt3/opt2 per-tile dispatch ratio = ' "$TMP/headline.txt" || fail "the sweep printed no headline"

# Every headline line of README.md and doc/sweep.md is one the sweep printed.
n=0
for f in "$readme" "$sweepdoc"; do
	while IFS= read -r line; do
		n=$((n + 1))
		grep -qxF "$line" "$TMP/headline.txt" ||
			fail "$(basename "$f") shows '$line', the sweep printed: $(cat "$TMP/headline.txt")"
	done < <(grep 'opt3/opt2 per-tile dispatch ratio = ' "$f")
done
[ "$n" -ge 5 ] || fail "expected the README's 3 and doc/sweep.md's 2 headline lines, found $n"

# The README's table: the kernbench column is the sweep's ratio at that R.
rows=0
while IFS='|' read -r _ r _ ours _; do
	r=$(echo "$r" | tr -d ' ') ours=$(echo "$ours" | sed 's/^ *\([0-9.]*\)x.*/\1/')
	grep -qxF "pe_cost_model.r_cycles_per_byte=$r: opt3/opt2 per-tile dispatch ratio = $ours" \
		"$TMP/headline.txt" || fail "README's table says ${ours}x at R = $r"
	rows=$((rows + 1))
done < <(grep -E '^\| 0\.[0-9]+ \|' "$readme")
[ "$rows" -eq 3 ] || fail "expected 3 rows in the README's table, found $rows"

# A figure of run --json at the default calibration (R = 0.0625).
fig() {
	"$KB" run "$1" --json | grep -o "\"$2\":[0-9.]*" | cut -d: -f2
}
# Equal to two decimals, as the documents print them.
same() {
	awk -v a="$1" -v b="$2" 'BEGIN { exit !(sprintf("%.2f", a) == sprintf("%.2f", b)) }'
}
o2=$(fig gqa_decode_opt2 dispatch_per_tile_ns) o3=$(fig gqa_decode_opt3 dispatch_per_tile_ns)
k2=$(fig gqa_decode_opt2 dispatch_kernel_per_tile_ns) k3=$(fig gqa_decode_opt3 dispatch_kernel_per_tile_ns)
[ -n "$o2" ] && [ -n "$o3" ] && [ -n "$k2" ] && [ -n "$k3" ] || fail "run --json lacks the per-tile figures"
echo "opt2 $o2 / $k2 ns, opt3 $o3 / $k3 ns per tile"

# README: "dispatches 102.75 ns per tile against opt3's 506.75 ns", the
# table's "(506.75 / 102.75 ns)" and "per tile: 105.98 and 509.98 ns".
txt=$(tr '\n' ' ' <"$readme")
d2=$(echo "$txt" | sed -n "s/.*dispatches \([0-9.]*\) ns per tile against opt3's \([0-9.]*\) ns.*/\1/p")
d3=$(echo "$txt" | sed -n "s/.*dispatches \([0-9.]*\) ns per tile against opt3's \([0-9.]*\) ns.*/\2/p")
same "$d2" "$o2" && same "$d3" "$o3" || fail "README says opt2 $d2 ns and opt3 $d3 ns per tile; runs give $o2 and $o3"
t3=$(echo "$txt" | sed -n 's/.*x (\([0-9.]*\) \/ \([0-9.]*\) ns) |.*/\1/p')
t2=$(echo "$txt" | sed -n 's/.*x (\([0-9.]*\) \/ \([0-9.]*\) ns) |.*/\2/p')
same "$t2" "$o2" && same "$t3" "$o3" || fail "README's table says ($t3 / $t2 ns); runs give $o3 / $o2"
w2=$(echo "$txt" | sed -n 's/.*per tile: \([0-9.]*\) and \([0-9.]*\) ns at S_kv.*/\1/p')
w3=$(echo "$txt" | sed -n 's/.*per tile: \([0-9.]*\) and \([0-9.]*\) ns at S_kv.*/\2/p')
same "$w2" "$k2" && same "$w3" "$k3" || fail "README says $w2 and $w3 ns with the whole kernel; runs give $k2 and $k3"

# README's derivation: "n3 = 12 commands of 428 bytes (opt3) and n2 = 2 of
# 364 bytes (opt2) per tile" must give the per-tile figures the runs print
# (FIXED 40 cycles + R 0.0625 x bytes, at 1 GHz), "1.18x" is b3 / b2 and
# "n3 / n2 ... (6x here" is n3 / n2.
n3=$(echo "$txt" | sed -n 's/.*n3 = \([0-9]*\) commands of \([0-9]*\) bytes (opt3).*/\1/p')
b3=$(echo "$txt" | sed -n 's/.*n3 = \([0-9]*\) commands of \([0-9]*\) bytes (opt3).*/\2/p')
n2=$(echo "$txt" | sed -n 's/.*n2 = \([0-9]*\) of \([0-9]*\) bytes (opt2).*/\1/p')
b2=$(echo "$txt" | sed -n 's/.*n2 = \([0-9]*\) of \([0-9]*\) bytes (opt2).*/\2/p')
[ -n "$n3" ] && [ -n "$b3" ] && [ -n "$n2" ] && [ -n "$b2" ] || fail "README's derivation paragraph not found"
same "$(awk -v n="$n3" -v b="$b3" 'BEGIN { print n * 40 + 0.0625 * b }')" "$o3" &&
	same "$(awk -v n="$n2" -v b="$b2" 'BEGIN { print n * 40 + 0.0625 * b }')" "$o2" ||
	fail "README's n3 = $n3 / $b3 bytes and n2 = $n2 / $b2 bytes do not give the runs' $o3 and $o2 ns"
bb=$(echo "$txt" | sed -n 's/.*carries only \([0-9.]*\)x opt2.s logical.*/\1/p')
same "$bb" "$(awk -v a="$b3" -v b="$b2" 'BEGIN { print a / b }')" || fail "README says opt3 carries ${bb}x opt2's bytes; $b3 / $b2"
nn=$(echo "$txt" | sed -n 's/.*as R falls (\([0-9.]*\)x here.*/\1/p')
[ "$nn" = "$((n3 / n2))" ] || fail "README says n3 / n2 = ${nn}x; $n3 / $n2"

# doc/benches.md: "(opt3 506.75 ns, opt2 102.75 ns at the default calibration: 4.93x)".
txt=$(tr '\n' ' ' <"$benchdoc")
b3=$(echo "$txt" | sed -n 's/.*(opt3 \([0-9.]*\) ns, opt2 \([0-9.]*\) ns at the default calibration: \([0-9.]*\)x).*/\1/p')
b2=$(echo "$txt" | sed -n 's/.*(opt3 \([0-9.]*\) ns, opt2 \([0-9.]*\) ns at the default calibration: \([0-9.]*\)x).*/\2/p')
br=$(echo "$txt" | sed -n 's/.*(opt3 \([0-9.]*\) ns, opt2 \([0-9.]*\) ns at the default calibration: \([0-9.]*\)x).*/\3/p')
same "$b2" "$o2" && same "$b3" "$o3" || fail "doc/benches.md says opt3 $b3 ns, opt2 $b2 ns; runs give $o3 and $o2"
grep -qxF "pe_cost_model.r_cycles_per_byte=0.0625: opt3/opt2 per-tile dispatch ratio = $br" "$TMP/headline.txt" ||
	fail "doc/benches.md says ${br}x at the default calibration"
# "... as S_kv grows (opt3/opt2 4.49x at S_kv = 1024, 4.81x at 4096)": whole-kernel figures.
ks=$(echo "$txt" | sed -n 's/.*as S_kv grows (opt3\/opt2 \([0-9.]*\)x at S_kv = \([0-9]*\), \([0-9.]*\)x at \([0-9]*\)).*/\1 \2 \3 \4/p')
[ -n "$ks" ] || fail "doc/benches.md: no 'as S_kv grows (opt3/opt2 ...)' figures found"
set -- $ks
for pair in "$1 $2" "$3 $4"; do
	set -- $pair
	a=$("$KB" run gqa_decode_opt3 --param S_kv=$2 --json | grep -o '"dispatch_kernel_per_tile_ns":[0-9.]*' | cut -d: -f2)
	b=$("$KB" run gqa_decode_opt2 --param S_kv=$2 --json | grep -o '"dispatch_kernel_per_tile_ns":[0-9.]*' | cut -d: -f2)
	same "$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }')" "$1" ||
		fail "doc/benches.md says opt3/opt2 ${1}x at S_kv = $2 with the whole kernel; runs give $a / $b"
done

# doc/opt2-vs-opt3.md: every row of its table (simulated µs, exact) is
# what its sweep gives: S_kv | R | TILE | opt2 strict | opt2 rw | opt3 strict | opt3 rw | ...
for S in 4096 65536; do
	"$KB" sweep gqa_decode_opt2,gqa_decode_opt3 --param TILE=16,64,256 --param S_kv=$S \
		--set pe_cost_model.r_cycles_per_byte=0.25,0.0625,0.03125 \
		--set pe.scheduler.policy=strict_fifo,rw_aware --out "$TMP/vs-$S.csv" >/dev/null ||
		fail "doc/opt2-vs-opt3.md's sweep at S_kv = $S exited $?"
done
# bench,TILE,S_kv,R,policy,sim_time_ns,... -> "bench S_kv R TILE policy µs"
cat "$TMP"/vs-*.csv | awk -F, '$1 ~ /^gqa/ { printf "%s %s %s %s %s %.2f %s\n", $1, $3, $4, $2, $5, $6 / 1000, $6 }' \
	>"$TMP/vs.txt"
vs=0
while IFS='|' read -r _ S R T a b c d e f _; do
	# The ratio columns (bold where opt2 wins) are opt2 / opt3 of the exact times.
	for x in "strict_fifo $e" "rw_aware $f"; do
		set -- $x
		t2=$(grep "^gqa_decode_opt2 $(echo $S $R $T) $1 " "$TMP/vs.txt" | cut -d' ' -f7)
		t3=$(grep "^gqa_decode_opt3 $(echo $S $R $T) $1 " "$TMP/vs.txt" | cut -d' ' -f7)
		[ -n "$t2" ] && [ -n "$t3" ] && awk -v a="$t2" -v b="$t3" -v r="${2//\*/}" -v bold="$2" \
			'BEGIN { exit !(sprintf("%.3f", a / b) == r && (index(bold, "*") > 0) == (a < b)) }' ||
			fail "doc/opt2-vs-opt3.md says opt2/opt3 = $2 ($1) at S_kv=$(echo $S) R=$(echo $R) TILE=$(echo $T); exact times $t2 / $t3"
	done
	set -- $a $b $c $d
	for x in "gqa_decode_opt2 strict_fifo $1" "gqa_decode_opt2 rw_aware $2" \
		 "gqa_decode_opt3 strict_fifo $3" "gqa_decode_opt3 rw_aware $4"; do
		set -- $x
		S=$(echo $S) R=$(echo $R) T=$(echo $T)
		grep -q "^$1 $S $R $T $2 $3 " "$TMP/vs.txt" ||
			fail "doc/opt2-vs-opt3.md says $1 $2 S_kv=$S R=$R TILE=$T takes $3 us; the sweep: $(grep "^$1 $S $R $T $2 " "$TMP/vs.txt")"
	done
	vs=$((vs + 1))
done < <(grep -E '^\| [0-9]+ \| 0\.[0-9]+ \| [0-9]+ \|' "$vsdoc")
[ "$vs" -eq 18 ] || fail "expected 18 rows in doc/opt2-vs-opt3.md's table, found $vs"
echo "PASS: $n headline lines, $rows table rows, the per-tile figures and $vs rows of doc/opt2-vs-opt3.md match the runs"
exit 0
