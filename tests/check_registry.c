/*
 * Bench registration (kernbench/registry.h): registries with and without
 * the built-ins, the checks on a definition, and a bench written against
 * the public API alone run through a registry in timing and data mode,
 * with its check and its dumped tensors. And the size fields of the
 * structs the library fills (kb_result, kb_sweep_row, kb_oplog_record).
 */
#include <check.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kernbench.h>
#include "base/err.h"
#include "base/str.h"

#include "bench/bench_impl.h"
#include "bench/provenance.h"
#include "runtime/result.h"
#include "suites.h"
#include "testutil.h"

/* ---- a bench of our own: C = A @ B through one composite -------------- */

typedef struct mm_args {
	int64_t m, k, n;
	uint64_t a, b, c;
	double *ha, *hb;
} mm_args;

static void mm_kernel(kb_tl *tl, void *p)
{
	const mm_args *g = p;
	int64_t sa[2] = { g->m, g->k }, sb[2] = { g->k, g->n }, sc[2] = { g->m, g->n };
	kb_tl_composite_desc d = { .op = "gemm" };

	d.a = kb_tl_ref(tl, g->a, KB_FP32, 2, sa);
	d.b = kb_tl_ref(tl, g->b, KB_FP32, 2, sb);
	d.out = kb_tl_ref(tl, g->c, KB_FP32, 2, sc);
	kb_tl_composite(tl, &d);
}

/* Counted by mm_check, which sweep tests run on their worker threads. */
static atomic_int mm_checks;

static int mm_check(kb_bench_ctx *ctx, kb_simulation *sim, void *state, kb_result *res,
		    kb_error *err)
{
	const mm_args *g = state;
	size_t n = (size_t)(g->m * g->n);
	double *want = calloc(n, sizeof(*want));
	int rc;

	(void)ctx;
	if (!want)
		return KB_ENOMEM;
	for (int64_t i = 0; i < g->m; i++)
		for (int64_t j = 0; j < g->n; j++)
			for (int64_t k = 0; k < g->k; k++)
				want[i * g->n + j] += g->ha[i * g->k + k] * g->hb[k * g->n + j];
	rc = kb_bench_compare(sim, KB_FP32, g->c, want, n, res, err);
	free(want);
	atomic_fetch_add(&mm_checks, 1);
	return rc;
}

static int mm_run(kb_bench_ctx *ctx, kb_result *res, kb_error *err)
{
	mm_args g = { kb_bench_param_int(ctx, "M"), kb_bench_param_int(ctx, "K"),
		      kb_bench_param_int(ctx, "N"), 0, 0, 0, NULL, NULL };
	int64_t sa[2] = { g.m, g.k }, sb[2] = { g.k, g.n }, sc[2] = { g.m, g.n };
	kb_simulation *sim = NULL;
	int rc;

	ck_assert_ptr_nonnull(kb_bench_options(ctx));
	ck_assert_str_eq(kb_bench_def_of(ctx)->info.name, "mm");
	ck_assert_ptr_eq(kb_bench_payload(ctx), &mm_checks);
	kb_bench_seed(ctx, (uint64_t)kb_bench_param_int(ctx, "seed"));
	rc = kb_bench_simulation(ctx, 1, &sim, err);
	if (!rc)
		rc = kb_bench_input(ctx, sim, KB_FP32, 2, sa, 1.0, &g.a, &g.ha, err);
	if (!rc)
		rc = kb_bench_input(ctx, sim, KB_FP32, 2, sb, 1.0, &g.b, &g.hb, err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 2, sc, 0, &g.c, err);
	if (!rc)
		rc = kb_bench_tensor(ctx, "a", KB_FP32, 2, sa, g.a, err);
	if (!rc)
		rc = kb_bench_tensor(ctx, "c", KB_FP32, 2, sc, g.c, err);
	if (!rc)
		rc = kb_simulation_launch(sim, mm_kernel, &g, 0, 1, err);
	if (!rc)
		rc = kb_bench_simulate(ctx, sim, &g, res, err);
	kb_simulation_destroy(sim);
	free(g.ha);
	free(g.hb);
	return rc;
}

static const kb_param_info mm_params[] = {
	{ "M", KB_PARAM_INT, "32", "rows", NULL, 1, 4096 },
	{ "K", KB_PARAM_INT, "48", "inner", NULL, 1, 4096 },
	{ "N", KB_PARAM_INT, "16", "columns", NULL, 1, 4096 },
	{ "seed", KB_PARAM_INT, "7", "inputs", NULL, 0, 1e9 },
};

static kb_bench_def mm_def(void)
{
	kb_bench_def d = KB_BENCH_DEF_INIT;

	d.info.name = "mm";
	d.info.help = "C = A @ B";
	d.info.params = mm_params;
	d.info.n_params = sizeof(mm_params) / sizeof(mm_params[0]);
	d.run = mm_run;
	d.check = mm_check;
	d.payload = &mm_checks;
	return d;
}

/* ---- tests -------------------------------------------------------------- */

