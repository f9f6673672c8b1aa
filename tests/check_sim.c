/*
 * Tests of the simulation core (src/sim): the total event order, lookahead
 * and deadlock errors, handler errors on any thread, picosecond rounding,
 * skipping of empty stretches, and the synthetic (PHOLD) model's golden hash.
 *
 * Every core test runs the same tiny LP model under the sequential executor
 * (threads 1), the M:N executor (threads 2) and one thread per LP (threads 0),
 * with par_threshold 1 so that even windows with one event run on all
 * worker threads.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "base/time.h"
#include "kernbench.h"
#include "sim/sim.h"
#include "suites.h"
#include "testutil.h"

#define LAT 10u              /* every link latency of the test models, ps */
#define MAX_LOG 64
#define MAX_LPS 16

static const int executors[] = { 1, 2, 0, KB_SIM_THREADS_AUTO };
#define N_EXEC (sizeof(executors) / sizeof(executors[0]))

/* ---- a tiny model: one state struct per LP, shared type table --------- */

typedef struct seen {
	kb_time time;
	uint32_t src;
	uint64_t seq;
	uint64_t tag;
} seen;

typedef struct tlp {
	uint32_t id;
	int role;
	/* what this LP does (meaning depends on the role) */
	kb_time at;          /* time of its action */
	kb_time delay;       /* delay of the messages it sends */
	uint32_t dst;
	int count;
	int fail_code;
	/* what it saw */
	seen log[MAX_LOG];
	int n_log;
} tlp;

static void record(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);

	ck_assert_int_lt(s->n_log, MAX_LOG);
	s->log[s->n_log].time = ev->time;
	s->log[s->n_log].src = ev->src;
	s->log[s->n_log].seq = ev->seq;
	s->log[s->n_log].tag = ev->w[0];
	s->n_log++;
	ck_assert_uint_eq(ev->time, kb__lp_now(lp));
}

static int send_tag(kb_lp *lp, uint32_t dst, kb_time delay, uint64_t tag)
{
	kb_event ev = { .type = 1 };

	ev.w[0] = tag;
	return kb__lp_send(lp, dst, delay, &ev);
}

static int self_tag(kb_lp *lp, kb_time delay, uint64_t tag)
{
	kb_event ev = { .type = 2 };

	ev.w[0] = tag;
	return kb__lp_self(lp, delay, &ev);
}

/* Receiver: records everything it gets. */
static int recv_event(kb_lp *lp, const kb_event *ev)
{
	record(lp, ev);
	return KB_OK;
}

/* Sender: at time `at` (a self event), sends `count` messages to dst that
 * arrive at time `at + delay`... computed so all senders hit the same time. */
static int snd_start(kb_lp *lp)
{
	tlp *s = kb__lp_state(lp);

	return self_tag(lp, s->at, 0);
}

static int snd_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);
	int rc = KB_OK;

	(void)ev;
	for (int i = 0; i < s->count && !rc; i++)
		rc = send_tag(lp, s->dst, s->delay, 100u * s->id + (uint64_t)i);
	return rc;
}

static const kb_lp_type recv_type = { "recv", NULL, recv_event, NULL, NULL, 0, NULL, NULL, NULL };
static const kb_lp_type snd_type = { "snd", snd_start, snd_event, NULL, NULL, 0, NULL, NULL, NULL };

typedef struct model {
	kb_sim *sim;
	tlp st[MAX_LPS];
	uint32_t n;
	kb_time lat;
} model;

/* A model whose links within a PE, within a cluster and between clusters
 * take lat_pe, lat_cluster and lat_global. */
static void model_init_links(model *m, int threads, kb_time lat_pe, kb_time lat_cluster,
			     kb_time lat_global)
{
	kb_sim_config cfg = { .threads = threads, .lat_pe = lat_pe, .lat_cluster = lat_cluster,
			      .lat_global = lat_global, .par_threshold = 1 };
	kb_error err;

	memset(m, 0, sizeof(*m));
	m->lat = lat_pe;
	m->sim = kb__sim_create(&cfg, &err);
	ck_assert_msg(m->sim != NULL, "kb__sim_create: %s", err.message);
}

static void model_init(model *m, int threads, kb_time lat)
{
	model_init_links(m, threads, lat, lat, lat);
}

/* Adds an LP on PE pe of cluster cluster (add them PE-major). */
static tlp *model_add_at(model *m, const kb_lp_type *type, uint32_t pe, uint32_t cluster)
{
	tlp *s;
	uint32_t id;

	ck_assert_uint_lt(m->n, MAX_LPS);
	s = &m->st[m->n];
	id = kb__sim_add_lp(m->sim, type, s, pe, cluster);
	ck_assert_uint_eq(id, m->n);
	s->id = id;
	m->n++;
	return s;
}

/* Adds an LP on its own PE (pe = id), so error messages name it peID.TYPE. */
static tlp *model_add(model *m, const kb_lp_type *type)
{
	return model_add_at(m, type, m->n, 0);
}

/* Threads of this process (entries of /proc/self/task). */
/* Sanitizer runtimes start a background thread of their own at the first
 * pthread_create; start one short-lived thread first so counts compare
 * the simulator's threads only. */
static void *noop_thread(void *arg)
{
	return arg;
}

static void warm_threads(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, noop_thread, NULL) == 0)
		pthread_join(t, NULL);
}

static int thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Threads still running after a run was destroyed, beyond `before`. A
 * joined thread can linger in /proc/self/task for a moment after
 * pthread_join returns (seen under load), so wait up to 2 s for it to go;
 * a thread that was never joined stays and fails the check. */
static int threads_left(int before)
{
	for (int i = 0; i < 200 && thread_count() > before; i++)
		usleep(10000);
	return thread_count() - before;
}

/* ---- event order ------------------------------------------------------ */

/* LP 0 receives; LPs 1..3 send two messages each, all arriving at t=1000.
 * LP 3 sends first (t=100), LP 1 last (t=300), so arrival order in the
 * inbox is the reverse of the required order. */
static void run_equal_times(int threads, seen *out, int *n_out)
{
	model m;
	kb_error err;
	int rc;

	model_init(&m, threads, LAT);
	model_add(&m, &recv_type);
	for (uint32_t i = 1; i <= 3; i++) {
		tlp *s = model_add(&m, &snd_type);

		s->at = (4 - i) * 100;
		s->delay = 1000 - s->at;
		s->dst = 0;
		s->count = 2;
	}
	rc = kb__sim_run(m.sim, &err);
	ck_assert_msg(rc == 0, "threads %d: %s", threads, err.message);
	ck_assert_uint_eq(kb__sim_stats(m.sim)->end_time, 1000);
	ck_assert_uint_eq(kb__sim_stats(m.sim)->events, 3 + 6);
	*n_out = m.st[0].n_log;
	memcpy(out, m.st[0].log, sizeof(seen) * (size_t)m.st[0].n_log);
	kb__sim_destroy(m.sim);
}

START_TEST(equal_time_order)
{
	seen ref[MAX_LOG];
	int n_ref = 0;

	for (size_t e = 0; e < N_EXEC; e++) {
		seen got[MAX_LOG];
		int n = 0;

		run_equal_times(executors[e], got, &n);
		ck_assert_int_eq(n, 6);
		for (int i = 0; i < n; i++) {
			ck_assert_uint_eq(got[i].time, 1000);
			/* sender 1 + i/2, its messages are seq 1 and 2 (seq 0 was its self event) */
			ck_assert_msg(got[i].src == 1u + (uint32_t)i / 2 && got[i].seq == 1u + (uint64_t)(i % 2),
				      "threads %d: event %d is (src %u, seq %llu)", executors[e], i,
				      got[i].src, (unsigned long long)got[i].seq);
			ck_assert_uint_eq(got[i].tag, 100u * got[i].src + (uint64_t)(i % 2));
			if (i)
				ck_assert(got[i - 1].src < got[i].src ||
					  (got[i - 1].src == got[i].src && got[i - 1].seq < got[i].seq));
		}
		if (e == 0) {
			memcpy(ref, got, sizeof(ref));
			n_ref = n;
		} else {
			ck_assert_int_eq(n, n_ref);
			ck_assert_msg(memcmp(ref, got, sizeof(seen) * (size_t)n) == 0,
				      "threads %d order differs from threads 1", executors[e]);
		}
	}
}
END_TEST

/* One handler sends two, three or four messages that all arrive at one
 * time, to LPs in descending id order, so that each orders before the ones sent before
 * it: they pass through the worker's next-event registers (the second
 * before the first, then the heap as the registers fill) and must still
 * run in (time, destination) order. */
static uint32_t fan_seen[MAX_LPS];
static atomic_int n_fan_seen; /* receivers may run on several threads */

static int fan_recv_event(kb_lp *lp, const kb_event *ev)
{
	int i = atomic_fetch_add(&n_fan_seen, 1);

	record(lp, ev);
	ck_assert_int_lt(i, MAX_LPS);
	fan_seen[i] = kb__lp_id(lp);
	return KB_OK;
}

static int fan_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);
	int rc = KB_OK;

	(void)ev;
	for (uint32_t d = (uint32_t)s->count; d >= 1 && !rc; d--)
		rc = send_tag(lp, d, 5 * LAT, 10u + d);
	return rc;
}

static const kb_lp_type fan_type = { "fan", snd_start, fan_event, NULL, NULL, 0, NULL, NULL, NULL };
static const kb_lp_type fan_recv_type = { "fanrecv", NULL, fan_recv_event, NULL, NULL, 0, NULL, NULL,
					  NULL };

START_TEST(registers_keep_order)
{
	for (size_t e = 0; e < N_EXEC; e++)
		for (int n = 2; n <= 4; n++) {
			model m;
			kb_error err;
			tlp *fan;
			int rc;

			atomic_store(&n_fan_seen, 0);
			model_init(&m, executors[e], LAT);
			fan = model_add(&m, &fan_type);
			fan->at = 100;
			fan->count = n;
			for (int i = 0; i < n; i++)
				model_add(&m, &fan_recv_type);
			rc = kb__sim_run(m.sim, &err);
			ck_assert_msg(rc == 0, "threads %d: %s", executors[e], err.message);
			ck_assert_uint_eq(kb__sim_stats(m.sim)->events, 1 + (uint64_t)n);
			ck_assert_int_eq(atomic_load(&n_fan_seen), n);
			for (uint32_t d = 1; d <= (uint32_t)n; d++) {
				const tlp *r = &m.st[d];

				ck_assert_int_eq(r->n_log, 1);
				ck_assert_uint_eq(r->log[0].time, 100 + 5 * LAT);
				ck_assert_uint_eq(r->log[0].src, 0);
				/* the fan's self event was its seq 0; dst n got seq 1 */
				ck_assert_uint_eq(r->log[0].seq, (uint64_t)n + 1 - d);
				ck_assert_uint_eq(r->log[0].tag, 10u + d);
			}
			/* One thread runs them in (time, destination) order. */
			if (executors[e] == 1)
				for (int i = 0; i < n; i++)
					ck_assert_msg(fan_seen[i] == (uint32_t)i + 1,
						      "%d messages: event %d ran at LP %u", n, i,
						      fan_seen[i]);
			kb__sim_destroy(m.sim);
		}
}
END_TEST

