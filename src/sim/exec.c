/*
 * Executors. All run the same LPs through kb__worker_window and give the
 * same results; they differ only in how many threads share the work.
 *
 * Sequential: one worker, no windows, no barriers.
 * Parallel (one thread per LP, or M:N): conservative windows. Everyone
 * agrees on the global earliest pending time T; events earlier than T + W
 * (W = the smallest latency of a link between workers) cannot be affected
 * by anything another worker does in this window, so each worker runs them
 * alone; then the workers meet, move delivered messages into their heaps
 * and repeat. T jumps over empty stretches of simulated time. A window with
 * little work is run by the coordinating thread alone (a parallel
 * threshold, as in SimGrid): that changes speed, never results.
 */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/err.h"
#include "sim/core_impl.h"

#define SEQ_BUDGET (1u << 16)

/* Everything before bound is final and no LP runs (kb_sim_config). */
static int window_hook(kb_sim *sim, kb_time bound, unsigned flags, kb_error *err)
{
	if (!sim->cfg.on_window)
		return KB_OK;
	return sim->cfg.on_window(sim->cfg.hook_ctx, bound, flags, err);
}

/* The first error by (time, LP id): the one a sequential run would meet. */
static kb_worker *first_error(kb_sim *sim)
{
	kb_worker *best = NULL;

	for (unsigned i = 0; i < sim->n_workers; i++) {
		kb_worker *w = &sim->workers[i];

		if (!w->err && w->alloc_failed) {
			kb__err(&w->error, KB_ENOMEM, "out of memory delivering messages");
			w->err = KB_ENOMEM;
			w->err_time = w->last_time;
			w->err_lp = 0;
		}
		if (w->err && (!best || w->err_time < best->err_time ||
			       (w->err_time == best->err_time && w->err_lp < best->err_lp)))
			best = w;
	}
	return best;
}

static int finish(kb_sim *sim, kb_error *err)
{
	kb_worker *bad = first_error(sim);
	int rc;

	for (unsigned i = 0; i < sim->n_workers; i++)
		if (sim->workers[i].last_time > sim->stats.end_time)
			sim->stats.end_time = sim->workers[i].last_time;
	if (bad) {
		/* Keep what is final: every record that ends before the error. */
		window_hook(sim, bad->err_time, KB_WINDOW_LAST, NULL);
		kb__err_copy(err, &bad->error);
		return bad->err;
	}
	if (atomic_load(&sim->stop))
		return kb__err(err, KB_ESTATE, "the simulation was stopped at t=%llu ps",
			       (unsigned long long)sim->stats.end_time);
	rc = window_hook(sim, KB_TIME_INF, KB_WINDOW_LAST, err);
	return rc;
}

int kb__exec_sequential(kb_sim *sim, kb_error *err)
{
	kb_worker *w = &sim->workers[0];

	kb__worker_drain(w);
	while (!w->err && !atomic_load_explicit(&sim->stop, memory_order_relaxed)) {
		kb_time t;
		int rc;

		kb__worker_window(w, KB_TIME_INF, SEQ_BUDGET);
		t = kb__worker_min(w);
		if (w->err || t == KB_TIME_INF)
			break;
		rc = window_hook(sim, t, 0, err);
		if (rc)
			return rc;
	}
	return finish(sim, err);
}

/* ---- dense windows: helpers claim whole workers' windows ----
 *
 * A dense window is run by the coordinator and up to (cores - 1) helper
 * threads, never more threads than cores: each claims whole workers in
 * turn (their LPs, heaps and node pools move as a unit), runs their
 * windows, meets the others at the barrier, then claims workers again to
 * drain their inboxes. The rest of the threads sleep. With a thread per
 * engine on a small machine this keeps oversubscription from costing a
 * context switch per thread per window; it changes speed, never results. */

static void help(kb_sim *sim)
{
	unsigned i;

	while ((i = atomic_fetch_add(&sim->claim_next, 1)) < sim->n_workers)
		if (kb__worker_min(&sim->workers[i]) < sim->bound)
			kb__worker_window(&sim->workers[i], sim->bound, UINT64_MAX);
	kb__barrier_wait(&sim->barrier);
	while ((i = atomic_fetch_add(&sim->drain_next, 1)) < sim->n_workers)
		kb__worker_drain(&sim->workers[i]);
	kb__barrier_wait(&sim->barrier);
}

/* Waits for a job generation other than seen; returns it. */
static unsigned wait_job(kb_sim *sim, unsigned seen)
{
	unsigned g, spin = sim->n_workers <= sim->ncpu ? 4000 : 16;

	for (unsigned i = 0; i < spin; i++)
		if ((g = atomic_load_explicit(&sim->job_gen, memory_order_acquire)) != seen)
			return g;
	atomic_fetch_add(&sim->job_sleepers, 1);
	while ((g = atomic_load(&sim->job_gen)) == seen)
		kb__futex_wait(&sim->job_gen, seen);
	atomic_fetch_sub(&sim->job_sleepers, 1);
	return g;
}

/* A ticket for job g; none when the job has its helpers or is gone. */
static int take_ticket(kb_sim *sim, unsigned g)
{
	uint64_t v = atomic_load(&sim->job);

	for (;;) {
		if ((unsigned)(v >> 32) != g || (unsigned)v >= atomic_load(&sim->helpers))
			return 0;
		if (atomic_compare_exchange_weak(&sim->job, &v, v + 1))
			return 1;
	}
}

