/*
 * The built-in benches: the opt2/opt3 dispatch ratio (ADR-0065 test 7,
 * DDD §10 P6), golden op_log hashes, thread-count independence, parameter
 * errors, a split-KV scaling sanity check, and the busy/utilization figures
 * of every bench against the op_log they are derived from.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"

/* Runs a bench in timing mode; fails the test on error. */
static void run_ok(const char *bench, const char *const *params, const char *const *sets,
		   int threads, kb_result *res)
{
	kb_error err;
	int rc;

	*res = (kb_result)KB_RESULT_INIT;
	rc = kbt_run(bench, params, sets, threads, 0, res, &err);
	ck_assert_msg(rc == KB_OK, "%s: %s", bench, err.message);
}

/* ---- dispatch ratio ---- */

static double per_tile(const char *bench, const char *r)
{
	const char *const params[] = { "S_kv=1024", NULL };
	char set[64];
	const char *const sets[] = { set, NULL };
	kb_result res = KB_RESULT_INIT;
	double v;

	snprintf(set, sizeof(set), "pe_cost_model.r_cycles_per_byte=%s", r ? r : "0.0625");
	run_ok(bench, params, r ? sets : NULL, 1, &res);
	ck_assert_uint_eq(res.tiles, 16);
	v = res.dispatch_per_tile_ns;
	kb_result_clear(&res);
	return v;
}

START_TEST(test_dispatch_ratio_default)
{
	double o2 = per_tile("gqa_decode_opt2", NULL), o3 = per_tile("gqa_decode_opt3", NULL);

	printf("dispatch per tile (S_kv=1024, default calibration): opt3 %.3f ns, opt2 %.3f ns, ratio %.3f\n",
	       o3, o2, o3 / o2);
	/* the robust gate of ADR-0065 test 7 */
	ck_assert_msg(o3 > 2.0 * o2, "opt3 %.3f ns is not > 2 x opt2 %.3f ns", o3, o2);
}
END_TEST

START_TEST(test_dispatch_ratio_r_sweep)
{
	static const char *const rs[] = { "0.25", "0.0625", "0.03125" };
	double ratio[3];

	for (int i = 0; i < 3; i++) {
		double o2 = per_tile("gqa_decode_opt2", rs[i]), o3 = per_tile("gqa_decode_opt3", rs[i]);

		ratio[i] = o3 / o2;
		printf("dispatch per tile at R=%s: opt3 %.3f ns, opt2 %.3f ns, ratio %.3f\n", rs[i], o3,
		       o2, ratio[i]);
		ck_assert_msg(o2 < o3, "R=%s: opt2 %.3f ns is not < opt3 %.3f ns", rs[i], o2, o3);
	}
	/* FIXED dominates more as R falls */
	ck_assert(ratio[0] < ratio[1]);
	ck_assert(ratio[1] < ratio[2]);
}
END_TEST

/* The seeds' per-tile metric (DDD §11) is the dispatch of the KV-tile
 * loop's commands: it does not move with S_kv (the whole-kernel figure,
 * with the Q load, fills and final division, does), and at R = 0 it is
 * FIXED x commands per tile: opt3 issues 12 (two loads, Q.K^T, eight
 * online-softmax steps, P.V), opt2 two. */
START_TEST(test_per_tile_is_the_loop)
{
	const char *const sets[] = { "pe_cost_model.r_cycles_per_byte=0", NULL };
	const char *const p256[] = { "S_kv=256", NULL }, *const p4k[] = { "S_kv=4096", NULL };
	static const char *const benches[] = { "gqa_decode_opt2", "gqa_decode_opt3" };
	static const double cmds[] = { 2, 12 };
	kb_result a = KB_RESULT_INIT, b = KB_RESULT_INIT;

	for (int i = 0; i < 2; i++) {
		run_ok(benches[i], p256, NULL, 1, &a);
		run_ok(benches[i], p4k, NULL, 1, &b);
		ck_assert_msg(a.dispatch_per_tile_ns == b.dispatch_per_tile_ns,
			      "%s: %.3f ns per tile at S_kv=256, %.3f at 4096", benches[i],
			      a.dispatch_per_tile_ns, b.dispatch_per_tile_ns);
		ck_assert(a.dispatch_kernel_per_tile_ns > b.dispatch_kernel_per_tile_ns);
		ck_assert(b.dispatch_kernel_per_tile_ns > b.dispatch_per_tile_ns);
		kb_result_clear(&a);
		kb_result_clear(&b);
		run_ok(benches[i], p4k, sets, 1, &a);
		ck_assert_msg(a.dispatch_per_tile_ns == 40.0 * cmds[i], "%s: %.3f ns per tile at R=0",
			      benches[i], a.dispatch_per_tile_ns);
		kb_result_clear(&a);
	}
}
END_TEST

