# Shared set-up of the CLI tests (sourced). Finds the kernbench command,
# makes a scratch directory removed at exit, and offers small helpers.
# Exit codes follow automake: 0 pass, 1 fail, 77 skip.

KB=${KB:-${abs_top_builddir:+$abs_top_builddir/}kernbench}
case $KB in */*) ;; *) KB=./$KB ;; esac
SRCDIR=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
if [ ! -x "$KB" ]; then
	echo "SKIP: kernbench not found at $KB (set KB=)" >&2
	exit 77
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kbcli.XXXXXX") || exit 99
trap 'rm -rf "$TMP"' EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

have_python() {
	command -v python3 >/dev/null 2>&1
}

# Prints a CSV file without its wall_s column (the one figure that differs
# from run to run). Uses Python's csv module when it can, since error cells
# may hold quoted commas; otherwise cuts the column by position.
strip_wall() {
	if have_python; then
		python3 - "$1" <<'PY'
import csv, sys
with open(sys.argv[1], newline='') as f:
    rows = list(csv.reader(f))
i = rows[0].index('wall_s')
w = csv.writer(sys.stdout, lineterminator='\n')
for r in rows:
    w.writerow(r[:i] + r[i + 1:])
PY
	else
		awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "wall_s") c = i }
			{ s = ""; for (i = 1; i <= NF; i++) if (i != c) s = s (s == "" ? "" : ",") $i; print s }' "$1"
	fi
}

# Same for JSON Lines: drops the "wall_s" member.
strip_wall_jsonl() {
	sed -e 's/,"wall_s":[^,}]*//' "$1"
}

# Runs "$KB" ARGS... with standard input, output and error on one
# pseudo-terminal, as in an interactive shell, and writes what the terminal
# received to OUT. Needs python3. Exits with the command's status.
on_pty() {
	local out=$1
	shift
	python3 - "$KB" "$out" "$@" <<'PY'
import os, pty, sys
kb, out = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.execv(kb, [kb] + sys.argv[3:])
data = b""
while True:
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    data += chunk
_, status = os.waitpid(pid, 0)
open(out, "wb").write(data)
sys.exit(os.WEXITSTATUS(status))
PY
}