START_TEST(builtins_through_a_registry)
{
	kb_registry_options o = KB_REGISTRY_OPTIONS_INIT;
	kb_registry *reg = NULL, *empty = NULL;
	const kb_bench_def *d;
	kb_error err;

	ck_assert_int_eq(kb_registry_create(&reg, NULL, &err), 0);
	ck_assert_uint_eq(kb_registry_count(reg), kb_bench_count());
	ck_assert_uint_ge(kb_registry_count(reg), 4);
	for (size_t i = 0; i < kb_registry_count(reg); i++)
		ck_assert_str_eq(kb_registry_at(reg, i)->info.name, kb_bench_get(i)->name);
	ck_assert_ptr_null(kb_registry_at(reg, kb_registry_count(reg)));
	ck_assert_int_eq(kb_registry_lookup(reg, "gemm", &d, &err), 0);
	ck_assert_str_eq(d->info.name, "gemm");
	ck_assert_uint_eq(d->abi, KB_BENCH_ABI);
	ck_assert_int_eq(kb_registry_lookup(reg, "gem", &d, &err), KB_ENOTFOUND);
	ck_assert_ptr_null(d);
	ck_assert_ptr_nonnull(strstr(err.message, "did you mean 'gemm'"));
	o.builtins = 0;
	ck_assert_int_eq(kb_registry_create(&empty, &o, &err), 0);
	ck_assert_uint_eq(kb_registry_count(empty), 0);
	ck_assert_int_eq(kb_registry_lookup(empty, "gemm", &d, &err), KB_ENOTFOUND);
	/* The built-ins go in unchecked (bench_registry.c): kb_registry_add's
	 * checks (names, types, ranges, defaults) must pass on each, and a
	 * second time refuse the name. */
	for (size_t i = 0; i < kb_registry_count(reg); i++) {
		ck_assert_msg(kb_registry_add(empty, kb_registry_at(reg, i), &err) == 0, "%s",
			      err.message);
		ck_assert_int_eq(kb_registry_add(empty, kb_registry_at(reg, i), &err), KB_ESTATE);
	}
	ck_assert_uint_eq(kb_registry_count(empty), kb_registry_count(reg));
	kb_registry_destroy(empty);
	kb_registry_destroy(reg);
	kb_registry_destroy(NULL);
}
END_TEST

/* The built-in registry path and the explicit registry give the same run. */
START_TEST(registry_run_matches_bench_run)
{
	kb_registry *reg = NULL;
	kb_result a = KB_RESULT_INIT, b = KB_RESULT_INIT;
	kb_error err;

	ck_assert_int_eq(kb_registry_create(&reg, NULL, &err), 0);
	ck_assert_int_eq(kb_registry_run(reg, "gemm", NULL, NULL, NULL, &a, &err), 0);
	ck_assert_int_eq(kb_bench_run("gemm", NULL, NULL, NULL, &b, &err), 0);
	ck_assert_str_eq(a.oplog_sha256, b.oplog_sha256);
	ck_assert_str_eq(a.bench, "gemm");
	kb_result_clear(&a);
	kb_result_clear(&b);
	kb_registry_destroy(reg);
}
END_TEST

static int add_expect(kb_registry *reg, const kb_bench_def *d, int code, const char *text)
{
	kb_error err;
	int rc = kb_registry_add(reg, d, &err);

	ck_assert_int_eq(rc, code);
	if (text)
		ck_assert_msg(strstr(err.message, text), "'%s' not in '%s'", text, err.message);
	return rc;
}

START_TEST(invalid_definitions_are_refused)
{
	kb_param_info p[2] = { mm_params[0], mm_params[1] };
	kb_bench_def d = mm_def();
	kb_registry *reg = NULL;
	kb_error err;

	ck_assert_int_eq(kb_registry_create(&reg, NULL, &err), 0);
	d.abi = KB_BENCH_ABI + 1;
	add_expect(reg, &d, KB_ERANGE, "ABI");
	d = mm_def();
	d.info.name = "has space";
	add_expect(reg, &d, KB_EINVAL, "has space");
	d.info.name = "";
	add_expect(reg, &d, KB_EINVAL, "not valid");
	d = mm_def();
	d.run = NULL;
	add_expect(reg, &d, KB_EINVAL, "no run function");
	d = mm_def();
	d.info.name = "gemm";
	add_expect(reg, &d, KB_ESTATE, "'gemm' is already registered");
	d = mm_def();
	d.info.params = p;
	d.info.n_params = 2;
	p[1].default_value = "99999";
	add_expect(reg, &d, KB_EINVAL, "K");
	p[1] = mm_params[1];
	p[1].name = "M";
	add_expect(reg, &d, KB_EINVAL, "'M' is defined twice");
	p[1] = mm_params[1];
	p[1].default_value = NULL;
	add_expect(reg, &d, KB_EINVAL, "no default");
	p[1] = mm_params[1];
	p[1].type = KB_PARAM_STRING;
	p[1].choices = "a|b";
	p[1].default_value = "c";
	add_expect(reg, &d, KB_EINVAL, "not one of a|b");
	p[1] = mm_params[1];
	p[1].min = 5;
	p[1].max = 1;
	add_expect(reg, &d, KB_EINVAL, "empty range");
	ck_assert_uint_eq(kb_registry_count(reg), kb_bench_count());
	kb_registry_destroy(reg);
}
END_TEST

/* The registry copies what it is given: a definition built in a buffer
 * the caller reuses stays as it was added. */
