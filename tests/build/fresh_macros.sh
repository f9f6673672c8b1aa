#!/usr/bin/env bash
# Bootstraps and configures a copy of the tree as a fresh machine would:
# aclocal sees the system's macro directory without autoconf-archive's
# ax_*.m4 files, so every AX_ macro must come from m4/. Run by .ci/run; on a
# machine without autoconf-archive it checks the same thing the plain way.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
sysdir=$(aclocal --print-ac-dir)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/acdir" "$work/src"
for f in "$sysdir"/*; do
	case ${f##*/} in ax_*) ;; *) ln -s "$f" "$work/acdir/" ;; esac
done
. "$top/tests/build/copy_tree.sh"
copy_tree "$top" "$work/src"
cd "$work/src"
rm -f m4/libtool.m4 m4/lt*.m4 configure aclocal.m4
if ! ACLOCAL="aclocal --system-acdir=$work/acdir" autoreconf --install --force >"$work/autoreconf.log" 2>&1; then
	cat "$work/autoreconf.log" >&2
	echo "fresh_macros: FAIL: autoreconf without autoconf-archive (a macro is not vendored in m4/)" >&2
	exit 1
fi
if grep -nE '^[[:space:]]*AX_[A-Z0-9_]+\(' configure >&2; then
	echo "fresh_macros: FAIL: configure keeps unexpanded AX_ macros" >&2
	exit 1
fi
if ! ./configure >"$work/configure.log" 2>&1; then
	tail -20 "$work/configure.log" >&2
	echo "fresh_macros: FAIL: configure of a fresh bootstrap" >&2
	exit 1
fi
echo "fresh_macros: ok (bootstrap and configure without autoconf-archive's macros)"
