#!/bin/bash
# The MPI transport is a module the command loads only under an MPI
# launcher (src/cli/mpi_load.c): the command itself needs no MPI library,
# a singleton KERNBENCH_MPI=1 sweep loads the module and gives the plain
# sweep's rows, and a module that cannot be found is an error naming the
# file (exit 1), not a crash or a silent plain sweep.
set -u
. "$(dirname "$0")/lib.sh"

bin=${abs_top_builddir:-.}/.libs/kernbench
[ -x "$bin" ] || bin=${abs_top_builddir:-.}/kernbench
if command -v readelf >/dev/null 2>&1; then
	needed=$(readelf -d "$bin" | grep NEEDED) || fail "readelf -d $bin found no NEEDED entries"
	case $needed in
	*libmpi*|*libopen-rte*|*libopen-pal*) fail "the command links MPI: $needed" ;;
	esac
	readelf -d "${abs_top_builddir:-.}/.libs/kernbench-mpi.so" | grep -q 'NEEDED.*libmpi' ||
		fail "the module kernbench-mpi.so does not link libmpi"
else
	echo "readelf not found: link checks skipped" >&2
fi

args=(synthetic --param events=100,200 --param seed=1,2 --quiet)
"$KB" sweep "${args[@]}" -j 1 --out "$TMP/ref.csv" || fail "plain sweep exited $?"
KERNBENCH_MPI=1 "$KB" sweep "${args[@]}" -j 1 --out "$TMP/one.csv" ||
	fail "KERNBENCH_MPI=1 sweep exited $?"
strip_wall "$TMP/ref.csv" >"$TMP/ref.s"
strip_wall "$TMP/one.csv" | cmp -s - "$TMP/ref.s" || fail "singleton MPI sweep rows differ"

# The command copied where no module lies beside it, with the installed
# module path absent too: the error names the module and the exit is 1.
if [ -f "${abs_top_builddir:-.}/.libs/kernbench-mpi.so" ] && [ "$bin" != "${abs_top_builddir:-.}/kernbench" ]; then
	mkdir "$TMP/bin" && cp "$bin" "$TMP/bin/kernbench" || fail "cannot copy $bin"
	installed=$(strings "$bin" | grep -m1 '/kernbench-mpi\.so$')
	if [ -n "$installed" ] && [ -e "$installed" ]; then
		echo "an installed module at $installed: missing-module check skipped" >&2
	else
		LD_LIBRARY_PATH="${abs_top_builddir:-.}/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
			KERNBENCH_MPI=1 "$TMP/bin/kernbench" sweep "${args[@]}" --out "$TMP/x.csv" \
			2>"$TMP/err"
		rc=$?
		[ $rc -eq 1 ] || fail "missing module: exit $rc, expected 1 ($(cat "$TMP/err"))"
		grep -q 'MPI module .*kernbench-mpi\.so cannot be loaded' "$TMP/err" ||
			fail "missing module: message does not name it: $(cat "$TMP/err")"
	fi
fi
exit 0