/* One LP sends bursts of BURST_N events at once, to eight receivers and
 * to itself, at times and destinations in a scrambled order: more than a
 * worker's ring holds (KB_RING), so that pushes land before, between and
 * behind its events, fill it and move its latest into the heap. Every
 * executor must run them in (time, destination, source, sequence) order:
 * on one thread all of them in that order, and each LP in its own. */
#define BURST_N 40
#define BURST_ROUNDS 6
#define BURST_RECV 8

typedef struct burst_rec {
	kb_time time;
	uint32_t dst, src;
	uint64_t seq;
} burst_rec;

static burst_rec burst_seen[BURST_ROUNDS * (BURST_N + 1) + 1];
static atomic_int n_burst_seen;

static void burst_note(kb_lp *lp, const kb_event *ev)
{
	int i = atomic_fetch_add(&n_burst_seen, 1);

	ck_assert_int_lt(i, (int)(sizeof(burst_seen) / sizeof(burst_seen[0])));
	burst_seen[i] = (burst_rec){ ev->time, kb__lp_id(lp), ev->src, ev->seq };
}

static int burst_recv_event(kb_lp *lp, const kb_event *ev)
{
	burst_note(lp, ev);
	record(lp, ev);
	return KB_OK;
}

static int burst_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);
	int rc = KB_OK;

	burst_note(lp, ev);
	if (ev->w[0] != 0) /* a burst's own self event */
		return KB_OK;
	for (uint32_t j = 0; j < BURST_N && !rc; j++) {
		uint32_t k = (j * 17 + (uint32_t)s->n_log * 5) % BURST_N;
		kb_time d = LAT * (1 + k % 7);

		rc = k % 5 == 4 ? self_tag(lp, d, 1 + j) : send_tag(lp, 1 + (k * 3) % BURST_RECV, d, j);
	}
	if (!rc && ++s->n_log < BURST_ROUNDS)
		rc = self_tag(lp, 1000, 0);
	return rc;
}

static const kb_lp_type burst_type = { "burst", snd_start, burst_event, NULL, NULL, 0, NULL, NULL,
				       NULL };
static const kb_lp_type burst_recv_type = { "burstrecv", NULL, burst_recv_event, NULL, NULL, 0, NULL,
					    NULL, NULL };

static int burst_before(const burst_rec *a, const burst_rec *b)
{
	return a->time < b->time ||
	       (a->time == b->time &&
		(a->dst < b->dst ||
		 (a->dst == b->dst && (a->src < b->src || (a->src == b->src && a->seq < b->seq)))));
}

/* Fails unless the n events of ran[] ran in the total order. */
static void assert_total_order(const burst_rec *ran, int n)
{
	for (int i = 1; i < n; i++)
		ck_assert_msg(burst_before(&ran[i - 1], &ran[i]),
			      "event %d (t %llu, LP %u, src %u, seq %llu) ran after (t %llu, LP %u, "
			      "src %u, seq %llu)",
			      i, (unsigned long long)ran[i].time, ran[i].dst, ran[i].src,
			      (unsigned long long)ran[i].seq, (unsigned long long)ran[i - 1].time,
			      ran[i - 1].dst, ran[i - 1].src, (unsigned long long)ran[i - 1].seq);
}

START_TEST(ring_keeps_order)
{
	seen ref[BURST_RECV][MAX_LOG];
	int n_ref[BURST_RECV];

	for (size_t e = 0; e < N_EXEC; e++) {
		model m;
		kb_error err;
		tlp *b;
		int rc, n;

		atomic_store(&n_burst_seen, 0);
		model_init(&m, executors[e], LAT);
		b = model_add(&m, &burst_type);
		b->at = 100;
		for (int i = 0; i < BURST_RECV; i++)
			model_add(&m, &burst_recv_type);
		rc = kb__sim_run(m.sim, &err);
		ck_assert_msg(rc == 0, "threads %d: %s", executors[e], err.message);
		n = atomic_load(&n_burst_seen);
		ck_assert_int_eq(n, BURST_ROUNDS * (BURST_N + 1));
		ck_assert_uint_eq(kb__sim_stats(m.sim)->events, (uint64_t)n);
		/* One thread runs every event in the total order. */
		if (executors[e] == 1)
			assert_total_order(burst_seen, n);
		/* Each receiver sees the same, in the same order, everywhere. */
		for (int r = 0; r < BURST_RECV; r++) {
			const tlp *st = &m.st[1 + r];

			ck_assert_int_gt(st->n_log, 0);
			if (e == 0) {
				memcpy(ref[r], st->log, sizeof(ref[r]));
				n_ref[r] = st->n_log;
			} else {
				ck_assert_int_eq(st->n_log, n_ref[r]);
				ck_assert_msg(memcmp(ref[r], st->log, sizeof(seen) * (size_t)st->n_log) == 0,
					      "threads %d: LP %d's events differ from threads 1", executors[e],
					      1 + r);
			}
		}
		kb__sim_destroy(m.sim);
	}
}
END_TEST

/* Twelve LPs keep ~50-60 events pending at once, at times from a
 * scrambled set of delays (up to 24 apart, some to the sender itself):
 * a sequential run puts them into bands (core.c, more than BAND_MIN at a
 * loop's start), where pushes land behind a time's events, before or
 * among them, on new times between others, and once on more times than
 * there are bands (the bands go back into the heap); the bands stay from
 * one loop of SEQ_BUDGET events to the next. Every executor must run
 * them in (time, destination, source, sequence) order: on one thread all
 * of them, and each LP its own. */
#define BAND_LPS 12
#define BAND_START 4
#define BAND_GEN 60
#define BAND_MAX 4096

static burst_rec band_seen[BAND_MAX];
static atomic_int n_band_seen;
static burst_rec band_lp_seen[BAND_LPS][BAND_MAX / 4];
static int n_band_lp[BAND_LPS];

static int band_event(kb_lp *lp, const kb_event *ev)
{
	uint32_t id = kb__lp_id(lp);
	uint64_t g = ev->w[0];
	uint32_t h = (uint32_t)((id * 2654435761u) ^ (g * 40503u) ^ (ev->seq * 97u)) >> 5;
	int i = atomic_fetch_add(&n_band_seen, 1);
	burst_rec r = { ev->time, id, ev->src, ev->seq };
	int rc = KB_OK;

	ck_assert_int_lt(i, BAND_MAX);
	ck_assert_int_lt(n_band_lp[id], BAND_MAX / 4);
	band_seen[i] = r;
	band_lp_seen[id][n_band_lp[id]++] = r;
	if (g >= BAND_GEN)
		return KB_OK;
	for (int c = 0; c < (h % 9 == 0 ? 2 : 1) && !rc; c++) {
		kb_event next = { .type = 3 };
		uint32_t k = (h >> (4 * c)) % 32;

		next.w[0] = c ? BAND_GEN : g + 1;
		/* To itself: at once where the new key (now, id, id, seq + 1)
		 * sorts after the running event's (src <= id), which pushes
		 * into the band being run; else later (a delay 0 from a larger
		 * src would order before the event that runs). */
		if (k < 6)
			rc = kb__lp_self(lp, ev->src <= id && k % 3 == 0 ? 0 : LAT * (1 + k % 3), &next);
		else /* once spread over more times than there are bands */
			rc = kb__lp_send(lp, (id + k) % BAND_LPS,
					 g == 40 ? LAT * (1 + k % 24) + k % 3 : LAT * (1 + k % 6),
					 &next);
	}
	return rc;
}

static int band_start(kb_lp *lp)
{
	kb_event ev = { .type = 3 };
	int rc = KB_OK;

	for (uint32_t i = 0; i < BAND_START && !rc; i++)
		rc = kb__lp_self(lp, LAT * ((kb__lp_id(lp) + 5 * i) % 7), &ev);
	return rc;
}

static const kb_lp_type band_type = { "band", band_start, band_event, NULL, NULL, 0, NULL, NULL,
				      NULL };

START_TEST(bands_keep_order)
{
	static burst_rec ref[BAND_LPS][BAND_MAX / 4];
	int n_ref[BAND_LPS];

	for (size_t e = 0; e < N_EXEC; e++) {
		model m;
		kb_error err;
		int rc, n;

		atomic_store(&n_band_seen, 0);
		memset(n_band_lp, 0, sizeof(n_band_lp));
		model_init(&m, executors[e], LAT);
		for (int i = 0; i < BAND_LPS; i++)
			model_add(&m, &band_type);
		rc = kb__sim_run(m.sim, &err);
		ck_assert_msg(rc == 0, "threads %d: %s", executors[e], err.message);
		n = atomic_load(&n_band_seen);
		/* Enough for a few sequential loops of 1024 events. */
		ck_assert_int_gt(n, 3000);
		ck_assert_uint_eq(kb__sim_stats(m.sim)->events, (uint64_t)n);
		if (executors[e] == 1)
			assert_total_order(band_seen, n);
		for (int r = 0; r < BAND_LPS; r++) {
			if (e == 0) {
				memcpy(ref[r], band_lp_seen[r], sizeof(ref[r]));
				n_ref[r] = n_band_lp[r];
			} else {
				ck_assert_int_eq(n_band_lp[r], n_ref[r]);
				ck_assert_msg(memcmp(ref[r], band_lp_seen[r],
						     sizeof(burst_rec) * (size_t)n_ref[r]) == 0,
					      "threads %d: LP %d's events differ from threads 1", executors[e],
					      r);
			}
		}
		kb__sim_destroy(m.sim);
	}
}
END_TEST

/* kb__lp_send_pe_run and kb__lp_send_pe_place: one LP sends runs of 1 to 20 messages to one LP of
 * its PE, each behind a few scattered events of its own (to itself now
 * or later, to LPs before and after the run's destination), and starts
 * its next round while the last round's run may still be pending: runs
 * that fit in the worker's ring behind its latest event, runs that do not
 * (more than the ring, or an event of the ring or the heap after theirs).
 * Every executor must run each LP's events as the same model with one
 * kb__lp_send_pe a message does: the same times, sources, seq numbers
 * and payloads, in the same order. */
#define RUN_RECV 4
#define RUN_ROUNDS 40
#define RUN_MAX 20
#define RUN_LOG 1024

typedef struct run_rec {
	kb_time time;
	uint64_t src, seq, tag;  /* src in 64 bits: no padding for memcmp */
} run_rec;

static run_rec run_seen[1 + RUN_RECV][RUN_LOG];
static int n_run_seen[1 + RUN_RECV];
static int run_as_one;     /* nonzero: kb__lp_send_pe_run, else one send a message */

static void run_note(kb_lp *lp, const kb_event *ev)
{
	uint32_t id = kb__lp_id(lp);

	ck_assert_int_lt(n_run_seen[id], RUN_LOG);
	run_seen[id][n_run_seen[id]++] = (run_rec){ ev->time, ev->src, ev->seq, ev->w[0] };
}

