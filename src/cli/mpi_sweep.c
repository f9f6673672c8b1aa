/*
 * `kernbench sweep` over MPI ranks: rank 0 hands out points dynamically and
 * writes every row, in point order, through the single-process row writer.
 *
 * Threads: MPI_THREAD_FUNNELED. Only the main thread of a rank calls MPI;
 * the points run on the rank's pool (mpi_pool.c). Nobody blocks in MPI
 * while the sweep runs: the main threads poll (MPI_Iprobe) and otherwise
 * sleep on their pool's condition variable for POLL_NS, so waiting ranks
 * leave the cores to the points (a blocking MPI receive spins).
 *
 * Protocol (MPI_COMM_WORLD, every payload MPI_BYTE):
 *   worker -> 0  REQUEST  uint32 n: n more points may be sent (first: -j)
 *   0 -> worker  WORK     uint64 index of a point to run
 *   worker -> 0  RESULT   an cli_mpi_wire_row; also asks for one more point
 *   0 -> worker  STOP     no more points: finish the running ones, say BYE
 *   worker -> 0  BYE      finished (after STOP)
 *   worker -> 0  FAIL     text: this rank cannot go on (it then stops)
 *   worker -> 0  ALIVE    nothing else sent for HEARTBEAT_S seconds
 * So each rank has at most -j points queued or running, rank 0 included
 * (its own pool gets points the same way, without messages).
 *
 * Order and memory: rank 0 keeps finished rows in a ring of `window` slots
 * (4 per job over all ranks) and only hands out a point below
 * next_deliver + window, like the single-process reorder buffer; rows are
 * passed to on_row strictly in point order.
 *
 * Failures: a failing point is a row like any other. A rank that cannot go
 * on sends FAIL: rank 0 prints "rank N: ...", stops handing out points,
 * still writes the rows that are next in order, stops every rank and
 * returns 1. A rank that dies is normally noticed by the launcher, which
 * ends the job and names it (mpirun: "process rank N ... exited on
 * signal"); if the job goes on (fault-tolerant runtimes, a hung node),
 * rank 0 gives up on a rank that sent nothing for KERNBENCH_MPI_TIMEOUT
 * seconds (default 60), names it and aborts the job. In every case the rows
 * already written stay and `--resume` completes the file.
 */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/mpi_sweep.h"

#define POLL_NS 2000000L       /* 2 ms between polls of an idle main thread */
#define HEARTBEAT_S 2.0
#define DEFAULT_TIMEOUT_S 60.0
#define WINDOW_PER_JOB 4

enum { TAG_REQUEST = 1, TAG_WORK, TAG_RESULT, TAG_STOP, TAG_BYE, TAG_FAIL, TAG_ALIVE };

struct cli_mpi_ctx {
	int rank, size, local_size;
};

/* ---- start and end ----------------------------------------------------- */

static int launched_by_mpi(void)
{
	static const char *const vars[] = {
		"OMPI_COMM_WORLD_SIZE",   /* Open MPI's mpirun */
		"PMIX_RANK",              /* PMIx launchers: srun --mpi=pmix, prterun */
		"PMI_RANK", "PMI_SIZE",   /* PMI-1/2: srun --mpi=pmi2, MPICH's hydra */
		"MPI_LOCALNRANKS",        /* MPICH's hydra */
		NULL
	};
	const char *force = getenv("KERNBENCH_MPI");
	size_t i;

	if (force && *force)
		return strcmp(force, "0") != 0;
	for (i = 0; vars[i]; i++)
		if (getenv(vars[i]))
			return 1;
	return 0;
}

static int mpi_fail(int code, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof(msg), "error %d", code);
	return cli_error("MPI: %s: %s", what, msg);
}

