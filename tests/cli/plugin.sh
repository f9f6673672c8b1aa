#!/bin/bash
# Bench plugins on the command line (issue 16): the example plugin of
# doc/examples/plugin/ (split-K GEMM) loaded by --plugin and by
# KERNBENCH_PLUGIN_PATH is seen by list, run and sweep (-j 2, --resume,
# --plot) like a built-in bench; its data-mode results agree between run,
# sweep, thread counts and an independent computation from the dumped
# tensors; --plugin is taken anywhere on the command line (up to '--');
# broken plugins are refused with a message naming the file and exit
# status 1.
set -u
. "$(dirname "$0")/lib.sh"

B=${abs_top_builddir:-.}
PLUGIN=$B/doc/examples/plugin/.libs/libsplitk.so
BROKEN=$B/tests/plugins/.libs
[ -f "$PLUGIN" ] || { echo "SKIP: $PLUGIN not built (make check builds it)" >&2; exit 77; }
unset KERNBENCH_PLUGIN_PATH

# ---- list ---------------------------------------------------------------
"$KB" list >"$TMP/plain.txt" || fail "list exited $?"
grep -q '^splitk_gemm' "$TMP/plain.txt" && fail "splitk_gemm listed without the plugin"
"$KB" --plugin "$PLUGIN" list >"$TMP/list.txt" || fail "list --plugin exited $?"
grep -q '^splitk_gemm$' "$TMP/list.txt" || fail "list does not show the plugin's bench"
grep -q '^    splits ' "$TMP/list.txt" || fail "list does not show the plugin's parameters"
# Built-ins first, in their order, then the plugin's.
head -n "$(wc -l <"$TMP/plain.txt")" "$TMP/list.txt" | cmp -s - "$TMP/plain.txt" ||
	fail "the built-in benches' listing changed with a plugin"
"$KB" --plugin="$PLUGIN" list --json >"$TMP/list.json" || fail "list --json exited $?"
grep -q '"name": *"splitk_gemm"' "$TMP/list.json" ||
	fail "list --json does not show the plugin's bench"
KERNBENCH_PLUGIN_PATH=$(dirname "$PLUGIN") "$KB" list >"$TMP/l1" && grep -q '^splitk_gemm$' "$TMP/l1" ||
	fail "KERNBENCH_PLUGIN_PATH=DIR does not load the plugin"
KERNBENCH_PLUGIN_PATH=":$PLUGIN:" "$KB" list >"$TMP/l2" && grep -q '^splitk_gemm$' "$TMP/l2" ||
	fail "KERNBENCH_PLUGIN_PATH=FILE does not load the plugin"
# The same file from both places is loaded once, not a duplicate.
KERNBENCH_PLUGIN_PATH=$PLUGIN "$KB" --plugin "$PLUGIN" list >/dev/null 2>"$TMP/err" ||
	fail "the same plugin twice: exit $? ($(cat "$TMP/err"))"
# A command with the library linked in (--enable-static-cli) exports the
# kb_ API, and the plugin's kb_ calls go to the command's copy, never to the
# libkernbench.so the plugin links (which has its own registry and
# thread-locals). glibc's LD_DEBUG says where each symbol was bound.
if [ "${KB_STATIC_CLI:-}" = yes ]; then
	LD_DEBUG=bindings "$KB" --plugin "$PLUGIN" run splitk_gemm --param M=16 --param N=16 \
		--param K=128 --param splits=4 >/dev/null 2>"$TMP/bind" || fail "run with LD_DEBUG exited $?"
	grep "libsplitk.so.* to .*: normal symbol \`kb_" "$TMP/bind" >"$TMP/bind_kb"
	[ -s "$TMP/bind_kb" ] || fail "LD_DEBUG=bindings shows no kb_ binding of the plugin"
	grep "to [^ ]*libkernbench\.so" "$TMP/bind_kb" && fail "the plugin's kb_ calls bind to libkernbench.so, not the command"
fi

# ---- run: figures, determinism, data parity -----------------------------
small=(--param M=16 --param N=16 --param K=128 --param splits=4)
for t in 1 0 auto; do
	"$KB" --plugin "$PLUGIN" run splitk_gemm "${small[@]}" --data --threads $t --json \
		>"$TMP/run$t.json" || fail "run --threads $t exited $?"
done
field() { sed -e "s/.*\"$2\": *\\([^,}]*\\).*/\\1/" -e "s/\"//g" "$1"; }
sha=$(field "$TMP/run1.json" oplog_sha256)
err=$(field "$TMP/run1.json" max_abs_err)
[ "$(field "$TMP/run1.json" pes)" = 4 ] || fail "splits=4 did not run on 4 PEs"
for t in 0 auto; do
	[ "$(field "$TMP/run$t.json" oplog_sha256)" = "$sha" ] || fail "--threads $t: another op_log"
	[ "$(field "$TMP/run$t.json" max_abs_err)" = "$err" ] || fail "--threads $t: another max_abs_err"
