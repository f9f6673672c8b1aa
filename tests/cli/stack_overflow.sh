#!/bin/bash
# A kernel that overflows its stack (the plugin bench of
# tests/plugins/overflow.c) makes the command say so in one line on stderr,
# naming the stack's size and the option that sets it, and the process
# still dies of SIGSEGV (status 128 + 11): with the kernel on the main
# thread (--threads 1), on the executor's threads (--threads 2, 0) and on a
# sweep's pool thread. Another fault is reported with its address.
set -u
. "$(dirname "$0")/lib.sh"

PLUGIN=${abs_top_builddir:-.}/tests/plugins/.libs/libkbt_overflow.so
[ -f "$PLUGIN" ] || { echo "SKIP: $PLUGIN not built (make check builds it)" >&2; exit 77; }
# A sanitizer installs its own SIGSEGV handler before main, and kernbench
# leaves a handler that is there in place: the sanitizer reports the fault.
if [ -n "${KB_SAN_FLAGS:-}" ]; then
	echo "SKIP: sanitizer build ($KB_SAN_FLAGS): its own handler reports the fault" >&2
	exit 77
fi
unset KERNBENCH_PLUGIN_PATH
ulimit -c 0   # no core files from the deaths below

OVERFLOW='kernbench: error: a kernel overflowed its stack of 1048576 bytes'
OPTION='kb_sim_options.kernel_stack_bytes'

# dies NAME FRAGMENT ARGS...: the command dies of SIGSEGV with one line on
# stderr that holds FRAGMENT (and, for an overflow, names the option).
dies() {
	local name=$1 want=$2 st
	shift 2
	# bash's own "Segmentation fault" line stays out of the log.
	{ "$KB" --plugin "$PLUGIN" "$@" >"$TMP/out" 2>"$TMP/err"; st=$?; } 2>/dev/null
	[ $st -eq 139 ] || fail "$name: exit status $st, not 139 (SIGSEGV): $(cat "$TMP/err")"
	grep -qF -- "$want" "$TMP/err" || fail "$name: stderr lacks '$want': $(cat "$TMP/err")"
	[ "$want" != "$OVERFLOW" ] || grep -qF -- "$OPTION" "$TMP/err" ||
		fail "$name: the message does not name $OPTION: $(cat "$TMP/err")"
	[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "$name: not one line on stderr: $(cat "$TMP/err")"
}

wide=(--set pes_per_cluster=4 --param pes=4)
"$KB" --plugin "$PLUGIN" run kbt_overflow --param kib=16 >/dev/null ||
	fail "a kernel within its stack: exit status $?"
dies "--threads 1" "$OVERFLOW" run kbt_overflow --threads 1
dies "--threads 2" "$OVERFLOW" run kbt_overflow "${wide[@]}" --threads 2
dies "--threads 0" "$OVERFLOW" run kbt_overflow "${wide[@]}" --threads 0
dies "sweep -j 2" "$OVERFLOW" sweep kbt_overflow --param pes=1,2 -j 2 --out "$TMP/s.csv"
dies "a write to 0x10" "kernbench: fatal: SIGSEGV at 0x10 " run kbt_overflow --param poke=1
echo "PASS: stack overflow and fault messages"