int cli_mpi_sweep_start(cli_mpi_ctx **out)
{
	cli_mpi_ctx *m;
	MPI_Comm local;
	int provided = 0, rc;

	*out = NULL;
	if (!launched_by_mpi())
		return 0;
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

int cli_mpi_sweep_rank(const cli_mpi_ctx *m)
{
	return m ? m->rank : 0;
}

int cli_mpi_sweep_parallel(const cli_mpi_ctx *m)
{
	return m && m->size > 1;
}

unsigned cli_mpi_sweep_jobs(const cli_mpi_ctx *m, unsigned requested)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (requested)
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

int cli_mpi_sweep_progress_wanted(void)
{
	const char *e = getenv("KERNBENCH_PROGRESS");

	if (e && *e)
		return strcmp(e, "0") != 0;
	return isatty(STDERR_FILENO) || parent_stderr_is_tty();
}

int cli_mpi_sweep_end(cli_mpi_ctx *m, int status)
{
	if (!m)
		return status;
	MPI_Finalize();
	free(m);
	return status;
}

/* ---- set-up ------------------------------------------------------------ */

int cli_mpi_sweep_setup_root(cli_mpi_ctx *m, int stop, unsigned jobs)
{
	int v = stop != 0, rc;

	if (!cli_mpi_sweep_parallel(m))
		return 0;
	if ((rc = MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD)) != MPI_SUCCESS)
		return mpi_fail(rc, "set-up");
	return stop ? 0 : cli_mpi_sweep_setup_done(m, 0, jobs);
}

int cli_mpi_sweep_setup_wait(cli_mpi_ctx *m, int *stop)
{
	int v = 1, rc;

	rc = MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
	*stop = v;
	return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "set-up");
}

/* Every rank: agree that the set-up worked everywhere; rank 0 gets the
 * total of the ranks' jobs (the reorder window) back through m. */
static unsigned long total_jobs;

