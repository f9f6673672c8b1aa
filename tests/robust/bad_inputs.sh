#!/bin/bash
# Bad inputs of every kind (issue 9), beyond those of tests/cli/exit_status.sh:
# malformed and out-of-range topology files, absurd shapes, sweep lists and
# resume files that do not fit, unwritable outputs. Each row is
#   expected status | check | stderr fragment | arguments
# where check is "-" (a `run` row gets --op-log @TMP@/never.jsonl added and
# the file must not exist afterwards: nothing written on error), "w" (may
# write: no such check) or "o" (the fragment is looked for on standard
# output: a sweep reports a failed point in its row). Arguments are split on
# spaces; @TMP@ is the scratch directory, @T@/NAME a topology file written
# below, @FILE@ a plain file (so @FILE@/x is a path that cannot be created).
set -u
. "$(dirname "$0")/../cli/lib.sh"

T=$TMP/topo
mkdir -p "$T"
: > "$TMP/afile"
S='"schema": "kernbench-topology/1"'
mk() { printf '%s' "$2" > "$T/$1.json"; }
mk trunc        "{$S, \"clock_freq_ghz\": 1.0"
mk nocomma      "{$S \"clock_freq_ghz\": 1.0}"
mk nested_comma "{$S, \"pe\": {\"gemm\": {\"tile_m\": 64,, \"tile_n\": 128}}}"
mk empty        ""
mk trailing     "{$S, \"clock_freq_ghz\": 1.0}
{}"
mk str          "{$S, \"clock_freq_ghz\": \"1.0\"}"
mk frac         "{$S, \"clusters\": 1.5}"
mk pe_num       "{$S, \"pe\": 3}"
mk bool         "{$S, \"memory\": {\"tcm_bytes\": true}}"
mk null         "{$S, \"links\": null}"
mk unk_nested   "{$S, \"pe\": {\"dma\": {\"setup_cycles\": 64, \"turbo\": 1}}}"
mk unk_obj      "{$S, \"pe\": {\"warp_drive\": {}}}"
mk noschema     '{"clock_freq_ghz": 1.0}'
mk schema2      '{"schema": "kernbench-topology/2"}'
mk schema_num   '{"schema": 1}'
mk clock0       "{$S, \"clock_freq_ghz\": 0}"
mk clockneg     "{$S, \"clock_freq_ghz\": -2.5}"
mk clockinf     "{$S, \"clock_freq_ghz\": 1e999}"
mk dma0         "{$S, \"pe\": {\"dma\": {\"bytes_per_cycle\": 0}}}"
mk link0        "{$S, \"links\": {\"intra_cluster_bytes_per_cycle\": 0}}"
mk tilem0       "{$S, \"pe\": {\"gemm\": {\"tile_m\": 0}}}"
mk tilekneg     "{$S, \"pe\": {\"gemm\": {\"tile_k\": -64}}}"
mk rneg         "{$S, \"pe_cost_model\": {\"r_cycles_per_byte\": -0.5}}"
mk cap8         "{$S, \"pe_cost_model\": {\"max_composite_logical_bytes\": 8}}"
mk tcm200k      "{$S, \"memory\": {\"tcm_bytes\": 200000}}"
mk clusters0    "{$S, \"clusters\": 0}"
mk clusters_big "{$S, \"clusters\": 4294967297}"
mk hbm0         "{$S, \"memory\": {\"hbm_bytes\": 0}}"
mk vw0          "{$S, \"pe\": {\"math\": {\"vector_width\": 0}}}"
mk inflight0    "{$S, \"pe\": {\"sched\": {\"max_inflight_tiles\": 0}}}"
mk dup          "{$S, \"clock_freq_ghz\": 1.0, \"clock_freq_ghz\": 2.0}"
mk array        '[1, 2]'
mk clock_denorm "{$S, \"clock_freq_ghz\": 5e-324}"
mk clock2       "{$S, \"clock_freq_ghz\": 2.0}"

# A finished sweep to resume with other lists / another bench, and a file
# that is not a sweep at all.
"$KB" sweep synthetic --param events=10 --param lps=1,2 --quiet --out "$TMP/done.csv" \
	>/dev/null 2>&1 || fail "cannot make the sweep file to resume"