static void *worker_main(void *arg)
{
	kb_sim *sim = ((kb_worker *)arg)->sim;
	unsigned seen = 0;

	for (;;) {
		seen = wait_job(sim, seen);
		if (atomic_load(&sim->quit))
			break;
		if (take_ticket(sim, seen))
			help(sim);
	}
	return NULL;
}

/* Publishes a job for `helpers` helpers; quit jobs wake everyone. */
static void post_job(kb_sim *sim, unsigned helpers)
{
	unsigned g = atomic_load(&sim->job_gen) + 1;

	atomic_store(&sim->helpers, helpers);
	atomic_store(&sim->barrier.parties, helpers + 1);
	atomic_store(&sim->claim_next, 0);
	atomic_store(&sim->drain_next, 0);
	atomic_store(&sim->job, (uint64_t)g << 32);
	atomic_store(&sim->job_gen, g);
	if (atomic_load(&sim->job_sleepers))
		kb__futex_wake(&sim->job_gen, atomic_load(&sim->quit) ? INT_MAX : (int)helpers);
}

static kb_time global_min(const kb_sim *sim, unsigned *active_out, kb_time *bound_out)
{
	kb_time t = KB_TIME_INF, b;
	unsigned active = 0;

	for (unsigned i = 0; i < sim->n_workers; i++) {
		kb_time m = kb__worker_min(&sim->workers[i]);

		if (m < t)
			t = m;
	}
	b = (t == KB_TIME_INF || KB_TIME_INF - t <= sim->window) ? KB_TIME_INF : t + sim->window;
	for (unsigned i = 0; i < sim->n_workers; i++)
		if (kb__worker_min(&sim->workers[i]) < b)
			active++;
	*active_out = active;
	*bound_out = b;
	return t;
}

/* Enough events in the window, on at least two workers, to pay for waking
 * a helper, and a core for it. */
static int window_is_dense(const kb_sim *sim, kb_time bound, unsigned active)
{
	size_t cap = sim->cfg.par_threshold, n = 0;

	if (active < 2 || sim->ncpu < 2)
		return 0;
	for (unsigned i = 0; i < sim->n_workers && n < cap; i++)
		n += kb__worker_count_below(&sim->workers[i], bound, cap - n);
	return n >= cap;
}

/* Finishes what the window hook set aside at the end of an earlier window. */
static int overlap_hook(kb_sim *sim, kb_error *err)
{
	if (!sim->cfg.on_overlap)
		return KB_OK;
	return sim->cfg.on_overlap(sim->cfg.hook_ctx, err);
}

static int run_window(kb_sim *sim, kb_time bound, unsigned active, int dense, kb_error *err)
{
	int rc;

	if (dense) {
		unsigned threads = active < sim->ncpu ? active : sim->ncpu;

		sim->bound = bound;
		post_job(sim, threads - 1);
		/* The coordinator runs the overlap hook (the runtime writes the
		 * op_log) while the helpers start the window; it claims workers
		 * too once done, so nobody waits. */
		rc = overlap_hook(sim, err);
		help(sim);
		sim->stats.parallel_windows++;
		return rc;
	}
	rc = overlap_hook(sim, err);
	if (rc)
		return rc;
	for (unsigned i = 0; i < sim->n_workers; i++)
		if (kb__worker_min(&sim->workers[i]) < bound)
			kb__worker_window(&sim->workers[i], bound, UINT64_MAX);
	for (unsigned i = 0; i < sim->n_workers; i++)
		kb__worker_drain(&sim->workers[i]);
	return KB_OK;
}

static int any_error(const kb_sim *sim)
{
	for (unsigned i = 0; i < sim->n_workers; i++)
		if (sim->workers[i].err || sim->workers[i].alloc_failed)
			return 1;
	return 0;
}

int kb__exec_parallel(kb_sim *sim, kb_error *err)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned started = 1;
	int rc = KB_OK;

	sim->ncpu = ncpu > 0 ? (unsigned)ncpu : 1;
	if (sim->ncpu > sim->n_workers)
		sim->ncpu = sim->n_workers;
	kb__barrier_init(&sim->barrier, 1, 4000);
	atomic_init(&sim->job, 0);
	atomic_init(&sim->job_gen, 0);
	atomic_init(&sim->job_sleepers, 0);
	for (; started < sim->n_workers; started++)
		if (pthread_create(&sim->workers[started].thread, NULL, worker_main,
				   &sim->workers[started]))
			break;
	if (started < sim->n_workers) {
		/* Run with the threads we have: re-size the barrier before anyone waits. */
		rc = kb__err(err, KB_ENOMEM, "cannot start worker thread %u of %u", started,
			     sim->n_workers);
		goto stop;
	}
	for (unsigned i = 0; i < sim->n_workers; i++)
		kb__worker_drain(&sim->workers[i]);
	while (!any_error(sim) && !atomic_load_explicit(&sim->stop, memory_order_relaxed)) {
		unsigned active;
		kb_time bound, t = global_min(sim, &active, &bound);

		if (t == KB_TIME_INF)
			break;
		rc = run_window(sim, bound, active, window_is_dense(sim, bound, active), err);
		sim->stats.windows++;
		if (rc)
			goto stop;
		/* Everything so far is before bound: the hook may set it aside
		 * for on_overlap during the next window. */
		rc = window_hook(sim, bound, KB_WINDOW_OVERLAP, err);
		if (rc)
			goto stop;
	}
stop:
	atomic_store(&sim->quit, 1);
	post_job(sim, 0);
	for (unsigned i = 1; i < started; i++)
		pthread_join(sim->workers[i].thread, NULL);
	if (rc)
		return rc;
	return finish(sim, err);
}
