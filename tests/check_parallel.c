/*
 * Determinism of the executors, in the manner of ROSS_TEST_SCHEDULERS: one
 * table of models and one of executors; every model gives the same op_log
 * bytes and the same simulated figures under every executor, run after run.
 * Then a short stress: random models with random thread counts
 * (tests/stress.sh is the long version, `make check-stress`).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernbench.h"
#include "suites.h"
#include "testutil.h"

typedef struct model {
	const char *name;       /* for messages */
	const char *bench;
	const char *params[6];
} model;

static const model models[] = {
	{ "synthetic", "synthetic", { "lps=16", "events=20000", NULL } },
	{ "synthetic-wide", "synthetic", { "lps=16", "events=20000", "lookahead_ns=50", NULL } },
	/* ~50 events per window: the windows that run on every worker thread */
	{ "synthetic-dense", "synthetic", { "lps=64", "events=100000", "lookahead_ns=50", NULL } },
	{ "gemm", "gemm", { "M=256", "K=256", "N=256", NULL } },
	{ "gemm-relu", "gemm", { "M=256", "K=256", "N=256", "epilogue=relu", NULL } },
	{ "opt2", "gqa_decode_opt2", { "S_kv=512", NULL } },
	{ "opt3", "gqa_decode_opt3", { "S_kv=512", NULL } },
	{ "opt2-4pe", "gqa_decode_opt2", { "H_kv=2", "P=2", "C=2", "S_kv=512", NULL } },
	{ "opt3-4pe", "gqa_decode_opt3", { "H_kv=4", "P=1", "S_kv=256", NULL } },
	/* IPCQ gathers within and across clusters: horizons shrink and grow */
	{ "opt3-16pe", "gqa_decode_opt3", { "H_kv=4", "P=4", "C=2", "S_kv=2048", NULL } },
	{ "opt2-8pe", "gqa_decode_opt2", { "H_kv=2", "P=4", "C=4", "S_kv=2048", NULL } },
};
#define N_MODELS ((int)(sizeof(models) / sizeof(models[0])))

static const int executors[] = { 1, 2, 3, 0, KB_THREADS_AUTO };
#define N_EXEC ((int)(sizeof(executors) / sizeof(executors[0])))

/* The simulated figures that must not depend on the executor. */
typedef struct figures {
	char sha[65];
	uint64_t sim_time_ps, events, records, commands, dispatch_ps, tiles;
	uint32_t pes;
	double max_abs_err, max_rel_err;
	/* how it ran (not compared) */
	unsigned workers;
	uint64_t alone_events, switches;
} figures;

static void run_model(const model *m, int threads, int data, figures *f)
{
	kb_result r = KB_RESULT_INIT;
	kb_error err;
	int rc = kbt_run(m->bench, m->params, NULL, threads, data, &r, &err);

	ck_assert_msg(rc == 0, "%s threads %d: %s", m->name, threads, err.message);
	memset(f, 0, sizeof(*f));
	memcpy(f->sha, r.oplog_sha256, sizeof(f->sha));
	f->sim_time_ps = r.sim_time_ps;
	f->events = r.events;
	f->records = r.records;
	f->commands = r.commands;
	f->dispatch_ps = r.dispatch_ps;
	f->tiles = r.tiles;
	f->pes = r.pes;
	f->max_abs_err = r.max_abs_err;
	f->max_rel_err = r.max_rel_err;
	f->workers = r.workers;
	f->alone_events = r.alone_events;
	f->switches = r.exec_switches;
	ck_assert_int_eq(r.threads, threads);
	ck_assert_uint_eq(strlen(f->sha), 64);
	ck_assert_uint_gt(f->records, 0);
	kb_result_clear(&r);
}

static int same_double(double a, double b)
{
	return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof(a)) == 0;
}

static void expect_same(const model *m, const char *what, const figures *ref, const figures *f)
{
	ck_assert_msg(strcmp(ref->sha, f->sha) == 0, "%s, %s: oplog_sha256 %s, want %s", m->name,
		      what, f->sha, ref->sha);
#define SAME(x)                                                                                  \
	ck_assert_msg(ref->x == f->x, "%s, %s: " #x " %llu, want %llu", m->name, what,            \
		      (unsigned long long)f->x, (unsigned long long)ref->x)
	SAME(sim_time_ps);
	SAME(events);
	SAME(records);
	SAME(commands);
	SAME(dispatch_ps);
	SAME(tiles);
	SAME(pes);
#undef SAME
	ck_assert_msg(same_double(ref->max_abs_err, f->max_abs_err) &&
			      same_double(ref->max_rel_err, f->max_rel_err),
		      "%s, %s: max_abs_err %.17g / max_rel_err %.17g, want %.17g / %.17g", m->name,
		      what, f->max_abs_err, f->max_rel_err, ref->max_abs_err, ref->max_rel_err);
}