/* ---- golden op_log hashes ----
 *
 * These are the SHA-256 of the op_log (timing mode) of each bench at small
 * sizes. They change with ANY change to the cost model (FIXED, R, logical
 * bytes), an engine latency formula, the plan / stage order of a command,
 * the op_log record format, or the default topology. Such a change must
 * come in a commit that explains the model change (and why the new op_log
 * is right); update the constants in that same commit, never to silence a
 * failing test.
 */
typedef struct golden {
	const char *bench;
	const char *params[6];
	const char *sha256;
	uint64_t sim_time_ps;
} golden;

static const golden goldens[] = {
	{ "synthetic", { "lps=8", "events=2000", NULL },
	  "793438b133822e12f669e170e7be87ca45d1ed0ed6d41490d25801a0a1ac982c", 2848403 },
	{ "gemm", { "M=128", "K=128", "N=128", NULL },
	  "5a0cc88f9e05b826c2ab9b96acd15fb872de67d5ff72b2e876f0e99286ea10d2", 3734875 },
	{ "gemm", { "M=128", "K=128", "N=128", "epilogue=bias", NULL },
	  "87beb3953343a8fc3a102eb5ab2295f3816c06a5005b0fa0f7bdb1a4c48a0de9", 3978000 },
	{ "gqa_decode_opt2", { "S_kv=256", NULL },
	  "0ed2e0a49b7173272fd1c92233edb349d8aecc946f8e03338f6c33eb40012c76", 4014250 },
	{ "gqa_decode_opt3", { "S_kv=256", NULL },
	  "011dac7e2e4c6c75c62c2cbcc1f74bbe1dacecf8386cfd32afdfc6f7c7d2aca1", 3719375 },
	{ "gqa_decode_opt2", { "S_kv=256", "H_kv=2", "P=2", "C=2", NULL },
	  "6130cf52585cde72dd5d1f124d185fb7351658ed2ce5f3c968134a85ae40ece4", 3008625 },
};

#define N_GOLDENS (sizeof(goldens) / sizeof(goldens[0]))

START_TEST(test_golden_hash)
{
	const golden *g = &goldens[_i];
	kb_result res = KB_RESULT_INIT;

	run_ok(g->bench, g->params, NULL, 1, &res);
	ck_assert_msg(strcmp(res.oplog_sha256, g->sha256) == 0,
		      "%s golden %d: op_log sha256 %s, want %s (see the comment above goldens[])",
		      g->bench, _i, res.oplog_sha256, g->sha256);
	ck_assert_uint_eq(res.sim_time_ps, g->sim_time_ps);
	ck_assert_int_eq(res.threads, 1);
	kb_result_clear(&res);
}
END_TEST

START_TEST(test_hash_threads)
{
	const golden *g = &goldens[_i];
	static const int threads[] = { 1, 2, 0 };
	char first[65] = "";

	for (int t = 0; t < 3; t++) {
		kb_result res = KB_RESULT_INIT;

		run_ok(g->bench, g->params, NULL, threads[t], &res);
		if (t == 0)
			snprintf(first, sizeof(first), "%s", res.oplog_sha256);
		ck_assert_msg(strcmp(res.oplog_sha256, first) == 0,
			      "%s golden %d: threads=%d hash %s differs from threads=1 %s", g->bench,
			      _i, threads[t], res.oplog_sha256, first);
		ck_assert_str_eq(res.oplog_sha256, g->sha256);
		kb_result_clear(&res);
	}
}
END_TEST

