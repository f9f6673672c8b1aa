/*
 * The points of one MPI rank: a pool of threads, each taking a queued point
 * index, running it and putting the finished row (as an cli_mpi_wire_row) on a
 * done list for the rank's main thread, which alone talks to MPI.
 *
 * A point runs as a one-point kb_sweep: the point's bench, each swept key
 * with the point's single value, the same base topology and options. That is
 * what kb_sweep_run does for that point in a single-process sweep (values
 * are split on commas and trimmed, so a single value splits to itself), so
 * the row is the same wherever it runs; and the library needs no MPI and no
 * private entry point.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/mpi_sweep.h"

typedef struct node {
	struct node *next;
	size_t index;
	cli_mpi_wire_row *row;
} node;

struct cli_mpi_pool {
	const cli_mpi_point_spec *spec;
	pthread_mutex_t mu;
	pthread_cond_t cv_work;    /* a point was queued, or stop */
	pthread_cond_t cv_done;    /* a row is done */
	node *q_head, *q_tail;     /* queued points */
	node *d_head, *d_tail;     /* finished rows */
	size_t queued, running;
	int stop, failed;
	pthread_t *tids;
	unsigned n_threads;
};

size_t cli_mpi_wire_size(const cli_mpi_wire_row *w)
{
	return offsetof(cli_mpi_wire_row, error) + (size_t)w->err_len + 1;
}

/* ---- one point --------------------------------------------------------- */

static cli_mpi_wire_row *wire_from_row(const kb_sweep_row *row)
{
	const char *e = row->status ? row->error : "";
	size_t n = strlen(e);
	cli_mpi_wire_row *w = calloc(1, offsetof(cli_mpi_wire_row, error) + n + 1);
	const kb_result *r = row->result;

	if (!w)
		return NULL;
	w->status = row->status;
	w->err_len = (uint32_t)n;
	memcpy(w->error, e, n + 1);
	if (row->status == 0 && r) {
		w->threads = r->threads;
		w->data = r->data;
		w->workers = r->workers;
		w->pes = r->pes;
		w->sim_time_ps = r->sim_time_ps;
		w->events = r->events;
		w->records = r->records;
		w->commands = r->commands;
		w->dispatch_ps = r->dispatch_ps;
		w->tiles = r->tiles;
		w->dispatch_per_tile_ns = r->dispatch_per_tile_ns;
		w->wall_s = r->wall_s;
		w->events_per_s = r->events_per_s;
		w->max_abs_err = r->max_abs_err;
		w->max_rel_err = r->max_rel_err;
		memcpy(w->bench, r->bench, sizeof(w->bench));
		w->bench[sizeof(w->bench) - 1] = '\0';
		memcpy(w->oplog_sha256, r->oplog_sha256, sizeof(w->oplog_sha256));
		w->oplog_sha256[sizeof(w->oplog_sha256) - 1] = '\0';
	}
	return w;
}

static int take_row(const kb_sweep_row *row, void *payload)
{
	cli_mpi_wire_row **out = payload;

	free(*out);
	*out = wire_from_row(row);
	return *out == NULL;
}

static void free_strs(char *bench, char **values, size_t n)
{
	size_t k;

	free(bench);
	for (k = 0; values && k < n; k++)
		free(values[k]);
	free(values);
}