/* What kb__lp_send_pe_place leaves to its caller: type, aux, payload. */
static void put_body(kb_event *b, const kb_event *ev)
{
	b->type = ev->type;
	b->aux = ev->aux;
	memcpy(b->w, ev->w, sizeof(b->w));
}

static int run_recv_event(kb_lp *lp, const kb_event *ev)
{
	run_note(lp, ev);
	return KB_OK;
}

static int run_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);
	uint32_t r = (uint32_t)s->n_log, m = 1 + (r * 7) % RUN_MAX, dst = 1 + r % RUN_RECV;
	kb_event run[RUN_MAX], *const *placed;
	int rc = KB_OK;

	run_note(lp, ev);
	if (ev->w[0] != 0) /* a scattered self event */
		return KB_OK;
	for (uint32_t j = 0; j < r % 5 && !rc; j++) {
		uint32_t k = (r * 5 + j * 3) % 7;

		rc = k < 3 ? self_tag(lp, k * LAT / 2, 1 + j)
			   : send_tag(lp, 1 + (r + k) % RUN_RECV, (1 + k % 2) * LAT, 1 + j);
	}
	for (uint32_t k = 0; k < m; k++)
		run[k] = (kb_event){ .type = 1, .aux = k, .w = { 1000 * (r + 1) + k, r, k, ~(uint64_t)k, 7 } };
	/* every other round written in place where it fits */
	if (run_as_one && !rc && r % 2 && (placed = kb__lp_send_pe_place(lp, dst, m)))
		for (uint32_t k = 0; k < m; k++)
			put_body(placed[m - 1 - k], &run[k]);
	else if (run_as_one && !rc)
		rc = kb__lp_send_pe_run(lp, dst, run, m);
	for (uint32_t k = 0; !run_as_one && k < m && !rc; k++)
		rc = kb__lp_send_pe(lp, dst, &run[k]);
	/* the next round while this one's run is pending, or after it */
	if (!rc && ++s->n_log < RUN_ROUNDS)
		rc = self_tag(lp, r % 3 ? LAT / 2 : 3 * LAT, 0);
	return rc;
}

static const kb_lp_type run_type = { "run", snd_start, run_event, NULL, NULL, 0, NULL, NULL, NULL };
static const kb_lp_type run_recv_type = { "runrecv", NULL, run_recv_event, NULL, NULL, 0, NULL,
					  NULL, NULL };

START_TEST(send_runs_keep_order)
{
	static run_rec ref[1 + RUN_RECV][RUN_LOG];
	int n_ref[1 + RUN_RECV];

	for (int as_one = 0; as_one < 2; as_one++)
		for (size_t e = 0; e < N_EXEC; e++) {
			model m;
			kb_error err;
			tlp *b;
			int rc;

			run_as_one = as_one;
			memset(n_run_seen, 0, sizeof(n_run_seen));
			model_init(&m, executors[e], LAT);
			b = model_add_at(&m, &run_type, 0, 0);
			b->at = 100;
			for (int i = 0; i < RUN_RECV; i++)
				model_add_at(&m, &run_recv_type, 0, 0);
			rc = kb__sim_run(m.sim, &err);
			ck_assert_msg(rc == 0, "threads %d: %s", executors[e], err.message);
			ck_assert_int_gt(n_run_seen[1], RUN_ROUNDS);
			for (int i = 0; i <= RUN_RECV; i++) {
				if (!as_one && e == 0) {
					memcpy(ref[i], run_seen[i], sizeof(ref[i]));
					n_ref[i] = n_run_seen[i];
					continue;
				}
				ck_assert_int_eq(n_run_seen[i], n_ref[i]);
				ck_assert_msg(memcmp(ref[i], run_seen[i], sizeof(run_rec) * (size_t)n_ref[i]) == 0,
					      "threads %d, runs %d: LP %d's events differ from single sends",
					      executors[e], as_one, i);
			}
			kb__sim_destroy(m.sim);
		}
}
END_TEST

/* Senders on workers of their own send into one LP's inbox in the same
 * window, round after round, so that their enqueues meet at the inbox's
 * tail: each appends behind a node another thread has just initialised,
 * ordered only by liburcu's exchange on the tail. ThreadSanitizer cannot see
 * that exchange (inline assembly); core.c's msg_enqueue tells it, and
 * tests/tsan.supp suppresses nothing of liburcu's queue, so a missing
 * happens-before there fails this test under TSan (plugin.sh's flake).
 * Everywhere: every message arrives once, in (time, src, seq) order, and
 * the nodes go back to their owners (one-way traffic). */
#define FANIN_SENDERS 8
#define FANIN_ROUNDS 128
#define FANIN_PER 3

static int fanin_recv_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);
	seen *last = &s->log[0];

	ck_assert_msg(s->n_log == 0 || last->time < ev->time ||
			      (last->time == ev->time &&
			       (last->src < ev->src || (last->src == ev->src && last->seq < ev->seq))),
		      "(t %llu, src %u, seq %llu) after (t %llu, src %u, seq %llu)",
		      (unsigned long long)ev->time, ev->src, (unsigned long long)ev->seq,
		      (unsigned long long)last->time, last->src, (unsigned long long)last->seq);
	/* A sender's round r sends tags r*FANIN_PER .. + FANIN_PER - 1, at
	 * seqs after its r + 1 self events and the round's earlier sends. */
	ck_assert_uint_eq(ev->seq, ev->w[0] + ev->w[0] / FANIN_PER + 1);
	ck_assert_uint_eq(ev->time, 100 + 1000 * (ev->w[0] / FANIN_PER) + LAT);
	last->time = ev->time;
	last->src = ev->src;
	last->seq = ev->seq;
	s->n_log++;
	return KB_OK;
}

static int fanin_snd_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);
	int rc = KB_OK;

	(void)ev;
	for (int i = 0; i < FANIN_PER && !rc; i++)
		rc = send_tag(lp, 0, LAT, (uint64_t)(s->n_log * FANIN_PER + i));
	if (!rc && ++s->n_log < FANIN_ROUNDS)
		rc = self_tag(lp, 1000, 0);
	return rc;
}

static const kb_lp_type fanin_recv_type = { "faninrecv", NULL, fanin_recv_event, NULL, NULL, 0, NULL,
					    NULL, NULL };
static const kb_lp_type fanin_snd_type = { "fanin", snd_start, fanin_snd_event, NULL, NULL, 0, NULL,
					   NULL, NULL };

START_TEST(senders_meet_in_one_inbox)
{
	for (size_t e = 0; e < N_EXEC; e++) {
		model m;
		kb_error err;
		int rc;

		model_init(&m, executors[e], LAT);
		model_add(&m, &fanin_recv_type);
		for (int i = 0; i < FANIN_SENDERS; i++)
			model_add(&m, &fanin_snd_type)->at = 100;
		rc = kb__sim_run(m.sim, &err);
		ck_assert_msg(rc == 0, "threads %d: %s", executors[e], err.message);
		ck_assert_int_eq(m.st[0].n_log, FANIN_SENDERS * FANIN_ROUNDS * FANIN_PER);
		ck_assert_uint_eq(kb__sim_stats(m.sim)->events,
				  (uint64_t)FANIN_SENDERS * FANIN_ROUNDS * (1 + FANIN_PER));
		ck_assert_uint_eq(kb__sim_stats(m.sim)->end_time, 100 + 1000 * (FANIN_ROUNDS - 1) + LAT);
		ck_assert_uint_eq(m.st[0].log[0].src, FANIN_SENDERS);
		kb__sim_destroy(m.sim);
	}
}
END_TEST

/* Self events and messages at one time: LP 1 schedules S0, S1 (t=1000) and
 * T (t=990) at start; T schedules S2 at t=1000. LP 0 and LP 2 each send one
 * message arriving at t=1000. Order: (time, src, seq). */
static int mix_start(kb_lp *lp)
{
	int rc = self_tag(lp, 1000, 10);

	if (!rc)
		rc = self_tag(lp, 1000, 11);
	if (!rc)
		rc = self_tag(lp, 990, 99);
	return rc;
}

static int mix_event(kb_lp *lp, const kb_event *ev)
{
	record(lp, ev);
	if (ev->w[0] == 99)
		return self_tag(lp, 10, 12);
	return KB_OK;
}

static const kb_lp_type mix_type = { "mix", mix_start, mix_event, NULL, NULL, 0, NULL, NULL, NULL };

START_TEST(self_events_same_time)
{
	static const struct {
		uint32_t src;
		uint64_t seq, tag;
		kb_time time;
	} want[] = {
		{ 1, 2, 99, 990 }, { 0, 1, 0, 1000 },  { 1, 0, 10, 1000 },
		{ 1, 1, 11, 1000 }, { 1, 3, 12, 1000 }, { 2, 1, 200, 1000 },
	};

	for (size_t e = 0; e < N_EXEC; e++) {
		model m;
		kb_error err;
		tlp *a, *b, *r;
		int rc;

		model_init(&m, executors[e], LAT);
		a = model_add(&m, &snd_type);
		r = model_add(&m, &mix_type);
		b = model_add(&m, &snd_type);
		a->at = 500; a->delay = 500; a->dst = 1; a->count = 1;
		b->at = 20; b->delay = 980; b->dst = 1; b->count = 1;
		rc = kb__sim_run(m.sim, &err);
		ck_assert_msg(rc == 0, "threads %d: %s", executors[e], err.message);
		ck_assert_int_eq(r->n_log, 6);
		for (int i = 0; i < 6; i++)
			ck_assert_msg(r->log[i].src == want[i].src && r->log[i].seq == want[i].seq &&
					      r->log[i].tag == want[i].tag &&
					      r->log[i].time == want[i].time,
				      "threads %d: event %d is (t %llu, src %u, seq %llu, tag %llu)",
				      executors[e], i, (unsigned long long)r->log[i].time,
				      r->log[i].src, (unsigned long long)r->log[i].seq,
				      (unsigned long long)r->log[i].tag);
		kb__sim_destroy(m.sim);
	}
}
END_TEST

/* ---- background traffic: a ring of LPs passing tokens ----------------- */

/* Each ring LP sends `count` tokens around the ring (delay = its `delay`,
 * at least the link latency) until a token has made `at` hops. */
static int ring_start(kb_lp *lp)
{
	tlp *s = kb__lp_state(lp);
	int rc = KB_OK;

	for (int i = 0; i < s->count && !rc; i++)
		rc = send_tag(lp, s->dst, s->delay + (kb_time)i, 0);
	return rc;
}

static int ring_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);

	if (ev->w[0] + 1 >= s->at)
		return KB_OK;
	return send_tag(lp, s->dst, s->delay, ev->w[0] + 1);
}

static const kb_lp_type ring_type = { "ring", ring_start, ring_event, NULL, NULL, 0, NULL, NULL, NULL };

