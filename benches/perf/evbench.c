/*
 * The simulation core's event loop alone (issue 13): N LPs on one PE,
 * each event schedules one more, on the LP itself (a third of them) or as
 * a message to one of the next two LPs, with pseudo-random delays, as a
 * decode run's engines pass work along. The handler does almost nothing,
 * so the CPU time per event is the core's: pop, dispatch, send, push.
 *
 *   evbench [LPS [EVENTS [REPS]]]    (default 7 LPs, as one decode PE,
 *                                     2,000,000 events, best of 5)
 *
 * Prints the events and the end time (the same on every build: a change
 * to the core that moves them changed the order of events) and the best
 * CPU ns per event. Run it side by side with another build's, interleaved.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sim/sim.h"

typedef struct lp_state {
	uint32_t id, n;
	uint64_t left;           /* events this LP still schedules */
	uint64_t x;              /* its own pseudo-random sequence */
} lp_state;

static int on_event(kb_lp *lp, const kb_event *ev)
{
	lp_state *s = kb__lp_state(lp);
	kb_event e = { .type = 1, .w = { ev->w[0] + 1, ev->w[1] } };

	if (!s->left)
		return KB_OK;
	s->left--;
	s->x = s->x * 6364136223846793005u + 1442695040888963407u;
	e.w[2] = s->x;
	if ((s->x >> 33) % 3 == 0)
		return kb__lp_self(lp, 1000 + (s->x >> 40) % 5000, &e);
	return kb__lp_send(lp, (uint32_t)((s->id + 1 + (s->x >> 50) % 2) % s->n),
			   4000 + (s->x >> 44) % 3000, &e);
}

static int on_start(kb_lp *lp)
{
	lp_state *s = kb__lp_state(lp);
	kb_event e = { .type = 0 };

	return s->id % 2 ? KB_OK : kb__lp_self(lp, s->id, &e);
}

static const kb_lp_type chain_type = {
	.name = "chain", .start = on_start, .event = on_event,
};

static double cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One run; returns CPU seconds, or a negative number on error. */
static double run_once(unsigned n, uint64_t events, uint64_t *done, kb_time *end)
{
	kb_sim_config cfg = { .threads = 1, .lat_pe = 1000, .lat_cluster = 1000, .lat_global = 1000 };
	lp_state *st = calloc(n, sizeof(*st));
	kb_error err;
	kb_sim *sim;
	double t0, t;
	int rc;

	if (!st || !(sim = kb__sim_create(&cfg, &err))) {
		free(st);
		fprintf(stderr, "evbench: cannot create the simulation\n");
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		st[i] = (lp_state){ i, n, events / n, i + 1 };
		if (kb__sim_add_lp(sim, &chain_type, &st[i], 0, 0) == UINT32_MAX) {
			fprintf(stderr, "evbench: cannot add LP %u\n", i);
			kb__sim_destroy(sim);
			free(st);
			return -1;
		}
	}
	t0 = cpu_s();
	rc = kb__sim_run(sim, &err);
	t = cpu_s() - t0;
	if (rc)
		fprintf(stderr, "evbench: %s\n", err.message);
	*done = kb__sim_stats(sim)->events;
	*end = kb__sim_stats(sim)->end_time;
	kb__sim_destroy(sim);
	free(st);
	return rc ? -1 : t;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 7;
	uint64_t events = argc > 2 ? strtoull(argv[2], NULL, 10) : 2000000;
	unsigned reps = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 5;
	double best = -1;
	uint64_t done = 0;
	kb_time end = 0;

	if (n < 2 || events < n || reps < 1) {
		fprintf(stderr, "usage: evbench [LPS >= 2 [EVENTS >= LPS [REPS >= 1]]]\n");
		return 2;
	}
	for (unsigned r = 0; r < reps; r++) {
		double t = run_once(n, events, &done, &end);

		if (t < 0)
			return 1;
		if (best < 0 || t < best)
			best = t;
	}
	printf("evbench: %u LPs, %llu events, end %llu ps: best %.1f ns/event CPU "
	       "(%.2f M events/s), of %u runs\n",
	       n, (unsigned long long)done, (unsigned long long)end, 1e9 * best / (double)done,
	       (double)done / best / 1e6, reps);
	return 0;
}