done
awk -v e="$err" 'BEGIN { exit !(e + 0 < 1e-4 && e != "null") }' ||
	fail "max_abs_err $err: the check does not pass"
# A rule between parameters is an error naming it, exit 1.
"$KB" --plugin "$PLUGIN" run splitk_gemm --param K=100 --param splits=3 2>"$TMP/err"
[ $? -eq 1 ] || fail "K not a multiple of splits: exit status not 1"
grep -q 'not a multiple of splits' "$TMP/err" || fail "no message for K % splits"
"$KB" --plugin "$PLUGIN" run splitk_gemm --param splits=0 2>"$TMP/err"
[ $? -eq 1 ] || fail "splits=0: exit status not 1"
grep -q 'splits = 0 is out of range' "$TMP/err" || fail "splits=0: no range message"

# Dumped tensors: C recomputed from A and B here, not by the library.
"$KB" --plugin "$PLUGIN" run splitk_gemm "${small[@]}" --data --dump "$TMP/dump" >/dev/null ||
	fail "run --dump exited $?"
for f in a.npy b.npy c.npy meta.json; do
	[ -f "$TMP/dump/$f" ] || fail "--dump wrote no $f"
done
if have_python; then
	python3 - "$TMP/dump" <<'PY' || fail "c.npy is not sum_p A_p @ B_p"
import ast, struct, sys
def load(path):
    with open(path, 'rb') as f:
        data = f.read()
    assert data[:6] == b'\x93NUMPY', path
    hlen = struct.unpack('<H', data[8:10])[0]
    head = ast.literal_eval(data[10:10 + hlen].decode('latin1'))
    assert head['descr'] == '<f4' and not head['fortran_order'], head
    n = 1
    for s in head['shape']:
        n *= s
    return head['shape'], struct.unpack('<%df' % n, data[10 + hlen:10 + hlen + 4 * n])
d = sys.argv[1]
(S, M, KP), a = load(d + '/a.npy')
(K, N), b = load(d + '/b.npy')
(M2, N2), c = load(d + '/c.npy')
assert (M2, N2) == (M, N) and K == S * KP
worst = 0.0
for i in range(M):
    for j in range(N):
        want = sum(a[(p * M + i) * KP + k] * b[(p * KP + k) * N + j]
                   for p in range(S) for k in range(KP))
        worst = max(worst, abs(want - c[i * N + j]))
print('max |c - sum_p a_p b_p| =', worst)
sys.exit(0 if worst < 1e-4 else 1)
PY
fi

# ---- sweep: -j 2 like -j 1, data rows like run, resume, plot -------------
sargs=(splitk_gemm --param M=16 --param N=16 --param splits=1,2,4 --param K=64,128 --data --quiet)
"$KB" --plugin "$PLUGIN" sweep "${sargs[@]}" -j 1 --out "$TMP/j1.csv" || fail "sweep -j 1 exited $?"
"$KB" --plugin "$PLUGIN" sweep "${sargs[@]}" -j 2 --out "$TMP/j2.csv" --plot "$TMP/p.svg" ||
	fail "sweep -j 2 exited $?"
[ "$(wc -l <"$TMP/j2.csv")" -eq 7 ] || fail "expected a header and 6 rows"
strip_wall "$TMP/j1.csv" >"$TMP/j1.s"
strip_wall "$TMP/j2.csv" | cmp -s - "$TMP/j1.s" || fail "-j 2 rows differ from -j 1"
grep -q '<svg' "$TMP/p.svg" || fail "--plot wrote no SVG"
grep -q "^splitk_gemm,16,16,4,128,.*,$sha,ok," "$TMP/j2.csv" ||
	fail "the sweep's row of run's point has another op_log hash"
grep "^splitk_gemm,16,16,4,128," "$TMP/j2.csv" | grep -q ",$(printf '%.9g' "$err")," ||
	fail "the sweep's row of run's point has another max_abs_err"
# --resume through KERNBENCH_PLUGIN_PATH: a cut file is completed.
head -n 3 "$TMP/j2.csv" >"$TMP/part.csv"
KERNBENCH_PLUGIN_PATH=$(dirname "$PLUGIN") "$KB" sweep "${sargs[@]}" -j 2 --out "$TMP/part.csv" \
	--resume || fail "sweep --resume exited $?"
strip_wall "$TMP/part.csv" | cmp -s - "$TMP/j1.s" || fail "the resumed file differs"
head -n 3 "$TMP/part.csv" | cmp -s - <(head -n 3 "$TMP/j2.csv") || fail "--resume rewrote rows"
# Without the plugin the bench is unknown: a usage error, as for any name.
"$KB" sweep "${sargs[@]}" --out "$TMP/none.csv" 2>"$TMP/err"
[ $? -eq 2 ] || fail "sweep of an unloaded plugin's bench: exit status not 2"
grep -q "unknown bench 'splitk_gemm'" "$TMP/err" || fail "no unknown-bench message"