START_TEST(definitions_are_copied)
{
	char name[16] = "mm", pname[8] = "M";
	kb_param_info p[1] = { mm_params[0] };
	kb_bench_def d = mm_def();
	kb_registry_options o = KB_REGISTRY_OPTIONS_INIT;
	kb_registry *reg = NULL;
	const kb_bench_def *got;
	kb_error err;

	o.builtins = 0;
	p[0].name = pname;
	p[0].help = NULL;
	d.info.name = name;
	d.info.help = NULL;
	d.info.params = p;
	d.info.n_params = 1;
	ck_assert_int_eq(kb_registry_create(&reg, &o, &err), 0);
	ck_assert_int_eq(kb_registry_add(reg, &d, &err), 0);
	strcpy(name, "zz");
	strcpy(pname, "Q");
	p[0].default_value = "1";
	ck_assert_int_eq(kb_registry_lookup(reg, "mm", &got, &err), 0);
	ck_assert_str_eq(got->info.params[0].name, "M");
	ck_assert_str_eq(got->info.params[0].default_value, "32");
	ck_assert_ptr_ne(got->info.name, name);
	/* A NULL help is "", a NULL choices (a number) stays NULL. */
	ck_assert_str_eq(got->info.help, "");
	ck_assert_str_eq(got->info.params[0].help, "");
	ck_assert_ptr_null(got->info.params[0].choices);
	kb_registry_destroy(reg);
}
END_TEST

/* Optional strings (kb__strdup_opt, as the registry copies help and
 * choices): NULL stays NULL and is no failure; a string is copied. */
START_TEST(optional_strings_are_copied)
{
	char text[8] = "abc";
	char *c;
	int failed = 0;

	ck_assert_ptr_null(kb__strdup_opt(NULL, &failed));
	ck_assert_int_eq(failed, 0);
	c = kb__strdup_opt(text, &failed);
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_ne(c, text);
	ck_assert_str_eq(c, "abc");
	ck_assert_int_eq(failed, 0);
	free(c);
	failed = 1;  /* left as it is: one flag over a series of copies */
	c = kb__strdup_opt(text, &failed);
	ck_assert_int_eq(failed, 1);
	free(c);
}
END_TEST

/* What a plugin's or a sweep point's failure tells (kb__err_text): the
 * error's text, else the name of its code. */
START_TEST(error_text_falls_back)
{
	kb_error e;

	kb_error_clear(&e);
	ck_assert_str_eq(kb__err_text(&e, KB_ENOMEM), kb_strerror(KB_ENOMEM));
	ck_assert_str_eq(kb__err_text(NULL, KB_EIO), kb_strerror(KB_EIO));
	kb__err(&e, KB_EIO, "disk %d full", 1);
	ck_assert_str_eq(kb__err_text(&e, KB_EINVAL), "disk 1 full");
}
END_TEST

START_TEST(own_bench_runs_checks_and_dumps)
{
	kb_bench_def d = mm_def();
	kb_run_options ro = KB_RUN_OPTIONS_INIT;
	kb_registry *reg = NULL;
	kb_params *p = NULL;
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	char *dir = kbt_tmpdir(), path[4096];

	ck_assert_int_eq(kb_registry_create(&reg, NULL, &err), 0);
	ck_assert_int_eq(kb_registry_add(reg, &d, &err), 0);
	/* Timing mode: no check, no values drawn. */
	mm_checks = 0;
	ck_assert_int_eq(kb_registry_run(reg, "mm", NULL, NULL, &ro, &res, &err), 0);
	ck_assert_int_eq(mm_checks, 0);
	ck_assert_str_eq(res.bench, "mm");
	ck_assert_uint_gt(res.commands, 0);
	ck_assert(isnan(res.max_abs_err));
	ck_assert_ptr_nonnull(strstr(res.params_json, "\"M\":32"));
	kb_result_clear(&res);
	/* Data mode: the check runs and the declared tensors are dumped. */
	ro.data = 1;
	ro.dump_dir = dir;
	ck_assert_int_eq(kb_params_create(&p, &err), 0);
	ck_assert_int_eq(kb_params_set(p, "M", "20", &err), 0);
	ck_assert_int_eq(kb_registry_run(reg, "mm", p, NULL, &ro, &res, &err), 0);
	ck_assert_int_eq(mm_checks, 1);
	ck_assert(isfinite(res.max_abs_err));
	ck_assert_double_lt(res.max_abs_err, 1e-3);
	kb_result_clear(&res);
	snprintf(path, sizeof(path), "%s/a.npy", dir);
	ck_assert_int_eq(access(path, R_OK), 0);
	unlink(path);
	snprintf(path, sizeof(path), "%s/c.npy", dir);
	ck_assert_int_eq(access(path, R_OK), 0);
	unlink(path);
	snprintf(path, sizeof(path), "%s/meta.json", dir);
	unlink(path);
	rmdir(dir);
	/* Its parameters are checked like a built-in's. */
	ck_assert_int_eq(kb_params_set(p, "M", "0", &err), 0);
	ck_assert_int_eq(kb_registry_run(reg, "mm", p, NULL, NULL, &res, &err), KB_ERANGE);
	ck_assert_str_eq(err.source, "M");
	/* And a registry without it does not know it. */
	ck_assert_int_eq(kb_bench_run("mm", NULL, NULL, NULL, &res, &err), KB_ENOTFOUND);
	kb_params_destroy(p);
	kb_registry_destroy(reg);
	free(dir);
}
END_TEST

