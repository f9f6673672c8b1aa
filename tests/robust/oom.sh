#!/bin/bash
# Allocation-failure injection (doc/robustness.md), in the manner of sqlite's
# and jansson's malloc-failure tests: for a few small runs, count the
# allocations kernbench's own code makes (tests/robust/failmalloc.c,
# preloaded), then run again failing the Nth for every N from 1 to that
# count. Each run must end by itself (no signal: no crash, no abort),
# with status 0 or 1, and when it fails its standard error says it was out
# of (host) memory. A run that succeeds despite a failed allocation (a cache
# that did not grow, a fallback) prints what the run without failures
# printed, figures and op_log hash alike. With --op-log the file is whole or
# not there (doc/oplog.md): a failed run leaves the earlier file as it was
# (or, failing in its data check after the simulation wrote the op_log,
# the reference's bytes) and no temporary behind, a successful one the
# reference's bytes; the same for --trace (but its metadata, which has
# the date). A sweep's failed point may say it in its row instead, and its
# rows are not compared.
#
# Two modes: "once" fails only the Nth allocation (the run goes on after
# it), "from" fails the Nth and every later one (the error paths must not
# need memory). The single-PE runs try every N in both modes. The
# multi-PE ones (~1100-1600 allocations, most of them the same few call
# sites over and over, per PE and per command) try the first two
# allocations of every call site in both modes (the run without failures
# tells which call made each) and every eighth N besides, in one mode or
# the other by turns: the whole script stays under a minute on 2 cores.
# Runs with two threads are not repeatable allocation for allocation (the
# threads' allocations interleave differently): what fails at N may
# differ from run to run, never the rules above.
#
# Skipped in sanitizer builds (an LD_PRELOAD malloc does not mix with the
# sanitizers' runtimes) and where the module counts nothing (not glibc).
# To see which allocation an N fails:
#   gdb -ex 'set env LD_PRELOAD .../libfailmalloc.so' -ex 'set env KB_FAILMALLOC_N N' \
#       -ex 'break failmalloc_hit' -ex run --args ./kernbench run ...
set -u
. "$(dirname "$0")/../cli/lib.sh"

FM=${abs_top_builddir:-.}/tests/robust/.libs/libfailmalloc.so
if [ -n "${KB_SAN_FLAGS:-}" ] || ldd "$KB" 2>/dev/null | grep -q 'lib[a-z]*san\.so'; then
	echo "SKIP: a sanitizer build (${KB_SAN_FLAGS:-libasan/libtsan linked}): an LD_PRELOAD malloc does not mix with its runtime" >&2
	exit 77
fi
[ -f "$FM" ] || { echo "SKIP: $FM not built (make check builds it)" >&2; exit 77; }