/* One model (the loop index) under every executor, twice each. */
START_TEST(model_x_executors)
{
	const model *m = &models[_i];
	figures ref, f;
	char what[64];

	run_model(m, 1, 0, &ref);
	ck_assert_uint_gt(ref.events, 0);
	ck_assert_uint_gt(ref.sim_time_ps, 0);
	for (int rep = 0; rep < 2; rep++) {
		for (int e = 0; e < N_EXEC; e++) {
			if (rep == 0 && executors[e] == 1)
				continue;
			/* the second time, auto and --threads 0 regroup their
			 * workers after every 3 windows (PEs whole, then one) */
			snprintf(what, sizeof(what), "threads %d run %d%s", executors[e], rep + 1,
				 rep ? " regrouping" : "");
			if (rep)
				setenv("KB_EXEC_ADAPT_WINDOWS", "3", 1);
			run_model(m, executors[e], 0, &f);
			unsetenv("KB_EXEC_ADAPT_WINDOWS");
			expect_same(m, what, &ref, &f);
		}
	}
}
END_TEST

/* Data mode: the numerical results are the same under every executor. */
START_TEST(data_mode_x_executors)
{
	static const model dm[] = {
		{ "opt2-data", "gqa_decode_opt2", { "H_kv=2", "P=2", "C=2", "S_kv=256", NULL } },
		{ "opt3-data", "gqa_decode_opt3", { "S_kv=256", NULL } },
	};

	for (size_t k = 0; k < sizeof(dm) / sizeof(dm[0]); k++) {
		figures ref, f, timing;
		char what[64];

		run_model(&dm[k], 1, 1, &ref);
		ck_assert_msg(isfinite(ref.max_abs_err), "%s: max_abs_err %g", dm[k].name,
			      ref.max_abs_err);
		for (int e = 0; e < N_EXEC; e++) {
			snprintf(what, sizeof(what), "data, threads %d", executors[e]);
			run_model(&dm[k], executors[e], 1, &f);
			expect_same(&dm[k], what, &ref, &f);
		}
		/* data mode does not change the timing */
		run_model(&dm[k], 0, 0, &timing);
		ck_assert_uint_eq(timing.sim_time_ps, ref.sim_time_ps);
		ck_assert_uint_eq(timing.events, ref.events);
	}
}
END_TEST

/* Auto's choice between windows and one thread hands the run over both
 * ways mid-run (KB_EXEC_TRIAL_EVENTS: every ~N events, whatever is
 * faster): the same bytes and figures as --threads 1, in timing and in
 * data mode, with stretches of one event and of hundreds. */
START_TEST(auto_hands_over)
{
	static const model dm[] = {
		{ "opt2-4pe-data", "gqa_decode_opt2", { "H_kv=2", "P=2", "C=2", "S_kv=2048", NULL } },
	};
	static const char *const every[] = { "1", "97", "700" };
	int asserted = 0;
	const model *m = _i < N_MODELS ? &models[_i] : &dm[0];
	int data = _i >= N_MODELS;
	figures ref, f;
	char what[64];

	run_model(m, 1, data, &ref);
	for (size_t k = 0; k < sizeof(every) / sizeof(every[0]); k++) {
		setenv("KB_EXEC_TRIAL_EVENTS", every[k], 1);
		run_model(m, KB_THREADS_AUTO, data, &f);
		unsetenv("KB_EXEC_TRIAL_EVENTS");
		snprintf(what, sizeof(what), "auto, a stretch every %s events", every[k]);
		expect_same(m, what, &ref, &f);
		/* A switch counts a way that then runs: one to one thread is
		 * never counted when no event ran on it (one at the very end
		 * of the run was, with a regroup for nothing). */
		if (f.alone_events == 0)
			ck_assert_msg(f.switches == 0, "%s, %s: %llu switches and no event on one thread",
				      m->name, what, (unsigned long long)f.switches);
		/* Both ways, at least once each, where the run is long enough
		 * (a stretch on one thread is at least one loop of the
		 * sequential executor, 1024 events). synthetic's 1 ns windows
		 * starve first: auto goes sequential for good
		 * (auto_gathers_starved_windows). */
		if (f.workers > 1 && strcmp(m->name, "synthetic") &&
		    f.events >= 4 * (strtoull(every[k], NULL, 10) + 1024)) {
			ck_assert_msg(f.switches >= 2, "%s, %s: %llu switches", m->name, what,
				      (unsigned long long)f.switches);
			ck_assert_uint_gt(f.alone_events, 0);
			ck_assert_uint_lt(f.alone_events, f.events);
			asserted++;
		}
	}
	/* the long models hand over at every stretch length (one core: none) */
	if (ref.events >= 20000 && strcmp(m->name, "synthetic") && f.workers > 1)
		ck_assert_int_eq(asserted, 3);
}
END_TEST

