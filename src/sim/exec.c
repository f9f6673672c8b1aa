/*
 * Executors. All run the same LPs through kb__worker_window and give the
 * same results; they differ only in how many threads share the work.
 *
 * Sequential: one worker, no windows, no barriers.
 * Parallel (one thread per LP, or M:N): conservative windows. Everyone
 * agrees on a bound B: the earliest time at which a message from one
 * worker can reach another. Each worker's sends are bounded below by its
 * horizon H (its earliest pending event, or later where the model says
 * its PEs cannot send outside before then), and every link out of it is
 * at least its shortest one, out_lat; so B = min over workers of
 * H + out_lat, which is at least T + W (T the global earliest pending
 * time, W the smallest latency between workers). Events earlier than B
 * cannot be affected by anything another worker does in this window, so
 * each worker runs them alone; then the workers meet, move delivered
 * messages into their heaps and repeat. A chain of messages through a
 * third worker only arrives later. T jumps over empty stretches of
 * simulated time. A window with little work is run by the coordinating
 * thread alone (a parallel threshold, as in SimGrid): that changes speed,
 * never results.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/altstack.h"
#include "base/err.h"
#include "sim/core_impl.h"

/* Events the sequential executor runs between window hooks: few enough
 * that the op_log records they write (about 0.4 per event, 110 bytes
 * each) are merged while still in cache; 65536 wrote ~3 MB between
 * merges, and decode opt2 ran 15-20% slower (issue 13). 1024 rather than
 * 2048: a serial run's two text buffers (the one written, the one being
 * hashed) each touch ~42 KB instead of ~84 KB, 22 page faults fewer at
 * decode S_kv=262144 (~2 us each here) for ~1,400 instructions a window. */
#define SEQ_BUDGET (1u << 10)
#define WINDOW_EVENTS (1u << 15)
/* The same in auto's stretches on one thread, which end on time: at a
 * run's start (each PE's first commands lowered, its memory touched) 1024
 * events took 4 ms on 64 PEs, twice a trial. */
#define STRETCH_BUDGET (1u << 8)

