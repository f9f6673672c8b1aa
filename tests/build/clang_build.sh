#!/usr/bin/env bash
# Builds a copy of the tree with Clang (CC=clang, --enable-werror) and runs
# its make check, so that the code stays portable beyond GCC: a Clang build
# once failed at the first link (an LTO probe Clang only warned about) and
# at a __builtin_cpu_supports string Clang 14 does not know. Run by
# .ci/run; prints a SKIP line and exits 0 where clang is not installed.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
CLANG=${CLANG:-clang}
if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "clang_build: SKIP: $CLANG not installed"
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$top/tests/build/copy_tree.sh"
copy_tree "$top" "$work"
cd "$work"
step() { # name, log, command...
	local name=$1 log=$2
	shift 2
	if ! "$@" >"$log" 2>&1; then
		tail -40 "$log" >&2
		echo "clang_build: FAIL: $name" >&2
		exit 1
	fi
}
step bootstrap "$work/bootstrap.log" ./bootstrap
step configure "$work/configure.log" env CC="$CLANG" ./configure --enable-werror
step build "$work/build.log" make -j"$(nproc)"
if ! make -j"$(nproc)" check >"$work/check.log" 2>&1; then
	grep -E '^(FAIL|ERROR|# )' "$work/check.log" >&2 || tail -40 "$work/check.log" >&2
	for f in $(grep -lE '^(FAIL|ERROR)' tests/*.log tests/*/*.log 2>/dev/null); do tail -20 "$f" >&2; done
	echo "clang_build: FAIL: make check" >&2
	exit 1
fi
echo "clang_build: ok ($("$CLANG" --version | head -1);" $(grep -E '^# (TOTAL|PASS|SKIP)' "$work/check.log" | tr -d '#') ")"