/* Adds n ring LPs (ids first..first+n-1) whose tokens travel `hops` hops. */
static void add_ring(model *m, uint32_t n, uint64_t hops)
{
	uint32_t first = m->n;

	for (uint32_t i = 0; i < n; i++) {
		tlp *s = model_add(m, &ring_type);

		s->dst = first + (i + 1) % n;
		s->delay = m->lat + 3 * i;
		s->count = 3;
		s->at = (kb_time)hops;
	}
}

/* ---- horizons: lookahead beyond the link latency ----------------------- */

/* "tick" ticks every 1 ps for `at` ticks and, at every multiple of its
 * period `delay`, sends its tick time to dst (its own PE each: LP id = PE).
 * Its horizon hook says so (role 0), or promises 5 periods of quiet (role
 * 1, a lie the core must catch rather than run on). */
static int tick_start(kb_lp *lp)
{
	return self_tag(lp, 1, 1);
}

static int tick_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);
	int rc = KB_OK;

	if (ev->type == 1)
		return recv_event(lp, ev);
	if (ev->w[0] % s->delay == 0)
		rc = send_tag(lp, s->dst, LAT, ev->w[0]);
	if (!rc && ev->w[0] + 1 < s->at)
		rc = self_tag(lp, 1, ev->w[0] + 1);
	return rc;
}

static kb_time tick_horizon(kb_lp *lp, kb_time t_min, kb_time enough)
{
	tlp *s = kb__lp_state(lp);

	(void)enough;
	if (s->role)
		return t_min + 5 * s->delay;
	return (t_min + s->delay - 1) / s->delay * s->delay;
}

static const kb_lp_type tick_type = { "tick", tick_start, tick_event, NULL, NULL, 0, NULL, NULL,
						tick_horizon };

static int run_ticks(int threads, int liar, seen *out, int *n_out, uint64_t *windows, kb_error *err)
{
	model m;
	int rc;

	model_init(&m, threads, LAT);
	for (uint32_t i = 0; i < 2; i++) {
		tlp *s = model_add(&m, &tick_type);

		s->at = 20000;
		s->delay = 1000;
		s->dst = 1 - i;
		s->role = liar;
	}
	rc = kb__sim_run(m.sim, err);
	*windows = kb__sim_stats(m.sim)->windows;
	*n_out = m.st[0].n_log;
	memcpy(out, m.st[0].log, sizeof(seen) * (size_t)m.st[0].n_log);
	kb__sim_destroy(m.sim);
	return rc;
}

START_TEST(horizon_stretches_windows)
{
	seen ref[MAX_LOG];
	int n_ref = 0;

	for (size_t e = 0; e < N_EXEC; e++) {
		seen got[MAX_LOG];
		uint64_t windows;
		kb_error err;
		int n = 0, rc = run_ticks(executors[e], 0, got, &n, &windows, &err);

		ck_assert_msg(rc == 0, "threads %d: %s", executors[e], err.message);
		ck_assert_int_eq(n, 19);
		ck_assert_uint_eq(got[0].time, 1000 + LAT);
		/* 20000 ps in windows of LAT would be 2000 windows; the horizon
		 * lets each run up to the next send. */
		if (executors[e] != 1)
			ck_assert_msg(windows <= 2 * 20 + 2, "threads %d: %llu windows", executors[e],
				      (unsigned long long)windows);
		if (e == 0) {
			memcpy(ref, got, sizeof(ref));
			n_ref = n;
		} else {
			ck_assert_int_eq(n, n_ref);
			ck_assert_msg(memcmp(ref, got, sizeof(seen) * (size_t)n) == 0,
				      "threads %d differs from threads 1", executors[e]);
		}
	}
}
END_TEST

START_TEST(horizon_lie_caught)
{
	for (size_t e = 0; e < N_EXEC; e++) {
		seen got[MAX_LOG];
		uint64_t windows;
		kb_error err;
		int n = 0, rc = run_ticks(executors[e], 1, got, &n, &windows, &err);

		if (executors[e] == 1) {
			ck_assert_msg(rc == 0, "sequential: %s", err.message);  /* no windows to break */
			continue;
		}
		/* (auto: the run's start, 512 events a PE, runs in windows
		 * before auto tries one thread, so it meets the lie too) */
		ck_assert_msg(rc == KB_ELOOKAHEAD, "threads %d: rc %d (%s)", executors[e], rc,
			      err.message);
		ck_assert_msg(strstr(err.message, "horizon") && strstr(err.message, "pe0.tick") &&
				      strstr(err.message, "t=1000 ps"),
			      "threads %d: '%s'", executors[e], err.message);
	}
}
END_TEST

/* ---- lookahead violation ---------------------------------------------- */

/* "bad" at t=`at` sends to dst with a delay below the link latency. */
static int bad_start(kb_lp *lp)
{
	tlp *s = kb__lp_state(lp);

	return self_tag(lp, s->at, 0);
}

static int bad_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);

	(void)ev;
	return send_tag(lp, s->dst, s->delay, 7);
}

static const kb_lp_type bad_type = { "bad", bad_start, bad_event, NULL, NULL, 0, NULL, NULL, NULL };

static void lookahead_once(int threads)
{
	model m;
	kb_error err;
	tlp *bad;
	int rc;

	model_init(&m, threads, LAT);
	add_ring(&m, 4, 1000);                  /* LPs 0..3: traffic on every thread */
	model_add(&m, &recv_type);              /* LP 4: pe4.recv */
	bad = model_add(&m, &bad_type);         /* LP 5: pe5.bad */
	add_ring(&m, 3, 1000);                  /* LPs 6..8 */
	bad->at = 777;
	bad->dst = 4;
	bad->delay = LAT - 3;
	rc = kb__sim_run(m.sim, &err);
	ck_assert_msg(rc == KB_ELOOKAHEAD, "threads %d: rc %d (%s)", threads, rc, err.message);
	ck_assert_int_eq(err.code, KB_ELOOKAHEAD);
	ck_assert_msg(strstr(err.message, "pe5.bad") && strstr(err.message, "pe4.recv") &&
			      strstr(err.message, "7 ps") && strstr(err.message, "t=777"),
		      "threads %d: message '%s' lacks the LPs, the delay or the time", threads,
		      err.message);
	ck_assert_int_eq(m.st[4].n_log, 0);
	kb__sim_destroy(m.sim);
}

START_TEST(lookahead_violation)
{
	for (size_t e = 0; e < N_EXEC; e++)
		lookahead_once(executors[e]);
}
END_TEST

START_TEST(lookahead_violation_no_threads_left)
{
	int before;

	warm_threads();
	before = thread_count();

	for (int i = 0; i < 20; i++) {
		lookahead_once(0);
		ck_assert_int_le(threads_left(before), 0);  /* none left running */
	}
}
END_TEST

/* A violation inside start (time 0), before any executor runs. */
static int bad_now_start(kb_lp *lp)
{
	tlp *s = kb__lp_state(lp);

	return send_tag(lp, s->dst, s->delay, 1);
}

static const kb_lp_type bad_now_type = { "early", bad_now_start, recv_event, NULL, NULL,
	0, NULL, NULL, NULL };

START_TEST(lookahead_violation_at_start)
{
	for (size_t e = 0; e < N_EXEC; e++) {
		model m;
		kb_error err;
		tlp *s;
		int rc;

		model_init(&m, executors[e], LAT);
		model_add(&m, &recv_type);
		s = model_add(&m, &bad_now_type);
		s->dst = 0;
		s->delay = 0;
		rc = kb__sim_run(m.sim, &err);
		ck_assert_int_eq(rc, KB_ELOOKAHEAD);
		ck_assert_msg(strstr(err.message, "pe1.early") && strstr(err.message, "pe0.recv") &&
				      strstr(err.message, "delay 0 ps"),
			      "message: %s", err.message);
		kb__sim_destroy(m.sim);
	}
}
END_TEST

/* ---- the send shortcut (core.c set_shortcuts, kb_lp local_lo/local_n) ---- */

/* kb__lp_send skips the look at the destination for a send within the
 * range of LPs set_shortcuts gave the sender (every LP, on one worker with
 * no link longer than lat_pe; else its PE, where one worker holds it whole)
 * and a delay of at least lat_pe. These models have sends on both sides of
 * that line, which must deliver as the sequential run does and as the
 * order of the core says; and sends below their link's latency, which must
 * be refused wherever a shortcut of the wrong range or without its latency
 * test would let them through. */

#define SC_HOPS 8           /* a token's last hop */
#define SC_PES 4

typedef struct sc_model {
	const char *name;
	kb_time lat_pe, lat_cluster, lat_global;
	uint32_t pe_lps[SC_PES];     /* LPs of each PE (0: no such PE) */
	uint32_t pe_cluster[SC_PES];
} sc_model;

static uint32_t sc_n;                           /* LPs of the model running */
static uint32_t sc_lo[MAX_LPS], sc_len[MAX_LPS]; /* each LP's PE: first LP, LPs */
static kb_time sc_lat_pe;

/* Where hop `hop` of a token at lp goes, by the hop and the LP: to the next
 * LP of its PE with exactly lat_pe (by kb__lp_send or, where it returns 1,
 * kb__lp_send_pe), to itself with lat_pe, to that next LP with a longer
 * delay, to the next PE's first LP (a higher id) or to the previous PE's
 * last (a lower one: below the PE's local_lo) with their link's latency. */
static int sc_route(kb_lp *lp, uint64_t hop, uint32_t *dst, kb_time *delay)
{
	uint32_t id = kb__lp_id(lp), lo = sc_lo[id], len = sc_len[id];
	uint32_t next = lo + (id - lo + 1) % len;

	switch ((id + hop) % 6) {
	case 5:
		*dst = next;
		*delay = sc_lat_pe;
		return 1;
	case 0:
		*dst = next;
		*delay = sc_lat_pe;
		return 0;
	case 1:
		*dst = id;
		*delay = sc_lat_pe;
		return 0;
	case 2:
		*dst = next;
		*delay = sc_lat_pe + 3;
		return 0;
	case 3:
		*dst = (lo + len) % sc_n;
		break;
	default:
		*dst = (lo + sc_n - 1) % sc_n;
		break;
	}
	*delay = *dst == id ? sc_lat_pe : kb__lp_link_latency(lp, *dst);
	return 0;
}

/* A token: w[0] its hop, w[1] the time it is due. */
static int sc_send(kb_lp *lp, uint64_t hop)
{
	kb_event ev = { .type = 1 };
	uint32_t dst;
	kb_time delay;
	int pe = sc_route(lp, hop, &dst, &delay);

	ev.w[0] = hop;
	ev.w[1] = kb__lp_now(lp) + delay;
	return pe ? kb__lp_send_pe(lp, dst, &ev) : kb__lp_send(lp, dst, delay, &ev);
}

/* Two tokens from every LP, at time 0: many arrive at equal times. */
static int sc_start(kb_lp *lp)
{
	int rc = sc_send(lp, 0);

	return rc ? rc : sc_send(lp, 1);
}

static int sc_event(kb_lp *lp, const kb_event *ev)
{
	record(lp, ev);
	ck_assert_uint_eq(ev->time, ev->w[1]);
	return ev->w[0] < SC_HOPS ? sc_send(lp, ev->w[0] + 1) : KB_OK;
}

