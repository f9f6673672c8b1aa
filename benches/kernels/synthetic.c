/*
 * The synthetic model of the core alone, in the spirit of PHOLD (ROSS, SST):
 * `lps` LPs exchange messages with seeded pseudo-random delays (at least the
 * lookahead) and targets. Each LP owns its generator, so nothing depends on
 * scheduling. An LP handles up to events/lps events (the first events % lps
 * LPs one more) and forwards one message per handled event; a message that
 * reaches an LP whose quota is spent ends there. `work` burns CPU per event
 * to stand in for an engine's real work, and `population` (messages each LP
 * starts with) sets how much parallel work a window holds.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "base/memlimit.h"
#include "bench/bench_impl.h"
#include "bench/rng.h"
#include "oplog/oplog.h"
#include "pe/pe.h"
#include "runtime/oplog_pump.h"
#include "runtime/simulation_impl.h"
#include "sim/sim.h"

typedef struct phold_lp {
	kb_rng rng;
	uint64_t quota, handled;
	uint32_t id, n_lps;
	kb_time lookahead, spread;
	double remote;
	uint64_t work;
	uint64_t population;
	uint64_t sink;
	kb_oplog_lane *lane;     /* NULL: no op_log */
} phold_lp;

static uint64_t burn(uint64_t iters, uint64_t x)
{
	for (uint64_t i = 0; i < iters; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	return x;
}

static int forward(kb_lp *lp, phold_lp *s)
{
	kb_event ev = { .type = 1 };
	kb_time delay = s->lookahead + kb__rng_below(&s->rng, s->spread + 1);
	uint32_t dst = s->id;

	if (s->n_lps > 1 && kb__rng_uniform(&s->rng) < s->remote) {
		dst = (uint32_t)kb__rng_below(&s->rng, s->n_lps - 1);
		if (dst >= s->id)
			dst++;
	}
	ev.w[0] = s->handled;
	return kb__lp_send(lp, dst, delay, &ev);
}

static int phold_start(kb_lp *lp)
{
	phold_lp *s = kb__lp_state(lp);
	int rc = KB_OK;

	for (uint64_t i = 0; !rc && s->quota && i < s->population; i++)
		rc = forward(lp, s);
	return rc;
}

static int phold_event(kb_lp *lp, const kb_event *ev)
{
	phold_lp *s = kb__lp_state(lp);
	kb_oplog_lane *lane = s->lane;

	if (s->handled >= s->quota)
		return KB_OK;
	s->handled++;
	s->sink = burn(s->work, s->sink + ev->w[0]);
	if (lane) {
		kb_oplog_record r = { kb__lp_now(lp), kb__lp_now(lp), s->id, "lp", "event",
				      s->handled - 1, NULL, -1, -1, NULL, 0, sizeof(kb_oplog_record) };
		kb_oplog_field f = KB_FIELD_U("src", ev->src);

		if (kb__oplog_emit(lane, &r, &f, 1))
			return kb__lp_fail(lp, KB_ENOMEM, "out of memory buffering an op_log record");
	}
	return forward(lp, s);
}

static const kb_lp_type phold_type = { "lp", phold_start, phold_event, NULL, NULL, 0, NULL, NULL, NULL };

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Host memory of an LP's queue, lane and state, measured (about 9 KiB at
 * 65536 LPs), with room; and of a message in flight: a queued event, twice
 * for the heap's doubling. */
#define LP_BYTES (16u << 10)
#define MESSAGE_BYTES (2 * sizeof(kb_event))

/* Refuses before any LP exists when the messages in flight at the start
 * (every LP sends population of them) cannot fit in host memory. */
static int check_memory(uint32_t n, uint64_t population, kb_error *err)
{
	uint64_t messages = kb__mul_sat(n, population);
	uint64_t need = kb__add_sat(kb__mul_sat(n, LP_BYTES), kb__mul_sat(messages, MESSAGE_BYTES));
	char why[160];

	snprintf(why, sizeof(why),
		 "lps = %u x population = %llu (%llu messages in flight from the start)", n,
		 (unsigned long long)population, (unsigned long long)messages);
	return kb__mem_need(need, why, err);
}

