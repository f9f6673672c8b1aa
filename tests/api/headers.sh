#!/bin/bash
# Every public header compiles on its own, as C11 and as C++11, with
# -pedantic -Wall -Wextra -Werror (libgit2's headertest, urcu's _cxx tests).
set -u
: "${abs_top_builddir:?}" "${abs_top_srcdir:?}"
CC=${CC:-cc}
CXX=${CXX:-c++}
inc="-I$abs_top_srcdir/include -I$abs_top_builddir/include"

command -v "${CC%% *}" >/dev/null 2>&1 || { echo "SKIP: no C compiler ($CC)"; exit 77; }
have_cxx=1
command -v "${CXX%% *}" >/dev/null 2>&1 || have_cxx=0

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
headers="kernbench.h"
for h in "$abs_top_srcdir"/include/kernbench/*.h "$abs_top_builddir"/include/kernbench/version.h; do
	[ -f "$h" ] && headers="$headers kernbench/$(basename "$h")"
done
headers=$(printf '%s\n' $headers | sort -u)

status=0
n=0
for h in $headers; do
	# A declaration after it: a header of macros alone (version.h) would
	# otherwise leave an empty translation unit, which -pedantic rejects.
	printf '#include <%s>\ntypedef int kb_headertest;\n' "$h" > "$tmp/t.c"
	# Twice: the include guards must hold.
	printf '#include <%s>\n#include <%s>\ntypedef int kb_headertest;\n' "$h" "$h" > "$tmp/t2.c"
	if ! $CC -std=c11 -pedantic -Wall -Wextra -Werror -fsyntax-only $inc "$tmp/t.c" ||
	   ! $CC -std=c11 -pedantic -Wall -Wextra -Werror -fsyntax-only $inc "$tmp/t2.c"; then
		echo "FAIL: $h as C11"
		status=1
	fi
	if [ $have_cxx = 1 ] &&
	   ! $CXX -std=c++11 -pedantic -Wall -Wextra -Werror -x c++ -fsyntax-only $inc "$tmp/t.c"; then
		echo "FAIL: $h as C++11"
		status=1
	fi
	n=$((n + 1))
done
[ $have_cxx = 1 ] || echo "note: no C++ compiler ($CXX); C++ checks skipped"
[ $status -eq 0 ] && echo "PASS: $n headers"
exit $status