static const kb_lp_type sc_type = { "chat", sc_start, sc_event, NULL, NULL, 0, NULL, NULL, NULL };

/* Adds the LPs of model c PE-major, of type type but LP odd_id, of type
 * odd; notes each one's PE. */
static void sc_build(model *m, const sc_model *c, int threads, const kb_lp_type *type,
		     uint32_t odd_id, const kb_lp_type *odd)
{
	model_init_links(m, threads, c->lat_pe, c->lat_cluster, c->lat_global);
	for (uint32_t p = 0; p < SC_PES; p++) {
		uint32_t lo = m->n;

		for (uint32_t i = 0; i < c->pe_lps[p]; i++) {
			model_add_at(m, m->n == odd_id ? odd : type, p, c->pe_cluster[p]);
			sc_lo[lo + i] = lo;
			sc_len[lo + i] = c->pe_lps[p];
		}
	}
	sc_n = m->n;
	sc_lat_pe = c->lat_pe;
}

/* Each LP's events in the core's order: (time, source, source seq) rising. */
static void sc_assert_ordered(const model *m, const char *name, int threads)
{
	for (uint32_t i = 0; i < m->n; i++)
		for (int k = 1; k < m->st[i].n_log; k++) {
			const seen *a = &m->st[i].log[k - 1], *b = &m->st[i].log[k];

			ck_assert_msg(burst_before(&(burst_rec){ a->time, i, a->src, a->seq },
						   &(burst_rec){ b->time, i, b->src, b->seq }),
				      "%s, threads %d: LP %u's events %d and %d out of order", name,
				      threads, i, k - 1, k);
		}
}

START_TEST(short_sends_deliver_as_sequential)
{
	static const sc_model models[] = {
		{ "one PE", 10, 40, 100, { 4 }, { 0 } },
		{ "equal links", 10, 10, 10, { 2, 3, 1, 2 }, { 0, 0, 0, 0 } },
		{ "one cluster, a longer global link", 10, 10, 100, { 2, 2, 2, 2 }, { 0, 0, 0, 0 } },
		{ "longer links between PEs", 10, 40, 100, { 2, 3, 1, 2 }, { 0, 0, 1, 1 } },
	};
	static seen ref[MAX_LPS][MAX_LOG];
	static int n_ref[MAX_LPS];

	for (size_t c = 0; c < sizeof(models) / sizeof(models[0]); c++)
		for (size_t e = 0; e < N_EXEC; e++) {
			model m;
			kb_error err;
			int rc;

			sc_build(&m, &models[c], executors[e], &sc_type, UINT32_MAX, NULL);
			rc = kb__sim_run(m.sim, &err);
			ck_assert_msg(rc == 0, "%s, threads %d: %s", models[c].name, executors[e],
				      err.message);
			/* 2 tokens of SC_HOPS + 1 and SC_HOPS hops from each LP,
			 * every event a message (no self events) */
			ck_assert_uint_eq(kb__sim_stats(m.sim)->events, m.n * (2 * SC_HOPS + 1));
			sc_assert_ordered(&m, models[c].name, executors[e]);
			for (uint32_t i = 0; i < m.n; i++) {
				if (e == 0) {
					n_ref[i] = m.st[i].n_log;
					memcpy(ref[i], m.st[i].log, sizeof(ref[i]));
					continue;
				}
				ck_assert_msg(m.st[i].n_log == n_ref[i] &&
						      memcmp(ref[i], m.st[i].log,
							     sizeof(seen) * (size_t)n_ref[i]) == 0,
					      "%s, threads %d: LP %u's events differ from threads 1",
					      models[c].name, executors[e], i);
			}
			kb__sim_destroy(m.sim);
		}
}
END_TEST

/* Sends below their link's latency, each where a shortcut could take it:
 * within the PE (the short path's latency test), to another PE of the
 * cluster with lat_pe (a shortcut over the cluster), to another cluster
 * with lat_cluster, and with every LP on one worker (a shortcut over all
 * LPs, which holds only where no link is longer than lat_pe). */
START_TEST(short_sends_keep_lookahead)
{
	/* PEs of two LPs, the third in a cluster of its own; LP 3 (PE 1's
	 * second) sends, to a lower id (below its PE's local_lo) or a higher. */
	static const struct {
		sc_model c;
		uint32_t dst;
		kb_time delay;
	} cases[] = {
		{ { "within the PE", 10, 40, 100, { 2, 2, 2 }, { 0, 0, 1 } }, 2, 9 },
		{ { "to the cluster with lat_pe", 10, 40, 100, { 2, 2, 2 }, { 0, 0, 1 } }, 0, 10 },
		{ { "to another cluster with lat_cluster", 10, 40, 100, { 2, 2, 2 }, { 0, 0, 1 } },
		  4, 40 },
		{ { "equal links", 10, 10, 10, { 2, 2, 2 }, { 0, 0, 1 } }, 1, 9 },
		{ { "only lat_global longer", 10, 10, 100, { 2, 2, 2 }, { 0, 0, 1 } }, 5, 10 },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (size_t e = 0; e < N_EXEC; e++) {
			model m;
			kb_error err;
			tlp *bad;
			int rc;

			sc_build(&m, &cases[c].c, executors[e], &recv_type, 3, &bad_type);
			bad = &m.st[3];
			bad->at = 777;
			bad->dst = cases[c].dst;
			bad->delay = cases[c].delay;
			rc = kb__sim_run(m.sim, &err);
			ck_assert_msg(rc == KB_ELOOKAHEAD && strstr(err.message, "below the link latency"),
				      "%s, threads %d: rc %d (%s)", cases[c].c.name, executors[e], rc,
				      rc ? err.message : "");
			ck_assert_int_eq(m.st[cases[c].dst].n_log, 0);
			kb__sim_destroy(m.sim);
		}
}
END_TEST

/* ---- deadlock --------------------------------------------------------- */

/* "stuck" handles one self event at t=500 and then still reports work. */
static int stuck_start(kb_lp *lp)
{
	return self_tag(lp, 500, 0);
}

static int stuck_pending(kb_lp *lp, char *buf, size_t len)
{
	tlp *s = kb__lp_state(lp);

	snprintf(buf, len, "waits for command %u", 40 + s->id);
	return 1;
}

static int idle_pending(kb_lp *lp, char *buf, size_t len)
{
	(void)lp;
	(void)buf;
	(void)len;
	return 0;
}

static const kb_lp_type stuck_type = { "stuck", stuck_start, recv_event, stuck_pending, NULL,
	0, NULL, NULL, NULL };
static const kb_lp_type idle_type = { "idle", NULL, recv_event, idle_pending, NULL, 0, NULL, NULL, NULL };

START_TEST(deadlock_detected)
{
	int before;

	warm_threads();
	before = thread_count();

	for (size_t e = 0; e < N_EXEC; e++) {
		model m;
		kb_error err;
		int rc;

		model_init(&m, executors[e], LAT);
		model_add(&m, &idle_type);
		add_ring(&m, 2, 10);
		model_add(&m, &stuck_type);  /* LP 3 */
		rc = kb__sim_run(m.sim, &err);
		ck_assert_msg(rc == KB_EDEADLOCK, "threads %d: rc %d (%s)", executors[e], rc,
			      err.message);
		ck_assert_int_eq(err.code, KB_EDEADLOCK);
		ck_assert_msg(strstr(err.message, "deadlock") && strstr(err.message, "t=500 ps") &&
				      strstr(err.message, "pe3.stuck") &&
				      strstr(err.message, "waits for command 43") &&
				      !strstr(err.message, "idle"),
			      "threads %d: message '%s'", executors[e], err.message);
		ck_assert_uint_eq(kb__sim_stats(m.sim)->end_time, 500);
		kb__sim_destroy(m.sim);
		ck_assert_int_le(threads_left(before), 0);  /* none left running */
	}
}
END_TEST

/* Nothing pending and nothing stuck: a clean finish, also with no events. */
START_TEST(quiescence_clean)
{
	for (size_t e = 0; e < N_EXEC; e++) {
		model m;
		kb_error err;
		int rc;

		model_init(&m, executors[e], LAT);
		model_add(&m, &idle_type);
		model_add(&m, &idle_type);
		rc = kb__sim_run(m.sim, &err);
		ck_assert_msg(rc == 0, "threads %d: %s", executors[e], err.message);
		ck_assert_uint_eq(kb__sim_stats(m.sim)->events, 0);
		/* a simulation runs once */
		ck_assert_int_eq(kb__sim_run(m.sim, &err), KB_ESTATE);
		kb__sim_destroy(m.sim);
	}
}
END_TEST

/* No LPs at all: every executor returns at once. */
START_TEST(empty_simulation)
{
	for (size_t e = 0; e < N_EXEC; e++) {
		kb_sim_config cfg = { .threads = executors[e], .lat_pe = LAT, .lat_cluster = LAT, .lat_global = LAT,
			      .par_threshold = 1 };
		kb_error err;
		kb_sim *sim = kb__sim_create(&cfg, &err);
		int rc;

		ck_assert_ptr_nonnull(sim);
		ck_assert_uint_eq(kb__sim_lp_count(sim), 0);
		rc = kb__sim_run(sim, &err);
		ck_assert_msg(rc == 0, "threads %d: %s", executors[e], err.message);
		ck_assert_uint_eq(kb__sim_stats(sim)->events, 0);
		kb__sim_destroy(sim);
	}
}
END_TEST

/* A zero link latency (no lookahead) is refused. */
START_TEST(zero_latency_refused)
{
	kb_sim_config cfg = { .threads = 1, .lat_pe = LAT, .lat_cluster = 0, .lat_global = LAT,
			      .par_threshold = 0 };
	kb_error err;

	ck_assert_ptr_null(kb__sim_create(&cfg, &err));
	ck_assert_int_eq(err.code, KB_EINVAL);
}
END_TEST

/* kb__sim_request_stop from inside a handler ends the run with KB_ESTATE. */
static kb_sim *stop_target;

static int stopper_event(kb_lp *lp, const kb_event *ev)
{
	(void)lp;
	(void)ev;
	kb__sim_request_stop(stop_target);
	return KB_OK;
}

static const kb_lp_type stopper_type = { "stopper", bad_start, stopper_event, NULL, NULL,
	0, NULL, NULL, NULL };

START_TEST(request_stop)
{
	for (size_t e = 0; e < N_EXEC; e++) {
		model m;
		kb_error err;
		tlp *s;
		int rc, before;

		warm_threads();
		before = thread_count();

		model_init(&m, executors[e], LAT);
		add_ring(&m, 4, 1000000);   /* far more than the test allows */
		s = model_add(&m, &stopper_type);
		s->at = 5000;
		stop_target = m.sim;
		rc = kb__sim_run(m.sim, &err);
		ck_assert_msg(rc == KB_ESTATE, "threads %d: rc %d (%s)", executors[e], rc, err.message);
		ck_assert_msg(strstr(err.message, "stopped"), "message '%s'", err.message);
		ck_assert_uint_lt(kb__sim_stats(m.sim)->events, 100000);
		kb__sim_destroy(m.sim);
		ck_assert_int_le(threads_left(before), 0);  /* none left running */
	}
}
END_TEST

/* ---- handler errors --------------------------------------------------- */

/* "failer" fails at t=`at` with fail_code (kb__lp_fail) unless at == 0;
 * a negative count makes it return the code without kb__lp_fail. */
static int failer_start(kb_lp *lp)
{
	tlp *s = kb__lp_state(lp);

	return s->at ? self_tag(lp, s->at, 0) : KB_OK;
}

static int failer_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);

	(void)ev;
	if (s->count < 0)
		return s->fail_code;
	return kb__lp_fail(lp, s->fail_code, "boom from LP %u", s->id);
}

