#!/bin/bash
# kernel_threads against RLIMIT_NPROC (ulimit -u): a run whose kernel
# threads cannot all start is refused before the first starts, naming the
# option and the limit (check_limits.c, test_kernel_threads_limit, run here
# under a limit a run of at most 4096 PEs reaches). The limit does not apply
# to root: as root the test drops to nobody (setpriv) when it can, else it
# skips.
set -u
prog=${abs_top_builddir:-.}/tests/check_all
[ -x "$prog" ] || { echo "SKIP: $prog is not built (needs Check)"; exit 77; }
if [ "$(id -u)" = 0 ]; then
	if command -v setpriv >/dev/null 2>&1 &&
		setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$prog" 2>/dev/null; then
		exec setpriv --reuid=65534 --regid=65534 --clear-groups bash "$0" "$@"
	fi
	echo "SKIP: running as root, to whom RLIMIT_NPROC does not apply"
	exit 77
fi

# RLIMIT_NPROC counts every thread of the user: leave room for those
# running now and for the test's own processes, and no more.
# (cat, not awk, opens the files: it goes on past a process that has ended.)
used=$(cat /proc/[0-9]*/status 2>/dev/null |
	awk -v uid="$(id -u)" '/^Uid:/ { u = $2 } /^Threads:/ { if (u == uid) n += $2 }
	END { print n + 0 }')
[ "${used:-0}" -gt 0 ] || { echo "SKIP: cannot count this user's threads in /proc"; exit 77; }
limit=$((used + 40))
[ "$limit" -lt 4000 ] || { echo "SKIP: $used threads of this user already run"; exit 77; }
out=$( (ulimit -u "$limit" && CK_RUN_SUITE=limits CK_RUN_CASE=resources "$prog") 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: the limits suite failed under ulimit -u $limit"; exit 1; }
echo "$out" | grep -q "^kernel_threads refused: kernel_threads = 1 (a thread per kernel instance) needs [0-9]* threads, more than RLIMIT_NPROC (ulimit -u) allows: $limit," ||
	{ echo "FAIL: no refusal under ulimit -u $limit"; exit 1; }
echo PASS
