#!/bin/sh
# The layer rule of doc/design.md: a folder of src/ (or benches/) uses only
# itself, the folders its row of the matrix names and include/kernbench.
# The matrix and its exceptions are read from doc/design.md, so the rule
# and its documentation cannot drift apart. Checked:
#  1. every #include "folder/..." in src/ and benches/;
#  2. every kb_/kb__ symbol an object file of the library leaves undefined
#     (a call or a data reference), against the folder that defines it;
#  3. ADR-0065 D7: nothing under src/pe knows a recipe exists.
# Exit 0 when all hold, 1 with one line per violation otherwise.
srcdir=${abs_top_srcdir:-.}
builddir=${abs_top_builddir:-.}
doc=$srcdir/doc/design.md
tmp=${TMPDIR:-/tmp}/kb-layers.$$
trap 'rm -f "$tmp".*' EXIT INT TERM

# "from to" pairs that are allowed: the matrix, then the exceptions (whose
# reason must not be empty).
awk '
/<!-- layer-matrix/ { m = 1; next }
/<!-- \/layer-matrix/ { m = 0 }
/<!-- layer-exceptions/ { e = 1; next }
/<!-- \/layer-exceptions/ { e = 0 }
m && /^\| `/ {
	n = split($0, c, "|"); from = c[2]; gsub(/[ `]/, "", from)
	print from, from; print from, "kernbench"
	k = split(c[3], t, " ")
	for (i = 1; i <= k; i++) print from, t[i]
	folders[from] = 1
}
e && /^\| `/ {
	n = split($0, c, "|"); from = c[2]; to = c[3]; why = c[4]
	gsub(/[ `]/, "", from); gsub(/[ `]/, "", to); gsub(/^ +| +$/, "", why)
	if (why == "") { print "exception " from " -> " to " has no reason" > "/dev/stderr"; bad = 1 }
	print from, to
}
END { exit bad }
' "$doc" > "$tmp.allowed" || exit 1
if [ ! -s "$tmp.allowed" ]; then
	echo "FAIL: no layer matrix found in $doc"
	exit 1
fi
awk '{ print $1 }' "$tmp.allowed" | sort -u > "$tmp.folders"

# The folder of a path: src/X/... -> X, benches/... -> benches.
folder_of() {
	case $1 in
	src/*) f=${1#src/}; echo "${f%%/*}" ;;
	benches/*) echo benches ;;
	esac
}

fail=0
: > "$tmp.bad"

# 1. Includes.
(cd "$srcdir" && find src benches -name '*.[ch]' | sort) | while read -r path; do
	from=$(folder_of "$path")
	grep -o '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_]*/' "$srcdir/$path" |
		sed 's/.*"//; s|/$||' | sort -u | while read -r to; do
		# Only folders of the matrix count (e.g. "src/model/x.inc" is a
		# generated file of the same folder, reached through the build dir).
		grep -qx "$to" "$tmp.folders" || continue
		grep -qx "$from $to" "$tmp.allowed" ||
			echo "FAIL: $path includes $to/ (a $from file may use: $(awk -v f="$from" '$1 == f && $2 != f && $2 != "kernbench" { printf "%s ", $2 }' "$tmp.allowed"))" >> "$tmp.bad"
	done
done

# 2. Symbols. The objects of the library are libtool's, in .libs beside the
# sources in the build tree (the command's own objects: 2b below).
NM=${NM:-nm}
# Only objects whose source is still in the tree: a build tree keeps the
# objects of files that were moved or removed, and those would be misjudged.
objs=$(cd "$builddir" && find src benches -path '*/.libs/libkbinternal_la-*.o' 2>/dev/null | sort |
	while read -r o; do
		c=${o%/.libs/*}/${o##*/libkbinternal_la-}
		[ -f "$srcdir/${c%.o}.c" ] && echo "$o"
	done)
if [ -z "$objs" ] || ! command -v "$NM" >/dev/null 2>&1; then
	echo "note: no library objects or no $NM; symbol check skipped"
else
	for o in $objs; do
		f=$(folder_of "$o")
		"$NM" "$builddir/$o" 2>/dev/null | awk -v f="$f" -v o="$o" '
			$1 == "U" && $2 ~ /^kb_/ { print "U", f, $2, o }
			NF == 3 && $2 ~ /^[TDBRC]$/ && $3 ~ /^kb_/ { print "D", f, $3, o }'
	done > "$tmp.syms"
	awk '
	FILENAME == ARGV[1] { ok[$1 " " $2] = 1; next }
	$1 == "D" { def[$3] = $2; next }
	$1 == "U" { use[++n] = $0 }
	END {
		for (i = 1; i <= n; i++) {
			split(use[i], u, " ")
			d = def[u[3]]
			if (d == "" || d == u[2]) continue
			if (!((u[2] " " d) in ok))
				printf "FAIL: %s uses %s, defined in %s/ (a %s object may not)\n", u[4], u[3], d, u[2]
		}
	}' "$tmp.allowed" "$tmp.syms" >> "$tmp.bad"
fi

# 2b. The command and the MPI module use the public API only. The command
# has the library linked in (configure's --enable-static-cli, the default),
# so no linker holds it to the kb_ exports any more: an internal kb__ symbol
# left undefined by one of their objects is a violation.
cli_objs=$(cd "$builddir" && { find src/cli -name 'kernbench-*.o'; find src/cli -path '*/.libs/kernbench_mpi_la-*.o'; } 2>/dev/null | sort |
	while read -r o; do
		b=${o##*/}; b=${b#kernbench-}; b=${b#kernbench_mpi_la-}
		[ -f "$srcdir/src/cli/${b%.o}.c" ] && echo "$o"
	done)
if [ -n "$cli_objs" ] && command -v "$NM" >/dev/null 2>&1; then
	for o in $cli_objs; do
		"$NM" -u "$builddir/$o" 2>/dev/null | awk -v o="$o" '
			$1 == "U" && $2 ~ /^kb__/ { printf "FAIL: %s uses %s, an internal symbol (the command and its MPI module may use only include/kernbench)\n", o, $2 }'
	done >> "$tmp.bad"
fi

# 3. ADR-0065 D7: recipes live beside the tl context.
bad=$(cd "$srcdir" && grep -lE 'recipes\.h|kb__recipe|softmax_merge' src/pe/*.c src/pe/*.h 2>/dev/null)
[ -n "$bad" ] && echo "FAIL: recipe knowledge under src/pe: $bad" >> "$tmp.bad"

if [ -s "$tmp.bad" ]; then
	cat "$tmp.bad"
	exit 1
fi
echo "layers hold: $(wc -l < "$tmp.allowed") allowed pairs, $(echo "$objs" | wc -w) library objects and $(echo "$cli_objs" | wc -w) command objects checked"
exit 0
