/*
 * Running a sweep: a pool of worker threads, each running whole points via
 * kb_registry_run (the sweep's registry), and a reorder buffer that hands rows to the caller's
 * callback, on the calling thread, strictly in point order.
 *
 * Workers claim point indices in increasing order. A finished result goes
 * into a ring of `window` slots; the calling thread delivers slot
 * next_deliver as soon as it is ready, so results that finish early wait for
 * the ones before them. A worker may only claim an index below
 * next_deliver + window: that bounds the results held in memory, and makes
 * slot reuse safe, since the index that last used a slot is already
 * delivered (and its result freed).
 *
 * Waits are timed, so kb_sweep_cancel only has to set an atomic flag: it
 * never takes the run's locks and may be called from any thread at any time.
 * After a cancel (or a callback asking to stop) no new point starts; the
 * points in progress finish; rows that are ready and next in order are still
 * delivered on cancel (so a file keeps a prefix of the order), then the run
 * stops.
 *
 * A transport (kb_sweep_run_transport) takes part in the same claim order
 * and the same ring: the calling thread claims indices for it as it has
 * room, and stores the rows it brings back (the row encoding, decoded) in
 * the slots, beside the rows of the local workers. The serving side of a
 * transport (kb_sweep_serve) runs the same workers on indices it is given,
 * and hands back each row in the row encoding.
 */
#include "kernbench/sweep.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/altstack.h"
#include "base/err.h"
#include "sweep/sweep_impl.h"

/* How long a waiting thread sleeps before it looks at the cancel flag again. */
#define POLL_NS 20000000L
/* Results that may wait in the reorder buffer, per job. */
#define WINDOW_PER_JOB 4
/* How long the calling thread waits for a transport's row at a time. */
#define POLL_T_NS 2000000L

typedef struct slot {
	int ready;
	int status;
	char *error;          /* malloc'd message, NULL when status == 0 */
	kb_result *res;       /* NULL when status != 0 */
} slot;

typedef struct done_row {
	struct done_row *next;
	size_t index;
	char *json;             /* the row encoding; NULL: out of memory */
} done_row;

typedef struct run_ctx {
	const kb_sweep *s;
	const kb_sweep_transport *t;  /* NULL: local points only */
	unsigned remote;          /* points sent through t, not yet back */
	int t_rc;                 /* the transport's error: the sweep stops */
	kb_error t_err;
	/* Serving (kb_sweep_serve): the indices to run and the rows done. */
	int serve;
	size_t *queue, q_head, q_len, q_cap;
	done_row *done, **done_tail;
	const kb_topology *base;
	size_t total, window;
	pthread_mutex_t mu;
	pthread_cond_t cv_ready;  /* a slot became ready or a worker stopped */
	pthread_cond_t cv_space;  /* next_deliver moved */
	size_t next_claim;        /* all guarded by mu */
	size_t next_deliver;
	unsigned running;         /* points in progress */
	int stop;
	int oom;                  /* stopped for want of memory (a worker's) */
	slot *slots;
} run_ctx;

/* A worker out of memory (mu held): no new point starts, and the sweep
 * fails with KB_ENOMEM rather than as cancelled. */
static void stop_oom(run_ctx *c)
{
	c->stop = 1;
	c->oom = 1;
}

static int cancelled(const run_ctx *c)
{
	return c->stop || atomic_load(&((kb_sweep *)c->s)->cancel);
}

static int is_skipped(const kb_sweep *s, size_t i)
{
	return s->skip && s->skip[i];
}

/* Timed wait: wakes at the latest after POLL_NS to look at the cancel flag. */
static void wait_poll(pthread_cond_t *cv, pthread_mutex_t *mu)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += POLL_NS;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(cv, mu, &ts);
}

/* ---- one point -------------------------------------------------------- */

/* Bench parameters and topology of one point, built from its values. */
static int point_inputs(const kb_sweep *s, const kb_topology *base, const char *const *values,
			kb_params **params, kb_topology **topo, kb_error *err)
{
	size_t k;
	int rc;

	if ((rc = kb_params_create(params, err)) || (rc = kb_topology_clone(topo, base, err)))
		return rc;
	for (k = 0; k < s->n_keys; k++) {
		if (s->keys[k].is_set)
			rc = kb_topology_set(*topo, s->keys[k].name, values[k], err);
		else
			rc = kb_params_set(*params, s->keys[k].name, values[k], err);
		if (rc)
			return rc;
	}
	return 0;
}