START_TEST(plugin_errors_name_the_file)
{
	kb_registry *reg = NULL;
	kb_error err;

	ck_assert_int_eq(kb_registry_create(&reg, NULL, &err), 0);
	ck_assert_int_eq(kb_registry_load_plugin(reg, "/nonexistent/libx.so", &err), KB_EIO);
	ck_assert_ptr_nonnull(strstr(err.message, "/nonexistent/libx.so"));
	ck_assert_str_eq(err.source, "/nonexistent/libx.so");
	/* Not a shared object. */
	ck_assert_int_eq(kb_registry_load_plugin(reg, KB_SRCDIR "/README.md", &err), KB_EIO);
	ck_assert_ptr_nonnull(strstr(err.message, "README.md"));
	ck_assert_int_eq(kb_registry_load_path(reg, NULL, &err), 0);
	ck_assert_int_eq(kb_registry_load_path(reg, "::", &err), 0);
	ck_assert_int_eq(kb_registry_load_path(reg, ":/nonexistent/y.so", &err), KB_EIO);
	ck_assert_ptr_nonnull(strstr(err.message, "/nonexistent/y.so"));
	ck_assert_uint_eq(kb_registry_count(reg), kb_bench_count());
	kb_registry_destroy(reg);
}
END_TEST

/* ---- the JSON API on a registry ---------------------------------------- */

typedef struct json_rows {
	int n;
	char first[4096];
} json_rows;

static int keep_json_row(const char *json, void *payload)
{
	json_rows *r = payload;

	if (r->n++ == 0)
		snprintf(r->first, sizeof(r->first), "%s", json);
	return 0;
}

START_TEST(json_api_through_a_registry)
{
	static const char *const spec = "{\"benches\": [\"mm\"], \"params\": {\"M\": [8, 16]}, "
					"\"jobs\": 2, \"data\": true}";
	kb_bench_def d = mm_def();
	kb_registry *reg = NULL;
	json_rows rows = { 0, "" };
	char *out = NULL;
	kb_error err;

	ck_assert_int_eq(kb_registry_create(&reg, NULL, &err), 0);
	ck_assert_int_eq(kb_registry_add(reg, &d, &err), 0);
	/* A run of the registry's own bench, in data mode with its check. */
	ck_assert_int_eq(kb_registry_run_json(reg, "mm", "{\"M\": 20}", NULL,
					      "{\"threads\": 1, \"data\": true}", &out, &err),
			 KB_OK);
	ck_assert_ptr_nonnull(strstr(out, "\"bench\":\"mm\""));
	ck_assert_ptr_nonnull(strstr(out, "\"M\":20"));
	ck_assert_ptr_null(strstr(out, "\"max_abs_err\":null"));
	ck_assert_ptr_nonnull(strstr(out, "\"max_abs_err\":"));
	kb_free(out);
	out = NULL;
	/* Its built-ins too; and the built-in entry points do not know mm. */
	ck_assert_int_eq(kb_registry_run_json(reg, "gemm", "{\"M\": 16, \"K\": 16, \"N\": 16}", NULL,
					      NULL, &out, &err), KB_OK);
	kb_free(out);
	out = NULL;
	ck_assert_int_eq(kb_bench_run_json("mm", NULL, NULL, NULL, &out, &err), KB_ENOTFOUND);
	ck_assert_int_eq(kb_registry_run_json(NULL, "mm", NULL, NULL, NULL, &out, &err),
			 KB_ENOTFOUND);
	ck_assert_ptr_null(out);
	/* The catalog lists it after the built-ins, with its typed parameters. */
	ck_assert_int_eq(kb_registry_catalog_json(&out, reg, &err), 0);
	ck_assert_ptr_nonnull(strstr(out, "\"name\":\"gemm\""));
	ck_assert_ptr_nonnull(strstr(out, "\"name\":\"mm\""));
	ck_assert(strstr(out, "\"name\":\"mm\"") > strstr(out, "\"name\":\"gemm\""));
	ck_assert_ptr_nonnull(strstr(out, "\"default\":32"));
	kb_free(out);
	ck_assert_int_eq(kb_catalog_json(&out, &err), 0);
	ck_assert_ptr_null(strstr(out, "\"name\":\"mm\""));
	kb_free(out);
	/* A sweep of it, rows in order. */
	ck_assert_int_eq(kb_registry_sweep_json(reg, spec, keep_json_row, &rows, &err), 0);
	ck_assert_int_eq(rows.n, 2);
	ck_assert_ptr_nonnull(strstr(rows.first, "\"bench\":\"mm\""));
	ck_assert_ptr_nonnull(strstr(rows.first, "\"M\":8"));
	ck_assert_ptr_nonnull(strstr(rows.first, "\"status\":0"));
	rows.n = 0;
	ck_assert_int_eq(kb_sweep_run_json(spec, keep_json_row, &rows, &err), KB_ENOTFOUND);
	ck_assert_int_eq(rows.n, 0);
	kb_registry_destroy(reg);
}
END_TEST

/* ---- size fields: structs the library fills can grow ------------------- */

static const char *const small_gemm[] = { "M=32", "K=32", "N=32", NULL };

/* A caller of a later header: its kb_result is longer than the library's. */
typedef struct later_result {
	kb_result r;
	unsigned char tail[64];
} later_result;

