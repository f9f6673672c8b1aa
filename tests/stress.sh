#!/bin/sh
# The long determinism stress (`make check-stress`): runs random models of the
# parallel table with random --threads values and compares every op_log hash
# (and the simulated figures) with the sequential run of the same model.
#
#   KB_STRESS_RUNS   number of runs (default 500)
#   KB_STRESS_SEED   seed of the model/thread choice (default 1)
#   KB_STRESS_MAXT   largest --threads value drawn (default 8; 0 is drawn too)
#   KERNBENCH        the binary (default $abs_top_builddir/kernbench)
#
# Exit status 0 when every run matches, 1 on any mismatch or failed run.
set -u

runs=${KB_STRESS_RUNS:-500}
seed=${KB_STRESS_SEED:-1}
maxt=${KB_STRESS_MAXT:-8}
kb=${KERNBENCH:-${abs_top_builddir:-.}/kernbench}

if [ ! -x "$kb" ]; then
	echo "stress.sh: no kernbench binary at '$kb' (set abs_top_builddir or KERNBENCH)" >&2
	exit 1
fi

# One model per line: bench, then its --param assignments.
models='synthetic lps=16 events=20000
synthetic lps=16 events=20000 lookahead_ns=50
synthetic lps=64 events=100000 lookahead_ns=50
gemm M=256 K=256 N=256
gemm M=256 K=256 N=256 epilogue=relu
gqa_decode_opt2 S_kv=512
gqa_decode_opt3 S_kv=512
gqa_decode_opt2 H_kv=2 P=2 C=2 S_kv=512
gqa_decode_opt3 H_kv=4 P=1 S_kv=256
gqa_decode_opt3 H_kv=4 P=4 C=2 S_kv=2048'
n_models=$(printf '%s\n' "$models" | wc -l)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kbstress.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# The simulated figures of a run --json line, as one comparable string.
figures() {
	tr ',' '\n' | grep -E '^"(oplog_sha256|sim_time_ps|events|records|commands|dispatch_ps|tiles)"' |
		tr '\n' ' '
}

run_model() { # index threads [regroup-every] [auto's stretch in events]
	adapt=${3:-}
	trial=${4:-}
	line=$(printf '%s\n' "$models" | sed -n "$1p")
	set -- $line "$2"
	bench=$1
	shift
	args=
	while [ $# -gt 1 ]; do
		args="$args --param $1"
		shift
	done
	# shellcheck disable=SC2086
	if [ -n "$adapt" ]; then
		KB_EXEC_ADAPT_WINDOWS=$adapt "$kb" run "$bench" $args --threads "$1" --json 2>"$tmp/err" | figures
	elif [ -n "$trial" ]; then
		KB_EXEC_TRIAL_EVENTS=$trial "$kb" run "$bench" $args --threads "$1" --json 2>"$tmp/err" | figures
	else
		"$kb" run "$bench" $args --threads "$1" --json 2>"$tmp/err" | figures
	fi
}

# Sequential references.
i=1
while [ "$i" -le "$n_models" ]; do
	run_model "$i" 1 >"$tmp/ref.$i"
	if ! grep -q oplog_sha256 "$tmp/ref.$i"; then
		echo "stress.sh: model $i ($(printf '%s\n' "$models" | sed -n "${i}p")) failed:" >&2
		cat "$tmp/err" >&2
		exit 1
	fi
	i=$((i + 1))
done

# A 31-bit LCG in shell arithmetic, so the sequence depends on the seed only.
x=$seed
rnd() { # below N
	x=$(((x * 1103515245 + 12345) % 2147483648))
	r=$(((x / 65536) % $1))
}

bad=0
n=1
while [ "$n" -le "$runs" ]; do
	rnd "$n_models"
	m=$((r + 1))
	rnd $((maxt + 2))
	t=$r
	[ "$t" -gt "$maxt" ] && t=auto
	# auto and --threads 0 regroup their workers after every 1, 4 or 32
	# windows in one run of two (KB_EXEC_ADAPT_WINDOWS)
	rnd 6
	a=
	[ "$r" -eq 1 ] && a=1
	[ "$r" -eq 2 ] && a=4
	[ "$r" -eq 3 ] && a=32
	# auto hands the run between windows and one thread every 1, 50 or
	# 500 events in three of four of its other runs (KB_EXEC_TRIAL_EVENTS;
	# without it the small models mostly end before auto's first trial)
	rnd 4
	e=
	if [ "$t" = auto ] && [ -z "$a" ]; then
		[ "$r" -eq 1 ] && e=1
		[ "$r" -eq 2 ] && e=50
		[ "$r" -eq 3 ] && e=500
	fi
	got=$(run_model "$m" "$t" "$a" "$e")
	if [ "$got" != "$(cat "$tmp/ref.$m")" ]; then
		bad=$((bad + 1))
		echo "MISMATCH run $n: model $m ($(printf '%s\n' "$models" | sed -n "${m}p")) --threads $t${a:+ KB_EXEC_ADAPT_WINDOWS=$a}${e:+ KB_EXEC_TRIAL_EVENTS=$e}"
		echo "  threads 1: $(cat "$tmp/ref.$m")"
		echo "  threads $t: $got"
		cat "$tmp/err"
	fi
	if [ $((n % 50)) -eq 0 ]; then
		echo "stress.sh: $n of $runs runs, $bad mismatches"
	fi
	n=$((n + 1))
done
echo "stress.sh: $runs runs, $n_models models, threads 0..$maxt, seed $seed: $bad mismatches"
[ "$bad" -eq 0 ]