static int run_synthetic(kb_bench_ctx *ctx, kb_result *res, kb_error *err)
{
	uint32_t n = (uint32_t)kb__bench_int(ctx, "lps");
	uint64_t total = (uint64_t)kb__bench_int(ctx, "events"), seed = (uint64_t)kb__bench_int(ctx, "seed");
	kb_time la = kb__cycles_to_ps(kb__bench_real(ctx, "lookahead_ns"), 1.0);
	kb_oplog_options oo = { ctx->opt->oplog_path, ctx->opt->trace_path, ctx->opt->on_record,
				ctx->opt->payload, kb__eng_names, KB_ENG_COUNT,
				kb__eng_channel, ctx->meta_json };
	kb_sim_config cfg = { .threads = ctx->opt->threads, .lat_pe = la, .lat_cluster = la, .lat_global = la,
			      .par_threshold = 0 };
	kb_oplog_pump pump;
	phold_lp *lps;
	kb_oplog *log = NULL;
	kb_sim *sim = NULL;
	double t0;
	int rc;

	rc = check_memory(n, (uint64_t)kb__bench_int(ctx, "population"), err);
	if (rc)
		return rc;
	lps = calloc(n, sizeof(*lps));
	if (!lps)
		return kb__err(err, KB_ENOMEM, "out of memory for %u LPs", n);
	if (ctx->opt->data) {
		free(lps);
		return kb__err(err, KB_EINVAL, "the synthetic model has no data mode");
	}
	rc = kb__oplog_create(&log, &oo, err);
	kb__oplog_pump_attach(&pump, log, &cfg);
	if (!rc && !(sim = kb__sim_create(&cfg, err)))
		rc = err ? err->code : KB_ENOMEM;
	for (uint32_t i = 0; !rc && i < n; i++) {
		phold_lp *s = &lps[i];

		kb__rng_seed(&s->rng, seed * 0x9e3779b97f4a7c15u + i);
		s->quota = total / n + (i < total % n);
		s->id = i;
		s->n_lps = n;
		s->lookahead = la;
		s->spread = 2 * kb__cycles_to_ps(kb__bench_real(ctx, "mean_ns"), 1.0);
		s->remote = kb__bench_real(ctx, "remote");
		s->work = (uint64_t)kb__bench_int(ctx, "work");
		s->population = (uint64_t)kb__bench_int(ctx, "population");
		if (kb__sim_add_lp(sim, &phold_type, s, i, 0) != i ||
		    (log && !(s->lane = kb__oplog_lane(log, i))))
			rc = kb__err(err, KB_ENOMEM, "out of memory adding LPs");
	}
	t0 = now_s();
	if (!rc)
		rc = kb__sim_run(sim, err);
	if (log) {
		kb_error ferr;
		int frc;

		if (rc)
			kb__oplog_discard(log);
		frc = kb__oplog_finish(log, res->oplog_sha256, &res->records, &ferr);
		if (!rc && frc) {
			kb__err_copy(err, &ferr);
			rc = frc;
		}
	}
	if (!rc) {
		const kb_sim_stats *st = kb__sim_stats(sim);

		res->wall_s = now_s() - t0;
		res->sim_time_ps = st->end_time;
		res->events = st->events;
		kb__result_exec(res, st);
		res->exec.ns_oplog_serial = kb__oplog_sink_ns(log);
		res->events_per_s = res->wall_s > 0 ? (double)st->events / res->wall_s : 0;
		res->dispatch_per_tile_ns = 0.0 / 0.0;
		res->dispatch_kernel_per_tile_ns = 0.0 / 0.0;
		res->max_abs_err = res->max_rel_err = 0.0 / 0.0;
	}
	kb__sim_destroy(sim);
	kb__oplog_destroy(log);
	free(lps);
	return rc;
}

static const kb_param_info params[] = {
	{ "lps", KB_PARAM_INT, "16", "logical processes", NULL, 1, 65536 },
	{ "events", KB_PARAM_INT, "100000", "events to handle in all", NULL, 0, 1e10 },
	{ "seed", KB_PARAM_INT, "1", "seed of every LP's generator", NULL, 0, 9e18 },
	{ "lookahead_ns", KB_PARAM_REAL, "1", "smallest message delay (the window)", NULL, 0.001, 1e6 },
	{ "mean_ns", KB_PARAM_REAL, "10", "mean extra delay (uniform over [0, 2 mean])", NULL, 0, 1e6 },
	{ "remote", KB_PARAM_REAL, "0.9", "probability a message goes to another LP", NULL, 0, 1 },
	{ "work", KB_PARAM_INT, "0", "busy-loop iterations per event", NULL, 0, 1e9 },
	{ "population", KB_PARAM_INT, "1", "messages each LP starts with (parallelism)", NULL, 1, 1 << 20 },
};

const kb_bench_def kb__bench_synthetic = {
	KB_BENCH_ABI,
	{ "synthetic", "PHOLD-style model of the simulation core alone", params,
	  sizeof(params) / sizeof(params[0]) },
	run_synthetic, NULL, NULL,
};