START_TEST(result_size_is_checked)
{
	kb_result res = KB_RESULT_INIT;
	later_result later;
	kb_sim_options so = KB_SIM_OPTIONS_INIT;
	kb_simulation *sim = NULL;
	kb_error err;

	/* Not initialised (zeroed, or one byte short of the first layout):
	 * refused, naming the field, before anything runs. */
	res.size = 0;
	ck_assert_int_eq(kbt_run("gemm", small_gemm, NULL, 1, 0, &res, &err), KB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "res->size is 0"));
	ck_assert_ptr_nonnull(strstr(err.message, "KB_RESULT_INIT"));
	ck_assert_ptr_null(kb_result_to_json(&res));
	res.size = KB_RESULT_SIZE_V1 - 1;
	ck_assert_int_eq(kbt_run("gemm", small_gemm, NULL, 1, 0, &res, &err), KB_EINVAL);
	so.threads = 1;
	ck_assert_int_eq(kb_simulation_create(&sim, NULL, &so, &err), 0);
	ck_assert_int_eq(kb_simulation_run(sim, &res, &err), KB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "kb_simulation_run: res->size"));
	/* The refused call did not use the simulation up. */
	res = (kb_result)KB_RESULT_INIT;
	ck_assert_int_eq(kb_simulation_run(sim, &res, &err), 0);
	ck_assert_uint_eq(res.size, sizeof(kb_result));
	kb_result_clear(&res);
	kb_simulation_destroy(sim);

	/* A longer struct: the library fills its own fields, says so in size,
	 * and leaves the rest alone. */
	memset(&later, 0xa5, sizeof(later));
	later.r = (kb_result)KB_RESULT_INIT;
	later.r.size = sizeof(later);
	ck_assert_int_eq(kbt_run("gemm", small_gemm, NULL, 1, 0, &later.r, &err), 0);
	ck_assert_uint_eq(later.r.size, sizeof(kb_result));
	ck_assert_str_eq(later.r.bench, "gemm");
	ck_assert_uint_gt(later.r.sim_time_ps, 0);
	ck_assert_ptr_nonnull(later.r.params_json);
	for (size_t i = 0; i < sizeof(later.tail); i++)
		ck_assert_uint_eq(later.tail[i], 0xa5);
	kb_result_clear(&later.r);
}
END_TEST

/* A caller of an older, shorter layout (simulated with a layout that ends
 * before params_json): only its fields are written, what the library
 * would have handed over beyond them is freed, and kb_result_clear frees
 * only what lies within its size. */
START_TEST(result_delivered_within_size)
{
	kb_result full = KB_RESULT_INIT, older;
	const size_t old_size = offsetof(kb_result, params_json);
	const unsigned char *tail = (const unsigned char *)&older + old_size;
	kb_engine_busy *busy;
	uint64_t sim_ps;
	kb_error err;

	ck_assert_int_eq(kbt_run("gemm", small_gemm, NULL, 1, 0, &full, &err), 0);
	ck_assert_ptr_nonnull(full.busy);
	ck_assert_ptr_nonnull(full.params_json);
	ck_assert_ptr_nonnull(full.meta_json);
	busy = full.busy;
	sim_ps = full.sim_time_ps;
	memset(&older, 0xa5, sizeof(older));
	older.size = old_size;
	kb__result_deliver(&older, &full);
	ck_assert_uint_eq(older.size, old_size);
	ck_assert_uint_eq(older.sim_time_ps, sim_ps);
	ck_assert_ptr_eq(older.busy, busy);
	for (size_t i = 0; i < sizeof(older) - old_size; i++)
		ck_assert_uint_eq(tail[i], 0xa5);
	/* full gave everything away (busy to older, the texts freed). */
	ck_assert_ptr_null(full.busy);
	ck_assert_ptr_null(full.params_json);
	ck_assert_ptr_null(full.meta_json);
	ck_assert_uint_eq(full.size, sizeof(kb_result));
	/* Clearing frees busy and touches nothing past size (params_json there
	 * is 0xa5 garbage: freeing it would crash). */
	kb_result_clear(&older);
	ck_assert_ptr_null(older.busy);
	for (size_t i = 0; i < sizeof(older) - old_size; i++)
		ck_assert_uint_eq(tail[i], 0xa5);
}
END_TEST

typedef struct row_probe {
	kb_sweep *s;
	int rows;
} row_probe;

static int probe_row(const kb_sweep_row *row, void *payload)
{
	row_probe *p = payload;
	kb_sweep_row mine = *row;
	kb_sweep_figures fig = KB_SWEEP_FIGURES_INIT;
	kb_result res;
	kb_error err;
	char *text = NULL;

	ck_assert_uint_eq(row->size, sizeof(kb_sweep_row));
	ck_assert_ptr_nonnull(row->result);
	ck_assert_uint_eq(row->result->size, sizeof(kb_result));
	/* A row of the first layout's size is read. */
	mine.size = KB_SWEEP_ROW_SIZE_V1;
	ck_assert_int_eq(kb_sweep_format_row(&text, p->s, &mine, KB_SWEEP_CSV, 0, &err), 0);
	kb_free(text);
	/* An uninitialised one is refused by every call that takes a row. */
	mine.size = 0;
	ck_assert_int_eq(kb_sweep_format_row(&text, p->s, &mine, KB_SWEEP_CSV, 0, &err), KB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "row->size is 0"));
	ck_assert_int_eq(kb_sweep_row_figures(&mine, &fig, &err), KB_EINVAL);
	ck_assert_ptr_null(kb_sweep_row_to_json(p->s, &mine));
	/* And so is a row whose result is. */
	mine.size = sizeof(mine);
	res = *row->result;
	res.size = 0;
	mine.result = &res;
	ck_assert_int_eq(kb_sweep_row_figures(&mine, &fig, &err), KB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "row->result->size is 0"));
	p->rows++;
	return 0;
}