printf 'garbage\n' > "$TMP/garbage.csv"
# Resume files edited by hand: status 'okay', a key value changed so that
# two rows claim one point, a NaN figure in an ok row.
sed '2s/,ok,/,okay,/' "$TMP/done.csv" > "$TMP/okay.csv"
sed '3s/^synthetic,10,2,/synthetic,10,1,/' "$TMP/done.csv" > "$TMP/twice.csv"
sed '2s/^synthetic,10,1,[0-9.]*,/synthetic,10,1,NaN,/' "$TMP/done.csv" > "$TMP/nan.csv"
# More of them: a bad SHA, a garbage line in the middle, a NUL inside a
# row, a JSON Lines row with trailing junk.
sed '2s/,[0-9a-f]\{64\},ok,/,xyz,ok,/' "$TMP/done.csv" > "$TMP/badsha.csv"
{ head -n 2 "$TMP/done.csv"; echo garbage; tail -n +3 "$TMP/done.csv"; } > "$TMP/middle.csv"
{ head -n 1 "$TMP/done.csv"; sed -n 2p "$TMP/done.csv" | tr -d '\n'; printf '\0\n'
  tail -n +3 "$TMP/done.csv"; } > "$TMP/nul.csv"
"$KB" sweep synthetic --param events=10 --param lps=1,2 --quiet --out "$TMP/done.jsonl" \
	>/dev/null 2>&1 || fail "cannot make the JSONL sweep file to resume"
sed '1s/}$/} junk/' "$TMP/done.jsonl" > "$TMP/junk.jsonl"
# Sparse: 300 MB of size, no disk.
truncate -s 300M "$TMP/huge.csv" 2>/dev/null || dd if=/dev/zero of="$TMP/huge.csv" bs=1 count=0 seek=300M 2>/dev/null