void kb__sweep_run_one(const kb_sweep *s, const kb_topology *base, size_t i,
		       const char **values, int *status, char **error, kb_result **out)
{
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	kb_params *params = NULL;
	kb_topology *topo = NULL;
	kb_result *res = NULL;
	const char *bench = kb__sweep_decode(s, i, values);
	kb_error e;
	int rc;

	kb_error_clear(&e);
	rc = point_inputs(s, base, values, &params, &topo, &e);
	if (rc)
		goto done;
	res = malloc(sizeof(*res));
	if (!res) {
		rc = kb__err(&e, KB_ENOMEM, "out of memory");
		goto done;
	}
	*res = (kb_result)KB_RESULT_INIT;
	o.threads = s->opt.threads;
	o.data = s->opt.data;
	rc = kb_registry_run(kb__sweep_registry(s), bench, params, topo, &o, res, &e);
done:
	if (rc && res) {
		kb_result_clear(res);
		free(res);
		res = NULL;
	}
	*status = rc;
	*out = res;
	*error = rc ? strdup(kb__err_text(&e, rc)) : NULL;  /* NULL: the row says kb_strerror */
	kb_params_destroy(params);
	kb_topology_destroy(topo);
}

/* Runs point i; fills sl (status, error or result). Called without the lock. */
static void run_point(const run_ctx *c, size_t i, const char **values, slot *sl)
{
	kb__sweep_run_one(c->s, c->base, i, values, &sl->status, &sl->error, &sl->res);
}

/* ---- workers ---------------------------------------------------------- */

/* Next index to run, or total when there is none; called with the lock. */
/* Next index for the transport (no wait), or total; called with the lock. */
static size_t claim_now(run_ctx *c)
{
	while (c->next_claim < c->total && is_skipped(c->s, c->next_claim))
		c->next_claim++;
	if (cancelled(c) || c->next_claim >= c->total ||
	    c->next_claim >= c->next_deliver + c->window)
		return c->total;
	return c->next_claim++;
}

static size_t claim(run_ctx *c)
{
	for (;;) {
		while (c->next_claim < c->total && is_skipped(c->s, c->next_claim))
			c->next_claim++;
		if (cancelled(c) || c->next_claim >= c->total)
			return c->total;
		if (c->next_claim < c->next_deliver + c->window)
			return c->next_claim++;
		wait_poll(&c->cv_space, &c->mu);
	}
}

/* Point i's row as on_row and the row encoding see it. */
static void fill_row(const kb_sweep *s, size_t total, size_t i, const slot *sl,
		     const char **values, kb_sweep_row *row)
{
	row->size = sizeof(*row);
	row->index = i;
	row->total = total;
	row->bench = kb__sweep_decode(s, i, values);
	row->n_keys = s->n_keys;
	row->keys = s->key_names;
	row->values = values;
	row->status = sl->status;
	row->error = sl->status ? (sl->error ? sl->error : kb_strerror(sl->status)) : "";
	row->result = sl->status ? NULL : sl->res;
}

/* A point's row in the row encoding (NULL when out of memory). */
static char *encode(const kb_sweep *s, size_t total, size_t i, const char **values, slot *sl)
{
	kb_sweep_row row;
	json_t *o;
	char *text;

	fill_row(s, total, i, sl, values, &row);
	o = kb__sweep_row_json(s, &row);
	text = o ? kb__sweep_json_text(o) : NULL;
	json_decref(o);
	return text;
}

static void free_slot(slot *sl);

/* Serving: the next queued index, or total when stopping; with the lock. */
static size_t claim_queued(run_ctx *c)
{
	while (!c->stop && c->q_len == 0)
		wait_poll(&c->cv_space, &c->mu);
	if (c->q_len == 0)
		return c->total;
	c->q_len--;
	return c->queue[c->q_head++ % c->q_cap];
}

static void serve_worker(run_ctx *c)
{
	const char **values = calloc(c->s->n_keys + 1, sizeof(*values));
	size_t i;

	pthread_mutex_lock(&c->mu);
	while (values && (i = claim_queued(c)) < c->total) {
		slot sl = { 1, 0, NULL, NULL };
		done_row *d;

		c->running++;
		pthread_mutex_unlock(&c->mu);
		run_point(c, i, values, &sl);
		d = calloc(1, sizeof(*d));
		if (d) {
			d->index = i;
			d->json = encode(c->s, c->total, i, values, &sl);
		}
		free_slot(&sl);
		pthread_mutex_lock(&c->mu);
		c->running--;
		if (d) {
			*c->done_tail = d;
			c->done_tail = &d->next;
		} else {
			stop_oom(c);
		}
		pthread_cond_signal(&c->cv_ready);
	}
	if (!values)
		stop_oom(c);
	pthread_cond_signal(&c->cv_ready);
	pthread_mutex_unlock(&c->mu);
	free(values);
}