START_TEST(sweep_row_size)
{
	kb_sweep_options so = KB_SWEEP_OPTIONS_INIT;
	row_probe p = { NULL, 0 };
	kb_error err;

	so.jobs = 1;
	ck_assert_int_eq(kb_sweep_create(&p.s, &so, &err), 0);
	ck_assert_int_eq(kb_sweep_add_bench(p.s, "gemm", &err), 0);
	ck_assert_int_eq(kb_sweep_add_param(p.s, "M", "16,32", &err), 0);
	ck_assert_int_eq(kb_sweep_add_param(p.s, "K", "32", &err), 0);
	ck_assert_int_eq(kb_sweep_add_param(p.s, "N", "32", &err), 0);
	ck_assert_int_eq(kb_sweep_run(p.s, probe_row, &p, &err), 0);
	ck_assert_int_eq(p.rows, 2);
	kb_sweep_destroy(p.s);
}
END_TEST

static int probe_record(const kb_oplog_record *rec, void *payload)
{
	size_t *n = payload;

	ck_assert_uint_eq(rec->size, sizeof(kb_oplog_record));
	(*n)++;
	return 0;
}

START_TEST(oplog_record_size)
{
	kb_run_options ro = KB_RUN_OPTIONS_INIT;
	kb_result res = KB_RESULT_INIT;
	kb_params *p = NULL;
	kb_error err;
	size_t n = 0;

	ck_assert_int_eq(kb_params_create(&p, &err), 0);
	for (size_t i = 0; small_gemm[i]; i++)
		ck_assert_int_eq(kb_params_set_assignment(p, small_gemm[i], &err), 0);
	ro.threads = 1;
	ro.on_record = probe_record;
	ro.payload = &n;
	ck_assert_int_eq(kb_bench_run("gemm", p, NULL, &ro, &res, &err), 0);
	ck_assert_uint_gt(n, 0);
	ck_assert_uint_eq(n, res.records);
	kb_result_clear(&res);
	kb_params_destroy(p);
}
END_TEST

/* ---- the result's text (result_json.c) ------------------------------- */

/* kb_result_to_json must equal jansson's dump of kb__result_json's object;
 * fast says the direct writer must write it (no fallback). */
static void same_text(const kb_result *r, int fast)
{
	char *ref = kb__result_to_json_jansson(r), *got = kb_result_to_json(r),
	     *direct = kb__result_text(r);

	ck_assert_ptr_nonnull(ref);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, ref);
	if (fast) {
		ck_assert_msg(direct != NULL, "fell back on %s", ref);
		ck_assert_str_eq(direct, ref);
	}
	free(ref);
	free(got);
	free(direct);
}

/* Every bench as a user runs it: sequential and threaded, timing and data. */
START_TEST(result_text_of_runs)
{
	static const char *const runs[][4] = {
		{ "gemm", "M=32", "K=32", "N=32" },
		{ "synthetic", NULL, NULL, NULL },
		{ "gqa_decode_opt2", "S_kv=256", NULL, NULL },
		{ "gqa_decode_opt3", "S_kv=256", "input_std=0.1", NULL },
	};
	static const int threads[] = { 1, 2, KB_THREADS_AUTO };

	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++)
		for (size_t t = 0; t < 3; t++)
			for (int data = 0; data < 2; data++) {
				kb_run_options ro = KB_RUN_OPTIONS_INIT;
				const char *argv[] = { "kernbench", "run", "a \"quoted\"\targ", "\\" };
				kb_result res = KB_RESULT_INIT;
				kb_params *p = NULL;
				kb_error err;

				if (data && strcmp(runs[i][0], "synthetic") == 0)
					continue;   /* it has no data mode */
				ck_assert_int_eq(kb_params_create(&p, &err), 0);
				for (size_t k = 1; k < 4 && runs[i][k]; k++)
					ck_assert_int_eq(kb_params_set_assignment(p, runs[i][k], &err), 0);
				ro.threads = threads[t];
				ro.data = data;
				ro.argc = 4;
				ro.argv = argv;
				ck_assert_msg(kb_bench_run(runs[i][0], p, NULL, &ro, &res, &err) == 0, "%s",
					      err.message);
				same_text(&res, 1);
				kb_result_clear(&res);
				kb_params_destroy(p);
			}
}
END_TEST

/* Results made by hand: what the writer copies, rewrites, or leaves to
 * jansson. */
