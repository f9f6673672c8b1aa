# Shared set-up of the MPI tests (sourced): the CLI test helpers, plus
# mpirun_kb NP ARGS... which runs `kernbench ARGS...` on NP ranks of this
# machine. Flags: shared memory only (no network, no ssh), more ranks than
# cores allowed, no binding (each rank runs a pool of threads), and
# --allow-run-as-root when root (CI containers).
. "$(dirname "$0")/../cli/lib.sh"

MPIRUN=${MPIRUN:-mpirun}
if ! command -v "$MPIRUN" >/dev/null 2>&1; then
	echo "SKIP: $MPIRUN not found" >&2
	exit 77
fi
MPIRUN_FLAGS=(--oversubscribe --bind-to none --mca btl self,vader --mca plm isolated)
[ "$(id -u)" = 0 ] && MPIRUN_FLAGS+=(--allow-run-as-root)
# No warnings about the single-copy mechanism in containers without ptrace.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# A session directory of its own: two mpiruns started at once by one user
# race to create /tmp/ompi.HOST.UID ("File exists") under make -j.
export OMPI_MCA_orte_tmpdir_base="$TMP"
# Sanitizer builds: Open MPI's own allocations at MPI_Init are not ours.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

mpirun_kb() {
	local np=$1
	shift
	"$MPIRUN" "${MPIRUN_FLAGS[@]}" -np "$np" "$KB" "$@"
}