/* ---- parameter errors ---- */

static void expect_error(const char *bench, const char *const *params, int code, const char *frag)
{
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc;

	res = (kb_result)KB_RESULT_INIT;
	memset(&err, 0, sizeof(err));
	rc = kbt_run(bench, params, NULL, 1, 0, &res, &err);
	ck_assert_msg(rc == code, "%s: rc %d (%s), want %d: %s", bench, rc, kb_strerror(rc), code,
		      err.message);
	ck_assert_int_eq(err.code, code);
	ck_assert_msg(strstr(err.message, frag) != NULL, "'%s' not in '%s'", frag, err.message);
	kb_result_clear(&res);
}

START_TEST(test_param_errors)
{
	const char *const none[] = { NULL };
	const char *const unknown[] = { "S_kv=256", "bogus_param=3", NULL };
	const char *const range[] = { "S_kv=0", NULL };
	const char *const range_hi[] = { "G=5000", NULL };
	const char *const nonnum[] = { "S_kv=lots", NULL };
	const char *const big_p[] = { "S_kv=256", "P=8", NULL };   /* 4 KV tiles */
	const char *const bad_choice[] = { "M=64", "K=64", "N=64", "dtype=int8", NULL };

	expect_error("no_such_bench", none, KB_ENOTFOUND, "no_such_bench");
	expect_error("gqa_decode_opt2", unknown, KB_ENOTFOUND, "bogus_param");
	expect_error("gqa_decode_opt2", range, KB_ERANGE, "S_kv");
	expect_error("gqa_decode_opt3", range_hi, KB_ERANGE, "G");
	expect_error("gqa_decode_opt2", nonnum, KB_EPARSE, "S_kv");
	expect_error("gqa_decode_opt2", big_p, KB_ERANGE, "P = 8");
	expect_error("gqa_decode_opt3", big_p, KB_ERANGE, "4 KV tiles");
	{
		kb_result res = KB_RESULT_INIT;
		kb_error err;
		int rc;

		res = (kb_result)KB_RESULT_INIT;
		rc = kbt_run("gemm", bad_choice, NULL, 1, 0, &res, &err);
		ck_assert_int_ne(rc, KB_OK);
		ck_assert(strstr(err.message, "dtype") != NULL);
		kb_result_clear(&res);
	}
	ck_assert_ptr_null(kb_bench_find("no_such_bench"));
	ck_assert_ptr_nonnull(kb_bench_find("gqa_decode_opt2"));
}
END_TEST

/* Mistyped names get a "did you mean", errors about a parameter name it in
 * err.source, and integer ranges print in full. */
START_TEST(test_param_messages)
{
	const char *const typo[] = { "s_kv=1024", NULL };
	const char *const far[] = { "zzzzzz=1", NULL };
	const char *const range[] = { "S_kv=0", NULL };
	const char *const big_p[] = { "S_kv=256", "P=8", NULL };
	const char *const seed[] = { "seed=-1", NULL };
	const char *const m0[] = { "M=0", NULL };
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	kb_sweep *sw = NULL;

	res = (kb_result)KB_RESULT_INIT;
	ck_assert_int_eq(kbt_run("gqa_decode_op2", NULL, NULL, 1, 0, &res, &err), KB_ENOTFOUND);
	ck_assert_msg(strstr(err.message, "did you mean 'gqa_decode_opt2'?"), "%s", err.message);
	ck_assert_int_eq(kbt_run("gqa_decode_opt2", typo, NULL, 1, 0, &res, &err), KB_ENOTFOUND);
	ck_assert_msg(strstr(err.message, "did you mean 'S_kv'?"), "%s", err.message);
	ck_assert_str_eq(err.source, "s_kv");
	ck_assert_int_eq(kbt_run("gqa_decode_opt2", far, NULL, 1, 0, &res, &err), KB_ENOTFOUND);
	ck_assert_msg(strstr(err.message, "known: G, d, S_kv"), "%s", err.message);
	ck_assert_int_eq(kbt_run("gqa_decode_opt2", range, NULL, 1, 0, &res, &err), KB_ERANGE);
	ck_assert_msg(strstr(err.message, "[1, 67108864]"), "%s", err.message);
	ck_assert_str_eq(err.source, "S_kv");
	ck_assert_int_eq(err.line, 0);
	ck_assert_int_eq(kbt_run("gemm", m0, NULL, 1, 0, &res, &err), KB_ERANGE);
	ck_assert_msg(strstr(err.message, "[1, 1048576]"), "%s", err.message);
	ck_assert_int_eq(kbt_run("gemm", seed, NULL, 1, 0, &res, &err), KB_ERANGE);
	ck_assert_msg(strstr(err.message, "[0, 9000000000000000000]"), "%s", err.message);
	ck_assert_int_eq(kbt_run("gqa_decode_opt2", big_p, NULL, 1, 0, &res, &err), KB_ERANGE);
	ck_assert_str_eq(err.source, "P");
	ck_assert_int_eq(kb_sweep_create(&sw, NULL, &err), 0);
	ck_assert_int_eq(kb_sweep_add_bench(sw, "gem", &err), KB_ENOTFOUND);
	ck_assert_msg(strstr(err.message, "did you mean 'gemm'?"), "%s", err.message);
	kb_sweep_destroy(sw);
}
END_TEST