static void work(run_ctx *c)
{
	const char **values;
	size_t i;

	if (c->serve) {
		serve_worker(c);
		return;
	}
	values = calloc(c->s->n_keys + 1, sizeof(*values));
	pthread_mutex_lock(&c->mu);
	while (values && (i = claim(c)) < c->total) {
		slot done = { 1, 0, NULL, NULL };

		c->running++;
		pthread_mutex_unlock(&c->mu);
		run_point(c, i, values, &done);
		pthread_mutex_lock(&c->mu);
		c->slots[i % c->window] = done;
		c->running--;
		pthread_cond_signal(&c->cv_ready);
	}
	if (!values)
		stop_oom(c);  /* the caller reports it */
	pthread_cond_signal(&c->cv_ready);
	pthread_mutex_unlock(&c->mu);
	free(values);
}

/* A pool thread. Its points' kernels may run on it (a sequential point
 * runs its kernels on the calling thread): an application's SA_ONSTACK
 * handler must be able to run when one overflows its stack. */
static void *worker(void *arg)
{
	kb_altstack alt;

	kb__altstack_init(&alt);
	work(arg);
	kb__altstack_fini(&alt);
	return NULL;
}

static void free_slot(slot *sl)
{
	if (sl->res) {
		kb_result_clear(sl->res);
		free(sl->res);
	}
	free(sl->error);
	memset(sl, 0, sizeof(*sl));
}

/* ---- the transport ------------------------------------------------------ */

/* The transport failed: the sweep stops after the local points in progress
 * (the points sent away are given up); called with the lock. */
static void transport_failed(run_ctx *c, int rc, const kb_error *e)
{
	if (!c->t_rc) {
		c->t_rc = rc;
		kb__err_copy(&c->t_err, e);
	}
	c->stop = 1;
	c->remote = 0;
}

/* Hands claimable points to the transport, takes one row back (waiting a
 * little when none came). Called on the calling thread with the lock, which
 * it releases around the transport's callbacks. */
static void transport_step(run_ctx *c)
{
	const kb_sweep_transport *t = c->t;
	size_t room, idx;
	char *json = NULL;
	kb_error e;
	int r;

	pthread_mutex_unlock(&c->mu);
	kb_error_clear(&e);
	for (room = t->room(t->payload); room > 0; room--) {
		pthread_mutex_lock(&c->mu);
		idx = claim_now(c);
		c->remote += idx < c->total;
		pthread_mutex_unlock(&c->mu);
		if (idx >= c->total)
			break;
		if ((r = t->send(t->payload, idx, &e))) {
			pthread_mutex_lock(&c->mu);
			transport_failed(c, r, &e);
			return;
		}
	}
	r = t->receive(t->payload, POLL_T_NS, &idx, &json, &e);
	if (r == 1) {
		slot sl = { 1, 0, NULL, NULL };
		int rc = kb__sweep_row_decode(json, idx, &sl.status, &sl.error, &sl.res, &e);

		free(json);
		pthread_mutex_lock(&c->mu);
		if (!rc && (idx < c->next_deliver || idx >= c->next_deliver + c->window ||
			    idx >= c->total || c->slots[idx % c->window].ready || c->remote == 0))
			rc = kb__err(&e, KB_EPARSE, "a row for point %zu, which was not sent away",
				     idx);
		if (rc) {
			free_slot(&sl);
			transport_failed(c, rc, &e);
			return;
		}
		c->slots[idx % c->window] = sl;
		c->remote--;
		return;
	}
	pthread_mutex_lock(&c->mu);
	if (r < 0 || r > 1)
		transport_failed(c, r < 0 ? r : KB_EINVAL, &e);
}

/* ---- delivery --------------------------------------------------------- */

/* Calls on_row for point i (lock not held); returns the callback's answer. */
static int deliver(run_ctx *c, size_t i, slot *sl, const char **values, kb_sweep_cb on_row,
		   void *payload)
{
	kb_sweep_row row;

	fill_row(c->s, c->total, i, sl, values, &row);
	return on_row(&row, payload);
}