int cli_mpi_pool_decode(cli_mpi_pool *p, size_t index, char **bench, char **values)
{
	const cli_mpi_point_spec *sp = p->spec;
	const char *const *v;
	const char *b;
	size_t k;
	int rc;

	pthread_mutex_lock(&p->mu);
	rc = kb_sweep_point(sp->s, index, &b, &v, NULL);
	if (rc == 0) {
		memset(values, 0, sp->n_keys * sizeof(*values));
		*bench = strdup(b);
		for (k = 0; k < sp->n_keys; k++)
			values[k] = strdup(v[k]);
		for (k = 0; k < sp->n_keys && *bench; k++)
			if (!values[k])
				break;
		if (!*bench || k < sp->n_keys)
			rc = KB_ENOMEM;
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* Runs point index; NULL when it could not be run at all (memory). */
static cli_mpi_wire_row *run_one(cli_mpi_pool *p, size_t index)
{
	const cli_mpi_point_spec *sp = p->spec;
	kb_sweep_options o = KB_SWEEP_OPTIONS_INIT;
	char **values = calloc(sp->n_keys + 1, sizeof(*values));
	char *bench = NULL;
	cli_mpi_wire_row *w = NULL;
	kb_sweep *one = NULL;
	size_t k;
	int rc;

	if (!values)
		return NULL;
	o.jobs = 1;
	o.registry = cli_registry;
	o.threads = sp->threads;
	o.data = sp->data;
	rc = cli_mpi_pool_decode(p, index, &bench, values);
	if (rc == 0)
		rc = kb_sweep_create(&one, &o, NULL);
	if (rc == 0)
		rc = kb_sweep_set_topology(one, sp->topo, NULL);
	if (rc == 0)
		rc = kb_sweep_add_bench(one, bench, NULL);
	for (k = 0; rc == 0 && k < sp->n_keys; k++)
		rc = k < sp->n_params ? kb_sweep_add_param(one, sp->keys[k], values[k], NULL)
				      : kb_sweep_add_set(one, sp->keys[k], values[k], NULL);
	if (rc == 0)
		rc = kb_sweep_run(one, take_row, &w, NULL);
	if (rc && w) {
		free(w);
		w = NULL;
	}
	if (w)
		w->index = index;
	kb_sweep_destroy(one);
	free_strs(bench, values, sp->n_keys);
	return w;
}

/* ---- the pool ---------------------------------------------------------- */

static void *worker(void *arg)
{
	cli_mpi_pool *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		node *n;

		while (!p->q_head && !p->stop)
			pthread_cond_wait(&p->cv_work, &p->mu);
		if (!p->q_head)
			break;
		n = p->q_head;
		p->q_head = n->next;
		if (!p->q_head)
			p->q_tail = NULL;
		p->queued--;
		p->running++;
		pthread_mutex_unlock(&p->mu);
		n->row = run_one(p, n->index);
		n->next = NULL;
		pthread_mutex_lock(&p->mu);
		p->running--;
		if (!n->row) {
			p->failed = 1;
			free(n);
		} else {
			if (p->d_tail)
				p->d_tail->next = n;
			else
				p->d_head = n;
			p->d_tail = n;
		}
		pthread_cond_broadcast(&p->cv_done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int cli_mpi_pool_start(cli_mpi_pool **out, const cli_mpi_point_spec *spec, unsigned jobs)
{
	cli_mpi_pool *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return KB_ENOMEM;
	p->spec = spec;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv_work, NULL);
	pthread_cond_init(&p->cv_done, NULL);
	p->tids = calloc(jobs ? jobs : 1, sizeof(*p->tids));
	if (!p->tids) {
		cli_mpi_pool_destroy(p);
		return KB_ENOMEM;
	}
	for (p->n_threads = 0; p->n_threads < jobs; p->n_threads++)
		if (pthread_create(&p->tids[p->n_threads], NULL, worker, p) != 0)
			break;
	if (p->n_threads == 0) {
		cli_mpi_pool_destroy(p);
		return KB_ENOMEM;
	}
	*out = p;
	return 0;
}

void cli_mpi_pool_push(cli_mpi_pool *p, size_t index)
{
	node *n = calloc(1, sizeof(*n));

	pthread_mutex_lock(&p->mu);
	if (!n) {
		p->failed = 1;
	} else {
		n->index = index;
		if (p->q_tail)
			p->q_tail->next = n;
		else
			p->q_head = n;
		p->q_tail = n;
		p->queued++;
		pthread_cond_signal(&p->cv_work);
	}
	pthread_mutex_unlock(&p->mu);
}

cli_mpi_wire_row *cli_mpi_pool_pop(cli_mpi_pool *p)
{
	cli_mpi_wire_row *w = NULL;
	node *n;

	pthread_mutex_lock(&p->mu);
	n = p->d_head;
	if (n) {
		p->d_head = n->next;
		if (!p->d_head)
			p->d_tail = NULL;
	}
	pthread_mutex_unlock(&p->mu);
	if (n) {
		w = n->row;
		free(n);
	}
	return w;
}

size_t cli_mpi_pool_busy(cli_mpi_pool *p)
{
	size_t n;

	pthread_mutex_lock(&p->mu);
	n = p->queued + p->running;
	pthread_mutex_unlock(&p->mu);
	return n;
}

void cli_mpi_pool_drop_queued(cli_mpi_pool *p)
{
	node *n;

	pthread_mutex_lock(&p->mu);
	while ((n = p->q_head)) {
		p->q_head = n->next;
		free(n);
	}
	p->q_tail = NULL;
	p->queued = 0;
	pthread_mutex_unlock(&p->mu);
}

void cli_mpi_pool_wait(cli_mpi_pool *p, long ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += ns;
	while (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&p->mu);
	if (!p->d_head && !p->failed)
		pthread_cond_timedwait(&p->cv_done, &p->mu, &ts);
	pthread_mutex_unlock(&p->mu);
}

int cli_mpi_pool_failed(cli_mpi_pool *p)
{
	int f;

	pthread_mutex_lock(&p->mu);
	f = p->failed;
	pthread_mutex_unlock(&p->mu);
	return f;
}

void cli_mpi_pool_destroy(cli_mpi_pool *p)
{
	unsigned t;
	cli_mpi_wire_row *w;

	if (!p)
		return;
	cli_mpi_pool_drop_queued(p);
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->cv_work);
	pthread_mutex_unlock(&p->mu);
	for (t = 0; t < p->n_threads; t++)
		pthread_join(p->tids[t], NULL);
	while ((w = cli_mpi_pool_pop(p)))
		free(w);
	free(p->tids);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv_work);
	pthread_cond_destroy(&p->cv_done);
	free(p);
}