START_TEST(test_suggest)
{
	static const char *const names[] = { "run", "sweep", NULL, "list", "M", "threads" };

	ck_assert_str_eq(kb_suggest("runn", names, 6), "run");
	ck_assert_str_eq(kb_suggest("swep", names, 6), "sweep");
	ck_assert_str_eq(kb_suggest("THREADS", names, 6), "threads");  /* case only */
	ck_assert_str_eq(kb_suggest("m", names, 6), "M");
	ck_assert_ptr_null(kb_suggest("s", names, 6));                 /* one letter: any is one edit */
	ck_assert_ptr_null(kb_suggest("run", names, 6));               /* the name itself */
	ck_assert_ptr_null(kb_suggest("frobnicate", names, 6));
	ck_assert_ptr_null(kb_suggest(NULL, names, 6));
	ck_assert_ptr_null(kb_suggest("run", NULL, 6));
	ck_assert_ptr_null(kb_suggest("runn", names, 0));
}
END_TEST

/* ---- scaling ---- */

START_TEST(test_split_kv_scaling)
{
	static const char *const ps[] = { "P=1", "P=2", "P=4", "P=8" };
	uint64_t t[4];

	for (int i = 0; i < 4; i++) {
		const char *const params[] = { "S_kv=2048", "H_kv=1", "C=1", ps[i], NULL };
		kb_result res = KB_RESULT_INIT;

		run_ok("gqa_decode_opt2", params, NULL, 1, &res);
		t[i] = res.sim_time_ps;
		ck_assert_uint_eq(res.pes, (uint32_t)(1u << i));
		printf("gqa_decode_opt2 S_kv=2048 H_kv=1 C=1 %s: sim_time %llu ps (%.3f us)\n", ps[i],
		       (unsigned long long)t[i], (double)t[i] / 1e6);
		kb_result_clear(&res);
	}
	/* split-KV helps */
	ck_assert_msg(t[1] < t[0], "P=2 %llu ps is not faster than P=1 %llu ps",
		      (unsigned long long)t[1], (unsigned long long)t[0]);
}
END_TEST

/* ---- busy time and utilization ---- */

typedef struct span {
	uint32_t pe;
	const char *eng;
	uint64_t t0, t1;
} span;

typedef struct spans {
	span *v;
	size_t n, cap;
} spans;

/* Keeps every record that is work: a hazard_wait is a command waiting
 * for the scheduler, not the scheduler working. */
static int keep_span(const kb_oplog_record *rec, void *payload)
{
	spans *s = payload;

	if (strcmp(rec->op, "hazard_wait") == 0)
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		span *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = (span){ rec->pe, rec->eng, rec->t0_ps, rec->t1_ps };
	return 0;
}