R='run synthetic --param events=10'
G='run gemm --param M=64 --param K=64 --param N=64'
table=$(cat <<ROWS
1|-|trunc.json:1:|$R --topology @T@/trunc.json
1|-|'}' expected|$R --topology @T@/nocomma.json
1|-|string or '}' expected|$R --topology @T@/nested_comma.json
1|-|empty.json:1:0:|$R --topology @T@/empty.json
1|-|end of file expected|$R --topology @T@/trailing.json
1|-|clock_freq_ghz: expected real|$R --topology @T@/str.json
1|-|clusters: expected integer|$R --topology @T@/frac.json
1|-|pe: expected object|$R --topology @T@/pe_num.json
1|-|memory.tcm_bytes: expected integer|$R --topology @T@/bool.json
1|-|links: expected object|$R --topology @T@/null.json
1|-|unknown key 'pe.dma.turbo'|$R --topology @T@/unk_nested.json
1|-|unknown key 'pe.warp_drive'|$R --topology @T@/unk_obj.json
1|-|missing required key 'schema'|$R --topology @T@/noschema.json
1|-|kernbench-topology/2|$R --topology @T@/schema2.json
1|-|schema: expected string|$R --topology @T@/schema_num.json
1|-|clock_freq_ghz = 0|$R --topology @T@/clock0.json
1|-|clock_freq_ghz = -2.5|$R --topology @T@/clockneg.json
1|-|1e999|$R --topology @T@/clockinf.json
1|-|pe.dma.bytes_per_cycle = 0|$R --topology @T@/dma0.json
1|-|links.intra_cluster_bytes_per_cycle = 0|$R --topology @T@/link0.json
1|-|pe.gemm.tile_m = 0|$R --topology @T@/tilem0.json
1|-|pe.gemm.tile_k = -64|$R --topology @T@/tilekneg.json
1|-|r_cycles_per_byte = -0.5|$R --topology @T@/rneg.json
1|-|max_composite_logical_bytes = 8|$G --topology @T@/cap8.json
1|-|cannot hold one GEMM tile set|$G --topology @T@/tcm200k.json
1|-|clusters = 0|$R --topology @T@/clusters0.json
1|-|clusters = 4294967297|$R --topology @T@/clusters_big.json
1|-|memory.hbm_bytes = 0|$R --topology @T@/hbm0.json
1|-|pe.math.vector_width = 0|$R --topology @T@/vw0.json
1|-|max_inflight_tiles = 0|$R --topology @T@/inflight0.json
1|-|duplicate object key|$R --topology @T@/dup.json
1|-|must be a JSON object|$R --topology @T@/array.json
1|-|Is a directory|$R --topology @T@
1|-|/dev/null:1:0:|$R --topology /dev/null
1|-|missing required key 'schema'|topology --topology @T@/noschema.json --set clock_freq_ghz=2
1|-|'inf' is not a number|topology --set clock_freq_ghz=inf
1|-|'nan' is not a number|topology --set clock_freq_ghz=nan
1|-|clusters: expected integer|topology --set clusters=1e2
1|-|memory.hbm_bytes = 99999999999999999999|topology --set memory.hbm_bytes=99999999999999999999
1|-|'pe.gemm' is an object|topology --set pe.gemm=1
1|-|'schema' cannot be set|topology --set schema=kernbench-topology/1
1|-|'0x10' is not a number|$R --set clock_freq_ghz=0x10
1|-|cannot hold one GEMM tile set|$G --set memory.tcm_bytes=65536
1|-|HBM exhausted|run gemm --param M=1048576 --param K=1048576 --param N=1048576
1|-|HBM exhausted|run gemm --data --param M=1048576 --param K=1048576 --param N=1048576
1|-|HBM exhausted|run gqa_decode_opt2 --param S_kv=67108864
1|-|HBM exhausted|run gqa_decode_opt2 --param S_kv=67108864 --param d=4096 --param G=4096
1|w|TCM exhausted|run gqa_decode_opt2 --param S_kv=64 --param d=4096 --param G=4096
1|-|parameter M = 0 is out of range|run gemm --param M=0
1|-|parameter K = 2000000 is out of range|run gemm --param K=2000000
1|-|'fp64' is not one of|run gemm --param dtype=fp64
1|-|'softmax' is not one of|run gemm --param epilogue=softmax
1|-|'1e3' is not an integer|run gemm --param M=1e3
1|-|is not an integer|run gemm --param M=99999999999999999999999
1|-|'nan' is not a finite number|$R --param mean_ns=nan
1|-|remote = 1.5 is out of range|$R --param remote=1.5
1|-|lookahead_ns = 0 is out of range|$R --param lookahead_ns=0
1|-|'1 2' is not an integer|$R --param lps=1\x202
2|-|--threads '99999'|$R --threads 99999
2|-|expected NAME=V1,V2|sweep synthetic --param lps=
2|-|empty value|sweep synthetic --param lps=,
2|-|expected KEY=V1,V2|sweep synthetic --set k=
2|-|expected KEY=V1,V2|sweep synthetic --set =1,2
2|-|unknown bench 'gemmx'|sweep gemmx,synthetic
2|-|empty bench name|sweep ,synthetic
2|-|.csv or .jsonl|sweep synthetic --out @TMP@/rows.json
2|-|.csv or .jsonl|sweep synthetic --out @TMP@/rows
2|-|swept twice|sweep synthetic --set clock_freq_ghz=1,2 --set clock_freq_ghz=3
1|-|Not a directory|sweep synthetic --param events=10 --out @FILE@/rows.csv
1|-|Not a directory|sweep synthetic --param events=10 --out /dev/full/rows.csv
1|-|Not a directory|sweep synthetic --param events=10 --plot @FILE@/p.svg
1|-|not a point of this sweep|sweep synthetic --param events=10 --param lps=4,8 --quiet --out @TMP@/done.csv --resume
1|-|header does not match|sweep gemm --param M=64 --quiet --out @TMP@/done.csv --resume
1|-|header does not match|sweep synthetic --param events=10 --quiet --out @TMP@/garbage.csv --resume
1|-|missing required key 'schema'|sweep synthetic --param events=10 --topology @T@/noschema.json
1|-|'pe' is an object|sweep synthetic --param events=10 --set pe=1,2
1|o|clock_freq_ghz = 0|sweep synthetic --param events=10 --set clock_freq_ghz=0,1 --quiet
1|o|HBM exhausted|sweep gemm --param M=64,1048576 --param K=1048576 --param N=1048576 --quiet
1|w|Not a directory|$G --data --dump @FILE@
1|w|cannot create dump directory|$G --data --dump @FILE@/sub
1|w|cannot create dump directory|$G --data --dump /dev/full/x
1|w|No space left on device|$G --op-log /dev/full
1|w|No space left on device|$G --trace /dev/full
1|w|Is a directory|$G --op-log @TMP@
1|w|Not a directory|$G --trace @FILE@/t.json
# Rule (issue 18 §1): simulated time never wraps. A clock or bandwidth so
# slow that one stage passes 2^63 ps is out of its documented range ...
1|-|clock_freq_ghz = 1e-300: must be >= 0.001|$G --set clock_freq_ghz=1e-300
1|-|clock_freq_ghz = 5e-324: must be >= 0.001|$G --topology @T@/clock_denorm.json
1|-|clock_freq_ghz = 1e-12: must be >= 0.001|$G --set clock_freq_ghz=1e-12
1|-|pe.dma.bytes_per_cycle = 1e-10: must be >= 0.001|$G --set pe.dma.bytes_per_cycle=1e-10
1|-|pe.tcm.bytes_per_cycle = 1e-10: must be >= 0.001|$G --set pe.tcm.bytes_per_cycle=1e-10
1|-|links.intra_cluster_bytes_per_cycle = 1e-10|$G --set links.intra_cluster_bytes_per_cycle=1e-10
1|-|clock_freq_ghz = 1e-300: must be >= 0.001|$R --set clock_freq_ghz=1e-300 --threads 0
# ... and a run that still gets there stops with KB_ERANGE naming the keys.
1|-|simulated time would pass 2^63 ps: dma_read takes|$G --param M=8192 --param K=8192 --param N=8192 --set clock_freq_ghz=0.001 --set pe.dma.bytes_per_cycle=0.001 --set pe.dma.setup_cycles=1000000000
1|-|set by pe.dma.setup_cycles, pe.dma.bytes_per_cycle and clock_freq_ghz|$G --param M=8192 --param K=8192 --param N=8192 --set clock_freq_ghz=0.001 --set pe.dma.bytes_per_cycle=0.001 --threads 0
1|o|simulated time would pass 2^63 ps|sweep gemm --param M=64,8192 --param K=8192 --param N=8192 --set clock_freq_ghz=0.001 --set pe.dma.bytes_per_cycle=0.001 --quiet
# Rule (issue 18 §3): two outputs never resolve to the same file (the
# op_log of a '-' row is @TMP@/never.jsonl), nor a file output to the dump
# directory; and a run that fails leaves no op_log (the rows above).
1|-|are the same file: give each output a path of its own|$G --trace @TMP@/never.jsonl
1|-|are the same file|$G --trace @TMP@/./never.jsonl
1|-|is inside the dump directory|$G --data --dump @TMP@
# Rule (issue 18 §6): --plot is checked before any point runs (this sweep
# would run for hours first), and --resume reads --out with a size cap.
1|-|No such file or directory|sweep synthetic --param events=10000000000 --param lps=1,2 --plot @TMP@/nodir/p.svg
1|-|the most --resume reads|sweep synthetic --param events=10 --quiet --out @TMP@/huge.csv --resume
# Rule (issue 18 §4): a value listed twice in a sweep list is refused
# (two points would claim one row), after trimming, for --param and --set.
2|-|value '1' is listed twice|sweep synthetic --param events=10 --param lps=1,2,1
2|-|value '1' is listed twice|sweep synthetic --param events=10 --param lps=1,\x201
2|-|value '1' is listed twice|sweep synthetic --param events=10 --set clusters=1,1
# Rule (issue 18 §4): resume verifies every row it keeps; a bad one is a
# named error with its line, never kept, dropped or recomputed silently.
1|-|okay.csv:2: status 'okay' is neither 'ok' nor 'error'|sweep synthetic --param events=10 --param lps=1,2 --quiet --out @TMP@/okay.csv --resume
1|-|twice.csv:3: a second row for the point|sweep synthetic --param events=10 --param lps=1,2 --quiet --out @TMP@/twice.csv --resume
1|-|nan.csv:2: figure 'NaN' of an ok row is not a finite number|sweep synthetic --param events=10 --param lps=1,2 --quiet --out @TMP@/nan.csv --resume
1|-|badsha.csv:2: oplog_sha256 'xyz' is not 64 hexadecimal digits|sweep synthetic --param events=10 --param lps=1,2 --quiet --out @TMP@/badsha.csv --resume
1|-|middle.csv:3: malformed row (1 cells, expected 11)|sweep synthetic --param events=10 --param lps=1,2 --quiet --out @TMP@/middle.csv --resume
1|-|nul.csv:2: malformed row: a NUL byte in the row|sweep synthetic --param events=10 --param lps=1,2 --quiet --out @TMP@/nul.csv --resume
1|-|junk.jsonl:1: malformed row: end of file expected|sweep synthetic --param events=10 --param lps=1,2 --quiet --out @TMP@/junk.jsonl --resume
# Rule (issue 18 §4): the sweep records its definition (OUT.meta.json);
# resume refuses a file made under another topology, bench list or keys.
1|-|records another sweep (topology_sha256|sweep synthetic --param events=10 --param lps=1,2 --quiet --out @TMP@/done.csv --resume --topology @T@/clock2.json
# Rule (issue 18 §2): memory needs are estimated from the parameters and
# refused before the work, with the figure and the limit, naming what the
# user set (not the topology key a bench grew from it).
1|-|lps = 65536 x population = 1048576 (68719476736 messages in flight from the start) needs about 10.0 TiB of host memory, more than the limit of|$R --param lps=65536 --param population=1048576
1|-|H_kv = 64 x P = 64 = 4096 PEs over C = 1 cluster: pes_per_cluster = 4096|run gqa_decode_opt2 --param H_kv=64 --param P=64
1|-|H_kv = 64 x P = 64 = 4096 PEs over C = 5 clusters: clusters * pes_per_cluster|run gqa_decode_opt2 --param H_kv=64 --param P=64 --param C=5
1|-|data mode with M = 1000000, K = 1000000, N = 1000 needs about|run gemm --data --param M=1000000 --param K=1000000 --param N=1000 --set memory.hbm_bytes=281474976710656
ROWS
)

# Address and thread sanitizers reserve terabytes of address space: no
# address-space limit for a sanitized build.
limit=8388608
if grep -qs -e __asan_init -e __tsan_init "$KB" "$(dirname "$KB")/.libs/kernbench" \
	"$(dirname "$KB")/.libs/libkernbench.so"; then
	limit=unlimited
fi

n=0
bad=0
while IFS='|' read -r want check frag args; do
	case $want in '' | '#'*) continue ;; esac
	args=${args//@TMP@/$TMP}
	args=${args//@T@/$T}
	args=${args//@FILE@/$TMP/afile}
	rm -f "$TMP/never.jsonl"
	case $check:$args in
	-:run\ *) args="$args --op-log $TMP/never.jsonl" ;;
	esac
	# \x20 in a row stands for a space inside one argument.
	IFS=' ' read -r -a argv <<<"$args"
	for i in "${!argv[@]}"; do
		argv[$i]=${argv[$i]//\\x20/ }
	done
	# Bounded, so an absurd input that exhausts host memory fails the row
	# instead of the machine.
	(ulimit -v $limit 2>/dev/null; exec timeout 300 "$KB" "${argv[@]}") \
		>"$TMP/out" 2>"$TMP/err" </dev/null
	got=$?
	n=$((n + 1))
	where=$TMP/err
	[ "$check" = o ] && where=$TMP/out
	if [ "$got" -ne "$want" ]; then
		echo "FAIL: kernbench $args: exit $got, expected $want; stderr:" >&2
		cat "$TMP/err" >&2
		bad=$((bad + 1))
		continue
	fi
	if ! grep -qF -- "$frag" "$where"; then
		echo "FAIL: kernbench $args: $(basename "$where") lacks '$frag':" >&2
		cat "$where" >&2
		bad=$((bad + 1))
		continue
	fi
	if [ "$check" != o ]; then
		kind=error
		[ "$want" -eq 2 ] && kind=usage
		if ! grep -q "^kernbench: $kind: " "$TMP/err"; then
			echo "FAIL: kernbench $args: no 'kernbench: $kind:' line" >&2
			bad=$((bad + 1))
		fi
	fi
	if grep -q -e 'AddressSanitizer' -e 'runtime error:' -e 'Segmentation' "$TMP/err"; then
		echo "FAIL: kernbench $args: crashed or sanitizer report" >&2
		bad=$((bad + 1))
	fi
	if [ -e "$TMP/never.jsonl" ]; then
		echo "FAIL: kernbench $args: wrote an op_log although it failed" >&2
		bad=$((bad + 1))
	fi
done <<<"$table"

# Rule (issue 18 §2): under an address-space limit (ulimit -v) the estimate
# refuses before any PE is built, naming the user's parameters, the figure
# and the limit (was: 'cannot map a kernel stack' midway). Not for a
# sanitized build, which needs terabytes of address space.
while IFS='|' read -r frag args; do
	[ "$limit" = unlimited ] && break
	read -r -a argv <<<"$args"
	(ulimit -v 3000000; exec "$KB" "${argv[@]}") >/dev/null 2>"$TMP/err"
	got=$?
	n=$((n + 1))
	if [ "$got" -ne 1 ] || ! grep -qF -- "$frag" "$TMP/err" ||
		! grep -qF "address-space limit (ulimit -v)" "$TMP/err"; then
		echo "FAIL: ulimit -v 3000000; kernbench $args: exit $got, stderr:" >&2
		cat "$TMP/err" >&2
		bad=$((bad + 1))
	fi
done <<'LIMITED'
H_kv = 64 x P = 64 = 4096 PEs over C = 4 clusters: 4096 PEs (1310720 bytes each) needs about 5.0 GiB|run gqa_decode_opt2 --param H_kv=64 --param P=64 --param C=4
data mode with M = 32768, K = 32768, N = 32768 needs about 37.0 GiB|run gemm --data --param M=32768 --param K=32768 --param N=32768
lps = 65536 x population = 1000 (65536000 messages in flight from the start) needs about|run synthetic --param lps=65536 --param population=1000
LIMITED

# Rule (issue 18 §3): a closed pipe on standard output is exit 1 with a
# message, not death by SIGPIPE (the reader is gone before the first write).
for cmd in "run gemm --json" "sweep synthetic --param events=10 --param lps=1,2"; do
	read -r -a argv <<<"$cmd"
	{ sleep 0.3; "$KB" "${argv[@]}" 2>"$TMP/err"; echo $? >"$TMP/rc"; } | true
	n=$((n + 1))
	got=$(cat "$TMP/rc")
	if [ "$got" -ne 1 ] || ! grep -q "^kernbench: error: .*Broken pipe\|could not write" "$TMP/err"; then
		echo "FAIL: kernbench $cmd into a closed pipe: exit $got, stderr:" >&2
		cat "$TMP/err" >&2
		bad=$((bad + 1))
	fi
done

# Rule (issue 18 §3): a closed pipe on standard output, as `| head -c1`
# closes it after the first byte, is exit 1 with a message (output larger
# than a pipe's buffer, so the write surely meets the closed pipe: the
# sweep's 1,024 points write ~107 KB; 32 points wrote 3.5 KB, which could
# all fit in the pipe before head closed it, and the case read exit 0).
for cmd in "run synthetic --param events=100000 --op-log /dev/stdout" \
	"sweep synthetic --param events=$(seq -s, 10 41) --param lps=$(seq -s, 1 32)"; do
	read -r -a argv <<<"$cmd"
	"$KB" "${argv[@]}" 2>"$TMP/err" | head -c1 >/dev/null
	got=${PIPESTATUS[0]}
	n=$((n + 1))
	if [ "$got" -ne 1 ] || ! grep -q "^kernbench: error: .*Broken pipe" "$TMP/err"; then
		echo "FAIL: kernbench $cmd | head -c1: exit $got, stderr:" >&2
		cat "$TMP/err" >&2
		bad=$((bad + 1))
	fi
done

# Rule (issue 18 §3): a sweep's summary lines that cannot be written (here
# standard output on a full disk, the rows going to --out) make the exit
# status nonzero, with a message.
"$KB" sweep gqa_decode_opt2,gqa_decode_opt3 --param S_kv=256 --quiet --out "$TMP/summary.csv" \
	>/dev/full 2>"$TMP/err"
got=$?
n=$((n + 1))
if [ "$got" -ne 1 ] || ! grep -q "could not write the sweep's summary" "$TMP/err"; then
	echo "FAIL: a sweep's summary into /dev/full: exit $got, stderr:" >&2
	cat "$TMP/err" >&2
	bad=$((bad + 1))
fi

# Rule (issue 18 §3): outputs are renamed into place when whole. A run that
# fails leaves an earlier op_log and trace at their names as they were and
# no temporary behind; a run killed midway leaves no file at the name.
mkdir -p "$TMP/keep"
echo old-log >"$TMP/keep/x.jsonl"
echo old-trace >"$TMP/keep/t.json"
"$KB" run gemm --param M=8192 --param K=8192 --param N=8192 --set clock_freq_ghz=0.001 \
	--set pe.dma.bytes_per_cycle=0.001 --op-log "$TMP/keep/x.jsonl" --trace "$TMP/keep/t.json" \
	>/dev/null 2>"$TMP/err"
got=$?
n=$((n + 1))
if [ "$got" -ne 1 ] || [ "$(cat "$TMP/keep/x.jsonl")" != old-log ] ||
	[ "$(cat "$TMP/keep/t.json")" != old-trace ] || [ "$(ls -A "$TMP/keep" | wc -l)" -ne 2 ]; then
	echo "FAIL: a failed run changed its outputs or left a temporary (exit $got):" >&2
	ls -A "$TMP/keep" >&2
	bad=$((bad + 1))
fi
"$KB" run synthetic --param events=100000000 --threads 1 --op-log "$TMP/keep/killed.jsonl" \
	--trace "$TMP/keep/killed.json" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 50); do
	ls -A "$TMP/keep" | grep -q kbtmp && break
	sleep 0.1
done
sleep 0.5
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
n=$((n + 1))
if [ -e "$TMP/keep/killed.jsonl" ] || [ -e "$TMP/keep/killed.json" ] ||
	! ls -A "$TMP/keep" | grep -q '^\.killed\.jsonl\.kbtmp-'; then
	echo "FAIL: a killed run left a file at its output's name, or wrote no temporary:" >&2
	ls -A "$TMP/keep" >&2
	bad=$((bad + 1))
fi

# Rule (issue 18 §4): --out is locked (flock) while a sweep writes it; a
# second sweep on the same file stops at once and leaves it as it was. The
# lock is held here with flock(1), as a running sweep holds it, so the case
# does not depend on timing; once it is released the same sweep works.
"$KB" sweep synthetic --param events=10 --param lps=1,2,3 --quiet --out "$TMP/locked.csv" \
	>/dev/null 2>&1 || fail "cannot make the file to lock"
cp "$TMP/locked.csv" "$TMP/locked.before"
for extra in "" "--resume"; do
	exec 9<>"$TMP/locked.csv"
	flock -n 9 || fail "cannot lock $TMP/locked.csv"
	"$KB" sweep synthetic --param events=10 --param lps=1,2,3 --quiet --out "$TMP/locked.csv" \
		$extra >/dev/null 2>"$TMP/err"
	got=$?
	exec 9>&-
	n=$((n + 1))
	if [ "$got" -ne 1 ] || ! grep -q "another sweep is writing this file" "$TMP/err" ||
		! cmp -s "$TMP/locked.csv" "$TMP/locked.before"; then
		echo "FAIL: a sweep on a locked --out ($extra): exit $got, or the file changed" >&2
		cat "$TMP/err" >&2
		bad=$((bad + 1))
	fi
done
"$KB" sweep synthetic --param events=10 --param lps=1,2,3 --quiet --out "$TMP/locked.csv" \
	--resume >/dev/null 2>"$TMP/err" || fail "resume after the lock was released: $(cat "$TMP/err")"

# Rule (issue 18 §5): KERNBENCH_MPI accepts only its documented values (1,
# 0, or unset/empty), in a build with MPI or without: a typo is a usage
# error, not a silent plain sweep on every rank. (Ranks that disagree on the
# sweep: tests/mpi/sweep_agree.sh.)
for v in yes 2 true; do
	KERNBENCH_MPI=$v "$KB" sweep synthetic --param events=10 --quiet >/dev/null 2>"$TMP/err"
	got=$?
	n=$((n + 1))
	if [ "$got" -ne 2 ] || ! grep -q "^kernbench: usage: .*KERNBENCH_MPI='$v': expected 1" "$TMP/err"; then
		echo "FAIL: KERNBENCH_MPI=$v: exit $got, expected 2 with the rule:" >&2
		cat "$TMP/err" >&2
		bad=$((bad + 1))
	fi
done
KERNBENCH_MPI=0 "$KB" sweep synthetic --param events=10 --quiet >/dev/null 2>"$TMP/err" ||
	fail "KERNBENCH_MPI=0 refused: $(cat "$TMP/err")"

[ "$n" -ge 40 ] || fail "only $n rows in the table"
[ "$bad" -eq 0 ] || fail "$bad of $n rows failed"
echo "PASS: $n bad inputs"