static const kb_lp_type failer_type = { "failer", failer_start, failer_event, NULL, NULL,
	0, NULL, NULL, NULL };

/* n_lps failers (ids 0..n-1) spread over the workers, with a ring of 3 LPs
 * after them; lat 1000 so that every failure falls in the same window. */
static void fail_case(int threads, const kb_time *at, uint32_t n, int code, uint32_t want_lp,
		      kb_time want_t)
{
	char name[32], what[32], when[32];
	model m;
	kb_error err;
	int rc, before;

	warm_threads();
	before = thread_count();

	model_init(&m, threads, 1000);
	for (uint32_t i = 0; i < n; i++) {
		tlp *s = model_add(&m, &failer_type);

		s->at = at[i];
		s->fail_code = code;
	}
	add_ring(&m, 3, 100);
	rc = kb__sim_run(m.sim, &err);
	ck_assert_msg(rc == code, "threads %d: rc %d (%s), want %d", threads, rc, err.message, code);
	ck_assert_int_eq(err.code, code);
	snprintf(name, sizeof(name), "pe%u.failer", want_lp);
	snprintf(what, sizeof(what), "boom from LP %u", want_lp);
	snprintf(when, sizeof(when), "t=%llu ps", (unsigned long long)want_t);
	ck_assert_msg(strstr(err.message, name) && strstr(err.message, what) &&
			      strstr(err.message, when),
		      "threads %d: message '%s', want %s at %s", threads, err.message, name, when);
	kb__sim_destroy(m.sim);
	ck_assert_int_le(threads_left(before), 0);  /* none left running */
}

START_TEST(handler_error_first_wins)
{
	/* ties at t=300 go to the smaller LP id; an earlier time beats a smaller id */
	static const kb_time a[] = { 0, 0, 0, 0, 300, 0, 300, 0 };      /* LP 4 */
	static const kb_time b[] = { 0, 350, 0, 0, 0, 0, 0, 320 };      /* LP 7 */
	static const kb_time c[] = { 0, 0, 0, 0, 0, 0, 0, 250 };        /* last LP only */
	static const kb_time d[] = { 410, 0, 0, 0, 0, 0, 0, 0 };        /* first LP only */
	static const kb_time f[] = { 0, 0, 0, 999, 0, 0, 999, 1 };      /* LP 7, early */

	for (size_t e = 0; e < N_EXEC; e++) {
		int t = executors[e];

		fail_case(t, a, 8, KB_EVALIDATE, 4, 300);
		fail_case(t, b, 8, KB_EMEM, 7, 320);
		fail_case(t, c, 8, KB_EINVAL, 7, 250);
		fail_case(t, d, 8, KB_EINVAL, 0, 410);
		fail_case(t, f, 8, KB_EINTERNAL, 7, 1);
	}
	/* threads 3: the failers sit on different workers */
	fail_case(3, a, 8, KB_EVALIDATE, 4, 300);
	fail_case(3, b, 8, KB_EMEM, 7, 320);
}
END_TEST

/* "ticker": a self event every ps and a message to the next LP every 7 ps
 * until t=20000; fails at t=`at` (unless 0), and counts in `count` the
 * events it is given after that (none in any executor). */
static int ticker_start(kb_lp *lp)
{
	return self_tag(lp, 1, 0);
}

static int ticker_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);
	kb_time now = kb__lp_now(lp);
	int rc;

	if (s->at && now > s->at)
		s->count++;
	if (ev->type == 1 || now > 20000)
		return KB_OK;
	if (s->at && now == s->at)
		return kb__lp_fail(lp, KB_EINVAL, "boom from LP %u", s->id);
	rc = self_tag(lp, 1, 0);
	if (!rc && now % 7 == 0)
		rc = send_tag(lp, s->dst, LAT, now);
	return rc;
}

static const kb_lp_type ticker_type = { "ticker", ticker_start, ticker_event, NULL, NULL,
	0, NULL, NULL, NULL };

/* An LP that fails in a window stops the run there, also where auto would
 * next hand the run to one thread (KB_EXEC_TRIAL_EVENTS: after every
 * window): the failed LP is given no event after its error, and the
 * error is the one a sequential run meets. */
START_TEST(handler_error_stops_auto)
{
	static const char *const every[] = { NULL, "1", "50" };

	for (size_t e = 0; e < N_EXEC; e++)
		for (size_t k = 0; k < sizeof(every) / sizeof(every[0]); k++) {
			model m;
			kb_error err;
			tlp *bad = NULL;
			int rc;

			if (every[k] && executors[e] != KB_SIM_THREADS_AUTO)
				continue;
			model_init(&m, executors[e], LAT);
			for (uint32_t i = 0; i < 8; i++) {
				tlp *s = model_add(&m, &ticker_type);

				s->dst = (i + 1) % 8;
				if (i == 5)
					bad = s;
			}
			bad->at = 2501;
			if (every[k])
				setenv("KB_EXEC_TRIAL_EVENTS", every[k], 1);
			rc = kb__sim_run(m.sim, &err);
			unsetenv("KB_EXEC_TRIAL_EVENTS");
			ck_assert_msg(rc == KB_EINVAL, "threads %d, every %s: rc %d (%s)", executors[e],
				      every[k] ? every[k] : "-", rc, err.message);
			ck_assert_msg(strstr(err.message, "pe5.ticker") && strstr(err.message, "t=2501 ps"),
				      "threads %d: message '%s'", executors[e], err.message);
			ck_assert_msg(bad->count == 0, "threads %d, every %s: %d events after the error",
				      executors[e], every[k] ? every[k] : "-", bad->count);
			kb__sim_destroy(m.sim);
		}
}
END_TEST

/* An LP of self events at 1 .. count ps, all before any link's latency:
 * a model of them ends in its first window. */
static int spurt_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);

	(void)ev;
	return kb__lp_now(lp) < (kb_time)s->count ? self_tag(lp, 1, 0) : KB_OK;
}

static const kb_lp_type spurt_type = { "spurt", ticker_start, spurt_event, NULL, NULL,
	0, NULL, NULL, NULL };

/* Auto hands the run over only while something is left to run: a run
 * that ends in its first window, with a stretch over after every window
 * (KB_EXEC_TRIAL_EVENTS=1), counts no switch and is not gathered onto
 * one thread for no event (it was: a switch, a regroup, gathered 2). */
START_TEST(auto_no_switch_at_end)
{
	model m;
	kb_error err;
	const kb_sim_stats *st;
	int rc;

	model_init(&m, KB_SIM_THREADS_AUTO, LAT);
	for (uint32_t i = 0; i < 8; i++)
		model_add(&m, &spurt_type)->count = 5;
	setenv("KB_EXEC_TRIAL_EVENTS", "1", 1);
	rc = kb__sim_run(m.sim, &err);
	unsetenv("KB_EXEC_TRIAL_EVENTS");
	ck_assert_msg(rc == KB_OK, "%s", err.message);
	st = kb__sim_stats(m.sim);
	ck_assert_uint_eq(st->events, 8 * 5);
	ck_assert_uint_eq(st->end_time, 5);
	ck_assert_msg(st->switches == 0 && st->alone_events == 0 && st->gathered != 2,
		      "%u workers: %llu switches, %llu events on one thread, gathered %d", st->workers,
		      (unsigned long long)st->switches, (unsigned long long)st->alone_events,
		      st->gathered);
	kb__sim_destroy(m.sim);
}
END_TEST

/* A handler returning an error code without kb__lp_fail still stops the run. */
START_TEST(handler_error_plain_return)
{
	for (size_t e = 0; e < N_EXEC; e++) {
		model m;
		kb_error err;
		tlp *s;
		int rc;

		model_init(&m, executors[e], LAT);
		add_ring(&m, 3, 100);
		s = model_add(&m, &failer_type);
		s->at = 55;
		s->count = -1;
		s->fail_code = KB_EMEM;
		rc = kb__sim_run(m.sim, &err);
		ck_assert_int_eq(rc, KB_EMEM);
		ck_assert_msg(strstr(err.message, "pe3.failer") && strstr(err.message, "t=55 ps"),
			      "message: %s", err.message);
		kb__sim_destroy(m.sim);
	}
}
END_TEST

/* A start callback that returns an error without kb__lp_fail. sim.h does
 * not say what happens; the event callback's error is honoured, so start's
 * should be too.
 * KNOWN BUG (reported): start_lps() in src/sim/core.c ignores the return
 * value of start() and only looks at worker->err, so this run succeeds.
 * Enable the test (tcase_add_test below) once it is fixed. */
static int start_fails(kb_lp *lp)
{
	(void)lp;
	return KB_EIO;
}

static const kb_lp_type start_fail_type = { "sfail", start_fails, recv_event, NULL, NULL,
	0, NULL, NULL, NULL };

START_TEST(start_error_plain_return)
{
	for (size_t e = 0; e < N_EXEC; e++) {
		model m;
		kb_error err;
		int rc;

		model_init(&m, executors[e], LAT);
		model_add(&m, &recv_type);
		model_add(&m, &start_fail_type);
		rc = kb__sim_run(m.sim, &err);
		ck_assert_msg(rc == KB_EIO, "threads %d: start() returned KB_EIO, run gave %d",
			      executors[e], rc);
		kb__sim_destroy(m.sim);
	}
}
END_TEST

/* ---- picosecond conversion -------------------------------------------- */