int cli_mpi_sweep_setup_done(cli_mpi_ctx *m, int status, unsigned jobs)
{
	int in[2] = { status != 0, m->rank }, res[2] = { 0, 0 }, rc;
	unsigned long j = jobs, sum = 0;

	rc = MPI_Allreduce(in, res, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
	if (rc == MPI_SUCCESS)
		rc = MPI_Allreduce(&j, &sum, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		return mpi_fail(rc, "set-up");
	total_jobs = sum;
	if (res[0]) {
		if (m->rank == 0)
			cli_error("rank %d could not set up the sweep (its message is above)",
				  res[1]);
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

/* ---- rank 0 ------------------------------------------------------------- */

typedef struct root {
	cli_mpi_ctx *m;
	cli_mpi_pool *pool;
	const cli_mpi_point_spec *spec;
	size_t total, window, next_claim, next_deliver;
	const unsigned char *skip;
	cli_mpi_wire_row **ring;
	unsigned long *credits;   /* per rank: points it may still be sent */
	double *last_seen;        /* per rank: when it last sent something */
	char *gone;               /* per rank: said BYE or FAIL */
	int rr;                   /* round-robin start of the hand-out */
	int fatal;                /* stop handing out points */
	int cb_stopped;           /* on_row asked to stop: deliver nothing more */
	double timeout;
	kb_sweep_cb on_row;
	void *payload;
} root;

static int skipped(const root *R, size_t i)
{
	return R->skip && R->skip[i];
}

/* Puts a finished row into the reorder ring (takes it). */
static void store(root *R, cli_mpi_wire_row *w, int src)
{
	size_t i = (size_t)w->index;

	if (i < R->next_deliver || i >= R->next_deliver + R->window || i >= R->total ||
	    R->ring[i % R->window]) {
		if (!R->fatal)
			cli_error("rank %d sent a row for point %zu, which it was not given", src, i);
		R->fatal = 1;
		free(w);
		return;
	}
	R->ring[i % R->window] = w;
}

/* Passes every ready row that is next in order to on_row. */
static int deliver_ready(root *R)
{
	const cli_mpi_point_spec *sp = R->spec;
	char **values = calloc(sp->n_keys + 1, sizeof(*values));
	int rc = 0;

	if (!values)
		return cli_error("out of memory");
	while (!R->cb_stopped) {
		cli_mpi_wire_row *w;
		kb_sweep_row row;
		kb_result res;
		char *bench = NULL;
		size_t i, k;

		while (R->next_deliver < R->total && skipped(R, R->next_deliver))
			R->next_deliver++;
		if (R->next_deliver >= R->total)
			break;
		i = R->next_deliver;
		w = R->ring[i % R->window];
		if (!w)
			break;
		R->ring[i % R->window] = NULL;
		if ((rc = cli_mpi_pool_decode(R->pool, i, &bench, values)) != 0) {
			rc = cli_error("out of memory");
			free(w);
			break;
		}
		memset(&res, 0, sizeof(res));
		memcpy(res.bench, w->bench, sizeof(res.bench));
		res.threads = w->threads;
		res.workers = w->workers;
		res.data = w->data;
		res.sim_time_ps = w->sim_time_ps;
		res.events = w->events;
		res.records = w->records;
		res.commands = w->commands;
		res.dispatch_ps = w->dispatch_ps;
		res.tiles = w->tiles;
		res.dispatch_per_tile_ns = w->dispatch_per_tile_ns;
		res.wall_s = w->wall_s;
		res.events_per_s = w->events_per_s;
		memcpy(res.oplog_sha256, w->oplog_sha256, sizeof(res.oplog_sha256));
		res.max_abs_err = w->max_abs_err;
		res.max_rel_err = w->max_rel_err;
		res.pes = w->pes;
		row.index = i;
		row.total = R->total;
		row.bench = bench;
		row.n_keys = sp->n_keys;
		row.keys = sp->keys;
		row.values = (const char *const *)values;
		row.status = w->status;
		row.error = w->status ? w->error : "";
		row.result = w->status ? NULL : &res;
		if (R->on_row(&row, R->payload))
			R->cb_stopped = R->fatal = 1;
		R->next_deliver++;
		free(w);
		free(bench);
		for (k = 0; k < sp->n_keys; k++) {
			free(values[k]);
			values[k] = NULL;
		}
	}
	free(values);
	if (rc)
		R->fatal = 1;
	return rc;
}

/* Gives claimable points to ranks with credit; nonzero when it gave some. */
static int hand_out(root *R)
{
	int given = 0, tried = 0, r = R->rr;

	while (!R->fatal && tried < R->m->size) {
		uint64_t idx;
		int rc;

		while (R->next_claim < R->total && skipped(R, R->next_claim))
			R->next_claim++;
		if (R->next_claim >= R->total || R->next_claim >= R->next_deliver + R->window)
			break;
		if (R->gone[r] || R->credits[r] == 0) {
			r = (r + 1) % R->m->size;
			tried++;
			continue;
		}
		idx = R->next_claim++;
		R->credits[r]--;
		if (r == 0) {
			cli_mpi_pool_push(R->pool, (size_t)idx);
		} else if ((rc = send_bytes(&idx, sizeof(idx), r, TAG_WORK)) != MPI_SUCCESS) {
			mpi_fail(rc, "sending a point");
			cli_error("rank %d could not be reached", r);
			R->fatal = 1;
			break;
		}
		given = 1;
		tried = 0;
		r = (r + 1) % R->m->size;
	}
	R->rr = r;
	return given;
}

/* Handles every waiting message; nonzero when there was one. */
static int poll_messages(root *R)
{
	int got = 0;

	for (;;) {
		MPI_Status st;
		char *buf = NULL;
		int flag = 0, len = 0, src, rc;

		rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
		if (rc == MPI_SUCCESS && !flag)
			return got;
		if (rc == MPI_SUCCESS)
			rc = recv_probed(&st, &buf, &len);
		if (rc != MPI_SUCCESS) {
			free(buf);
			mpi_fail(rc, flag ? "receiving from a rank" : "probing for messages");
			if (flag)
				cli_error("rank %d: its message could not be received", st.MPI_SOURCE);
			R->fatal = 1;
			return got;
		}
		got = 1;
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
		case TAG_RESULT:
			if ((size_t)len < offsetof(cli_mpi_wire_row, error) + 1 ||
			    cli_mpi_wire_size((cli_mpi_wire_row *)buf) != (size_t)len) {
				cli_error("rank %d sent a malformed row", src);
				R->fatal = 1;
				break;
			}
			R->credits[src]++;
			store(R, (cli_mpi_wire_row *)buf, src);
			buf = NULL;
			break;
		case TAG_BYE:
			R->gone[src] = 1;
			R->credits[src] = 0;
			break;
		case TAG_FAIL:
			cli_error("rank %d failed: %s", src, buf);
			R->gone[src] = 1;
			R->credits[src] = 0;
			R->fatal = 1;
			break;
		default:  /* TAG_ALIVE */
			break;
		}
		free(buf);
	}
}

/* A rank that sent nothing for the timeout: name it and end the job. */
static void check_alive(root *R)
{
	double t = now_s();
	int r;

	for (r = 1; r < R->m->size; r++) {
		if (R->gone[r] || t - R->last_seen[r] <= R->timeout)
			continue;
		cli_error("rank %d sent nothing for %.0f s: it died or hangs; the rows written "
			  "so far stay (run the same command with --resume to complete the file)",
			  r, R->timeout);
		fflush(NULL);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

static int all_gone(const root *R)
{
	int r;

	for (r = 1; r < R->m->size; r++)
		if (!R->gone[r])
			return 0;
	return 1;
}

/* Takes the rows of rank 0's own pool; nonzero when there was one. */
static int take_local(root *R)
{
	cli_mpi_wire_row *w;
	int got = 0;

	while ((w = cli_mpi_pool_pop(R->pool))) {
		R->credits[0]++;
		store(R, w, 0);
		got = 1;
	}
	if (cli_mpi_pool_failed(R->pool) && !R->fatal) {
		cli_error("rank 0 failed: out of memory while running a point");
		R->fatal = 1;
	}
	return got;
}

static void stop_all(root *R)
{
	int r;

	for (r = 1; r < R->m->size; r++)
		if (!R->gone[r])
			send_bytes(NULL, 0, r, TAG_STOP);
}

int cli_mpi_sweep_run(cli_mpi_ctx *m, const cli_mpi_point_spec *spec, unsigned jobs, size_t total,
		      const unsigned char *skip, kb_sweep_cb on_row, void *payload)
{
	root R;
	size_t i;
	int r, rc = 0;

	memset(&R, 0, sizeof(R));
	R.m = m;
	R.spec = spec;
	R.total = total;
	R.skip = skip;
	R.on_row = on_row;
	R.payload = payload;
	R.timeout = timeout_s();
	R.window = (size_t)(total_jobs ? total_jobs : jobs) * WINDOW_PER_JOB;
	R.ring = calloc(R.window, sizeof(*R.ring));
	R.credits = calloc((size_t)m->size, sizeof(*R.credits));
	R.last_seen = calloc((size_t)m->size, sizeof(*R.last_seen));
	R.gone = calloc((size_t)m->size, 1);
	if (!R.ring || !R.credits || !R.last_seen || !R.gone ||
	    cli_mpi_pool_start(&R.pool, spec, jobs)) {
		rc = cli_error("out of memory");
		R.fatal = 1;
	}
	for (r = 0; r < m->size && R.last_seen; r++)
		R.last_seen[r] = now_s();
	if (R.credits)
		R.credits[0] = jobs;

	/* The sweep. */
	while (!R.fatal) {
		int active = take_local(&R);

		active |= poll_messages(&R);
		deliver_ready(&R);
		if (R.next_deliver >= R.total || R.fatal)
			break;
		active |= hand_out(&R);
		check_alive(&R);
		if (!active)
			cli_mpi_pool_wait(R.pool, POLL_NS);
	}

	/* The end: every other rank finishes its running points and says BYE;
	 * after a failure their rows are still written while they are next. */
	if (R.gone) {
		if (R.pool)
			cli_mpi_pool_drop_queued(R.pool);
		stop_all(&R);
		while (!all_gone(&R) || (R.pool && cli_mpi_pool_busy(R.pool))) {
			int active = R.pool ? take_local(&R) : 0;

			active |= poll_messages(&R);
			deliver_ready(&R);
			check_alive(&R);
			if (!active && R.pool)
				cli_mpi_pool_wait(R.pool, POLL_NS);
			else if (!active)
				nanosleep(&(struct timespec){ 0, POLL_NS }, NULL);
		}
		if (R.pool)
			take_local(&R);
		deliver_ready(&R);
	}
	if (R.fatal && !rc) {
		rc = CLI_FAIL;
		while (R.next_deliver < R.total && skipped(&R, R.next_deliver))
			R.next_deliver++;
		if (!R.cb_stopped && R.next_deliver < R.total)
			cli_error("sweep stopped before point %zu of %zu; the rows written stay "
				  "(run the same command with --resume to complete the file)",
				  R.next_deliver, R.total);
	}
	cli_mpi_pool_destroy(R.pool);
	for (i = 0; R.ring && i < R.window; i++)
		free(R.ring[i]);
	free(R.ring);
	free(R.credits);
	free(R.last_seen);
	free(R.gone);
	return rc;
}

/* ---- the other ranks ---------------------------------------------------- */

/* KERNBENCH_MPI_TEST_FAIL=RANK:N makes rank RANK fail after N rows (tests). */
static long test_fail_after(const cli_mpi_ctx *m)
{
	const char *e = getenv("KERNBENCH_MPI_TEST_FAIL");
	long rank, n;

	if (!e || sscanf(e, "%ld:%ld", &rank, &n) != 2 || rank != m->rank)
		return -1;
	return n;
}

static int worker_fail(const char *msg)
{
	send_bytes(msg, strlen(msg) + 1, 0, TAG_FAIL);
	return CLI_FAIL;
}

int cli_mpi_sweep_work(cli_mpi_ctx *m, const cli_mpi_point_spec *spec, unsigned jobs)
{
	cli_mpi_pool *pool = NULL;
	uint32_t n = jobs;
	double last_sent;
	long sent = 0, fail_after = test_fail_after(m);
	int stopping = 0, rc = 0;

	if (cli_mpi_pool_start(&pool, spec, jobs))
		return worker_fail("out of memory (could not start the pool of points)");
	if ((rc = send_bytes(&n, sizeof(n), 0, TAG_REQUEST)) != MPI_SUCCESS) {
		cli_mpi_pool_destroy(pool);
		return mpi_fail(rc, "asking rank 0 for points");
	}
	last_sent = now_s();
	for (;;) {
		cli_mpi_wire_row *w;
		MPI_Status st;
		int flag = 0, active = 0;

		/* Points and STOP from rank 0. */
		for (;;) {
			char *buf = NULL;
			int len = 0;

			rc = MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
			if (rc != MPI_SUCCESS || !flag)
				break;
			if ((rc = recv_probed(&st, &buf, &len)) != MPI_SUCCESS)
				break;
			active = 1;
			if (st.MPI_TAG == TAG_WORK && len == (int)sizeof(uint64_t)) {
				uint64_t idx;

				memcpy(&idx, buf, sizeof(idx));
				cli_mpi_pool_push(pool, (size_t)idx);
			} else if (st.MPI_TAG == TAG_STOP) {
				stopping = 1;
				cli_mpi_pool_drop_queued(pool);
			}
			free(buf);
		}
		if (rc != MPI_SUCCESS) {
			rc = mpi_fail(rc, "receiving from rank 0");
			break;
		}
		/* Finished rows to rank 0. */
		while ((w = cli_mpi_pool_pop(pool))) {
			rc = send_bytes(w, cli_mpi_wire_size(w), 0, TAG_RESULT);
			free(w);
			if (rc != MPI_SUCCESS)
				break;
			last_sent = now_s();
			active = 1;
			if (++sent == fail_after) {
				rc = worker_fail("injected failure (KERNBENCH_MPI_TEST_FAIL)");
				break;
			}
		}
		if (rc) {
			if (rc != CLI_FAIL)
				rc = mpi_fail(rc, "sending a row to rank 0");
			break;
		}
		if (cli_mpi_pool_failed(pool)) {
			rc = worker_fail("out of memory while running a point");
			break;
		}
		if (stopping && cli_mpi_pool_busy(pool) == 0) {
			while ((w = cli_mpi_pool_pop(pool))) { /* finished meanwhile */
				send_bytes(w, cli_mpi_wire_size(w), 0, TAG_RESULT);
				free(w);
			}
			send_bytes(NULL, 0, 0, TAG_BYE);
			break;
		}
		if (now_s() - last_sent >= HEARTBEAT_S) {
			send_bytes(NULL, 0, 0, TAG_ALIVE);
			last_sent = now_s();
		}
		if (!active)
			cli_mpi_pool_wait(pool, POLL_NS);
	}
	cli_mpi_pool_destroy(pool);
	return rc;
}