START_TEST(result_text_by_hand)
{
	static const char *const fast_texts[] = {
		"{}", "[]", "{\"a\":1,\"b\":[1,-2,0,true,false,null,\"x\"],\"c\":{\"d\":{}}}",
		"{\"r\":0.10000000000000001,\"s\":1e300,\"t\":-0.0,\"u\":1E-320,\"v\":2.5e+10}",
		"{\"i\":123456789012345678,\"j\":-12345678901234567}",
		"{\"e\":\"a\\\"b\\\\c\\nd\\te\\rf\\bg\\fh\",\"x\":\"/~\x7f\"}",
		"[1.5,[[[]]],{\"k\":[0.333333333333333314829616256247]}]",
	};
	static const char *const slow_texts[] = {
		"", "1", "\"s\"", "{\"a\":1,\"a\":2}", "{\"a\": 1}", " {}", "{}x",
		"{\"u\":\"\\u0041\"}", "{\"u\":\"\\/\"}", "{\"u\":\"\xc3\xa9\"}", "{\"n\":01}",
		"{\"n\":-0}", "{\"n\":1234567890123456789}", "{\"n\":1e999}", "{\"n\":1.}",
		"{\"n\":.5}", "{\"n\":tru}", "{\"n\":trueX}", "{\"a\":[1,]}", "{\"a\":1", "[",
		"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
	};
	kb_engine_busy busy[] = { { 0, "cpu", 5 }, { 1, "dma", 7 }, { 0, "gemm", 3 },
				  { 1, "cpu", 1 } };
	kb_result r = KB_RESULT_INIT;
	char *orig;

	snprintf(r.bench, sizeof(r.bench), "hand");
	snprintf(r.oplog_sha256, sizeof(r.oplog_sha256), "%064d", 0);
	r.threads = 3;
	r.workers = 2;
	r.pes = 2;
	r.sim_time_ps = 1000;
	r.events = 10;
	r.tiles = 4;
	r.dispatch_per_tile_ns = 1.0 / 3.0;
	r.dispatch_kernel_per_tile_ns = 1e21;
	r.windows = 5;
	r.exec.threads = 2;
	r.exec.ns_oplog_serial = 7;
	r.exec.gathered = 2;
	r.alone_events = 6;
	r.exec_switches = 3;
	r.wall_s = 0.00012345;
	r.events_per_s = 123456789012.0;
	r.busy = busy;
	r.n_busy = 4;
	same_text(&r, 1);
	for (size_t i = 0; i < sizeof(fast_texts) / sizeof(fast_texts[0]); i++) {
		r.params_json = (char *)fast_texts[i];
		r.meta_json = (char *)fast_texts[(i + 1) % (sizeof(fast_texts) / sizeof(fast_texts[0]))];
		same_text(&r, 1);
	}
	for (size_t i = 0; i < sizeof(slow_texts) / sizeof(slow_texts[0]); i++) {
		r.params_json = (char *)slow_texts[i];
		r.meta_json = NULL;
		same_text(&r, 0);
		r.params_json = NULL;
		r.meta_json = (char *)slow_texts[i];
		same_text(&r, 0);
	}
	r.params_json = r.meta_json = NULL;
	/* Values jansson refuses or writes as null, the threads' word, data. */
	r.threads = KB_THREADS_AUTO;
	r.data = 1;
	r.max_abs_err = NAN;
	r.max_rel_err = 1e-7;
	r.dispatch_per_tile_ns = INFINITY;
	r.wall_s = NAN;
	r.events_per_s = -INFINITY;
	r.sim_time_ps = UINT64_MAX;   /* written as json_int_t */
	same_text(&r, 1);
	r.sim_time_ps = 0;            /* utilization 0.0 */
	same_text(&r, 1);
	/* An engine twice for a PE, or named "pe": jansson keeps one member. */
	busy[3].eng = "dma";
	busy[3].pe = 1;
	same_text(&r, 0);
	busy[3].eng = "pe";
	same_text(&r, 0);
	busy[3].eng = "cpu";
	/* Names jansson escapes or refuses. */
	orig = strdup(r.bench);
	snprintf(r.bench, sizeof(r.bench), "a\"b\\c\td\x7f");
	same_text(&r, 1);
	snprintf(r.bench, sizeof(r.bench), "a\001");
	same_text(&r, 0);
	snprintf(r.bench, sizeof(r.bench), "\xc3\xa9");
	same_text(&r, 0);
	snprintf(r.bench, sizeof(r.bench), "%s", orig);
	free(orig);
	same_text(&r, 1);
	r.size = KB_RESULT_SIZE_V1 - 1;
	ck_assert_ptr_null(kb_result_to_json(&r));
}
END_TEST

/* The date of a provenance text, its digits masked: two texts made a
 * second apart compare equal. */
static void mask_date(char *s)
{
	char *d = s ? strstr(s, "\"date_utc\":\"") : NULL;

	for (d = d ? d + 12 : NULL; d && *d && *d != '"'; d++)
		if (*d >= '0' && *d <= '9')
			*d = '0';
}

static void same_provenance(const kb_provenance_options *o, int fast)
{
	char *got = NULL, *ref = NULL;
	kb_error err;

	ck_assert_int_eq(kb__provenance_text(o, &got, &err), 0);
	ck_assert_int_eq(kb__provenance_dump(o, &ref, &err), 0);
	if (fast)
		ck_assert_msg(got != NULL, "fell back on %s", ref);
	if (got) {
		mask_date(got);
		mask_date(ref);
		ck_assert_str_eq(got, ref);
	}
	free(got);
	free(ref);
}

