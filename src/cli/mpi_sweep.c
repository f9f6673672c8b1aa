/*
 * `kernbench sweep` over MPI ranks: MPI as a transport of the library's
 * sweep (kernbench/sweep.h). Rank 0 runs kb_sweep_run_transport: its own
 * pool runs points, and the transport hands other points to the other
 * ranks, which run them with kb_sweep_serve (the same pool, the same
 * library call for a point) and send back each row in the library's row
 * encoding; the library's one reorder buffer delivers every row in point
 * order to the same on_row as the single-process sweep.
 *
 * Threads: MPI_THREAD_FUNNELED. Only the main thread of a rank calls MPI:
 * the library calls a transport's callbacks on the calling thread. Nobody
 * blocks in MPI while the sweep runs: the main threads poll (MPI_Iprobe)
 * and otherwise sleep for the library's short wait, so waiting ranks leave
 * the cores to the points (a blocking MPI receive spins).
 *
 * Set-up: every rank builds the sweep from the same command line; rank 0
 * then broadcasts its sweep's definition (kb_sweep_definition_json) and
 * every rank compares its own hash with it: a rank that read another
 * topology file under the same path, or another list, says how it differs
 * and the command ends on every rank (issue 18 §5).
 *
 * Protocol (MPI_COMM_WORLD, every payload MPI_BYTE):
 *   worker -> 0  REQUEST  uint32 n: n more points may be sent (first: -j)
 *   0 -> worker  WORK     uint64 index of a point to run
 *   worker -> 0  RESULT   uint64 index, then the row encoding (JSON, NUL);
 *                         also asks for one more point
 *   0 -> worker  STOP     no more points: finish the running ones, say BYE
 *   worker -> 0  BYE      finished (after STOP)
 *   worker -> 0  FAIL     text: this rank cannot go on (it then stops)
 *   worker -> 0  ALIVE    nothing else sent for HEARTBEAT_S seconds
 *
 * Failures: a failing point is a row like any other. A rank that cannot go
 * on sends FAIL: the transport reports "rank N failed: ...", the library
 * stops handing out points and delivers the rows that are next in order,
 * rank 0 stops every rank and the command exits 1. A rank that dies is
 * normally noticed by the launcher, which ends the job and names it; if the
 * job goes on, rank 0 gives up on a rank that sent nothing for
 * KERNBENCH_MPI_TIMEOUT seconds (default 60), names it and aborts the job.
 * In every case the rows already written stay and --resume completes the
 * file.
 *
 * Built as the module kernbench-mpi.so (mpi_ops.h): only the table at the
 * end is exported, and the command loads it when a launcher started it.
 */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/mpi_ops.h"

#define HEARTBEAT_S 2.0
#define DEFAULT_TIMEOUT_S 60.0

enum { TAG_REQUEST = 1, TAG_WORK, TAG_RESULT, TAG_STOP, TAG_BYE, TAG_FAIL, TAG_ALIVE };

struct cli_mpi_ctx {
	int rank, size, local_size;
	unsigned long total_jobs;   /* -j summed over every rank (set-up) */
};

/* ---- start and end ----------------------------------------------------- */

static int mpi_fail(int code, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof(msg), "error %d", code);
	return cli_error("MPI: %s: %s", what, msg);
}

static int mpi_start(cli_mpi_ctx **out)
{
	cli_mpi_ctx *m;
	MPI_Comm local;
	int provided = 0, rc;

	*out = NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return cli_error("out of memory");
	rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
	if (rc != MPI_SUCCESS) {
		free(m);
		return cli_error("MPI_Init_thread failed (error %d)", rc);
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &m->size);
	m->local_size = 1;
	if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
				&local) == MPI_SUCCESS) {
		MPI_Comm_size(local, &m->local_size);
		MPI_Comm_free(&local);
	}
	*out = m;
	if (provided < MPI_THREAD_FUNNELED && m->size > 1) {
		cli_error("MPI: the library gives no thread support (MPI_THREAD_FUNNELED needed)");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	return 0;
}

static int mpi_rank(const cli_mpi_ctx *m)
{
	return m ? m->rank : 0;
}

static int mpi_parallel(const cli_mpi_ctx *m)
{
	return m && m->size > 1;
}

static unsigned mpi_jobs(const cli_mpi_ctx *m, unsigned requested)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (requested || !mpi_parallel(m))
		return requested;
	if (m && m->local_size > 1)
		n /= m->local_size;
	return n < 1 ? 1 : (unsigned)n;
}