START_TEST(cycles_to_ps_rounding)
{
	/* the dispatch example of ARCHITECTURE.md §3 */
	ck_assert_uint_eq(kb__cycles_to_ps(40 + 0.0625 * 46, 1.0), 42875);
	ck_assert_uint_eq(kb__cycles_to_ps(42.875, 1.0), 42875);
	ck_assert_uint_eq(kb__cycles_to_ps(1, 1.0), 1000);
	ck_assert_uint_eq(kb__cycles_to_ps(1, 2.0), 500);
	/* 1.5 GHz: 666.67 -> 667, 1333.33 -> 1333, 2000 exact */
	ck_assert_uint_eq(kb__cycles_to_ps(1, 1.5), 667);
	ck_assert_uint_eq(kb__cycles_to_ps(2, 1.5), 1333);
	ck_assert_uint_eq(kb__cycles_to_ps(3, 1.5), 2000);
	/* halves round away from zero */
	ck_assert_uint_eq(kb__cycles_to_ps(0.0005, 1.0), 1);
	ck_assert_uint_eq(kb__cycles_to_ps(0.0015, 1.0), 2);
	ck_assert_uint_eq(kb__cycles_to_ps(0.0025, 1.0), 3);
	ck_assert_uint_eq(kb__cycles_to_ps(1.0025, 1.0), 1003);
	ck_assert_uint_eq(kb__cycles_to_ps(0.0004, 1.0), 0);
	ck_assert_uint_eq(kb__cycles_to_ps(0.0006, 1.0), 1);
	/* 0.7 GHz: 1000/0.7 = 1428.57 -> 1429 */
	ck_assert_uint_eq(kb__cycles_to_ps(1, 0.7), 1429);
	/* zero, negative, NaN -> 0 */
	ck_assert_uint_eq(kb__cycles_to_ps(0, 1.0), 0);
	ck_assert_uint_eq(kb__cycles_to_ps(-0.0, 1.0), 0);
	ck_assert_uint_eq(kb__cycles_to_ps(-1, 1.0), 0);
	ck_assert_uint_eq(kb__cycles_to_ps(-0.0005, 1.0), 0);
	ck_assert_uint_eq(kb__cycles_to_ps(0.0 / 0.0, 1.0), 0);
	/* large values: exact up to the end of simulated time, then
	 * KB_TIME_INF, which no event can reach (kb__time_add refuses it) */
	ck_assert_uint_eq(kb__cycles_to_ps(1e9, 1.0), 1000000000000ull);
	ck_assert_uint_eq(kb__cycles_to_ps(9e15, 1.0), 9000000000000000000ull);
	ck_assert(kb__cycles_to_ps(9e15, 1.0) <= KB_TIME_MAX);
	ck_assert_uint_eq(kb__cycles_to_ps(1e30, 1.0), KB_TIME_INF);
	ck_assert_uint_eq(kb__cycles_to_ps(1e16, 1.0), KB_TIME_INF);
}
END_TEST

/* kb__clock_ps skips the division only where that changes nothing (the
 * proof is in time.h): every whole cycle count below 2^20 and every
 * multiple of 2^-16 below 16, the values around where each shortcut
 * stops, random values across their whole ranges, and random fractional
 * and odd values, at clocks with a whole number of ps per cycle and
 * without, all give what kb__cycles_to_ps gives. */
START_TEST(clock_ps_matches_division)
{
	/* ps per cycle where 1000 / ghz is a whole number exactly; 0.8 and
	 * 0.001 are not exact doubles, so 1000 / ghz is not whole for them */
	static const struct {
		double ghz;
		uint64_t p;
	} clk[] = { { 1.0, 1000 }, { 2.0, 500 }, { 0.5, 2000 }, { 1.25, 800 }, { 100.0, 10 },
		    { 0.125, 8000 }, { 8.0, 125 }, { 40.0, 25 }, { 0.8, 0 }, { 0.001, 0 }, { 1.5, 0 }, { 0.7, 0 }, { 3.0, 0 },
		    { 0.3, 0 }, { 1.1, 0 }, { 64.0, 0 } };
	uint64_t rng = 99, bad = 0, fast = 0, frac = 0;

	for (size_t g = 0; g < sizeof(clk) / sizeof(clk[0]); g++) {
		kb_clock c;
		double top, ftop;

		kb__clock_init(&c, clk[g].ghz);
		ck_assert_uint_eq(c.ps_per_cycle, clk[g].p);
		top = c.whole_below;
		ftop = c.frac_below;
		/* plain comparisons, one assertion: ck_assert per value would
		 * take a minute of checkpointing */
		for (uint64_t x = 0; x < (1u << 20); x++)
			bad += kb__clock_ps(&c, (double)x) != kb__cycles_to_ps((double)x, clk[g].ghz);
		for (int i = -65536; i < 65536; i++) {   /* around the cutoffs */
			double x = top + i, y = ftop * 65536.0 + i;

			if (x >= 0)
				bad += kb__clock_ps(&c, x) != kb__cycles_to_ps(x, clk[g].ghz);
			if (y >= 0)
				bad += kb__clock_ps(&c, y / 65536.0) !=
				       kb__cycles_to_ps(y / 65536.0, clk[g].ghz);
		}
		for (uint64_t y = 0; y < (1u << 20); y++)
			bad += kb__clock_ps(&c, (double)y / 65536.0) !=
			       kb__cycles_to_ps((double)y / 65536.0, clk[g].ghz);
		for (int i = 0; i < 200000; i++) {
			double x;
			uint64_t bits;

			rng = rng * 6364136223846793005u + 1442695040888963407u;
			switch (i % 5) {
			case 0:   /* a whole count in the shortcut's range */
				x = top > 0 ? floor((double)(rng >> 11) / 9007199254740992.0 * top) : (double)(rng >> 44);
				break;
			case 1:   /* fractional */
				x = (double)(rng >> 40) / 1024.0;
				break;
			case 2:   /* any double at all: huge, tiny, negative, NaN */
				bits = rng;
				memcpy(&x, &bits, sizeof(x));
				break;
			case 3:   /* a multiple of 2^-16 in the fractional shortcut's range */
				x = floor((double)(rng >> 11) / 9007199254740992.0 * ftop * 65536.0) / 65536.0;
				break;
			default:  /* whole, past the shortcut */
				x = top + (double)(rng >> 30);
				break;
			}
			bad += kb__clock_ps(&c, x) != kb__cycles_to_ps(x, clk[g].ghz);
			fast += x >= 0.0 && x < top && x == floor(x);
			frac += x >= 0.0 && x < ftop && x != floor(x) && x * 65536.0 == floor(x * 65536.0);
		}
	}
	ck_assert_uint_eq(bad, 0);
	/* the shortcuts were taken, not only the division */
	ck_assert_uint_gt(fast, 200000);
	ck_assert_uint_gt(frac, 200000);
}
END_TEST

/* Rule (issue 18): a time addition that would pass 2^63 - 1 ps fails and
 * leaves the time as it was; it never wraps. */
START_TEST(time_add_checked)
{
	kb_time t = KB_TIME_MAX - 5;

	ck_assert_int_eq(kb__time_add(&t, 5), 0);
	ck_assert_uint_eq(t, KB_TIME_MAX);
	ck_assert_int_eq(kb__time_add(&t, 1), -1);
	ck_assert_uint_eq(t, KB_TIME_MAX);
	t = 0;
	ck_assert_int_eq(kb__time_add(&t, KB_TIME_INF), -1);
	ck_assert_uint_eq(t, 0);
	ck_assert_int_eq(kb__time_add(&t, KB_TIME_MAX), 0);
	t = 1;
	ck_assert_int_eq(kb__time_add(&t, KB_TIME_MAX), -1);
	ck_assert_uint_eq(t, 1);
}
END_TEST

/* ---- empty stretches -------------------------------------------------- */

/* Two LPs bounce a token 1 s of simulated time apart, 4 times. */
START_TEST(empty_stretches_skipped)
{
	const kb_time second = 1000000000000ull;

	for (size_t e = 0; e < N_EXEC; e++) {
		model m;
		kb_error err;
		const kb_sim_stats *st;
		int rc;

		model_init(&m, executors[e], 1000);
		add_ring(&m, 2, 4);
		m.st[0].delay = second;
		m.st[1].delay = second;
		m.st[0].count = m.st[1].count = 1;
		rc = kb__sim_run(m.sim, &err);
		ck_assert_msg(rc == 0, "%s", err.message);
		st = kb__sim_stats(m.sim);
		/* tokens: 0 -> 1 at 1 s, hops until 3; LP 1's token likewise */
		ck_assert_uint_eq(st->events, 2 * 4);
		ck_assert_uint_eq(st->end_time, 4 * second);
		if (executors[e] != 1) {
			ck_assert_uint_eq(st->workers, 2);
			ck_assert_uint_eq(st->window, 1000);
			ck_assert_msg(st->windows <= 16, "threads %d: %llu windows for 8 events",
				      executors[e], (unsigned long long)st->windows);
		}
		kb__sim_destroy(m.sim);
	}
}
END_TEST

/* ---- message node recycling ------------------------------------------- */

/* "talker" sends `count` messages per tick (1 ps) to LP `dst` for `at`
 * ticks; the receiver never answers. */
static int talker_start(kb_lp *lp)
{
	return self_tag(lp, 0, 0);
}

static int talker_event(kb_lp *lp, const kb_event *ev)
{
	tlp *s = kb__lp_state(lp);
	int rc = KB_OK;

	for (int i = 0; i < s->count && !rc; i++)
		rc = send_tag(lp, s->dst, s->delay, ev->w[0]);
	if (!rc && ev->w[0] + 1 < s->at)
		rc = self_tag(lp, 1, ev->w[0] + 1);
	return rc;
}

static int sink_event(kb_lp *lp, const kb_event *ev)
{
	(void)lp;
	(void)ev;
	return KB_OK;
}

static const kb_lp_type talker_type = { "talker", talker_start, talker_event, NULL, NULL,
	0, NULL, NULL, NULL };
static const kb_lp_type sink_type = { "sink", NULL, sink_event, NULL, NULL, 0, NULL, NULL, NULL };

/* One-way traffic between two workers: the nodes freed by the receiving
 * worker should come back to the sender's pool (or the pools be bounded),
 * so memory does not grow with the number of messages.
 * KNOWN BUG (reported): nodes are recycled into the *consumer's* free list
 * (kb__worker_drain), so with one-way traffic the sender allocates a new
 * slab every 256 messages and the receiver's free list grows without bound:
 * about 96 bytes per message for the whole run (2M messages: ~190 MB).
 * Enable the test (tcase_add_test below) once it is fixed. */
START_TEST(one_way_traffic_memory)
{
	model m;
	kb_error err;
	tlp *a, *b;
	struct rusage ru0, ru1;
	long grew;
	int rc;

	model_init(&m, 2, LAT);
	a = model_add(&m, &talker_type);
	b = model_add(&m, &sink_type);
	(void)b;
	a->dst = 1;
	a->delay = LAT;
	a->count = 50;
	a->at = 40000;
	getrusage(RUSAGE_SELF, &ru0);
	rc = kb__sim_run(m.sim, &err);
	getrusage(RUSAGE_SELF, &ru1);
	ck_assert_msg(rc == 0, "%s", err.message);
	/* 2M messages and the talker's 40000 ticks */
	ck_assert_uint_eq(kb__sim_stats(m.sim)->events, 2000000 + 40000);
	grew = ru1.ru_maxrss - ru0.ru_maxrss;
	kb__sim_destroy(m.sim);
	ck_assert_msg(grew < 32 * 1024, "peak RSS grew by %ld kB for 2M one-way messages", grew);
}
END_TEST

/* ---- synthetic model -------------------------------------------------- */