/* Everything before bound is final and no LP runs (kb_sim_config). */
static int window_hook(kb_sim *sim, kb_time bound, unsigned flags, kb_error *err)
{
	uint64_t t0;
	int rc;

	if (!sim->cfg.on_window)
		return KB_OK;
	t0 = kb__now_ns();
	rc = sim->cfg.on_window(sim->cfg.hook_ctx, bound, flags, err);
	sim->stats.ns_oplog += kb__now_ns() - t0;
	return rc;
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

typedef struct auto_choice auto_choice;
static int stretch_over(const kb_sim *sim, const auto_choice *c);

/* run_alone's loop; with c, until auto's stretch is over (*over), at a
 * time boundary: every event before the returned bound has run, none
 * after it, and the hook has had every record before it. */
static int run_windows(kb_sim *sim, kb_worker *w, const auto_choice *c, int *over, kb_error *err)
{
	/* failed: an LP failed in a window before auto's stretch on one
	 * thread (no LP may run after its error, as in any executor) */
	while (!w->err && !atomic_load_explicit(&sim->stop, memory_order_relaxed) &&
	       !atomic_load_explicit(&sim->failed, memory_order_relaxed)) {
		kb_time t;
		int rc;

		kb__worker_run(w, c ? STRETCH_BUDGET : SEQ_BUDGET);
		t = kb__worker_min(w);
		if (w->err || t == KB_TIME_INF)
			break;
		if (c && stretch_over(sim, c)) {
			/* The rest of time t too, so that windows start clean. */
			kb__worker_close(w);
			kb__worker_window(w, t + 1, UINT64_MAX);
			t = kb__worker_min(w);
			if (w->err || t == KB_TIME_INF)
				break;
			*over = 1;
			return window_hook(sim, t, 0, err);
		}
		rc = window_hook(sim, t, 0, err);
		if (rc)
			return rc;
	}
	return KB_OK;
}

/* One worker with every LP runs everything in order (with c: until auto's
 * stretch is over, *over). The close is not redundant: a loop stopped for
 * its budget keeps its bands (kb__worker_run), and run_windows leaves
 * after one when a stop is asked for or the hook fails; band events are
 * in no heap key, which kb__sim_destroy's discard and auto's windows
 * read. Where the loop ran dry or failed, or a stretch ended (closed
 * there, before its bounded loop), the bands are closed already and this
 * costs one test (bands_close with nb 0). */
static int run_alone(kb_sim *sim, kb_worker *w, const auto_choice *c, int *over, kb_error *err)
{
	int rc = run_windows(sim, w, c, over, err);

	kb__worker_close(w);
	return rc;
}

int kb__exec_sequential(kb_sim *sim, kb_error *err)
{
	int rc;

	if (sim->cfg.on_threads)
		sim->cfg.on_threads(sim->cfg.hook_ctx, 1);
	kb__worker_drain(&sim->workers[0]);
	rc = run_alone(sim, &sim->workers[0], NULL, NULL, err);
	return rc ? rc : finish(sim, err);
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

/* The earliest time at which w may send to another worker; enough: a
 * bound the caller does not need to see exceeded. */
static kb_time worker_horizon(const kb_worker *w, kb_time enough)
{
	kb_time t = kb__worker_min(w), h = KB_TIME_INF;

	if (!w->covered || t == KB_TIME_INF)
		return t;
	for (size_t i = 0; i < w->n_hlps && h > t; i++) {
		kb_lp *lp = w->hlps[i];
		kb_time x = lp->type->horizon(lp, t, enough);

		if (x < h)
			h = x;
	}
	return h < t ? t : h;
}

static kb_time sat_add(kb_time a, kb_time b)
{
	return KB_TIME_INF - a <= b ? KB_TIME_INF : a + b;
}

/* A horizon the drain worked out, where it answers this question (below
 * its enough it is exact; at or past it, it is good for any enough up to
 * that), or asked now. */
static kb_time known_horizon(const kb_worker *w, kb_time enough)
{
	if (w->hz_ok && (w->hz < w->hz_enough || enough <= w->hz_enough))
		return w->hz;
	return worker_horizon(w, enough);
}

/* Runs one worker's window and notes its events and time. */
static void run_worker(kb_worker *w, kb_time bound)
{
	uint64_t e0 = w->events, t0 = kb__now_ns();

	w->hz_ok = 0;
	kb__worker_window(w, bound, UINT64_MAX);
	w->win_ns = kb__now_ns() - t0;
	w->win_events = w->events - e0;
}

/* Claims w for job gen: nobody else runs it in this job. */
static int claim(atomic_uint *stamp, unsigned gen)
{
	return atomic_load_explicit(stamp, memory_order_relaxed) != gen &&
	       atomic_exchange_explicit(stamp, gen, memory_order_relaxed) != gen;
}

/* Runs the window's workers: first those thread `me` ran last (their
 * LPs' heaps, lanes and PE state are in its core's cache: a worker that
 * moved between cores every window cost its whole state in misses), then
 * any left, from the other end, so that threads meet in the middle. */
static void claim_windows(kb_sim *sim, unsigned me, unsigned gen)
{
	unsigned n = sim->n_active;

	for (unsigned i = 0; i < n; i++) {
		kb_worker *w = sim->active[i];

		if (atomic_load_explicit(&w->home, memory_order_relaxed) == me && claim(&w->taken, gen))
			run_worker(w, sim->bound);
	}
	for (unsigned i = n; i-- > 0;) {
		kb_worker *w = sim->active[i];

		if (claim(&w->taken, gen)) {
			atomic_store_explicit(&w->home, me, memory_order_relaxed);
			run_worker(w, sim->bound);
		}
	}
}

/* Drains every worker's inboxes, each on its home thread where it can,
 * and works out its horizon for the next window there: in parallel,
 * where the coordinator alone would ask every PE in turn. */
static void claim_drains(kb_sim *sim, unsigned me, unsigned gen)
{
	for (int pass = 0; pass < 2; pass++)
		for (unsigned i = 0; i < sim->n_workers; i++) {
			kb_worker *w = &sim->workers[i];

			if ((!pass && atomic_load_explicit(&w->home, memory_order_relaxed) != me) ||
			    !claim(&w->drained, gen))
				continue;
			kb__worker_drain(w);
			if (sim->horizons && w->covered) {
				w->hz_enough = sat_add(kb__worker_min(w), sim->hz_span);
				w->hz = worker_horizon(w, w->hz_enough);
				w->hz_ok = 1;
			}
		}
}

/* One thread's part of a dense window: me is 0 on the coordinator, the
 * helper thread's index otherwise; gen the job. */
static void help(kb_sim *sim, unsigned me, unsigned gen)
{
	uint64_t t0 = kb__now_ns(), t1, t2, t3, t4;

	/* The coordinator sinks the op_log set aside (on_overlap); the others
	 * first merge their share of it. */
	if (me && sim->cfg.on_share) {
		sim->cfg.on_share(sim->cfg.hook_ctx);
		t1 = kb__now_ns();
		atomic_fetch_add_explicit(&sim->ns_share, t1 - t0, memory_order_relaxed);
		t0 = t1;
	}
	claim_windows(sim, me, gen);
	if (me)
		atomic_fetch_sub_explicit(&sim->busy, 1, memory_order_release);
	t1 = kb__now_ns();
	kb__barrier_wait(&sim->barrier);
	t2 = kb__now_ns();
	claim_drains(sim, me, gen);
	t3 = kb__now_ns();
	kb__barrier_wait(&sim->barrier);
	t4 = kb__now_ns();
	atomic_fetch_add_explicit(&sim->ns_events, t1 - t0, memory_order_relaxed);
	atomic_fetch_add_explicit(&sim->ns_barrier, (t2 - t1) + (t4 - t3), memory_order_relaxed);
	atomic_fetch_add_explicit(&sim->ns_drain, t3 - t2, memory_order_relaxed);
}

/* First homes (and after a regroup): consecutive workers, neighbouring
 * PEs, on one thread. Between windows only. */
static void set_homes(kb_sim *sim)
{
	for (unsigned i = 0; i < sim->n_workers; i++) {
		kb_worker *w = &sim->workers[i];

		atomic_store(&w->home, (unsigned)((uint64_t)i * sim->ncpu / sim->n_workers));
		atomic_store(&w->taken, 0);
		atomic_store(&w->drained, 0);
	}
}

/* Waits for a job generation other than seen; returns it. */
static unsigned wait_job(kb_sim *sim, unsigned seen)
{
	unsigned g, spin = 4000;

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
	unsigned seen = 0, me = ((kb_worker *)arg)->index;
	kb_altstack alt;

	/* Kernels run here: an application's SA_ONSTACK handler must be able
	 * to run when one overflows its stack (kb_kernel_stack_fault). */
	kb__altstack_init(&alt);
	for (;;) {
		seen = wait_job(sim, seen);
		if (atomic_load(&sim->quit))
			break;
		if (take_ticket(sim, seen))
			help(sim, me, seen);
	}
	kb__altstack_fini(&alt);
	return NULL;
}

/* Publishes a job for `helpers` helpers (returns its generation); quit
 * jobs wake everyone. */
static unsigned post_job(kb_sim *sim, unsigned helpers)
{
	unsigned g = atomic_load(&sim->job_gen) + 1;

	if (g == 0)
		g = 1;   /* 0 is the stamp of a worker never claimed */

	atomic_store(&sim->helpers, helpers);
	atomic_store(&sim->busy, helpers);
	atomic_store(&sim->barrier.parties, helpers + 1);
	atomic_store(&sim->job, (uint64_t)g << 32);
	atomic_store(&sim->job_gen, g);
	if (atomic_load(&sim->job_sleepers))
		kb__futex_wake(&sim->job_gen, atomic_load(&sim->quit) ? INT_MAX : (int)helpers);
	return g;
}

/* ---- the coordinator's heap of worker minima ----
 *
 * Keyed by each worker's earliest pending event (then index), so that
 * finding the next window costs the workers that have events in it, not
 * every worker: T is the top, the active workers are the top's subtree
 * below the bound. After a solo window only the workers that ran and
 * those they sent to (dirty) are re-keyed; after a parallel window, whose
 * drain may have touched any worker, the heap is rebuilt. */

static int wkey_less(const kb_worker *a, const kb_worker *b)
{
	return a->hkey < b->hkey || (a->hkey == b->hkey && a->index < b->index);
}

static void wheap_put(kb_sim *sim, size_t i, kb_worker *w)
{
	sim->wheap[i] = w;
	w->hpos = i;
}

static void wheap_down(kb_sim *sim, kb_worker *w)
{
	size_t i = w->hpos, n = sim->n_workers;

	for (;;) {
		size_t l = 2 * i + 1, m;

		if (l >= n)
			break;
		m = l + 1 < n && wkey_less(sim->wheap[l + 1], sim->wheap[l]) ? l + 1 : l;
		if (!wkey_less(sim->wheap[m], w))
			break;
		wheap_put(sim, i, sim->wheap[m]);
		i = m;
	}
	wheap_put(sim, i, w);
}

/* Re-keys w and restores the heap. */
static void wheap_fix(kb_sim *sim, kb_worker *w)
{
	size_t i = w->hpos;

	w->hkey = kb__worker_min(w);
	w->dirty = 0;
	w->hz_ok = 0;   /* it ran, or was sent to */
	while (i > 0 && wkey_less(w, sim->wheap[(i - 1) / 2])) {
		wheap_put(sim, i, sim->wheap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	wheap_put(sim, i, w);
	wheap_down(sim, w);
}

static void wheap_build(kb_sim *sim)
{
	for (unsigned i = 0; i < sim->n_workers; i++) {
		kb_worker *w = &sim->workers[i];

		w->hkey = kb__worker_min(w);
		w->dirty = 0;
		wheap_put(sim, i, w);
	}
	for (size_t i = sim->n_workers / 2; i-- > 0;)
		wheap_down(sim, sim->wheap[i]);
	sim->n_dirty = 0;
}

/* After a solo window: re-key the workers that ran and those sent to. */
static void wheap_update(kb_sim *sim)
{
	for (unsigned i = 0; i < sim->n_active; i++)
		wheap_fix(sim, sim->active[i]);
	for (unsigned i = 0; i < sim->n_dirty; i++)
		if (sim->dirty[i]->dirty)
			wheap_fix(sim, sim->dirty[i]);
	sim->n_dirty = 0;
}

/* The workers of the heap's subtree at i with events before bound. */
static void collect_active(kb_sim *sim, size_t i, kb_time bound)
{
	if (i >= sim->n_workers || sim->wheap[i]->hkey >= bound)
		return;
	sim->active[sim->n_active++] = sim->wheap[i];
	collect_active(sim, 2 * i + 1, bound);
	collect_active(sim, 2 * i + 2, bound);
}

/* The earliest (horizon + link out) of the subtree at i, below b: a
 * worker's horizon is never before its minimum, so a subtree whose
 * minimum plus the shortest link out reaches b cannot lower it. */
static kb_time horizon_bound(const kb_sim *sim, size_t i, kb_time b)
{
	const kb_worker *w;
	kb_time h;

	if (i >= sim->n_workers)
		return b;
	w = sim->wheap[i];
	if (sat_add(w->hkey, sim->min_out_lat) >= b)
		return b;
	h = sat_add(known_horizon(w, b - (b > w->out_lat ? w->out_lat : b)), w->out_lat);
	if (h < b)
		b = h;
	b = horizon_bound(sim, 2 * i + 1, b);
	return horizon_bound(sim, 2 * i + 2, b);
}

/* How long a window may be: near WINDOW_EVENTS events at the moving rate. */
static double window_len(const kb_sim *sim)
{
	return sim->rate > 0 ? (double)WINDOW_EVENTS / sim->rate : 64.0 * (double)sim->window;
}

/* Every worker's heap is empty (the windows' heap keys it at its root). */
static int run_over(const kb_sim *sim)
{
	return !sim->n_workers || sim->wheap[0]->hkey == KB_TIME_INF;
}

/* The global earliest pending time T (returned), the window's bound B,
 * and the workers with events before B (sim->active). Horizons can make
 * a window the whole run: it is capped near WINDOW_EVENTS events (by the
 * moving rate; 64 shortest windows while there is none yet), so the op_log
 * buffers a bounded number of records and merges one window's records
 * while the next runs. A shorter bound is always safe. */
static kb_time global_min(kb_sim *sim, kb_time *bound_out)
{
	kb_time t = sim->n_workers ? sim->wheap[0]->hkey : KB_TIME_INF, b;

	sim->n_active = 0;
	if (t == KB_TIME_INF) {
		*bound_out = KB_TIME_INF;
		return t;
	}
	if (sim->horizons) {
		double len = window_len(sim);

		b = len >= (double)(KB_TIME_INF - t) ? KB_TIME_INF : t + (kb_time)len;
		if (b < sat_add(t, sim->window))
			b = sat_add(t, sim->window);
		b = horizon_bound(sim, 0, b);
	} else {
		b = sat_add(t, sim->window);
	}
	collect_active(sim, 0, b);
	*bound_out = b;
	return t;
}

/* Enough events in the window, on at least two workers, to pay for waking
 * a helper, and a core for it. A window's events are mostly made inside
 * it (chains of events), so what is pending at its start undercounts a
 * long window: the rate of events per simulated picosecond seen so far (a
 * moving average) says what a window of this length will hold. */
static int holds(const kb_sim *sim, kb_time t, kb_time bound, size_t cap)
{
	size_t n = 0;

	if (bound == KB_TIME_INF || sim->rate * (double)(bound - t) >= (double)cap)
		return 1;
	for (unsigned i = 0; i < sim->n_active && n < cap; i++)
		n += kb__worker_count_below(sim->active[i], bound, cap - n);
	return n >= cap;
}

/* A raised threshold is probed again: one window in PROBE_EVERY of those
 * the configured threshold would run in parallel still is, and judged, so
 * that a threshold raised while the machine was busy comes back down. */
#define PROBE_EVERY 16

static int window_is_dense(kb_sim *sim, kb_time t, kb_time bound)
{
	if (sim->n_active < 2 || sim->ncpu < 2)
		return 0;
	if (holds(sim, t, bound, sim->threshold))
		return 1;
	return sim->threshold > sim->cfg.par_threshold &&
	       holds(sim, t, bound, sim->cfg.par_threshold) && ++sim->probes % PROBE_EVERY == 0;
}

/* Does what the window hook set aside at the end of earlier windows:
 * with busy, while the helpers run this one (the rest may wait for a
 * later window), else all of it. */
static int overlap_hook(kb_sim *sim, const atomic_uint *busy, kb_error *err)
{
	uint64_t t0;
	int rc;

	if (!sim->cfg.on_overlap)
		return KB_OK;
	t0 = kb__now_ns();
	rc = sim->cfg.on_overlap(sim->cfg.hook_ctx, busy, err);
	sim->stats.ns_oplog += kb__now_ns() - t0;
	return rc;
}

static void update_rate(kb_sim *sim, kb_time t, kb_time bound, uint64_t events)
{
	double r;

	if (bound != KB_TIME_INF && bound > t) {
		r = (double)events / (double)(bound - t);
		sim->rate = sim->stats.windows ? 0.75 * sim->rate + 0.25 * r : r;
	}
}

/* The parallel threshold adapts to what windows cost here: the coordinator
 * alone costs ns_event per event (a moving average of its windows); a
 * parallel window of e events that took longer than e * ns_event did not
 * pay for waking the others and the barriers. When most of a batch of
 * parallel windows did not pay, the threshold rises at once to what the
 * batch's overhead says pays (at least double); when nearly all did, it
 * halves again (never below the configured one). */
#define JUDGE_BATCH 8

/* After a window (wall: its ns on the coordinator, op_log work not
 * counted): prices an event from what each worker's thread spent on its
 * events, and judges a parallel window against that price. */
static void judge_window(kb_sim *sim, int dense, unsigned threads, uint64_t wall, uint64_t events,
			 uint64_t ns)
{
	if (events >= 8) {
		double c = (double)ns / (double)events;

		sim->ns_event = sim->ns_event > 0 ? 0.875 * sim->ns_event + 0.125 * c : c;
	}
	/* A profiled run (KB_EXEC_PROFILE, for kbbench project's model of
	 * more cores) keeps the configured threshold: which windows run in
	 * parallel then depends on the model, not on this machine's load. */
	if (!dense || sim->ns_event <= 0 || sim->profile)
		return;
	/* Overhead: what the window took beyond its events shared out. */
	sim->overhead += (double)wall - (double)events * sim->ns_event / (double)threads;
	if ((double)wall > (double)events * sim->ns_event)
		sim->losses++;
	else
		sim->wins++;
	if (sim->wins + sim->losses < JUDGE_BATCH)
		return;
	if (sim->losses > sim->wins && sim->threshold < (1u << 24)) {
		/* e events pay when e c (1 - 1/p) > overhead */
		double pays = sim->overhead / JUDGE_BATCH /
			      (sim->ns_event * (1.0 - 1.0 / (double)threads));

		sim->threshold = pays > 2.0 * sim->threshold
					 ? (pays < (double)(1u << 24) ? (unsigned)pays : 1u << 24)
					 : 2 * sim->threshold;
	} else if (sim->losses * 4 < sim->wins && sim->threshold / 2 >= sim->cfg.par_threshold)
		sim->threshold /= 2;
	sim->wins = sim->losses = 0;
	sim->overhead = 0;
}

static int run_window(kb_sim *sim, kb_time bound, int dense, kb_error *err)
{
	uint64_t t0, t1;
	int rc;

	if (dense) {
		unsigned threads = sim->n_active < sim->ncpu ? sim->n_active : sim->ncpu, gen;
		double span = 2.0 * window_len(sim);

		sim->bound = bound;
		sim->solo = 0;
		/* The drains ask horizons this far ahead: the next window's
		 * bound lies within one length of its T (twice: the rate moves). */
		sim->hz_span = span >= (double)KB_TIME_INF ? KB_TIME_INF : (kb_time)span;
		gen = post_job(sim, threads - 1);

		/* The coordinator runs the overlap hook (the runtime writes the
		 * op_log, a pipeline stage that may lag) while the helpers start
		 * the window; it claims workers too once done, and stops as soon
		 * as the helpers are done, so nobody waits for it. */
		rc = overlap_hook(sim, &sim->busy, err);
		help(sim, 0, gen);
		sim->stats.parallel_windows++;
		return rc;
	}
	rc = overlap_hook(sim, NULL, err);
	if (rc)
		return rc;
	/* Alone, messages go straight into heaps: no inbox to drain. */
	sim->bound = bound;
	sim->solo = 1;
	t0 = kb__now_ns();
	for (unsigned i = 0; i < sim->n_active; i++)
		run_worker(sim->active[i], bound);
	t1 = kb__now_ns();
	atomic_fetch_add_explicit(&sim->ns_events, t1 - t0, memory_order_relaxed);
	atomic_fetch_add_explicit(&sim->ns_drain, kb__now_ns() - t1, memory_order_relaxed);
	return KB_OK;
}

/* Windows too small to pay. The executors that choose their own shape
 * (auto, and --threads 0, a worker per engine) adapt when, over at least
 * ADAPT_WINDOWS windows, finding windows (and the drains, where the
 * horizons are worked out after a parallel window) cost more than a tenth
 * of running the events, or none of STARVED_WINDOWS windows in a row was worth
 * running in parallel: a worker per engine regroups every PE whole on a
 * worker (links between PEs are longer, and PEs give horizons); PEs whole
 * go on sequentially (every LP on one worker, no windows). A thread count
 * asked for keeps its windows. Speed only: the bytes never change. */
#define ADAPT_WINDOWS 256
#define STARVED_WINDOWS 1024

static int starved(const kb_sim *sim)
{
	uint64_t wins = sim->stats.windows - sim->adapt_windows;
	uint64_t next = sim->stats.ns_next + atomic_load_explicit(&sim->ns_drain, memory_order_relaxed) -
			sim->adapt_next;
	uint64_t ev = atomic_load_explicit(&sim->ns_events, memory_order_relaxed) - sim->adapt_events;

	if (sim->cfg.threads != KB_SIM_THREADS_AUTO && sim->cfg.threads != 0)
		return 0;
	if (sim->adapt_every)
		return wins >= sim->adapt_every;
	return sim->sparse_run >= STARVED_WINDOWS || (wins >= ADAPT_WINDOWS && 10 * next > ev);
}

/* Regroups after starved windows; *alone: the rest runs sequentially. */
/* The shortest link out of any worker (horizon_bound's pruning). */
static void set_min_out_lat(kb_sim *sim)
{
	sim->min_out_lat = KB_TIME_INF;
	for (unsigned i = 0; i < sim->n_workers; i++)
		if (sim->workers[i].out_lat < sim->min_out_lat)
			sim->min_out_lat = sim->workers[i].out_lat;
}

/* kb__sim_regroup between windows (groups as there), and the window
 * state of the new partition: its links, no horizon worked out, the heap
 * of worker minima, the threads' homes; starved() judges from here. */
static int regroup(kb_sim *sim, unsigned groups)
{
	if (kb__sim_regroup(sim, groups))
		return KB_ENOMEM;
	sim->sparse_run = 0;
	sim->adapt_windows = sim->stats.windows;
	sim->adapt_next = sim->stats.ns_next + atomic_load(&sim->ns_drain);
	sim->adapt_events = atomic_load(&sim->ns_events);
	set_min_out_lat(sim);
	sim->stats.window = sim->window;
	for (unsigned i = 0; i < sim->n_workers; i++)
		sim->workers[i].hz_ok = 0;
	wheap_build(sim);
	set_homes(sim);
	return KB_OK;
}

static int adapt(kb_sim *sim, int *alone)
{
	int per_pe = sim->per_lp && sim->n_pes > 1 && sim->n_pes < sim->n_lps;

	if (regroup(sim, per_pe ? sim->n_pes : 1))
		return KB_ENOMEM;
	*alone = !per_pe;
	sim->stats.gathered = per_pe ? 1 : 2;
	return KB_OK;
}

static int any_error(kb_sim *sim)
{
	return atomic_load_explicit(&sim->failed, memory_order_relaxed);
}

/* The window's events and their ns, from the workers that ran it; clears
 * their per-window figures. */
static void window_sums(kb_sim *sim, uint64_t *events, uint64_t *ns)
{
	*events = *ns = 0;
	for (unsigned i = 0; i < sim->n_active; i++) {
		kb_worker *w = sim->active[i];

		*events += w->win_events;
		*ns += w->win_ns;
		w->win_events = w->win_ns = 0;
	}
}

/* One line per window of the per-window profile (KB_EXEC_PROFILE). */
static void profile_window(kb_sim *sim, kb_time t, kb_time bound, int dense, uint64_t ns_next,
			   uint64_t ns_log, uint64_t ns_share, uint64_t ns_drain)
{
	FILE *f = sim->profile;

	fprintf(f, "%llu %llu %llu %d %llu %llu %llu %llu", (unsigned long long)sim->stats.windows,
		(unsigned long long)t, (unsigned long long)bound, dense, (unsigned long long)ns_next,
		(unsigned long long)ns_log, (unsigned long long)ns_share, (unsigned long long)ns_drain);
	for (unsigned i = 0; i < sim->n_workers; i++) {
		kb_worker *w = &sim->workers[i];

		fprintf(f, " %llu %llu", (unsigned long long)w->win_events,
			(unsigned long long)w->win_ns);
	}
	fputc('\n', f);
}

static void profile_open(kb_sim *sim)
{
	const char *path = getenv("KB_EXEC_PROFILE");
	FILE *f;

	if (!path || !*path || !(f = fopen(path, "w")))
		return;
	fprintf(f, "# kernbench executor profile: workers %u pes %u cores %u window_ps %llu\n"
		   "# window t_ps bound_ps dense ns_next ns_oplog ns_share ns_drain, then per worker: events ns\n"
		   "# (ns_oplog: the coordinator's op_log work, ns_share: the other threads'; ns_drain:\n"
		   "# every thread's inbox drains and the horizons worked out with them)\n",
		sim->n_workers, sim->n_pes, sim->ncpu, (unsigned long long)sim->window);
	sim->profile = f;
}

/* Nothing is left to run: the op_log the last window set aside is merged
 * by every thread and sunk by the coordinator, as a window with no
 * workers (else the coordinator alone would merge it at the end, a serial
 * tail of a window's records). */
static int share_last(kb_sim *sim, kb_error *err)
{
	uint64_t log0 = sim->stats.ns_oplog;
	uint64_t share0 = atomic_load_explicit(&sim->ns_share, memory_order_relaxed);
	unsigned gen;
	int rc;

	if (sim->ncpu < 2 || !sim->cfg.on_share)
		return KB_OK;
	sim->n_active = 0;
	sim->solo = 0;
	gen = post_job(sim, sim->ncpu - 1);
	rc = overlap_hook(sim, NULL, err);
	help(sim, 0, gen);
	if (sim->profile)
		profile_window(sim, KB_TIME_INF, KB_TIME_INF, 1, 0, sim->stats.ns_oplog - log0,
			       atomic_load(&sim->ns_share) - share0, 0);
	return rc;
}

/* ---- auto: windows, or one thread ----
 *
 * The default is the fastest correct choice (ARCHITECTURE.md), and which
 * is faster, windows on several threads or the sequential loop on one,
 * depends on the machine as much as on the model: on two cores a
 * multi-PE decode run's windows pay for barriers, and for merging the
 * op_log's lanes before the hash, which the sequential loop (its bands,
 * its records already in order) does not, and ran 4-17% slower after
 * stop 22 (and 2x slower while the VM's second core was slow); on 16
 * cores the windows win. So auto measures both, as events per wall ns
 * with the op_log's work in them: a trial stretch in windows, one on one
 * thread, and the faster for KEEP_NS, four times longer each time a
 * trial of the other confirms it (a shared machine's load moves), then a
 * trial of the other again. The run's start (each PE's first commands
 * lowered, its memory touched, ~500 events a PE) is slower per event
 * whatever runs it, and on 64 PEs it is half of a short run: judged, it
 * made whichever trial came second look faster, and the choice flip at
 * every stretch. It runs in windows, as before auto chose (they share
 * it out where there are cores), and is not judged. Stretches end
 * between windows, or at a time boundary of the sequential loop. Speed
 * only: the bytes never change.
 * KB_EXEC_TRIAL_EVENTS=N (tests): no start, and stretches of about N
 * events, each the other way, so that both hand-overs run many times in a
 * run. */
#define TRIAL_NS 2000000u
#define KEEP_NS (2 * (uint64_t)TRIAL_NS)
#define KEEP_MAX_NS (512 * (uint64_t)TRIAL_NS)
#define WARM_EVENTS_PER_PE 512

struct auto_choice {
	int on;              /* auto, with more than one worker */
	int alone;           /* this stretch runs on one thread */
	int trial;           /* this stretch is a trial */
	uint64_t warm;       /* events of the run's start (0: over) */
	uint64_t t0, e0;     /* its start: wall ns, events run */
	uint64_t until;      /* its end (wall ns) */
	uint64_t keep;       /* the next kept stretch (ns) */
	uint64_t every;      /* KB_EXEC_TRIAL_EVENTS, or 0 */
	double rate[2];      /* events per ns measured last: windows, alone (0: none yet) */
};

static uint64_t events_run(const kb_sim *sim)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < sim->n_workers; i++)
		n += sim->workers[i].events;
	return n;
}

static int stretch_over(const kb_sim *sim, const auto_choice *c)
{
	if (c->warm)
		return events_run(sim) >= c->warm;
	return c->every ? events_run(sim) - c->e0 >= c->every : kb__now_ns() >= c->until;
}

/* The stretch that ends now: its rate, and the next one's way and length. */
static void next_stretch(kb_sim *sim, auto_choice *c)
{
	uint64_t now = kb__now_ns(), ev = events_run(sim);
	int m = c->alone, next = !m;

	if (c->warm) {
		/* the start is over: the trial in windows begins */
		c->warm = 0;
		c->t0 = now;
		c->e0 = ev;
		c->until = now + TRIAL_NS;
		return;
	}
	c->rate[m] = now > c->t0 ? (double)(ev - c->e0) / (double)(now - c->t0) : 0;
	if (!c->every && c->trial && c->rate[!m] > 0) {
		/* A trial: the faster way is kept, the longer the more often
		 * it is confirmed. */
		next = c->rate[m] > c->rate[!m] ? m : !m;
		c->keep = next == m ? KEEP_NS : (4 * c->keep < KEEP_MAX_NS ? 4 * c->keep : KEEP_MAX_NS);
		c->trial = 0;
	} else {
		c->trial = 1;   /* the other way, for a trial */
	}
	if (next != m)
		sim->stats.switches++;
	c->alone = next;
	c->t0 = now;
	c->e0 = ev;
	c->until = now + (c->trial ? TRIAL_NS : c->keep);
}

static void auto_start(kb_sim *sim, auto_choice *c)
{
	const char *every = getenv("KB_EXEC_TRIAL_EVENTS");

	memset(c, 0, sizeof(*c));
	c->on = sim->cfg.threads == KB_SIM_THREADS_AUTO && sim->n_workers > 1 && !sim->profile &&
		!sim->adapt_every;
	c->every = every ? strtoull(every, NULL, 10) : 0;
	c->warm = c->every ? 0 : (uint64_t)WARM_EVENTS_PER_PE * sim->n_pes;
	c->trial = 1;
	c->keep = KEEP_NS / 4;   /* the first choice keeps KEEP_NS, whichever wins */
	c->t0 = kb__now_ns();
	c->until = c->t0 + TRIAL_NS;
}

/* One thread runs every LP from here (the others wait for a window): the
 * hook may take the records in order, as a sequential run's (no merge). */
static void go_serial(kb_sim *sim)
{
	sim->solo = 1;
	sim->bound = KB_TIME_INF;
	if (sim->cfg.on_threads)
		sim->cfg.on_threads(sim->cfg.hook_ctx, 1);
}

/* From windows to one thread, between windows (every inbox drained):
 * every LP on worker 0. */
static int gather(kb_sim *sim)
{
	if (regroup(sim, 1))
		return KB_ENOMEM;
	sim->stats.gathered = 2;
	go_serial(sim);
	return KB_OK;
}

/* Back to windows, at a time boundary of the sequential loop: the LPs
 * spread over the workers as place_lps spread them, each LP's records in
 * its own lane again, and the window state of that partition. */
static int spread(kb_sim *sim)
{
	if (regroup(sim, sim->n_workers))
		return KB_ENOMEM;
	sim->stats.gathered = 0;
	if (sim->cfg.on_threads)
		sim->cfg.on_threads(sim->cfg.hook_ctx, sim->ncpu);
	return KB_OK;
}

/* Runs the gathered LPs on one thread, for good (c NULL) or for auto's
 * stretches until it goes back to windows (*ended 0) or the run is over
 * (*ended 1). */
static int alone_stretches(kb_sim *sim, auto_choice *c, int *ended, kb_error *err)
{
	kb_worker *w0 = &sim->workers[0];
	uint64_t t0 = kb__now_ns(), log0 = sim->stats.ns_oplog, e0 = events_run(sim);
	int rc = KB_OK, over;

	*ended = 1;
	for (;;) {
		over = 0;
		rc = run_alone(sim, w0, c, &over, err);
		/* without c (the rest of a run, to its end) over stays 0;
		 * the test says so where next_stretch reads c */
		if (rc || !over || !c)
			break;
		next_stretch(sim, c);
		if (!c->alone) {
			*ended = 0;
			break;
		}
	}
	sim->stats.alone_events += events_run(sim) - e0;
	atomic_fetch_add(&sim->ns_events, kb__now_ns() - t0 - (sim->stats.ns_oplog - log0));
	if (!rc && !*ended && spread(sim))
		rc = kb__err(err, KB_ENOMEM, "out of memory regrouping the LPs");
	return rc;
}

int kb__exec_parallel(kb_sim *sim, kb_error *err)
{
	unsigned started = 1, threads;
	uint64_t wall0 = kb__now_ns();
	auto_choice ac;
	int rc = KB_OK;

	if (sim->ncpu > sim->n_workers)
		sim->ncpu = sim->n_workers;
	/* Only ncpu threads ever run a window: start no more. */
	threads = sim->ncpu;
	sim->stats.threads = threads;
	sim->wheap = malloc((sim->n_workers + 1) * sizeof(*sim->wheap));
	sim->active = malloc((sim->n_workers + 1) * sizeof(*sim->active));
	sim->dirty = malloc((sim->n_workers + 1) * sizeof(*sim->dirty));
	set_min_out_lat(sim);
	if (!sim->wheap || !sim->active || !sim->dirty) {
		rc = kb__err(err, KB_ENOMEM, "out of memory starting the parallel executor");
		goto stop;
	}
	kb__barrier_init(&sim->barrier, 1, 4000);
	set_homes(sim);
	atomic_init(&sim->job, 0);
	atomic_init(&sim->job_gen, 0);
	atomic_init(&sim->job_sleepers, 0);
	atomic_init(&sim->ns_events, 0);
	atomic_init(&sim->ns_barrier, 0);
	atomic_init(&sim->ns_drain, 0);
	atomic_init(&sim->ns_share, 0);
	atomic_init(&sim->busy, 0);
	profile_open(sim);
	/* Tests: regroup after this many windows, whatever they cost. */
	if (getenv("KB_EXEC_ADAPT_WINDOWS"))
		sim->adapt_every = strtoull(getenv("KB_EXEC_ADAPT_WINDOWS"), NULL, 10);
	sim->threshold = sim->cfg.par_threshold;
	auto_start(sim, &ac);
	if (sim->cfg.on_threads)
		sim->cfg.on_threads(sim->cfg.hook_ctx, threads);
	for (; started < threads; started++)
		if (pthread_create(&sim->workers[started].thread, NULL, worker_main,
				   &sim->workers[started]))
			break;
	if (started < threads) {
		/* Run with the threads we have: re-size the barrier before anyone waits. */
		rc = kb__err(err, KB_ENOMEM, "cannot start worker thread %u of %u", started, threads);
		goto stop;
	}
	for (unsigned i = 0; i < sim->n_workers; i++)
		kb__worker_drain(&sim->workers[i]);
	wheap_build(sim);
	while (!any_error(sim) && !atomic_load_explicit(&sim->stop, memory_order_relaxed)) {
		uint64_t t0 = kb__now_ns(), t1, ns_next, log0 = sim->stats.ns_oplog, events, ns;
		uint64_t share0 = atomic_load_explicit(&sim->ns_share, memory_order_relaxed);
		uint64_t drain0 = atomic_load_explicit(&sim->ns_drain, memory_order_relaxed);
		kb_time bound, t = global_min(sim, &bound);
		unsigned used;
		int dense;

		if (t == KB_TIME_INF) {
			rc = share_last(sim, err);
			break;
		}
		dense = window_is_dense(sim, t, bound);
		ns_next = kb__now_ns() - t0;
		sim->stats.ns_next += ns_next;
		t1 = kb__now_ns();
		rc = run_window(sim, bound, dense, err);
		t1 = kb__now_ns() - t1 - (sim->stats.ns_oplog - log0);
		t0 = kb__now_ns();
		if (dense)
			wheap_build(sim);
		else
			wheap_update(sim);
		if (sim->profile)
			profile_window(sim, t, bound, dense, ns_next, sim->stats.ns_oplog - log0,
				       atomic_load(&sim->ns_share) - share0,
				       atomic_load(&sim->ns_drain) - drain0);
		used = sim->n_active < sim->ncpu ? sim->n_active : sim->ncpu;
		window_sums(sim, &events, &ns);
		update_rate(sim, t, bound, events);
		judge_window(sim, dense, used, t1, events, ns);
		sim->stats.ns_next += kb__now_ns() - t0;
		sim->sparse_run = dense ? 0 : sim->sparse_run + 1;
		sim->stats.windows++;
		if (rc)
			goto stop;
		/* Everything so far is before bound: the hook may set it aside
		 * for on_overlap during the next window. */
		rc = window_hook(sim, bound, KB_WINDOW_OVERLAP, err);
		if (rc)
			goto stop;
		/* An LP failed in this window: nothing more runs (not even on
		 * one thread, below); finish reports the first error. */
		if (any_error(sim))
			break;
		/* Nothing left: the next turn ends the run (share_last). Neither
		 * a starved regroup nor auto's hand-over to one thread would run
		 * an event; auto's was counted as a switch (gathered 2). */
		if (run_over(sim))
			continue;
		if (starved(sim)) {
			int alone, ended;

			if (adapt(sim, &alone)) {
				rc = kb__err(err, KB_ENOMEM, "out of memory regrouping the LPs");
				goto stop;
			}
			if (!alone)
				continue;
			/* The sequential executor's loop, for the rest of the run. */
			go_serial(sim);
			rc = alone_stretches(sim, NULL, &ended, err);
			break;
		}
		if (ac.on && stretch_over(sim, &ac)) {
			int ended;

			/* What the sink has not done of this stretch's records
			 * is its cost too, not the next one's. */
			rc = overlap_hook(sim, NULL, err);
			if (rc)
				goto stop;
			next_stretch(sim, &ac);
			if (!ac.alone)
				continue;
			if (gather(sim)) {
				rc = kb__err(err, KB_ENOMEM, "out of memory regrouping the LPs");
				goto stop;
			}
			rc = alone_stretches(sim, &ac, &ended, err);
			if (rc || ended)
				break;
		}
	}
stop:
	atomic_store(&sim->quit, 1);
	post_job(sim, 0);
	for (unsigned i = 1; i < started; i++)
		pthread_join(sim->workers[i].thread, NULL);
	if (sim->profile)
		fclose(sim->profile);
	sim->profile = NULL;
	free(sim->wheap);
	free(sim->active);
	free(sim->dirty);
	sim->wheap = sim->active = sim->dirty = NULL;
	sim->stats.ns_events = atomic_load(&sim->ns_events);
	sim->stats.ns_barrier = atomic_load(&sim->ns_barrier);
	sim->stats.ns_drain = atomic_load(&sim->ns_drain);
	sim->stats.ns_oplog += atomic_load(&sim->ns_share);
	sim->stats.ns_wall = kb__now_ns() - wall0;
	if (rc)
		return rc;
	return finish(sim, err);
}