static int by_t0(const void *a, const void *b)
{
	const span *x = a, *y = b;

	return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* The time covered by at least one record of pe's engine eng. */
static uint64_t covered_ps(const spans *s, uint32_t pe, const char *eng)
{
	span *v = malloc((s->n + 1) * sizeof(*v));
	size_t n = 0;
	uint64_t sum = 0, end = 0;

	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].pe == pe && strcmp(s->v[i].eng, eng) == 0)
			v[n++] = s->v[i];
	qsort(v, n, sizeof(*v), by_t0);
	for (size_t i = 0; i < n; i++) {
		if (v[i].t1 <= end)
			continue;
		sum += v[i].t1 - (v[i].t0 > end ? v[i].t0 : end);
		end = v[i].t1;
	}
	free(v);
	return sum;
}

/* Each engine's busy time is the time its records cover, inside the run. */
static void check_covered(const char *what, const kb_result *r, const spans *s)
{
	for (size_t i = 0; i < r->n_busy; i++) {
		const kb_engine_busy *b = &r->busy[i];
		uint64_t want = covered_ps(s, b->pe, b->eng);

		ck_assert_msg(b->busy_ps == want && b->busy_ps <= r->sim_time_ps,
			      "%s: pe%u.%s busy %llu ps, its records cover %llu ps of %llu", what,
			      b->pe, b->eng, (unsigned long long)b->busy_ps,
			      (unsigned long long)want, (unsigned long long)r->sim_time_ps);
	}
}

/* A run's busy_ps is the time each engine works (PE_DMA's read and write
 * channels at once count once), and its utilization, busy / sim_time_ps,
 * is a fraction in [0, 1] in the result and in its JSON. */
static void check_busy(const char *bench, const char *const *params)
{
	kb_params *p = NULL;
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	kb_result r = KB_RESULT_INIT;
	kb_error err;
	spans s = { 0 };
	char *text;
	json_t *j, *util;
	int rc = kb_params_create(&p, &err);

	for (size_t i = 0; !rc && params && params[i]; i++)
		rc = kb_params_set_assignment(p, params[i], &err);
	o.threads = 1;
	o.on_record = keep_span;
	o.payload = &s;
	rc = rc ? rc : kb_bench_run(bench, p, NULL, &o, &r, &err);
	kb_params_destroy(p);
	ck_assert_msg(rc == KB_OK, "%s: %s", bench, err.message);
	check_covered(bench, &r, &s);
	text = kb_result_to_json(&r);
	ck_assert_ptr_nonnull(text);
	j = json_loads(text, 0, NULL);
	ck_assert_ptr_nonnull(j);
	util = json_object_get(j, "utilization");
	ck_assert_int_eq(util != NULL, r.n_busy > 0);
	for (size_t i = 0; i < json_array_size(util); i++) {
		json_t *pe = json_array_get(util, i), *v;
		const char *eng;

		json_object_foreach(pe, eng, v) {
			double u = json_number_value(v);

			if (strcmp(eng, "pe") == 0)
				continue;
			ck_assert_msg(json_is_real(v) && u >= 0.0 && u <= 1.0,
				      "%s: pe%lld.%s utilization %g", bench,
				      (long long)json_integer_value(json_object_get(pe, "pe")), eng, u);
		}
	}
	json_decref(j);
	kb_free(text);
	kb_result_clear(&r);
	free(s.v);
}

/* Every bench with its defaults. */
START_TEST(test_busy_every_bench)
{
	const kb_bench_info *b = kb_bench_get((size_t)_i);

	ck_assert_ptr_nonnull(b);
	check_busy(b->name, NULL);
}
END_TEST

/* Shapes the defaults do not reach: an epilogue, split-KV over PEs
 * (IPCQ), several KV heads over clusters. */
START_TEST(test_busy_shapes)
{
	static const char *const gemm_bias[] = { "epilogue=bias", "M=64", NULL };
	static const char *const opt2_split[] = { "S_kv=512", "P=4", "C=2", NULL };
	static const char *const opt3_heads[] = { "S_kv=512", "P=2", "H_kv=2", NULL };

	check_busy("gemm", gemm_bias);
	check_busy("gqa_decode_opt2", opt2_split);
	check_busy("gqa_decode_opt3", opt3_heads);
}
END_TEST