/*
 * The delivery loop on the calling thread; returns 0 when every point was
 * delivered, KB_ESTATE when the callback or kb_sweep_cancel stopped it.
 */
static int deliver_all(run_ctx *c, const char **values, kb_sweep_cb on_row, void *payload,
		       kb_error *err)
{
	int rc = 0;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		slot *sl;

		while (c->next_deliver < c->total && is_skipped(c->s, c->next_deliver))
			c->next_deliver++;
		if (c->next_deliver >= c->total)
			break;
		sl = &c->slots[c->next_deliver % c->window];
		if (sl->ready) {
			slot mine = *sl;
			size_t i = c->next_deliver;

			memset(sl, 0, sizeof(*sl));
			pthread_mutex_unlock(&c->mu);
			rc = deliver(c, i, &mine, values, on_row, payload);
			free_slot(&mine);
			pthread_mutex_lock(&c->mu);
			c->next_deliver++;
			pthread_cond_broadcast(&c->cv_space);
			if (rc) {
				c->stop = 1;
				rc = kb__err(err, KB_ESTATE, "sweep stopped by its row callback "
					     "after point %zu", i);
				break;
			}
			continue;
		}
		if (cancelled(c) && c->running == 0 && (c->remote == 0 || c->t_rc)) {
			if (c->t_rc) {
				kb__err_copy(err, &c->t_err);
				rc = c->t_rc;
			} else if (c->oom) {
				rc = kb__err(err, KB_ENOMEM, "out of memory running the sweep, "
					     "before point %zu of %zu", c->next_deliver, c->total);
			} else {
				rc = kb__err(err, KB_ESTATE, "sweep cancelled before point %zu of %zu",
					     c->next_deliver, c->total);
			}
			break;
		}
		if (c->t && !c->t_rc)
			transport_step(c);
		else
			wait_poll(&c->cv_ready, &c->mu);
	}
	c->stop = 1;
	pthread_cond_broadcast(&c->cv_space);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

static unsigned pool_size(const kb_sweep *s, size_t pending)
{
	long n = s->opt.jobs ? (long)s->opt.jobs : sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		n = 1;
	if ((size_t)n > pending)
		n = (long)pending;
	return (unsigned)n;
}

static size_t pending_points(const kb_sweep *s, size_t total)
{
	size_t i, n = 0;

	for (i = 0; i < total; i++)
		n += !is_skipped(s, i);
	return n;
}

/* Starts the pool, delivers, joins; c->slots and c->window are set. */
static int run_pool(run_ctx *c, unsigned jobs, const char **values, kb_sweep_cb on_row,
		    void *payload, kb_error *err)
{
	pthread_t *tids = calloc(jobs, sizeof(*tids));
	unsigned started = 0, t;
	int rc = 0;

	if (!tids)
		return kb__err(err, KB_ENOMEM, "out of memory");
	for (started = 0; started < jobs; started++)
		if (pthread_create(&tids[started], NULL, worker, c) != 0)
			break;
	if (started == 0)
		rc = kb__err(err, KB_ENOMEM, "could not start a sweep thread");
	else
		rc = deliver_all(c, values, on_row, payload, err);
	for (t = 0; t < started; t++)
		pthread_join(tids[t], NULL);
	free(tids);
	return rc;
}

static int init_ctx(run_ctx *c, const kb_sweep *s, size_t total, unsigned jobs, kb_error *err)
{
	memset(c, 0, sizeof(*c));
	c->s = s;
	c->total = total;
	c->window = (size_t)jobs * WINDOW_PER_JOB;
	c->done_tail = &c->done;
	c->slots = calloc(c->window, sizeof(*c->slots));
	if (!c->slots)
		return kb__err(err, KB_ENOMEM, "out of memory");
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv_ready, NULL);
	pthread_cond_init(&c->cv_space, NULL);
	return 0;
}

static void fini_ctx(run_ctx *c)
{
	size_t i;

	for (i = 0; i < c->window; i++)
		free_slot(&c->slots[i]);
	free(c->slots);
	free(c->queue);
	while (c->done) {
		done_row *d = c->done;

		c->done = d->next;
		free(d->json);
		free(d);
	}
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv_ready);
	pthread_cond_destroy(&c->cv_space);
}