/* Short stress: random models, random thread counts 1..8 (seeded). */
START_TEST(short_stress)
{
	figures ref[N_MODELS];
	int have[N_MODELS] = { 0 };
	unsigned seed = 20240531u;

	for (int run = 0; run < 20; run++) {
		int k, threads;
		figures f;
		char what[64];

		k = (int)(rand_r(&seed) % N_MODELS);
		threads = 1 + (int)(rand_r(&seed) % 8);
		if (!have[k]) {
			run_model(&models[k], 1, 0, &ref[k]);
			have[k] = 1;
		}
		snprintf(what, sizeof(what), "stress run %d, threads %d", run, threads);
		run_model(&models[k], threads, 0, &f);
		expect_same(&models[k], what, &ref[k], &f);
	}
}
END_TEST

/* The workers really are used: threads N gives 4N workers (up to the PEs,
 * here the LPs) shared by at most N busy threads; N >= LPs, or 0, a worker
 * per LP. */
START_TEST(workers_used)
{
	static const char *const p[] = { "lps=16", "events=2000", NULL };
	kb_result r = KB_RESULT_INIT;
	kb_error err;

	for (int t = 0; t <= 20; t += (t < 4 ? 1 : 16)) {
		ck_assert_msg(kbt_run("synthetic", p, NULL, t, 0, &r, &err) == 0, "%s", err.message);
		ck_assert_uint_eq(r.workers, t == 0 || t >= 16 ? 16u
					     : t == 1	     ? 1u
					     : (4u * (unsigned)t > 16u ? 16u : 4u * (unsigned)t));
		if (t > 0)
			ck_assert_uint_le(r.exec.threads, (unsigned)t);
		kb_result_clear(&r);
	}
	/* auto: a few workers per core, at most one per PE (here: per LP), and
	 * never more busy threads than cores */
	ck_assert_msg(kbt_run("synthetic", p, NULL, KB_THREADS_AUTO, 0, &r, &err) == 0, "%s",
		      err.message);
	{
		long cores = kbt_cores();

		if (cores < 2)
			ck_assert_uint_eq(r.workers, 1);
		else
			ck_assert_uint_eq(r.workers, cores * 4 < 16 ? (unsigned)cores * 4 : 16u);
		ck_assert_uint_le(r.exec.threads, (unsigned)cores);
		ck_assert_uint_le(r.exec.threads, r.workers);
		/* windows, or a run short enough for auto's first trial, on
		 * one thread, to hold all of it */
		if (r.workers > 1)
			ck_assert_msg(r.windows > 0 || r.alone_events == r.events,
				      "%llu windows, %llu of %llu events alone",
				      (unsigned long long)r.windows, (unsigned long long)r.alone_events,
				      (unsigned long long)r.events);
		else
			ck_assert_uint_eq(r.alone_events, 0);
	}
	kb_result_clear(&r);
}
END_TEST

Suite *parallel_suite(void)
{
	Suite *s = suite_create("parallel");
	TCase *table = tcase_create("schedulers");
	TCase *stress = tcase_create("stress");

	tcase_set_timeout(table, 120);
	tcase_add_loop_test(table, model_x_executors, 0, N_MODELS);
	tcase_add_test(table, data_mode_x_executors);
	tcase_add_loop_test(table, auto_hands_over, 0, N_MODELS + 1);
	tcase_add_test(table, workers_used);
	suite_add_tcase(s, table);

	tcase_set_timeout(stress, 120);
	tcase_add_test(stress, short_stress);
	suite_add_tcase(s, stress);
	return s;
}