# ---- refused plugins: the file named, exit status 1 ----------------------
refused() {
	local file=$1 text=$2
	shift 2
	"$KB" --plugin "$file" "$@" list >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "$file: exit status not 1"
	grep -qF "$file" "$TMP/err" || fail "$file: the message does not name the file: $(cat "$TMP/err")"
	grep -qF "$text" "$TMP/err" || fail "$file: no '$text' in: $(cat "$TMP/err")"
}
refused "$TMP/missing.so" "No such file"
refused "$SRCDIR/README.md" "cannot be loaded"
refused "$BROKEN/libkbt_noentry.so" "no entry point kb_plugin_init"
refused "$BROKEN/libkbt_abi.so" "ABI"
refused "$BROKEN/libkbt_dup.so" "bench 'gemm' is already registered"
refused "$BROKEN/libkbt_invalid.so" "out of range"
refused "$BROKEN/libkbt_fail.so" "refuses to start"
# Through the environment too, and for every command that runs benches.
KERNBENCH_PLUGIN_PATH=$BROKEN/libkbt_dup.so "$KB" run gemm 2>"$TMP/err"
[ $? -eq 1 ] || fail "KERNBENCH_PLUGIN_PATH with a broken plugin: exit status not 1"
grep -qF "libkbt_dup.so" "$TMP/err" || fail "KERNBENCH_PLUGIN_PATH: the message does not name the file"
"$KB" --plugin 2>/dev/null
[ $? -eq 2 ] || fail "--plugin without a file: exit status not 2"

# ---- --plugin anywhere on the command line --------------------------------
# After the command, after the bench, among the options, at the end: the
# same run as with --plugin first (same op_log, same check).
for form in "run --plugin $PLUGIN splitk_gemm" "run splitk_gemm --plugin $PLUGIN" \
	"run splitk_gemm --plugin=$PLUGIN" "run splitk_gemm --param M=16 --plugin $PLUGIN"; do
	# shellcheck disable=SC2086 # the form is split on purpose
	"$KB" $form "${small[@]}" --data --threads 1 --json >"$TMP/any.json" ||
		fail "'$form': exit $?"
	[ "$(field "$TMP/any.json" oplog_sha256)" = "$sha" ] || fail "'$form': another op_log"
	[ "$(field "$TMP/any.json" max_abs_err)" = "$err" ] || fail "'$form': another max_abs_err"
done
"$KB" run splitk_gemm "${small[@]}" --data --threads 1 --json --plugin "$PLUGIN" >"$TMP/last.json" ||
	fail "run with --plugin last: exit $?"
[ "$(field "$TMP/last.json" oplog_sha256)" = "$sha" ] || fail "--plugin last: another op_log"
"$KB" list --plugin "$PLUGIN" >"$TMP/l3" || fail "list --plugin: exit $?"
cmp -s "$TMP/l3" "$TMP/list.txt" || fail "list --plugin lists otherwise than --plugin list"
"$KB" --plugin "$PLUGIN" list --plugin "$PLUGIN" >/dev/null 2>"$TMP/err" ||
	fail "the same plugin before and after the command: exit $? ($(cat "$TMP/err"))"
"$KB" sweep "${sargs[@]}" -j 2 --out "$TMP/any.csv" --plugin "$PLUGIN" || fail "sweep ... --plugin: exit $?"
strip_wall "$TMP/any.csv" | cmp -s - "$TMP/j1.s" || fail "sweep with --plugin last: other rows"
"$KB" topology --plugin "$PLUGIN" >/dev/null || fail "topology --plugin: exit $?"
# Refusals name the file, exit 1, wherever --plugin stands.
"$KB" run gemm --plugin "$BROKEN/libkbt_dup.so" 2>"$TMP/err"
[ $? -eq 1 ] || fail "run gemm --plugin BROKEN: exit status not 1"
grep -qF "libkbt_dup.so" "$TMP/err" || fail "run gemm --plugin BROKEN: the file is not named"
"$KB" list --plugin="$TMP/missing.so" 2>"$TMP/err"
[ $? -eq 1 ] || fail "list --plugin=MISSING: exit status not 1"
grep -qF "$TMP/missing.so" "$TMP/err" || fail "list --plugin=MISSING: the file is not named"
# Without a file, anywhere: a usage error; after '--' it is no option.
"$KB" run gemm --plugin 2>"$TMP/err"
[ $? -eq 2 ] || fail "run gemm --plugin (no file): exit status not 2"
grep -q -- "--plugin needs a file" "$TMP/err" || fail "run gemm --plugin: no message"
"$KB" run gemm --plugin= 2>/dev/null
[ $? -eq 2 ] || fail "run gemm --plugin=: exit status not 2"
"$KB" run splitk_gemm -- --plugin "$PLUGIN" 2>/dev/null
[ $? -eq 2 ] || fail "--plugin after '--' was taken as an option"
echo "PASS: plugin benches in list, run, sweep (-j 2, --resume, --plot, data); --plugin anywhere; refusals name the file"