static int run_with(kb_sweep *s, const kb_sweep_transport *t, kb_sweep_cb on_row,
		    void *payload, kb_error *err)
{
	kb_topology *def = NULL;
	const char **values = NULL;
	size_t total, pending;
	unsigned jobs;
	run_ctx c;
	int rc;

	kb_error_clear(err);
	if (!s || !on_row)
		return kb__err(err, KB_EINVAL, "kb_sweep_run: NULL argument");
	if (t && (t->version != KB_SWEEP_TRANSPORT_VERSION || !t->room || !t->send || !t->receive))
		return kb__err(err, KB_EINVAL, "kb_sweep_run_transport: a transport of version %u "
			       "with room, send and receive is needed (this library: %u)",
			       t->version, KB_SWEEP_TRANSPORT_VERSION);
	if (s->running)
		return kb__err(err, KB_ESTATE, "the sweep is already running");
	if (s->n_benches == 0)
		return kb__err(err, KB_ESTATE, "the sweep has no bench");
	total = kb_sweep_points(s);
	pending = pending_points(s, total);
	if (pending == 0)
		return 0;
	if (!s->topo && (rc = kb_topology_default(&def, err)))
		return rc;
	values = calloc(s->n_keys + 1, sizeof(*values));
	if (!values) {
		kb_topology_destroy(def);
		return kb__err(err, KB_ENOMEM, "out of memory");
	}
	jobs = pool_size(s, pending);
	rc = init_ctx(&c, s, total, jobs + (t ? t->remote_jobs : 0), err);
	if (rc == 0) {
		c.t = t;
		c.base = s->topo ? s->topo : def;
		s->running = 1;
		rc = run_pool(&c, jobs, values, on_row, payload, err);
		s->running = 0;
		fini_ctx(&c);
	}
	free(values);
	kb_topology_destroy(def);
	return rc;
}

KB_API int kb_sweep_run(kb_sweep *s, kb_sweep_cb on_row, void *payload, kb_error *err)
{
	return run_with(s, NULL, on_row, payload, err);
}

KB_API int kb_sweep_run_transport(kb_sweep *s, const kb_sweep_transport *t, kb_sweep_cb on_row,
				  void *payload, kb_error *err)
{
	if (!t) {
		kb_error_clear(err);
		return kb__err(err, KB_EINVAL, "kb_sweep_run_transport: NULL transport");
	}
	return run_with(s, t, on_row, payload, err);
}

/* ---- serving a transport ------------------------------------------------ */

/* Hands the finished rows to src->done (lock not held); nonzero: stop. */
static int hand_back(run_ctx *c, const kb_sweep_source *src, kb_error *err)
{
	done_row *d;
	int rc = 0;

	pthread_mutex_lock(&c->mu);
	d = c->done;
	c->done = NULL;
	c->done_tail = &c->done;
	pthread_mutex_unlock(&c->mu);
	while (d) {
		done_row *next = d->next;

		if (!rc && !d->json)
			rc = kb__err(err, KB_ENOMEM, "out of memory encoding the row of point %zu",
				     d->index);
		else if (!rc && src->done(src->payload, d->index, d->json))
			rc = kb__err(err, KB_ESTATE, "serving stopped after point %zu", d->index);
		else if (!rc)
			d->json = NULL;  /* the callee's now */
		free(d->json);
		free(d);
		d = next;
	}
	return rc;
}