/* Is fd 2 of the parent (mpirun, when it started this rank) a terminal? */
static int parent_stderr_is_tty(void)
{
	char path[64], target[256];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%ld/fd/2", (long)getppid());
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;
	target[n] = '\0';
	return strncmp(target, "/dev/pts/", 9) == 0 || strncmp(target, "/dev/tty", 8) == 0;
}

static int mpi_progress_wanted(void)
{
	const char *e = getenv("KERNBENCH_PROGRESS");

	if (e && *e)
		return strcmp(e, "0") != 0;
	return isatty(STDERR_FILENO) || parent_stderr_is_tty();
}

static int mpi_end(cli_mpi_ctx *m, int status)
{
	if (!m)
		return status;
	MPI_Finalize();
	free(m);
	return status;
}

/* ---- set-up ------------------------------------------------------------ */

static int mpi_setup_done(cli_mpi_ctx *m, int status, const kb_sweep *s, unsigned jobs);

static int mpi_setup_root(cli_mpi_ctx *m, int stop, const kb_sweep *s, unsigned jobs)
{
	int v = stop != 0, rc;

	if (!mpi_parallel(m))
		return 0;
	if ((rc = MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD)) != MPI_SUCCESS)
		return mpi_fail(rc, "set-up");
	return stop ? 0 : mpi_setup_done(m, 0, s, jobs);
}

static int mpi_setup_wait(cli_mpi_ctx *m, int *stop)
{
	int v = 1, rc;

	rc = MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
	*stop = v;
	return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "set-up");
}

/* Every rank: the first rank with a nonzero status, or -1; rc an MPI code. */
static int first_failed(int status, int rank, int *rc)
{
	int in[2] = { status != 0, rank }, res[2] = { 0, 0 };

	*rc = MPI_Allreduce(in, res, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
	return res[0] ? res[1] : -1;
}

/* Rank 0's definition to every rank; each compares it with its own sweep's
 * and prints, naming itself, how they differ. 0 when they agree. */
static int agree_on_definition(const cli_mpi_ctx *m, const kb_sweep *s)
{
	char mine[65], theirs[65], *text = NULL, *root = NULL;
	unsigned long len = 0;
	kb_error err;
	int rc = kb_sweep_definition_json(&text, s, &err), mrc;

	if (rc == 0)
		rc = kb_sweep_definition_sha256(s, mine, &err);
	if (rc)
		cli_kb_error(&err, rc);
	len = m->rank == 0 && text ? (unsigned long)strlen(text) + 1 : 0;
	if ((mrc = MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD)) != MPI_SUCCESS ||
	    len == 0 || len > INT_MAX) {
		free(text);
		return mrc != MPI_SUCCESS ? mpi_fail(mrc, "set-up") : CLI_FAIL;
	}
	root = m->rank == 0 ? text : malloc(len);
	if (!root) {
		free(text);
		return cli_error("out of memory");
	}
	if ((mrc = MPI_Bcast(root, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD)) != MPI_SUCCESS)
		rc = mpi_fail(mrc, "set-up");
	else if (m->rank != 0 && !rc) {
		/* The hash of rank 0's text, computed the same way as our own. */
		root[len - 1] = '\0';
		if (strcmp(root, text) != 0) {
			if (kb_sweep_definition_compare(text, root, &err) == 0)
				snprintf(err.message, sizeof(err.message), "the texts differ");
			(void)theirs;
			rc = cli_error("rank %d: this rank's sweep differs from rank 0's (sweep "
				       "definition %.12s here): %s; every rank must read the same "
				       "topology and lists", m->rank, mine, err.message);
		}
	}
	if (root != text)
		free(root);
	free(text);
	return rc;
}

/* Every rank: agree that the set-up worked everywhere and that every rank
 * built the same sweep; rank 0 keeps the total of the ranks' jobs. */