/*
 * GOLDEN op_log hash of `kernbench run synthetic --param lps=8
 * --param events=5000 --param seed=7 --threads 1` (any --threads gives the
 * same bytes).
 *
 * It changes when, and only when, one of these changes:
 *  - the PHOLD model (benches/kernels/synthetic.c): how each LP's generator
 *    is seeded (seed * 0x9e3779b97f4a7c15 + i) and in which order it is
 *    drawn (delay first, then the remote coin, then the target), the delay
 *    law (lookahead + uniform integer in [0, 2 mean]), the quota rule or the
 *    default parameters (lookahead_ns 1, mean_ns 10, remote 0.9);
 *  - the generator itself (kb_rng in src/bench/rng.c);
 *  - the event order of the core ((time, source LP, source seq));
 *  - the op_log record format (key order, the "src" member of "event"
 *    records, number formatting) or record order.
 * Update it only in a commit whose message explains the model change that
 * moved it; a change without such an explanation is a determinism bug.
 */
#define SYNTH_GOLDEN "5694871ed6e7ed5a3f948375f6737668e7c98c9c247c83778dde91a08ad8338a"
/* Figures of the same run. Fewer records than `events`: every LP starts one
 * message, a message ends at an LP whose quota is spent, so the run stops
 * when the last of the 8 messages is absorbed (events = records + 8). */
#define SYNTH_GOLDEN_RECORDS 4767u
#define SYNTH_GOLDEN_EVENTS 4775u
#define SYNTH_GOLDEN_TIME_PS 6680569u

START_TEST(synthetic_reproducible)
{
	static const char *const p[] = { "lps=8", "events=5000", "seed=7", NULL };
	kb_result r1 = KB_RESULT_INIT, r2 = KB_RESULT_INIT;
	kb_error err;

	ck_assert_msg(kbt_run("synthetic", p, NULL, 1, 0, &r1, &err) == 0, "%s", err.message);
	ck_assert_msg(kbt_run("synthetic", p, NULL, 1, 0, &r2, &err) == 0, "%s", err.message);
	ck_assert_str_eq(r1.oplog_sha256, r2.oplog_sha256);
	ck_assert_uint_eq(r1.sim_time_ps, r2.sim_time_ps);
	ck_assert_uint_eq(r1.events, r2.events);
	ck_assert_uint_eq(r1.records, SYNTH_GOLDEN_RECORDS);
	ck_assert_uint_eq(r1.events, SYNTH_GOLDEN_EVENTS);
	ck_assert_uint_eq(r1.sim_time_ps, SYNTH_GOLDEN_TIME_PS);
	ck_assert_msg(strcmp(r1.oplog_sha256, SYNTH_GOLDEN) == 0,
		      "synthetic lps=8 events=5000 seed=7: oplog_sha256 %s, golden %s "
		      "(sim_time_ps %llu, events %llu); see the comment above SYNTH_GOLDEN",
		      r1.oplog_sha256, SYNTH_GOLDEN, (unsigned long long)r1.sim_time_ps,
		      (unsigned long long)r1.events);
	kb_result_clear(&r1);
	kb_result_clear(&r2);
	/* and the same bytes from the threaded executors */
	for (int t = 0; t <= 2; t += 2) {
		ck_assert_msg(kbt_run("synthetic", p, NULL, t, 0, &r2, &err) == 0, "%s", err.message);
		ck_assert_msg(strcmp(r2.oplog_sha256, SYNTH_GOLDEN) == 0, "threads %d: %s", t,
			      r2.oplog_sha256);
		kb_result_clear(&r2);
	}
}
END_TEST

/* Auto on a model whose windows hold an event or two (a 1 ns link, 16
 * LPs) goes on sequentially after a thousand windows: the same bytes as
 * --threads 1, and the run says it gathered (where there are two cores to
 * start from; on one, auto is sequential from the start). */
START_TEST(auto_gathers_starved_windows)
{
	static const char *const p[] = { "lps=16", "events=20000", "seed=5", NULL };
	kb_result r1 = KB_RESULT_INIT, ra = KB_RESULT_INIT, r2 = KB_RESULT_INIT;
	kb_error err;

	ck_assert_msg(kbt_run("synthetic", p, NULL, 1, 0, &r1, &err) == 0, "%s", err.message);
	ck_assert_msg(kbt_run("synthetic", p, NULL, KB_THREADS_AUTO, 0, &ra, &err) == 0, "%s",
		      err.message);
	ck_assert_msg(kbt_run("synthetic", p, NULL, 2, 0, &r2, &err) == 0, "%s", err.message);
	ck_assert_str_eq(ra.oplog_sha256, r1.oplog_sha256);
	ck_assert_str_eq(r2.oplog_sha256, r1.oplog_sha256);
	ck_assert_uint_eq(ra.events, r1.events);
	ck_assert_uint_eq(ra.sim_time_ps, r1.sim_time_ps);
	if (ra.workers > 1) {
		ck_assert_int_eq(ra.exec.gathered, 2);
		ck_assert_uint_lt(ra.windows, r2.windows);
	}
	ck_assert_int_eq(r2.exec.gathered, 0);   /* a thread count asked for keeps its windows */
	kb_result_clear(&r1);
	kb_result_clear(&ra);
	kb_result_clear(&r2);
}
END_TEST

/* Different seeds give different logs (the seed is really used). */
START_TEST(synthetic_seed_matters)
{
	static const char *const p7[] = { "lps=8", "events=2000", "seed=7", NULL };
	static const char *const p8[] = { "lps=8", "events=2000", "seed=8", NULL };
	kb_result a = KB_RESULT_INIT, b = KB_RESULT_INIT;
	kb_error err;

	ck_assert_msg(kbt_run("synthetic", p7, NULL, 1, 0, &a, &err) == 0, "%s", err.message);
	ck_assert_msg(kbt_run("synthetic", p8, NULL, 1, 0, &b, &err) == 0, "%s", err.message);
	ck_assert_str_ne(a.oplog_sha256, b.oplog_sha256);
	ck_assert(a.records > 1500 && a.records <= 2000);
	ck_assert(b.records > 1500 && b.records <= 2000);
	ck_assert_uint_eq(a.events, a.records + 8);
	kb_result_clear(&a);
	kb_result_clear(&b);
}
END_TEST


/* ---- LP types that own their state (state_size / init / final) ---------- */

static int owned_inits, owned_finals;

typedef struct owned {
	int seen;
	int *buf;
} owned;

static int owned_init(void *st, void *arg)
{
	owned *o = st;

	ck_assert_int_eq(o->seen, 0); /* the core hands a zeroed state */
	if (arg)
		return KB_EINVAL;        /* an init that fails adds no LP */
	o->buf = malloc(16);
	owned_inits++;
	return o->buf ? KB_OK : KB_ENOMEM;
}

static void owned_final(void *st)
{
	owned *o = st;

	free(o->buf);
	owned_finals++;
}

static int owned_event(kb_lp *lp, const kb_event *ev)
{
	owned *o = kb__lp_state(lp);

	(void)ev;
	o->seen++;
	return KB_OK;
}

static int owned_start(kb_lp *lp)
{
	kb_event ev = { .type = 1 };

	return kb__lp_self(lp, 5, &ev);
}

static const kb_lp_type owned_type = { "owned", owned_start, owned_event, NULL, NULL,
				       sizeof(owned), owned_init, owned_final, NULL };

START_TEST(lp_type_owns_state)
{
	kb_sim_config cfg = { .threads = 1, .lat_pe = LAT, .lat_cluster = LAT, .lat_global = LAT,
			      .par_threshold = 0 };
	kb_error err;
	kb_sim *sim = kb__sim_create(&cfg, &err);
	int fail = 1;

	owned_inits = owned_finals = 0;
	ck_assert_ptr_nonnull(sim);
	ck_assert_uint_eq(kb__sim_add_lp(sim, &owned_type, NULL, 0, 0), 0);
	ck_assert_uint_eq(kb__sim_add_lp(sim, &owned_type, &fail, 0, 0), UINT32_MAX);
	ck_assert_uint_eq(kb__sim_add_lp(sim, &owned_type, NULL, 0, 0), 1);
	ck_assert_uint_eq(kb__sim_lp_count(sim), 2);
	ck_assert_int_eq(owned_inits, 2);
	ck_assert_int_eq(owned_finals, 1); /* the failed init's state was finalized */
	ck_assert_int_eq(kb__sim_run(sim, &err), 0);
	ck_assert_int_eq(((owned *)kb__sim_lp_state(sim, 1))->seen, 1);
	ck_assert_ptr_null(kb__sim_lp_state(sim, 2));
	kb__sim_destroy(sim);
	ck_assert_int_eq(owned_finals, 3);
}
END_TEST

Suite *sim_suite(void)
{
	Suite *s = suite_create("sim");
	TCase *order = tcase_create("order");
	TCase *errors = tcase_create("errors");
	TCase *timec = tcase_create("time");
	TCase *synth = tcase_create("synthetic");

	tcase_add_test(order, equal_time_order);
	tcase_add_test(order, self_events_same_time);
	tcase_add_test(order, registers_keep_order);
	tcase_add_test(order, ring_keeps_order);
	tcase_add_test(order, bands_keep_order);
	tcase_add_test(order, send_runs_keep_order);
	tcase_add_test(order, senders_meet_in_one_inbox);
	tcase_add_test(order, short_sends_deliver_as_sequential);
	suite_add_tcase(s, order);

	tcase_set_timeout(errors, 60);
	tcase_add_test(errors, lookahead_violation);
	tcase_add_test(order, horizon_stretches_windows);
	tcase_add_test(errors, horizon_lie_caught);
	tcase_add_test(errors, lookahead_violation_no_threads_left);
	tcase_add_test(errors, lookahead_violation_at_start);
	tcase_add_test(errors, short_sends_keep_lookahead);
	tcase_add_test(errors, deadlock_detected);
	tcase_add_test(errors, quiescence_clean);
	tcase_add_test(errors, empty_simulation);
	tcase_add_test(errors, zero_latency_refused);
	tcase_add_test(errors, request_stop);
	tcase_add_test(errors, handler_error_first_wins);
	tcase_add_test(errors, handler_error_plain_return);
	tcase_add_test(errors, handler_error_stops_auto);
	tcase_add_test(errors, auto_no_switch_at_end);
	tcase_add_test(errors, start_error_plain_return);
	tcase_add_test(errors, lp_type_owns_state);
	suite_add_tcase(s, errors);

	tcase_set_timeout(timec, 60);
	tcase_add_test(timec, cycles_to_ps_rounding);
	tcase_add_test(timec, clock_ps_matches_division);
	tcase_add_test(timec, time_add_checked);
	tcase_add_test(timec, empty_stretches_skipped);
	tcase_add_test(timec, one_way_traffic_memory);
	suite_add_tcase(s, timec);

	tcase_set_timeout(synth, 60);
	tcase_add_test(synth, synthetic_reproducible);
	tcase_add_test(synth, synthetic_seed_matters);
	tcase_add_test(synth, auto_gathers_starved_windows);
	suite_add_tcase(s, synth);
	return s;
}