START_TEST(provenance_text_equals_jansson)
{
	static const char *const fast_params[] = {
		NULL, "{}", "{\"a\":0.10000000000000001,\"b\":1e5,\"c\":[1,\"x\\ty\"],\"d\":-0.0}",
	};
	static const char *const slow_params[] = { "1", "{\"a\" :1}", "{\"a\":\"\xc3\xa9\"}" };
	const char *argv[] = { "kernbench", NULL, "a \"q\"\t\\", "x" };
	const char *argv_utf8[] = { "kernbench", "\xc3\xa9" };
	kb_provenance_options o = KB_PROVENANCE_OPTIONS_INIT;
	kb_topology *t = NULL;
	kb_error err;
	char *out = NULL;

	same_provenance(NULL, 1);
	ck_assert_int_eq(kb_topology_default(&t, &err), 0);
	ck_assert_int_eq(kb_topology_set(t, "pe.gemm.tile_m", "32", &err), 0);
	o.topology = t;
	o.threads = 3;
	o.argc = 4;
	o.argv = argv;
	for (size_t i = 0; i < sizeof(fast_params) / sizeof(fast_params[0]); i++) {
		o.params_json = fast_params[i];
		same_provenance(&o, 1);
	}
	for (size_t i = 0; i < sizeof(slow_params) / sizeof(slow_params[0]); i++) {
		o.params_json = slow_params[i];
		same_provenance(&o, 0);
	}
	o.params_json = NULL;
	o.argc = 2;
	o.argv = argv_utf8;
	same_provenance(&o, 0);
	o.argc = 0;
	same_provenance(&o, 1);
	/* The public entry point: the same text, and jansson's errors. */
	ck_assert_int_eq(kb_provenance_json(&out, &o, &err), 0);
	ck_assert_ptr_nonnull(strstr(out, "\"command_line\":null,\"threads\":3,"));
	kb_free(out);
	o.params_json = "{";
	ck_assert_int_eq(kb_provenance_json(&out, &o, &err), KB_EPARSE);
	ck_assert_ptr_null(out);
	kb_topology_destroy(t);
}
END_TEST

/* A run's parameter text (kb__params_text) against jansson's. */
START_TEST(params_text_equals_jansson)
{
	static const kb_param_info ps[] = {
		{ "n", KB_PARAM_INT, "12", NULL, NULL, 0, 1e18 },
		{ "x", KB_PARAM_REAL, "0.1", NULL, NULL, -1e300, 1e300 },
		{ "s", KB_PARAM_STRING, "plain", NULL, NULL, 0, 0 },
	};
	static const char *const fast[][3] = {
		{ NULL, NULL, NULL }, { "-7", "1e5", "a b" }, { "12x", "0.5z", "q\"t\\" },
		{ "99999999999999999999", "-0.0", "~" }, { "+3", "1e-320", "/" },
	};
	static const char *const slow[][3] = { { NULL, NULL, "a\"b" }, { NULL, NULL, "\xc3\xa9" },
					      { NULL, "1e999", NULL } };
	kb_bench_info b = { "hand", NULL, ps, 3 };

	for (size_t k = 0; k < 2; k++) {
		size_t n = k ? sizeof(slow) / sizeof(slow[0]) : sizeof(fast) / sizeof(fast[0]);

		for (size_t i = 0; i < n; i++) {
			kb_params *p = NULL;
			kb_error err;
			char *got, *ref;

			ck_assert_int_eq(kb_params_create(&p, &err), 0);
			for (size_t j = 0; j < 3; j++) {
				const char *v = k ? slow[i][j] : fast[i][j];

				if (v)
					ck_assert_msg(kb_params_set(p, ps[j].name, v, &err) == 0, "%s: %s",
						      v, err.message);
			}
			got = kb__params_text(&b, p);
			ref = kb__params_dump(&b, p);
			ck_assert_ptr_nonnull(ref);
			if (!k)
				ck_assert_msg(got != NULL, "fell back on %s", ref);
			if (got)
				ck_assert_str_eq(got, ref);
			free(got);
			free(ref);
			kb_params_destroy(p);
		}
	}
}
END_TEST

Suite *registry_suite(void)
{
	Suite *s = suite_create("registry");
	TCase *tc = tcase_create("registry"), *sizes;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, builtins_through_a_registry);
	tcase_add_test(tc, registry_run_matches_bench_run);
	tcase_add_test(tc, invalid_definitions_are_refused);
	tcase_add_test(tc, definitions_are_copied);
	tcase_add_test(tc, optional_strings_are_copied);
	tcase_add_test(tc, error_text_falls_back);
	tcase_add_test(tc, own_bench_runs_checks_and_dumps);
	tcase_add_test(tc, plugin_errors_name_the_file);
	tcase_add_test(tc, json_api_through_a_registry);
	tcase_add_test(tc, result_text_of_runs);
	tcase_add_test(tc, result_text_by_hand);
	tcase_add_test(tc, provenance_text_equals_jansson);
	tcase_add_test(tc, params_text_equals_jansson);
	suite_add_tcase(s, tc);
	sizes = tcase_create("sizes");
	tcase_set_timeout(sizes, 60);
	tcase_add_test(sizes, result_size_is_checked);
	tcase_add_test(sizes, result_delivered_within_size);
	tcase_add_test(sizes, sweep_row_size);
	tcase_add_test(sizes, oplog_record_size);
	suite_add_tcase(s, sizes);
	return s;
}