static int mpi_setup_done(cli_mpi_ctx *m, int status, const kb_sweep *s, unsigned jobs)
{
	unsigned long j = jobs, sum = 0;
	int failed, rc;

	failed = first_failed(status, m->rank, &rc);
	if (rc == MPI_SUCCESS)
		rc = MPI_Allreduce(&j, &sum, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		return mpi_fail(rc, "set-up");
	m->total_jobs = sum;
	if (failed < 0) {
		status = agree_on_definition(m, s);
		failed = first_failed(status, m->rank, &rc);
		if (rc != MPI_SUCCESS)
			return mpi_fail(rc, "set-up");
	}
	if (failed >= 0) {
		if (m->rank == 0)
			cli_error("rank %d could not set up the sweep (its message is above)",
				  failed);
		return CLI_FAIL;
	}
	return 0;
}

/* ---- small helpers ----------------------------------------------------- */

static double now_s(void)
{
	return cli_now();
}

static double timeout_s(void)
{
	const char *e = getenv("KERNBENCH_MPI_TIMEOUT");
	char *end;
	double t;

	if (!e || !*e)
		return DEFAULT_TIMEOUT_S;
	t = strtod(e, &end);
	return *end || !(t > 0) ? DEFAULT_TIMEOUT_S : t;
}

static int send_bytes(const void *buf, size_t n, int dest, int tag)
{
	if (n > INT_MAX)
		return MPI_ERR_COUNT;
	return MPI_Send(buf, (int)n, MPI_BYTE, dest, tag, MPI_COMM_WORLD);
}

/* Receives the probed message into a malloc'd buffer (NUL-terminated). */
static int recv_probed(const MPI_Status *st, char **buf, int *len)
{
	int n = 0, rc = MPI_Get_count(st, MPI_BYTE, &n);

	if (rc != MPI_SUCCESS)
		return rc;
	*buf = malloc((size_t)n + 1);
	if (!*buf)
		return MPI_ERR_NO_MEM;
	rc = MPI_Recv(*buf, n, MPI_BYTE, st->MPI_SOURCE, st->MPI_TAG, MPI_COMM_WORLD,
		      MPI_STATUS_IGNORE);
	(*buf)[n] = '\0';
	*len = n;
	return rc;
}

/* ---- rank 0: the transport ---------------------------------------------- */

typedef struct root {
	cli_mpi_ctx *m;
	unsigned long *credits;   /* per rank: points it may still be sent */
	double *last_seen;        /* per rank: when it last sent something */
	char *gone;               /* per rank: said BYE or FAIL */
	int rr;                   /* round-robin start of the hand-out */
	double timeout;
} root;

static void set_err(kb_error *err, int code, const char *fmt, ...) KB_PRINTF(3, 4);

/* The error a transport callback returns to the library. */
static void set_err(kb_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	kb_error_clear(err);
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
}

static size_t t_room(void *payload)
{
	const root *R = payload;
	size_t n = 0;

	for (int r = 1; r < R->m->size; r++)
		n += R->gone[r] ? 0 : R->credits[r];
	return n;
}

static int t_send(void *payload, size_t index, kb_error *err)
{
	root *R = payload;
	uint64_t idx = index;
	int r, rc;

	for (int tried = 0; tried < R->m->size; tried++) {
		r = 1 + (R->rr + tried) % (R->m->size - 1);
		if (R->gone[r] || R->credits[r] == 0)
			continue;
		R->rr = r % (R->m->size - 1);
		R->credits[r]--;
		rc = send_bytes(&idx, sizeof(idx), r, TAG_WORK);
		if (rc == MPI_SUCCESS)
			return 0;
		mpi_fail(rc, "sending a point");
		set_err(err, KB_EIO, "rank %d could not be reached", r);
		return KB_EIO;
	}
	set_err(err, KB_ESTATE, "no rank can take point %zu", index);
	return KB_ESTATE;
}

/* A rank that sent nothing for the timeout: name it and end the job. */
static void check_alive(root *R)
{
	double t = now_s();

	for (int r = 1; r < R->m->size; r++) {
		if (R->gone[r] || t - R->last_seen[r] <= R->timeout)
			continue;
		cli_error("rank %d sent nothing for %.0f s: it died or hangs; the rows written "
			  "so far stay (run the same command with --resume to complete the file)",
			  r, R->timeout);
		fflush(NULL);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

/*
 * Handles waiting messages until a RESULT (1, *index and *json set), none is
 * left (0, after waiting wait_ns once), or an error (a kb_status).
 */
static int t_receive(void *payload, long wait_ns, size_t *index, char **json, kb_error *err)
{
	root *R = payload;
	int waited = 0;

	for (;;) {
		MPI_Status st;
		char *buf = NULL;
		int flag = 0, len = 0, src, rc;

		rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
		if (rc == MPI_SUCCESS && !flag) {
			check_alive(R);
			if (waited || wait_ns <= 0)
				return 0;
			nanosleep(&(struct timespec){ 0, wait_ns }, NULL);
			waited = 1;
			continue;
		}
		if (rc == MPI_SUCCESS)
			rc = recv_probed(&st, &buf, &len);
		if (rc != MPI_SUCCESS) {
			free(buf);
			mpi_fail(rc, flag ? "receiving from a rank" : "probing for messages");
			set_err(err, KB_EIO, "rank %d: its message could not be received",
				flag ? st.MPI_SOURCE : -1);
			return KB_EIO;
		}
		src = st.MPI_SOURCE;
		R->last_seen[src] = now_s();
		switch (st.MPI_TAG) {
		case TAG_REQUEST:
			if (len == (int)sizeof(uint32_t)) {
				uint32_t n;

				memcpy(&n, buf, sizeof(n));
				R->credits[src] += n;
			}
			break;
		case TAG_RESULT: {
			uint64_t idx;

			if ((size_t)len <= sizeof(idx) || buf[len - 1] != '\0') {
				free(buf);
				set_err(err, KB_EPARSE, "rank %d sent a malformed row", src);
				return KB_EPARSE;
			}
			memcpy(&idx, buf, sizeof(idx));
			R->credits[src]++;
			*index = (size_t)idx;
			*json = strdup(buf + sizeof(idx));
			free(buf);
			if (!*json) {
				set_err(err, KB_ENOMEM, "out of memory");
				return KB_ENOMEM;
			}
			return 1;
		}
		case TAG_BYE:
			R->gone[src] = 1;
			R->credits[src] = 0;
			break;
		case TAG_FAIL:
			R->gone[src] = 1;
			R->credits[src] = 0;
			set_err(err, KB_EIO, "rank %d failed: %s", src, buf);
			free(buf);
			return KB_EIO;
		default:  /* TAG_ALIVE */
			break;
		}
		free(buf);
	}
}

static int all_gone(const root *R)
{
	for (int r = 1; r < R->m->size; r++)
		if (!R->gone[r])
			return 0;
	return 1;
}

/* The end: every other rank finishes its running points and says BYE
 * (rows that come meanwhile are not needed any more). */
static void stop_all(root *R)
{
	for (int r = 1; r < R->m->size; r++)
		if (!R->gone[r])
			send_bytes(NULL, 0, r, TAG_STOP);
	while (!all_gone(R)) {
		size_t idx;
		char *json = NULL;
		int got = t_receive(R, 2000000L, &idx, &json, NULL);

		free(json);
		(void)got;
	}
}

static int mpi_run(cli_mpi_ctx *m, kb_sweep *s, unsigned jobs, kb_sweep_cb on_row,
		      void *payload)
{
	kb_sweep_transport t = { KB_SWEEP_TRANSPORT_VERSION, t_room, t_send, t_receive, NULL, 0 };
	kb_error err;
	root R;
	int rc;

	memset(&R, 0, sizeof(R));
	R.m = m;
	R.timeout = timeout_s();
	R.credits = calloc((size_t)m->size, sizeof(*R.credits));
	R.last_seen = calloc((size_t)m->size, sizeof(*R.last_seen));
	R.gone = calloc((size_t)m->size, 1);
	if (!R.credits || !R.last_seen || !R.gone) {
		rc = cli_error("out of memory");
		goto done;
	}
	for (int r = 0; r < m->size; r++)
		R.last_seen[r] = now_s();
	t.payload = &R;
	t.remote_jobs = (unsigned)(m->total_jobs > jobs ? m->total_jobs - jobs : 0);
	rc = kb_sweep_run_transport(s, &t, on_row, payload, &err);
	stop_all(&R);
	if (rc && rc != KB_ESTATE) {
		cli_kb_error(&err, rc);
		cli_error("the sweep stopped; the rows written stay (run the same command with "
			  "--resume to complete the file)");
	}
	rc = rc ? CLI_FAIL : 0;
done:
	free(R.credits);
	free(R.last_seen);
	free(R.gone);
	return rc;
}

/* ---- the other ranks ---------------------------------------------------- */

typedef struct worker {
	const cli_mpi_ctx *m;
	uint32_t jobs;
	int asked, stopped, failed;
	long sent, fail_after;
	double last_sent;
} worker;

/* KERNBENCH_MPI_TEST_FAIL=RANK:N makes rank RANK fail after N rows (tests). */
static long test_fail_after(const cli_mpi_ctx *m)
{
	const char *e = getenv("KERNBENCH_MPI_TEST_FAIL");
	long rank, n;

	if (!e || sscanf(e, "%ld:%ld", &rank, &n) != 2 || rank != m->rank)
		return -1;
	return n;
}

/* KERNBENCH_MPI_TEST_STOP=RANK:N makes rank RANK stop itself (SIGSTOP) after
 * N rows, so that a test can kill a rank that is surely still running. */
static void test_stop_after(const cli_mpi_ctx *m, long sent)
{
	const char *e = getenv("KERNBENCH_MPI_TEST_STOP");
	long rank, n;

	if (e && sscanf(e, "%ld:%ld", &rank, &n) == 2 && rank == m->rank && sent == n)
		raise(SIGSTOP);
}

static int worker_fail(worker *W, const char *msg)
{
	W->failed = 1;
	send_bytes(msg, strlen(msg) + 1, 0, TAG_FAIL);
	return 1;
}

/* The library asks for work: a point from rank 0 (1), none now (0), or no
 * more (-1). Heartbeats go from here. */
static int w_next(void *payload, long wait_ns, size_t *index)
{
	worker *W = payload;
	MPI_Status st;
	int flag = 0, rc;

	if (!W->asked) {
		W->asked = 1;
		if (send_bytes(&W->jobs, sizeof(W->jobs), 0, TAG_REQUEST) != MPI_SUCCESS)
			return worker_fail(W, "could not ask rank 0 for points"), -1;
		W->last_sent = now_s();
	}
	while (!W->stopped) {
		char *buf = NULL;
		int len = 0;

		rc = MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
		if (rc != MPI_SUCCESS || !flag)
			break;
		if (recv_probed(&st, &buf, &len) != MPI_SUCCESS) {
			free(buf);
			W->stopped = 1;
			break;
		}
		if (st.MPI_TAG == TAG_WORK && len == (int)sizeof(uint64_t)) {
			uint64_t idx;

			memcpy(&idx, buf, sizeof(idx));
			free(buf);
			*index = (size_t)idx;
			return 1;
		}
		if (st.MPI_TAG == TAG_STOP)
			W->stopped = 1;
		free(buf);
	}
	if (now_s() - W->last_sent >= HEARTBEAT_S) {
		send_bytes(NULL, 0, 0, TAG_ALIVE);
		W->last_sent = now_s();
	}
	if (wait_ns > 0)
		nanosleep(&(struct timespec){ 0, wait_ns }, NULL);
	return W->stopped || W->failed ? -1 : 0;
}

/* A finished row to rank 0: its index, then the row encoding. */
static int w_done(void *payload, size_t index, char *json)
{
	worker *W = payload;
	size_t n = strlen(json) + 1;
	char *buf = malloc(sizeof(uint64_t) + n);
	uint64_t idx = index;
	int rc;

	if (!buf) {
		free(json);
		return worker_fail(W, "out of memory sending a row");
	}
	memcpy(buf, &idx, sizeof(idx));
	memcpy(buf + sizeof(idx), json, n);
	free(json);
	rc = send_bytes(buf, sizeof(idx) + n, 0, TAG_RESULT);
	free(buf);
	if (rc != MPI_SUCCESS) {
		mpi_fail(rc, "sending a row to rank 0");
		W->failed = 1;
		return 1;
	}
	W->last_sent = now_s();
	if (++W->sent == W->fail_after)
		return worker_fail(W, "injected failure (KERNBENCH_MPI_TEST_FAIL)");
	test_stop_after(W->m, W->sent);
	return 0;
}

static int mpi_work(cli_mpi_ctx *m, const kb_sweep *s, unsigned jobs)
{
	worker W = { m, jobs, 0, 0, 0, 0, test_fail_after(m), 0 };
	kb_sweep_source src = { KB_SWEEP_TRANSPORT_VERSION, w_next, w_done, &W };
	kb_error err;
	int rc = kb_sweep_serve(s, &src, &err);

	if (rc && !W.failed) {
		char msg[sizeof(err.message) + 32];

		snprintf(msg, sizeof(msg), "%s", err.message);
		worker_fail(&W, msg);
	}
	if (!W.failed)
		send_bytes(NULL, 0, 0, TAG_BYE);
	return W.failed ? CLI_FAIL : 0;
}

/* The one symbol the module exports (mpi_ops.h). */
extern const cli_mpi_ops cli_mpi_module_ops;
const cli_mpi_ops cli_mpi_module_ops = {
	.abi = CLI_MPI_OPS_ABI,
	.start = mpi_start,
	.rank = mpi_rank,
	.parallel = mpi_parallel,
	.jobs = mpi_jobs,
	.progress_wanted = mpi_progress_wanted,
	.setup_root = mpi_setup_root,
	.setup_wait = mpi_setup_wait,
	.setup_done = mpi_setup_done,
	.run = mpi_run,
	.work = mpi_work,
	.end = mpi_end,
};