# jansson, linked into the command (configure), is not ours either: its
# failure handling is its own (a json_dumps short of memory can return a
# cut text). Its code is the last in the command's text, from the first
# function without a source line after the library's (nm -l; without -g,
# from its first json_ function) to _fini. Its calls to malloc are tail
# calls, so the return address is in whichever jansson function called.
skip=
if command -v nm >/dev/null 2>&1; then
	set -- $(nm -n -l --defined-only "$KB" 2>/dev/null | awk -F'\t' '
		{ split($1, a, " ") }
		a[2] !~ /^[tTwW]$/ { next }
		NF >= 2 { ours = 1; after = ""; next }
		ours && after == "" { after = a[1] }
		a[2] == "T" && a[3] ~ /^json_/ && first == "" { first = a[1]; start = after != "" ? after : a[1] }
		a[3] == "_fini" { fini = a[1] }
		END { if (first != "" && fini != "") print start, fini }')
	[ $# -ne 2 ] || skip=$1-$2
fi

# Runs the command with allocation N failing (0: none) in mode M, the
# count written to $TMP/count; stdout and stderr to $TMP/out and $TMP/err.
fm_run() {
	local n=$1 from=$2
	shift 2
	LD_PRELOAD=$FM KB_FAILMALLOC_N=$n KB_FAILMALLOC_FROM=$from KB_FAILMALLOC_SKIP=$skip \
		KB_FAILMALLOC_REPORT=$TMP/count "$@" >"$TMP/out" 2>"$TMP/err"
}

# What a run prints that must not depend on a failed allocation.
figures() {
	grep -v -e '^wall time' -e '^events/s' -e '^threads' "$1"
}

OL=$TMP/ol
mkdir -p "$OL"
bad=0
note() {
	echo "FAIL: $*" >&2
	sed 's/^/    /' "$TMP/err" | head -n 5 >&2
	bad=$((bad + 1))
}

# check NAME N MODE RC: the rules for one run.
check() {
	local name=$1 n=$2 mode=$3 rc=$4 tmps
	if [ "$rc" -ge 128 ]; then
		note "$name N=$n $mode: killed by signal $((rc - 128))"
	elif [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
		note "$name N=$n $mode: status $rc"
	elif [ "$rc" -eq 1 ] && ! grep -qs 'out of \(host \)\?memory' "$TMP/err" ${rows:+"$rows"}; then
		note "$name N=$n $mode: failed without saying 'out of memory'"
	elif [ "$rc" -eq 0 ] && [ -z "$rows" ] && ! figures "$TMP/out" | cmp -s - "$TMP/ref.out"; then
		note "$name N=$n $mode: succeeded with other figures"
	fi
	if [ -n "$oplog" ]; then
		tmps=$(find "$OL" -name '.*kbtmp*' | head -n 1)
		[ -z "$tmps" ] || note "$name N=$n $mode: left $tmps"
		if [ "$rc" -eq 0 ]; then
			cmp -s "$OL/o.jsonl" "$TMP/ref.jsonl" || note "$name N=$n $mode: op_log not the reference's"
		elif [ "$rc" -eq 1 ] && [ "$(cat "$OL/o.jsonl" 2>/dev/null)" != earlier ] &&
			! cmp -s "$OL/o.jsonl" "$TMP/ref.jsonl"; then
			# whole: the earlier file, or the run's own where only the
			# data check after the simulation failed (--data)
			note "$name N=$n $mode: the earlier op_log was not left as it was"
		fi
		rm -f "$OL"/.*kbtmp* "$OL/o.jsonl"
	fi
	if [ -n "$trace" ]; then
		if [ "$rc" -eq 0 ]; then
			traced "$OL/t.json" | cmp -s - "$TMP/ref.trace" ||
				note "$name N=$n $mode: trace not the reference's"
		elif [ "$rc" -eq 1 ] && [ -e "$OL/t.json" ]; then
			note "$name N=$n $mode: a failed run left a trace"
		fi
		rm -f "$OL/t.json"
	fi
}

# A trace but its metadata (the date).
traced() {
	grep -v '"metadata"' "$1" 2>/dev/null
}

# The Ns to try and their modes, from the call sites of the run without
# failures ($TMP/sites, one return address a line): every N in both modes
# (EVERY 1), or the first two allocations of each call site in both modes
# and every EVERY-th N besides, in one mode or the other by turns.
pick() {
	awk -v every="$1" '{ c[$1]++ }
		every == 1 || c[$1] <= 2 { print NR, "once"; print NR, "from"; next }
		NR % every == 0 { print NR, (t++ % 2 ? "from" : "once") }' "$TMP/sites"
}

# config NAME EVERY ENV... -- ARGS...: a reference run, its count and call
# sites, then the Ns pick chooses.
config() {
	local name=$1 every=$2 envs=() count n rc mode
	shift 2
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	oplog=
	case " $* " in *" --op-log "*) oplog=1 ;; esac
	trace=
	case " $* " in *" --trace "*) trace=1 ;; esac
	rows=   # a sweep's failed point says why in its row
	case " $* " in *" sweep "*) rows=$OL/rows.csv ;; esac
	rm -f "$OL/o.jsonl" "$OL/t.json" "$OL/rows.csv"
	KB_FAILMALLOC_SITES=$TMP/sites fm_run 0 0 env ${envs[@]+"${envs[@]}"} "$KB" "$@" ||
		fail "$name: the run without failures: $(cat "$TMP/err")"
	count=$(cat "$TMP/count" 2>/dev/null)
	if [ -z "$count" ] || [ "$count" -eq 0 ]; then
		echo "SKIP: $name: the module counted no allocation (glibc only)" >&2
		exit 77
	fi
	figures "$TMP/out" > "$TMP/ref.out"
	[ -z "$oplog" ] || mv "$OL/o.jsonl" "$TMP/ref.jsonl"
	[ -z "$trace" ] || { traced "$OL/t.json" > "$TMP/ref.trace"; rm -f "$OL/t.json"; }
	pick "$every" > "$TMP/picked"
	echo "$name: $count allocations from $(sort -u "$TMP/sites" | wc -l) call sites, $(wc -l < "$TMP/picked") runs"
	while read -r n mode; do
		[ -z "$oplog" ] || echo earlier > "$OL/o.jsonl"
		rm -f "$OL/rows.csv"   # a sweep would resume it
		fm_run "$n" "$([ "$mode" = from ] && echo 1 || echo 0)" env ${envs[@]+"${envs[@]}"} "$KB" "$@" </dev/null
		rc=$?
		check "$name" "$n" "$mode" "$rc"
	done < "$TMP/picked"
}

D2='gqa_decode_opt2 --param S_kv=512'
D3='gqa_decode_opt3 --param H_kv=4 --param P=2 --param C=2 --param S_kv=1024'
# shellcheck disable=SC2086
{
config decode 1 -- run $D2
config data 1 -- run $D2 --data
config decode-outputs 1 -- run $D2 --op-log "$OL/o.jsonl" --trace "$OL/t.json"
config opt3-threads1 8 -- run $D3 --threads 1
config opt3-threads2 8 -- run $D3 --threads 2
# auto, handing over between parallel windows and one thread many times
config opt3-auto-oplog 8 KB_EXEC_TRIAL_EVENTS=50 -- run $D3 --op-log "$OL/o.jsonl"
# a sweep of two points on a pool of two threads (its rows, no figures)
config sweep 1 -- sweep synthetic --param events=10 --param lps=1,2 -j 2 --quiet --out "$OL/rows.csv"
}
[ "$bad" -eq 0 ] || fail "$bad runs broke the rules above"
exit 0