static int serve_loop(run_ctx *c, const kb_sweep_source *src, kb_error *err)
{
	int rc = 0, stopping = 0;

	for (;;) {
		size_t idx;
		int r, idle;

		if ((rc = hand_back(c, src, err)))
			break;
		pthread_mutex_lock(&c->mu);
		idle = c->running == 0 && c->q_len == 0 && !c->done;
		if (c->stop && !stopping)
			rc = kb__err(err, KB_ENOMEM, "out of memory in the pool of points");
		pthread_mutex_unlock(&c->mu);
		if (rc || (stopping && idle))
			break;
		r = src->next(src->payload, POLL_T_NS, &idx);
		if (stopping)
			continue;  /* only for the transport's sake (heartbeats) */
		pthread_mutex_lock(&c->mu);
		if (r == 1 && idx < c->total && c->q_len < c->q_cap) {
			c->queue[(c->q_head + c->q_len++) % c->q_cap] = idx;
			pthread_cond_signal(&c->cv_space);
		} else if (r == 1) {
			rc = kb__err(err, KB_ERANGE, "point %zu out of range or more points than "
				     "the queue holds (%zu)", idx, c->q_cap);
		} else if (r < 0) {
			stopping = 1;
			c->q_len = 0;  /* not started: dropped */
		}
		pthread_mutex_unlock(&c->mu);
		if (rc)
			break;
	}
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	c->q_len = 0;
	pthread_cond_broadcast(&c->cv_space);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

KB_API int kb_sweep_serve(const kb_sweep *s, const kb_sweep_source *src, kb_error *err)
{
	kb_topology *def = NULL;
	pthread_t *tids = NULL;
	unsigned jobs, started = 0;
	run_ctx c;
	int rc;

	kb_error_clear(err);
	if (!s || !src || !src->next || !src->done || src->version != KB_SWEEP_TRANSPORT_VERSION)
		return kb__err(err, KB_EINVAL, "kb_sweep_serve: NULL argument or a source of "
			       "another version");
	if (s->n_benches == 0)
		return kb__err(err, KB_ESTATE, "the sweep has no bench");
	jobs = pool_size(s, (size_t)-1);
	if (!s->topo && (rc = kb_topology_default(&def, err)))
		return rc;
	rc = init_ctx(&c, s, kb_sweep_points(s), jobs, err);
	if (rc) {
		kb_topology_destroy(def);
		return rc;
	}
	c.serve = 1;
	c.base = s->topo ? s->topo : def;
	/* The transport sends at most the points it was told it may (jobs in
	 * flight); the queue holds the window's worth anyway. */
	c.q_cap = c.window;
	c.queue = calloc(c.q_cap, sizeof(*c.queue));
	tids = calloc(jobs, sizeof(*tids));
	if (!c.queue || !tids)
		rc = kb__err(err, KB_ENOMEM, "out of memory");
	for (; !rc && started < jobs; started++)
		if (pthread_create(&tids[started], NULL, worker, &c) != 0)
			break;
	if (!rc && started == 0)
		rc = kb__err(err, KB_ENOMEM, "could not start a sweep thread");
	if (!rc)
		rc = serve_loop(&c, src, err);
	for (unsigned t = 0; t < started; t++)
		pthread_join(tids[t], NULL);
	if (!rc)
		rc = hand_back(&c, src, err);
	free(tids);
	fini_ctx(&c);
	kb_topology_destroy(def);
	return rc;
}

KB_API int kb_sweep_run_point(char **row_json, const kb_sweep *s, size_t index, kb_error *err)
{
	kb_topology *def = NULL;
	const char **values;
	slot sl = { 1, 0, NULL, NULL };
	int rc;

	kb_error_clear(err);
	if (!row_json || !s)
		return kb__err(err, KB_EINVAL, "kb_sweep_run_point: NULL argument");
	if (index >= kb_sweep_points(s))
		return kb__err(err, KB_ERANGE, "point %zu out of range (the sweep has %zu)", index,
			       kb_sweep_points(s));
	if (!s->topo && (rc = kb_topology_default(&def, err)))
		return rc;
	if (!(values = calloc(s->n_keys + 1, sizeof(*values)))) {
		kb_topology_destroy(def);
		return kb__err(err, KB_ENOMEM, "out of memory");
	}
	kb__sweep_run_one(s, s->topo ? s->topo : def, index, values, &sl.status, &sl.error, &sl.res);
	*row_json = encode(s, kb_sweep_points(s), index, values, &sl);
	free_slot(&sl);
	free((void *)values);
	kb_topology_destroy(def);
	return *row_json ? 0 : kb__err(err, KB_ENOMEM, "out of memory");
}

KB_API int kb_sweep_deliver_json(const kb_sweep *s, size_t index, const char *row_json,
				 kb_sweep_cb on_row, void *payload, kb_error *err)
{
	const char **values;
	kb_sweep_row row;
	slot sl = { 1, 0, NULL, NULL };
	int rc;

	kb_error_clear(err);
	if (!s || !row_json || !on_row)
		return kb__err(err, KB_EINVAL, "kb_sweep_deliver_json: NULL argument");
	if (index >= kb_sweep_points(s))
		return kb__err(err, KB_ERANGE, "point %zu out of range (the sweep has %zu)", index,
			       kb_sweep_points(s));
	if ((rc = kb__sweep_row_decode(row_json, index, &sl.status, &sl.error, &sl.res, err)))
		return rc;
	if (!(values = calloc(s->n_keys + 1, sizeof(*values)))) {
		free_slot(&sl);
		return kb__err(err, KB_ENOMEM, "out of memory");
	}
	fill_row(s, kb_sweep_points(s), index, &sl, values, &row);
	rc = on_row(&row, payload) ? kb__err(err, KB_ESTATE, "stopped by the row callback after "
					     "point %zu", index) : 0;
	free_slot(&sl);
	free((void *)values);
	return rc;
}