/* PE_IPCQ sends and receives on two channels too: pe0 sends two large
 * tensors while pe1's small one arrives, so pe0's receive overlaps its
 * sends, and that time counts once. */
static void both_ways_kernel(kb_tl *tl, void *p)
{
	int64_t big[2] = { 64, 128 }, small[2] = { 8, 8 };

	(void)p;
	if (kb_tl_pe(tl) == 0) {
		kb_tl_send(tl, kb_tl_alloc(tl, KB_FP32, 2, big), 1, 1);
		kb_tl_send(tl, kb_tl_alloc(tl, KB_FP32, 2, big), 1, 2);
		kb_tl_recv(tl, kb_tl_alloc(tl, KB_FP32, 2, small), 1, 3);
	} else {
		kb_tl_send(tl, kb_tl_alloc(tl, KB_FP32, 2, small), 0, 3);
		kb_tl_recv(tl, kb_tl_alloc(tl, KB_FP32, 2, big), 0, 1);
		kb_tl_recv(tl, kb_tl_alloc(tl, KB_FP32, 2, big), 0, 2);
	}
}

START_TEST(test_busy_ipcq_both_ways)
{
	kb_topology *t = NULL;
	kb_simulation *sim = NULL;
	kb_sim_options o = KB_SIM_OPTIONS_INIT;
	kb_result r = KB_RESULT_INIT;
	kb_error err;
	spans s = { 0 };
	uint64_t sum = 0;

	ck_assert_int_eq(kb_topology_default(&t, &err), KB_OK);
	ck_assert_int_eq(kb_topology_set(t, "pes_per_cluster", "2", &err), KB_OK);
	o.threads = 1;
	o.on_record = keep_span;
	o.payload = &s;
	ck_assert_int_eq(kb_simulation_create(&sim, t, &o, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_launch(sim, both_ways_kernel, NULL, 0, 2, &err), KB_OK);
	ck_assert_msg(kb_simulation_run(sim, &r, &err) == KB_OK, "%s", err.message);
	/* The case is there: pe0's IPCQ records overlap. */
	for (size_t i = 0; i < s.n; i++)
		if (s.v[i].pe == 0 && strcmp(s.v[i].eng, "ipcq") == 0)
			sum += s.v[i].t1 - s.v[i].t0;
	ck_assert_uint_gt(sum, covered_ps(&s, 0, "ipcq"));
	check_covered("both_ways", &r, &s);
	kb_result_clear(&r);
	kb_simulation_destroy(sim);
	kb_topology_destroy(t);
	free(s.v);
}
END_TEST

Suite *bench_suite(void)
{
	Suite *s = suite_create("bench");
	TCase *ratio = tcase_create("dispatch_ratio");
	TCase *gold = tcase_create("golden");
	TCase *err = tcase_create("params");
	TCase *scale = tcase_create("scaling");
	TCase *busy = tcase_create("busy");

	tcase_add_test(ratio, test_dispatch_ratio_default);
	tcase_add_test(ratio, test_dispatch_ratio_r_sweep);
	tcase_add_test(ratio, test_per_tile_is_the_loop);
	tcase_add_loop_test(gold, test_golden_hash, 0, (int)N_GOLDENS);
	tcase_add_loop_test(gold, test_hash_threads, 0, (int)N_GOLDENS);
	tcase_add_test(err, test_param_errors);
	tcase_add_test(err, test_param_messages);
	tcase_add_test(err, test_suggest);
	tcase_add_test(scale, test_split_kv_scaling);
	tcase_add_loop_test(busy, test_busy_every_bench, 0, (int)kb_bench_count());
	tcase_add_test(busy, test_busy_shapes);
	tcase_add_test(busy, test_busy_ipcq_both_ways);
	tcase_set_timeout(busy, 60);
	tcase_set_timeout(ratio, 60);
	tcase_set_timeout(gold, 60);
	tcase_set_timeout(scale, 60);
	suite_add_tcase(s, ratio);
	suite_add_tcase(s, gold);
	suite_add_tcase(s, err);
	suite_add_tcase(s, scale);
	suite_add_tcase(s, busy);
	return s;
}
