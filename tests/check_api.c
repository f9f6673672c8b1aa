/*
 * The public API as an embedding program sees it: only <kernbench.h>, no
 * internal header. Version, topology objects and their error objects, a
 * simulation driven by hand with the caller's own kernel in data mode, the
 * op_log callback, result figures, error paths, several simulations at once
 * on different threads, the bench table and sweeps.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kernbench.h>

#include "deep_stack.h"
#include "suites.h"
#include "testutil.h"

/* ---- version ---- */

START_TEST(version_matches_macros)
{
	ck_assert_str_eq(kb_version(), KB_VERSION_STRING);
	ck_assert_uint_eq(kb_version_hex(), (unsigned)KB_VERSION_HEX);
	ck_assert_uint_eq(kb_version_hex() >> 16, (unsigned)KB_VERSION_MAJOR);
	ck_assert_uint_eq((kb_version_hex() >> 8) & 0xff, (unsigned)KB_VERSION_MINOR);
	ck_assert_uint_eq(kb_version_hex() & 0xff, (unsigned)KB_VERSION_PATCH);
}
END_TEST

START_TEST(strerror_names)
{
	for (int c = KB_OK; c >= KB_EINTERNAL; c--)
		ck_assert_ptr_nonnull(kb_strerror(c));
	ck_assert_ptr_nonnull(kb_strerror(12345));
	ck_assert_str_eq(kb_validation_name(KB_V_BAD_HANDLE), "bad_handle");
	ck_assert_ptr_nonnull(kb_validation_name(-7));
	kb_error_clear(NULL);
}
END_TEST

/* kb_error's fixed size and version (issue 16: a struct the library
 * fills says which layout it filled): a caller's garbage is replaced by
 * this library's version and a zeroed reserve, on success and failure. */
START_TEST(error_version_and_reserve)
{
	kb_topology *t = NULL;
	kb_error err;

	memset(&err, 0xab, sizeof(err));
	kb_error_clear(&err);
	ck_assert_int_eq(err.version, KB_ERROR_VERSION);
	memset(&err, 0xab, sizeof(err));
	ck_assert_int_eq(kb_topology_default(&t, &err), KB_OK);
	memset(&err, 0xab, sizeof(err));
	ck_assert_int_lt(kb_topology_set(t, "pe.dma.no_such_key", "1", &err), 0);
	ck_assert_int_eq(err.version, KB_ERROR_VERSION);
	ck_assert_str_eq(err.source, "pe.dma.no_such_key");
	for (size_t i = 0; i < sizeof(err.reserved) / sizeof(err.reserved[0]); i++)
		ck_assert_int_eq(err.reserved[i], 0);
	kb_topology_destroy(t);
}
END_TEST

/* ---- topology ---- */

START_TEST(topology_default_set_dump)
{
	kb_topology *t = NULL, *back = NULL;
	kb_error err;
	double v = 0;
	char *json;

	ck_assert_int_eq(kb_topology_default(&t, &err), KB_OK);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(kb_topology_set(t, "pe_cost_model.r_cycles_per_byte", "0.25", &err), KB_OK);
	ck_assert_int_eq(kb_topology_get_number(t, "pe_cost_model.r_cycles_per_byte", &v, &err), KB_OK);
	ck_assert(v == 0.25);
	ck_assert_int_eq(kb_topology_set_assignment(t, "pe.dma.setup_cycles = 80", &err), KB_OK);
	json = kb_topology_dump(t);
	ck_assert_ptr_nonnull(json);
	ck_assert_ptr_nonnull(strstr(json, KB_TOPOLOGY_SCHEMA));
	ck_assert_int_eq(kb_topology_load_string(&back, json, &err), KB_OK);
	ck_assert_int_eq(kb_topology_get_number(back, "pe.dma.setup_cycles", &v, &err), KB_OK);
	ck_assert(v == 80);
	ck_assert_int_eq(kb_topology_get_number(back, "pe_cost_model.r_cycles_per_byte", &v, &err), KB_OK);
	ck_assert(v == 0.25);
	kb_free(json);
	kb_topology_destroy(back);
	kb_topology_destroy(t);
	kb_topology_destroy(NULL);
	kb_free(NULL);
}
END_TEST

START_TEST(topology_errors)
{
	kb_topology *t = NULL, *keep = NULL;
	kb_error err;
	double v = 0;

	/* Malformed JSON: line and column of the error. */
	ck_assert_int_eq(kb_topology_load_string(&t, "{\n  \"schema\": ,\n}\n", &err), KB_EPARSE);
	ck_assert_ptr_null(t);
	ck_assert_int_eq(err.code, KB_EPARSE);
	ck_assert_int_eq(err.line, 2);
	ck_assert_int_gt(err.column, 0);
	ck_assert_str_eq(err.source, "<string>");
	ck_assert_int_gt((int)strlen(err.message), 0);

	/* Missing schema, unknown key, wrong type, out of range. */
	ck_assert_int_eq(kb_topology_load_string(&t, "{\"clusters\": 2}", &err), KB_EKEY);
	ck_assert_int_eq(kb_topology_load_string(&t, "{\"schema\": \"kernbench-topology/1\", \"nope\": 1}", &err),
			 KB_EKEY);
	ck_assert_ptr_nonnull(strstr(err.message, "nope"));
	ck_assert_int_eq(kb_topology_load_string(&t, "{\"schema\": \"kernbench-topology/1\", \"clusters\": \"x\"}",
						 &err), KB_ETYPE);
	ck_assert_ptr_null(t);
	ck_assert_int_eq(kb_topology_load_file(&t, "/nonexistent/kb/topology.json", &err), KB_EIO);
	ck_assert_ptr_nonnull(strstr(err.message, "/nonexistent/kb/topology.json"));

	/* A failed set leaves the topology unchanged. */
	ck_assert_int_eq(kb_topology_default(&keep, &err), KB_OK);
	ck_assert_int_eq(kb_topology_set(keep, "no.such.key", "1", &err), KB_EKEY);
	ck_assert_int_eq(kb_topology_set(keep, "pe.dma.setup_cycles", "abc", &err), KB_EPARSE);
	ck_assert_int_eq(kb_topology_set(keep, "pe.dma.setup_cycles", "1.5", &err), KB_ETYPE);
	ck_assert_int_eq(kb_topology_set(keep, "pe_cost_model.r_cycles_per_byte", "-1", &err), KB_ERANGE);
	ck_assert_int_eq(kb_topology_get_number(keep, "pe_cost_model.r_cycles_per_byte", &v, &err), KB_OK);
	ck_assert(v == 0.0625);

	/* NULL arguments. */
	ck_assert_int_eq(kb_topology_default(NULL, &err), KB_EINVAL);
	ck_assert_int_eq(err.code, KB_EINVAL);
	ck_assert_int_eq(kb_topology_load_string(&t, NULL, &err), KB_EINVAL);
	ck_assert_int_eq(kb_topology_load_file(&t, NULL, &err), KB_EINVAL);
	ck_assert_int_eq(kb_topology_set(NULL, "clusters", "1", &err), KB_EINVAL);
	ck_assert_int_eq(kb_topology_set(keep, NULL, "1", &err), KB_EINVAL);
	ck_assert_int_eq(kb_topology_get_number(keep, "clusters", NULL, &err), KB_EINVAL);
	ck_assert_ptr_null(kb_topology_dump(NULL));
	ck_assert_int_eq(kb_topology_clone(NULL, keep, &err), KB_EINVAL);
	ck_assert_int_eq(kb_topology_clone(&keep, NULL, &err), KB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "kb_topology_clone"));
	/* The error object is optional. */
	ck_assert_int_eq(kb_topology_set(keep, "no.such.key", "1", NULL), KB_EKEY);
	kb_topology_destroy(keep);
}
END_TEST

/* ---- a kernel of our own: C = relu?(A @ B + bias) ---- */

typedef struct gemm_job {
	int64_t M, K, N;
	int relu;
	uint64_t a, b, bias, c;
} gemm_job;

static void gemm_bias_kernel(kb_tl *tl, void *p)
{
	const gemm_job *g = p;
	int64_t sa[2] = { g->M, g->K }, sb[2] = { g->K, g->N }, sc[2] = { g->M, g->N };
	int64_t sn[1] = { g->N };
	kb_tl_op epi[2] = { { .op = "bias" }, { .op = "relu" } };
	kb_tl_composite_desc d = { .op = "gemm" };

	d.a = kb_tl_ref(tl, g->a, KB_FP32, 2, sa);
	d.b = kb_tl_ref(tl, g->b, KB_FP32, 2, sb);
	d.out = kb_tl_ref(tl, g->c, KB_FP32, 2, sc);
	epi[0].args[0] = (kb_tl_arg){ "bias", kb_tl_load(tl, kb_tl_ref(tl, g->bias, KB_FP32, 1, sn), NULL) };
	d.epilogue = epi;
	d.n_epilogue = g->relu ? 2 : 1;
	kb_tl_composite(tl, &d);
}

typedef struct oplog_seen {
	uint64_t n, last_t1, bad_order, dispatch;
	int bad_fields;
	char *text;       /* every record's JSON, one per line */
	size_t len, cap;
} oplog_seen;

static int on_record(const kb_oplog_record *r, void *payload)
{
	oplog_seen *s = payload;

	if (s->n && r->t1_ps < s->last_t1)
		s->bad_order++;
	s->last_t1 = r->t1_ps;
	s->n++;
	/* r->json is not NUL-terminated: it is json_len bytes. */
	if (!r->eng || !r->op || !r->json || r->t1_ps < r->t0_ps || r->json_len < 2 ||
	    r->json[0] != '{' || r->json[r->json_len - 1] != '}' || memchr(r->json, '\n', r->json_len))
		s->bad_fields = 1;
	if (r->eng && r->op && strcmp(r->eng, "cpu") == 0 && strcmp(r->op, "dispatch") == 0) {
		s->dispatch++;
		if (!r->kind || r->lbytes <= 0)
			s->bad_fields = 1;
	}
	if (s->len + r->json_len + 2 > s->cap) {
		size_t cap = (s->cap + r->json_len + 2) * 2;
		char *t = realloc(s->text, cap);

		if (!t)
			return 1;
		s->text = t;
		s->cap = cap;
	}
	memcpy(s->text + s->len, r->json, r->json_len);
	s->len += r->json_len;
	s->text[s->len++] = '\n';
	s->text[s->len] = '\0';
	return 0;
}

/* Deterministic small inputs, exact in fp32. */
static void fill(float *x, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)((int)((i * 7 + seed * 13) % 17) - 8) / 8.0f;
}

typedef struct gemm_run {
	kb_result res;
	double max_err;
	int rc;
	char message[768];
} gemm_run;

/* Creates a simulation, runs gemm_bias_kernel on one PE in data mode and
 * compares C with a host computation. */
static void run_own_gemm(int threads, int relu, kb_oplog_cb cb, void *payload,
			 const char *oplog_path, gemm_run *out)
{
	const int64_t M = 64, K = 96, N = 128;
	int64_t sa[2] = { M, K }, sb[2] = { K, N }, sc[2] = { M, N }, sn[1] = { N };
	kb_sim_options so = KB_SIM_OPTIONS_INIT;
	kb_simulation *sim = NULL;
	gemm_job job = { M, K, N, relu, 0, 0, 0, 0 };
	float *a = malloc(sizeof(float) * (size_t)(M * K)), *b = malloc(sizeof(float) * (size_t)(K * N));
	float *bias = malloc(sizeof(float) * (size_t)N), *c = malloc(sizeof(float) * (size_t)(M * N));
	kb_error err;
	int rc;

	memset(out, 0, sizeof(*out));
	out->res = (kb_result)KB_RESULT_INIT;
	ck_assert(a && b && bias && c);
	fill(a, (size_t)(M * K), 1);
	fill(b, (size_t)(K * N), 2);
	fill(bias, (size_t)N, 3);
	so.threads = threads;
	so.data = 1;
	so.on_record = cb;
	so.payload = payload;
	so.oplog_path = oplog_path;
	rc = kb_simulation_create(&sim, NULL, &so, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 2, sa, 0, &job.a, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 2, sb, 0, &job.b, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 1, sn, 0, &job.bias, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 2, sc, 1, &job.c, &err);
	if (!rc)
		rc = kb_simulation_upload(sim, job.a, a, sizeof(float) * (size_t)(M * K), &err);
	if (!rc)
		rc = kb_simulation_upload(sim, job.b, b, sizeof(float) * (size_t)(K * N), &err);
	if (!rc)
		rc = kb_simulation_upload(sim, job.bias, bias, sizeof(float) * (size_t)N, &err);
	if (!rc)
		rc = kb_simulation_launch(sim, gemm_bias_kernel, &job, 0, 1, &err);
	if (!rc)
		rc = kb_simulation_run(sim, &out->res, &err);
	if (!rc)
		rc = kb_simulation_download(sim, job.c, c, sizeof(float) * (size_t)(M * N), &err);
	for (int64_t i = 0; !rc && i < M; i++)
		for (int64_t j = 0; j < N; j++) {
			double want = bias[j];

			for (int64_t k = 0; k < K; k++)
				want += (double)a[i * K + k] * (double)b[k * N + j];
			if (relu && want < 0)
				want = 0;
			out->max_err = fmax(out->max_err, fabs(want - (double)c[i * N + j]));
		}
	out->rc = rc;
	if (rc)
		snprintf(out->message, sizeof(out->message), "%s", err.message);
	kb_simulation_destroy(sim);
	free(a);
	free(b);
	free(bias);
	free(c);
}

static void check_figures(const kb_result *r)
{
	uint64_t busy_sum = 0, busy_gemm = 0, busy_cpu = 0;

	ck_assert_uint_gt(r->sim_time_ps, 0);
	ck_assert_uint_gt(r->events, 0);
	ck_assert_uint_gt(r->commands, 0);
	ck_assert_uint_gt(r->dispatch_ps, 0);
	ck_assert_uint_gt(r->records, 0);
	ck_assert_uint_eq(r->pes, 1);
	ck_assert_int_eq(r->data, 1);
	ck_assert_uint_gt(r->workers, 0);
	ck_assert_int_eq((int)strlen(r->oplog_sha256), 64);
	ck_assert_ptr_nonnull(r->busy);
	ck_assert_uint_gt(r->n_busy, 0);
	for (size_t i = 0; i < r->n_busy; i++) {
		ck_assert_uint_lt(r->busy[i].pe, r->pes);
		ck_assert_ptr_nonnull(r->busy[i].eng);
		ck_assert_uint_le(r->busy[i].busy_ps, r->sim_time_ps);
		busy_sum += r->busy[i].busy_ps;
		if (strcmp(r->busy[i].eng, "gemm") == 0)
			busy_gemm += r->busy[i].busy_ps;
		if (strcmp(r->busy[i].eng, "cpu") == 0)
			busy_cpu += r->busy[i].busy_ps;
	}
	ck_assert_uint_gt(busy_sum, 0);
	ck_assert_uint_gt(busy_gemm, 0);
	/* Dispatching is PE_CPU work, so it is part of PE_CPU's busy time. */
	ck_assert_uint_ge(busy_cpu, r->dispatch_ps);
	ck_assert_uint_le(r->dispatch_ps, r->sim_time_ps);
}

START_TEST(own_kernel_data_mode)
{
	oplog_seen seen = { 0 };
	gemm_run run;
	char *dir = kbt_tmpdir(), path[4200], *file;
	size_t len = 0;

	ck_assert_ptr_nonnull(dir);
	snprintf(path, sizeof(path), "%s/ops.jsonl", dir);
	run_own_gemm(0, 1, on_record, &seen, path, &run);
	ck_assert_msg(run.rc == 0, "run failed: %s", run.message);
	ck_assert_msg(run.max_err < 1e-4, "max abs error %g", run.max_err);
	check_figures(&run.res);
	/* The callback saw every record, in order, the same bytes as the file. */
	ck_assert_uint_eq(seen.n, run.res.records);
	ck_assert_uint_eq(seen.bad_order, 0);
	ck_assert_int_eq(seen.bad_fields, 0);
	ck_assert_uint_eq(seen.dispatch, run.res.commands);
	file = kbt_slurp(path, &len);
	ck_assert_ptr_nonnull(file);
	ck_assert_uint_eq(len, seen.len);
	ck_assert(memcmp(file, seen.text, len) == 0);
	free(file);
	unlink(path);
	rmdir(dir);
	free(dir);
	free(seen.text);
	kb_result_clear(&run.res);
	kb_result_clear(&run.res);  /* twice is harmless */
	kb_result_clear(NULL);
}
END_TEST

/* A kernel with work before and after a loop of `tiles` fills; mode 0
 * declares nothing, 1 declares the loop, 2 ends without a begin. */
typedef struct tile_job {
	int mode;
	uint64_t tiles;
} tile_job;

static void tile_kernel(kb_tl *tl, void *p)
{
	const tile_job *j = p;
	int64_t shape[1] = { 256 };

	kb_tl_scope_begin(tl);
	kb_tl_full(tl, KB_FP32, 1, shape, 1.0);
	kb_tl_full(tl, KB_FP32, 1, shape, 2.0);
	kb_tl_scope_end(tl);
	if (j->mode == 1)
		kb_tl_tile_loop_begin(tl);
	for (uint64_t i = 0; i < j->tiles; i++) {
		kb_tl_scope_begin(tl);
		kb_tl_full(tl, KB_FP32, 1, shape, (double)i);
		kb_tl_scope_end(tl);
	}
	if (j->mode)
		kb_tl_tile_loop_end(tl, j->tiles);
	kb_tl_scope_begin(tl);
	kb_tl_full(tl, KB_FP32, 1, shape, 3.0);
	kb_tl_scope_end(tl);
}

static void run_tiles(int mode, uint32_t programs, kb_result *res)
{
	kb_sim_options so = KB_SIM_OPTIONS_INIT;
	kb_simulation *sim = NULL;
	tile_job job = { mode, 5 };
	kb_topology *t = NULL;
	kb_error err;
	int rc;

	rc = kb_topology_default(&t, &err);
	if (!rc)
		rc = kb_topology_set(t, "pes_per_cluster", "2", &err);
	so.pes = programs;
	if (!rc)
		rc = kb_simulation_create(&sim, t, &so, &err);
	kb_topology_destroy(t);
	if (!rc)
		rc = kb_simulation_launch(sim, tile_kernel, &job, 0, programs, &err);
	if (!rc)
		rc = kb_simulation_run(sim, res, &err);
	ck_assert_msg(rc == 0, "run failed: %s", err.message);
	kb_simulation_destroy(sim);
}

START_TEST(own_kernel_declares_tiles)
{
	kb_result none = KB_RESULT_INIT, loop = KB_RESULT_INIT, whole = KB_RESULT_INIT;
	char *json;

	run_tiles(0, 2, &none);
	run_tiles(1, 2, &loop);
	run_tiles(2, 1, &whole);
	/* Nothing declared: the per-tile figures are absent. */
	ck_assert_uint_eq(none.tiles, 0);
	ck_assert(isnan(none.dispatch_per_tile_ns));
	ck_assert(isnan(none.dispatch_kernel_per_tile_ns));
	json = kb_result_to_json(&none);
	ck_assert_ptr_nonnull(json);
	ck_assert_ptr_null(strstr(json, "tile"));
	kb_free(json);
	/* Declaring issues no command. */
	ck_assert_uint_eq(loop.commands, none.commands);
	ck_assert_uint_eq(loop.dispatch_ps, none.dispatch_ps);
	/* Two programs of 5 tiles; the loop's commands are fewer than all. */
	ck_assert_uint_eq(loop.tiles, 10);
	ck_assert(isfinite(loop.dispatch_per_tile_ns) && loop.dispatch_per_tile_ns > 0);
	ck_assert(loop.dispatch_per_tile_ns < loop.dispatch_kernel_per_tile_ns);
	ck_assert(fabs(loop.dispatch_kernel_per_tile_ns * 10 * 1000 - (double)loop.dispatch_ps) < 1);
	/* 3 fills outside the loop, 5 inside, all the same size: 5/8 of it. */
	ck_assert(fabs(loop.dispatch_per_tile_ns * 10 * 1000 - (double)loop.dispatch_ps * 5 / 8) <
		  (double)loop.dispatch_ps * 1e-3);
	json = kb_result_to_json(&loop);
	ck_assert_ptr_nonnull(json);
	ck_assert_ptr_nonnull(strstr(json, "\"tiles\":10"));
	kb_free(json);
	/* An end without a begin counts from the kernel's start. */
	ck_assert_uint_eq(whole.tiles, 5);
	ck_assert(whole.dispatch_per_tile_ns > loop.dispatch_per_tile_ns);
	ck_assert(whole.dispatch_per_tile_ns < whole.dispatch_kernel_per_tile_ns);
	kb_result_clear(&none);
	kb_result_clear(&loop);
	kb_result_clear(&whole);
}
END_TEST

START_TEST(own_kernel_threads_agree)
{
	gemm_run seq, par;

	run_own_gemm(1, 0, NULL, NULL, NULL, &seq);
	run_own_gemm(0, 0, NULL, NULL, NULL, &par);
	ck_assert_msg(seq.rc == 0 && par.rc == 0, "%s %s", seq.message, par.message);
	ck_assert_uint_eq(seq.res.sim_time_ps, par.res.sim_time_ps);
	ck_assert_uint_eq(seq.res.events, par.res.events);
	ck_assert_uint_eq(seq.res.commands, par.res.commands);
	ck_assert_str_eq(seq.res.oplog_sha256, par.res.oplog_sha256);
	ck_assert(seq.max_err < 1e-4 && par.max_err < 1e-4);
	kb_result_clear(&seq.res);
	kb_result_clear(&par.res);
}
END_TEST

static int stop_at_first(const kb_oplog_record *r, void *payload)
{
	(void)r;
	++*(int *)payload;
	return 1;
}

START_TEST(callback_stops_run)
{
	int calls = 0;
	gemm_run run;

	run_own_gemm(1, 0, stop_at_first, &calls, NULL, &run);
	ck_assert_int_ne(run.rc, 0);
	ck_assert_int_eq(calls, 1);
}
END_TEST

/* ---- error paths ---- */

static void nop_kernel(kb_tl *tl, void *p)
{
	(void)p;
	kb_tl_cpu_overhead(tl, 10);
}

START_TEST(null_args)
{
	kb_simulation *sim = NULL;
	kb_error err;
	int64_t shape[1] = { 4 };
	uint64_t addr = 0;
	char buf[16];

	ck_assert_int_eq(kb_simulation_create(NULL, NULL, NULL, &err), KB_EINVAL);
	ck_assert_int_eq(err.code, KB_EINVAL);
	ck_assert_int_eq(kb_simulation_alloc(NULL, KB_FP32, 1, shape, 0, &addr, &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_upload(NULL, 0, buf, sizeof(buf), &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_download(NULL, 0, buf, sizeof(buf), &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_launch(NULL, nop_kernel, NULL, 0, 1, &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_run(NULL, NULL, &err), KB_EINVAL);
	ck_assert_uint_eq(kb_simulation_pes(NULL), 0);
	kb_simulation_destroy(NULL);

	ck_assert_int_eq(kb_simulation_create(&sim, NULL, NULL, &err), KB_OK);
	ck_assert_uint_eq(kb_simulation_pes(sim), 1);
	ck_assert_int_eq(kb_simulation_alloc(sim, KB_FP32, 1, NULL, 0, &addr, &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_alloc(sim, KB_FP32, 1, shape, 0, NULL, &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_alloc(sim, KB_FP32, 0, shape, 0, &addr, &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_alloc(sim, (kb_dtype)99, 1, shape, 0, &addr, &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_upload(sim, 0, NULL, 4, &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_download(sim, 0, NULL, 4, &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_launch(sim, NULL, NULL, 0, 1, &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_launch(sim, nop_kernel, NULL, 0, 2, &err), KB_ERANGE);
	ck_assert_int_eq(kb_simulation_launch(sim, nop_kernel, NULL, 0, 0, &err), KB_ERANGE);
	/* Without data mode there is nothing to upload. */
	ck_assert_int_eq(kb_simulation_alloc(sim, KB_FP32, 1, shape, 1, &addr, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_upload(sim, addr, buf, sizeof(buf), &err), KB_ESTATE);
	kb_simulation_destroy(sim);

	ck_assert_int_eq(kb_bench_run(NULL, NULL, NULL, NULL, NULL, &err) != 0, 1);
	ck_assert_int_eq(kb_params_create(NULL, &err), KB_EINVAL);
	ck_assert_int_eq(err.code, KB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "kb_params_create"));
	ck_assert_int_eq(kb_params_create(NULL, NULL), KB_EINVAL);
	ck_assert_int_eq(kb_sweep_create(NULL, NULL, &err), KB_EINVAL);
}
END_TEST

START_TEST(state_errors)
{
	kb_simulation *sim = NULL;
	kb_result res = KB_RESULT_INIT;
	kb_error err;

	ck_assert_int_eq(kb_simulation_create(&sim, NULL, NULL, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_launch(sim, nop_kernel, NULL, 0, 1, &err), KB_OK);
	/* The same PE twice. */
	ck_assert_int_eq(kb_simulation_launch(sim, nop_kernel, NULL, 0, 1, &err), KB_EINVAL);
	ck_assert_int_eq(kb_simulation_run(sim, &res, &err), KB_OK);
	ck_assert_uint_gt(res.sim_time_ps, 0);
	kb_result_clear(&res);
	ck_assert_int_eq(kb_simulation_launch(sim, nop_kernel, NULL, 0, 1, &err), KB_ESTATE);
	ck_assert_int_eq(err.code, KB_ESTATE);
	ck_assert_int_eq(kb_simulation_run(sim, NULL, &err), KB_ESTATE);
	ck_assert_int_eq(err.code, KB_ESTATE);
	kb_simulation_destroy(sim);
}
END_TEST

START_TEST(destroy_without_run)
{
	kb_simulation *sim = NULL;
	kb_sim_options so = KB_SIM_OPTIONS_INIT;
	int64_t shape[2] = { 8, 8 };
	uint64_t addr;
	kb_error err;

	so.data = 1;
	ck_assert_int_eq(kb_simulation_create(&sim, NULL, &so, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_alloc(sim, KB_FP16, 2, shape, 1, &addr, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_launch(sim, nop_kernel, NULL, 0, 1, &err), KB_OK);
	kb_simulation_destroy(sim);
}
END_TEST

/* A composite whose operands do not fit: a (8, 16) @ b (8, 8). */
static void bad_shape_kernel(kb_tl *tl, void *p)
{
	int64_t sa[2] = { 8, 16 }, sb[2] = { 8, 8 };
	kb_tl_composite_desc d = { .op = "gemm" };
	uint64_t *addr = p;

	d.a = kb_tl_load(tl, kb_tl_ref(tl, addr[0], KB_FP16, 2, sa), NULL);
	d.b = kb_tl_load(tl, kb_tl_ref(tl, addr[1], KB_FP16, 2, sb), NULL);
	kb_tl_composite(tl, &d);
	/* Every later op is a no-op once one has failed (checked on the
	 * test's thread: a kernel runs on a thread of the simulation). */
	addr[2] = (uint64_t)kb_tl_failed(tl);
	addr[3] = kb_tl_dot(tl, d.a, d.b, 0) == NULL;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

START_TEST(failed_run_then_destroy)
{
	kb_simulation *sim = NULL;
	int64_t sa[2] = { 8, 16 }, sb[2] = { 8, 8 };
	uint64_t addr[4] = { 0 };
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc;

	ck_assert_int_eq(kb_simulation_create(&sim, NULL, NULL, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_alloc(sim, KB_FP16, 2, sa, 1, &addr[0], &err), KB_OK);
	ck_assert_int_eq(kb_simulation_alloc(sim, KB_FP16, 2, sb, 1, &addr[1], &err), KB_OK);
	ck_assert_int_eq(kb_simulation_launch(sim, bad_shape_kernel, addr, 0, 1, &err), KB_OK);
	rc = kb_simulation_run(sim, &res, &err);
	ck_assert_int_eq(rc, KB_EVALIDATE);
	ck_assert_int_eq(err.code, KB_EVALIDATE);
	ck_assert_int_eq(err.detail, KB_V_SHAPE);
	ck_assert_msg(strstr(err.message, kb_validation_name(KB_V_SHAPE)) != NULL, "message: %s", err.message);
	ck_assert_uint_eq(addr[2], 1);
	ck_assert_uint_eq(addr[3], 1);
	/* The message names the call site (this file). */
	ck_assert_msg(strstr(err.message, "check_api.c") != NULL, "message: %s", err.message);
	/* kb_error.source is the call site "file.c:LINE", with LINE in .line too
	 * (doc/api.md, "What kb_error.source holds"). */
	{
		char want[32];

		snprintf(want, sizeof(want), "check_api.c:%d", err.line);
		ck_assert_int_gt(err.line, 0);
		ck_assert_msg(ends_with(err.source, want), "source '%s', line %d", err.source, err.line);
	}
	ck_assert_int_eq(kb_simulation_run(sim, &res, &err), KB_ESTATE);
	kb_simulation_destroy(sim);
}
END_TEST

/* A kernel that keeps the handle of its first tensor, and one that uses a
 * handle it is given. */
typedef struct handle_box {
	uint64_t addr;
	kb_tl_tensor *kept;      /* set by keep_kernel */
	kb_tl_tensor *foreign;   /* used by use_kernel */
	int saw_failed;
} handle_box;

static void keep_kernel(kb_tl *tl, void *p)
{
	handle_box *h = p;
	int64_t s[2] = { 8, 8 };

	h->kept = kb_tl_load(tl, kb_tl_ref(tl, h->addr, KB_FP16, 2, s), NULL);
}

static void use_kernel(kb_tl *tl, void *p)
{
	handle_box *h = p;
	int64_t s[2] = { 8, 8 };
	kb_tl_tensor *mine = kb_tl_load(tl, kb_tl_ref(tl, h->addr, KB_FP16, 2, s), NULL);

	kb_tl_dot(tl, mine, h->foreign, 0);
	h->saw_failed = kb_tl_failed(tl);
}

START_TEST(foreign_handle)
{
	kb_simulation *a = NULL, *b = NULL;
	int64_t s[2] = { 8, 8 };
	handle_box ha = { 0 }, hb = { 0 };
	kb_error err;

	ck_assert_int_eq(kb_simulation_create(&a, NULL, NULL, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_create(&b, NULL, NULL, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_alloc(a, KB_FP16, 2, s, 1, &ha.addr, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_alloc(b, KB_FP16, 2, s, 1, &hb.addr, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_launch(a, keep_kernel, &ha, 0, 1, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_run(a, NULL, &err), KB_OK);
	ck_assert_ptr_nonnull(ha.kept);
	/* Simulation a is still alive while b runs with a's handle. */
	hb.foreign = ha.kept;
	ck_assert_int_eq(kb_simulation_launch(b, use_kernel, &hb, 0, 1, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_run(b, NULL, &err), KB_EVALIDATE);
	if (err.detail != 0)  /* see failed_run_then_destroy */
		ck_assert_int_eq(err.detail, KB_V_BAD_HANDLE);
	ck_assert_int_eq(hb.saw_failed, 1);
	ck_assert_msg(strstr(err.message, kb_validation_name(KB_V_BAD_HANDLE)) != NULL,
		      "message: %s", err.message);
	kb_simulation_destroy(b);
	kb_simulation_destroy(a);
}
END_TEST

/* ---- built-in benches ---- */

START_TEST(bench_table)
{
	size_t n = kb_bench_count();
	const kb_bench_info *g;

	ck_assert_uint_gt(n, 0);
	ck_assert_ptr_null(kb_bench_get(n));
	for (size_t i = 0; i < n; i++) {
		const kb_bench_info *b = kb_bench_get(i);

		ck_assert_ptr_nonnull(b);
		ck_assert_ptr_nonnull(b->name);
		ck_assert_ptr_eq(kb_bench_find(b->name), b);
		for (size_t p = 0; p < b->n_params; p++) {
			ck_assert_ptr_nonnull(b->params[p].name);
			ck_assert_ptr_nonnull(b->params[p].default_value);
		}
	}
	ck_assert_ptr_null(kb_bench_find("no_such_bench"));
	ck_assert_ptr_null(kb_bench_find(NULL));
	g = kb_bench_find("gemm");
	ck_assert_ptr_nonnull(g);
	ck_assert_ptr_nonnull(kb_bench_find("gqa_decode_opt2"));
	ck_assert_ptr_nonnull(kb_bench_find("gqa_decode_opt3"));
}
END_TEST

START_TEST(bench_run_errors)
{
	kb_params *p = NULL;
	kb_result res = KB_RESULT_INIT;
	kb_error err;

	ck_assert_int_eq(kb_bench_run("no_such_bench", NULL, NULL, NULL, &res, &err), KB_ENOTFOUND);
	ck_assert_int_eq(kb_params_create(&p, &err), KB_OK);
	ck_assert_int_eq(kb_params_set_assignment(p, "no_equals_sign", &err), KB_EINVAL);
	ck_assert_int_eq(kb_params_set(p, "nope", "1", &err), KB_OK);
	ck_assert_int_eq(kb_bench_run("gemm", p, NULL, NULL, &res, &err), KB_ENOTFOUND);
	ck_assert_ptr_nonnull(strstr(err.message, "nope"));
	kb_params_destroy(p);
	ck_assert_int_eq(kb_params_create(&p, &err), KB_OK);
	ck_assert_int_eq(kb_params_set(p, "M", "0", &err), KB_OK);
	ck_assert_int_eq(kb_bench_run("gemm", p, NULL, NULL, &res, &err), KB_ERANGE);
	kb_params_destroy(p);
	kb_params_destroy(NULL);
}
END_TEST

START_TEST(bench_run_json)
{
	static const char *const params[] = { "M=64", "K=64", "N=128", "epilogue=relu", NULL };
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	char *json;

	ck_assert_int_eq(kbt_run("gemm", params, NULL, 1, 1, &res, &err), KB_OK);
	ck_assert_str_eq(res.bench, "gemm");
	ck_assert_uint_gt(res.sim_time_ps, 0);
	ck_assert_uint_gt(res.tiles, 0);
	ck_assert(res.max_abs_err < 1e-2);
	ck_assert_ptr_nonnull(res.params_json);
	json = kb_result_to_json(&res);
	ck_assert_ptr_nonnull(json);
	ck_assert_ptr_nonnull(strstr(json, "\"sim_time_ps\""));
	ck_assert_ptr_nonnull(strstr(json, res.oplog_sha256));
	kb_free(json);
	kb_result_clear(&res);
}
END_TEST

/* ---- JSON in, JSON out ---- */

START_TEST(json_run_and_errors)
{
	char *out = NULL, *twice = NULL;
	kb_error err;

	ck_assert_int_eq(kb_bench_run_json("gemm", "{\"M\": 64, \"epilogue\": \"relu\"}",
					   "{\"pe_cost_model\": {\"r_cycles_per_byte\": 0.25}}",
					   "{\"threads\": 1, \"argv\": [\"prog\", \"x\"]}", &out, &err),
			 KB_OK);
	ck_assert_ptr_nonnull(strstr(out, "\"M\":64"));
	ck_assert_ptr_nonnull(strstr(out, "\"epilogue\":\"relu\""));
	ck_assert_ptr_nonnull(strstr(out, "\"command_line\":[\"prog\",\"x\"]"));
	ck_assert_ptr_nonnull(strstr(out, "\"topology_sha256\":\""));
	ck_assert_ptr_nonnull(strstr(out, "\"kernbench_version\":\"" KB_VERSION_STRING "\""));
	/* The same run through the dotted form gives the same op_log. */
	ck_assert_int_eq(kb_bench_run_json("gemm", "{\"M\": 64, \"epilogue\": \"relu\"}",
					   "{\"pe_cost_model.r_cycles_per_byte\": 0.25}",
					   "{\"threads\": 2}", &twice, &err),
			 KB_OK);
	ck_assert(strncmp(strstr(out, "\"oplog_sha256\""), strstr(twice, "\"oplog_sha256\""), 80) == 0);
	ck_assert(strncmp(strstr(out, "\"topology_sha256\""), strstr(twice, "\"topology_sha256\""), 84) == 0);
	kb_free(out);
	kb_free(twice);

	ck_assert_int_eq(kb_bench_run_json("nope", NULL, NULL, NULL, &out, &err), KB_ENOTFOUND);
	ck_assert_ptr_null(out);
	ck_assert_int_eq(kb_bench_run_json("gemm", "{\"Q\": 1}", NULL, NULL, &out, &err), KB_ENOTFOUND);
	ck_assert_ptr_nonnull(strstr(err.message, "'Q'"));
	ck_assert_int_eq(kb_bench_run_json("gemm", "{\"M\": [1]}", NULL, NULL, &out, &err), KB_ETYPE);
	ck_assert_int_eq(kb_bench_run_json("gemm", "{\"M\": ", NULL, NULL, &out, &err), KB_EPARSE);
	ck_assert_int_eq(kb_bench_run_json("gemm", NULL, "{\"pe.nope\": 1}", NULL, &out, &err), KB_EKEY);
	ck_assert_ptr_nonnull(strstr(err.message, "pe.nope"));
	ck_assert_int_eq(kb_bench_run_json("gemm", NULL, NULL, "{\"thread\": 1}", &out, &err), KB_EKEY);
	ck_assert_int_eq(kb_bench_run_json("gemm", NULL, NULL, "{\"threads\": -1}", &out, &err), KB_ERANGE);
	ck_assert_int_eq(kb_bench_run_json("gemm", NULL, NULL, NULL, NULL, &err), KB_EINVAL);
	ck_assert_ptr_null(out);
}
END_TEST

static int collect_row(const char *json, void *payload)
{
	char **rows = payload;
	size_t i = 0;

	while (rows[i])
		i++;
	rows[i] = strdup(json);
	return 0;
}

START_TEST(json_sweep_and_catalog)
{
	char *rows[8] = { 0 }, *cat = NULL, *meta = NULL;
	kb_provenance_options po = KB_PROVENANCE_OPTIONS_INIT;
	kb_error err;

	ck_assert_int_eq(kb_sweep_run_json("{\"benches\": [\"gemm\"], \"params\": {\"M\": [64, 128]},"
					   " \"set\": {\"pe_cost_model.r_cycles_per_byte\": [0.0625, 0.25]},"
					   " \"jobs\": 2}", collect_row, rows, &err),
			 KB_OK);
	ck_assert_ptr_nonnull(rows[3]);
	ck_assert_ptr_null(rows[4]);
	/* Fixed order, typed keys: the last key varies fastest. */
	ck_assert_ptr_nonnull(strstr(rows[0], "\"keys\":{\"M\":64,\"pe_cost_model.r_cycles_per_byte\":0.0625}"));
	ck_assert_ptr_nonnull(strstr(rows[1], "\"keys\":{\"M\":64,\"pe_cost_model.r_cycles_per_byte\":0.25}"));
	ck_assert_ptr_nonnull(strstr(rows[2], "\"index\":2"));
	ck_assert_ptr_nonnull(strstr(rows[3], "\"status\":0"));
	for (int i = 0; i < 4; i++) {
		free(rows[i]);
		rows[i] = NULL;
	}
	ck_assert_int_eq(kb_sweep_run_json("{\"benches\": []}", collect_row, rows, &err), KB_EINVAL);
	/* A failing point is a row with its error; the sweep goes on. */
	ck_assert_int_eq(kb_sweep_run_json("{\"benches\": \"gemm\", \"params\": {\"Z\": 1}}",
					   collect_row, rows, &err), KB_OK);
	ck_assert_ptr_nonnull(strstr(rows[0], "\"status\":-12"));
	ck_assert_ptr_nonnull(strstr(rows[0], "'Z'"));
	ck_assert_ptr_nonnull(strstr(rows[0], "\"result\":null"));
	free(rows[0]);

	ck_assert_int_eq(kb_catalog_json(&cat, &err), KB_OK);
	ck_assert_ptr_nonnull(strstr(cat, "\"name\":\"gqa_decode_opt2\""));
	ck_assert_ptr_nonnull(strstr(cat, "\"name\":\"softmax_merge\""));
	ck_assert_ptr_nonnull(strstr(cat, "\"name\":\"exp_diff\""));
	ck_assert_ptr_nonnull(strstr(cat, "\"operands\":[\"a\",\"b\"]"));
	kb_free(cat);

	ck_assert_int_eq(kb_provenance_json(&meta, &po, &err), KB_OK);
	ck_assert_ptr_nonnull(strstr(meta, "\"command_line\":null"));
	ck_assert_ptr_nonnull(strstr(meta, "\"date_utc\":\"2"));
	kb_free(meta);
	po.params_json = "{";
	ck_assert_int_eq(kb_provenance_json(&meta, &po, &err), KB_EPARSE);
}
END_TEST

static void failing_kernel(kb_tl *tl, void *p)
{
	(void)p;
	kb_tl_cpu_overhead(tl, 10);
	kb_tl_fail(tl, "my own reason");
	kb_tl_cpu_overhead(tl, 10);  /* a no-op once failed */
}

START_TEST(tl_fail_and_conversions)
{
	static const float f[] = { 0.0f, 1.0f, -2.5f, 65504.0f, 1e9f, 3.0e-8f };
	kb_simulation *sim = NULL;
	uint16_t h[6], b[6];
	float back[6];
	kb_error err;
	char *res = NULL;

	ck_assert_int_eq(kb_simulation_create_json(&sim, NULL, "{\"threads\": 1}", &err), KB_OK);
	ck_assert_int_eq(kb_simulation_launch(sim, failing_kernel, NULL, 0, 1, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_run_json(sim, &res, &err), KB_EVALIDATE);
	ck_assert_ptr_null(res);
	ck_assert_int_eq(err.detail, KB_V_KERNEL);
	ck_assert_str_eq(kb_validation_name(KB_V_KERNEL), "kernel_fail");
	ck_assert_ptr_nonnull(strstr(err.message, "my own reason"));
	ck_assert_ptr_nonnull(strstr(err.message, "check_api.c"));
	kb_simulation_destroy(sim);

	kb_fp32_to_fp16(h, f, 6);
	kb_fp16_to_fp32(back, h, 6);
	ck_assert(back[0] == 0.0f && back[1] == 1.0f && back[2] == -2.5f && back[3] == 65504.0f);
	ck_assert(isinf(back[4]));
	ck_assert_uint_eq(h[1], 0x3c00);
	kb_fp32_to_bf16(b, f, 6);
	kb_bf16_to_fp32(back, b, 6);
	ck_assert_uint_eq(b[1], 0x3f80);
	ck_assert(back[2] == -2.5f && fabsf(back[4] - 1e9f) < 1e7f);
}
END_TEST

/* ---- several simulations at once on different threads ---- */

typedef struct thread_job {
	kb_result bench;
	gemm_run own;
	int bench_rc;
} thread_job;

static void run_bench_gemm(int threads, kb_result *res, int *rc)
{
	static const char *const params[] = { "M=128", "K=128", "N=256", "epilogue=bias", NULL };
	kb_error err;

	*rc = kbt_run("gemm", params, NULL, threads, 1, res, &err);
}

static void *thread_main(void *p)
{
	thread_job *j = p;

	run_bench_gemm(0, &j->bench, &j->bench_rc);
	run_own_gemm(2, 1, NULL, NULL, NULL, &j->own);
	return NULL;
}

START_TEST(threads_independent)
{
	enum { NT = 4 };
	thread_job jobs[NT];
	pthread_t th[NT];
	kb_result ref_bench = KB_RESULT_INIT;
	gemm_run ref_own;
	int rc;

	run_bench_gemm(1, &ref_bench, &rc);
	ck_assert_int_eq(rc, KB_OK);
	run_own_gemm(1, 1, NULL, NULL, NULL, &ref_own);
	ck_assert_msg(ref_own.rc == 0, "%s", ref_own.message);
	memset(jobs, 0, sizeof(jobs));
	for (int i = 0; i < NT; i++)
		jobs[i].bench = (kb_result)KB_RESULT_INIT;
	for (int i = 0; i < NT; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
	for (int i = 0; i < NT; i++)
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
	for (int i = 0; i < NT; i++) {
		thread_job *j = &jobs[i];

		ck_assert_int_eq(j->bench_rc, KB_OK);
		ck_assert_msg(j->own.rc == 0, "%s", j->own.message);
		ck_assert_uint_eq(j->bench.sim_time_ps, ref_bench.sim_time_ps);
		ck_assert_uint_eq(j->bench.events, ref_bench.events);
		ck_assert_uint_eq(j->bench.commands, ref_bench.commands);
		ck_assert_str_eq(j->bench.oplog_sha256, ref_bench.oplog_sha256);
		ck_assert(j->bench.max_abs_err == ref_bench.max_abs_err);
		ck_assert_uint_eq(j->own.res.sim_time_ps, ref_own.res.sim_time_ps);
		ck_assert_uint_eq(j->own.res.events, ref_own.res.events);
		ck_assert_str_eq(j->own.res.oplog_sha256, ref_own.res.oplog_sha256);
		ck_assert(j->own.max_err == ref_own.max_err);
		ck_assert(j->own.max_err < 1e-4);
		kb_result_clear(&j->bench);
		kb_result_clear(&j->own.res);
	}
	kb_result_clear(&ref_bench);
	kb_result_clear(&ref_own.res);
}
END_TEST

/* ---- sweeps ---- */

typedef struct sweep_seen {
	size_t n;
	int bad;
	char bench[4][32];
	char value[4][32];
	uint64_t commands[4];
} sweep_seen;

static int on_row(const kb_sweep_row *row, void *payload)
{
	sweep_seen *s = payload;

	if (row->index != s->n || row->total != 4 || row->n_keys != 1 || row->status != 0 ||
	    !row->result || strcmp(row->keys[0], "S_kv") != 0)
		s->bad = 1;
	if (s->n < 4) {
		snprintf(s->bench[s->n], sizeof(s->bench[0]), "%s", row->bench);
		snprintf(s->value[s->n], sizeof(s->value[0]), "%s", row->values[0]);
		s->commands[s->n] = row->result ? row->result->commands : 0;
	}
	s->n++;
	return 0;
}

START_TEST(sweep_in_order)
{
	static const char *const want_bench[4] = { "gqa_decode_opt2", "gqa_decode_opt2",
						   "gqa_decode_opt3", "gqa_decode_opt3" };
	static const char *const want_value[4] = { "256", "512", "256", "512" };
	kb_sweep_options so = KB_SWEEP_OPTIONS_INIT;
	kb_sweep *sw = NULL;
	sweep_seen seen = { 0 };
	const char *bench;
	const char *const *values;
	kb_error err;

	so.jobs = 4;
	ck_assert_int_eq(kb_sweep_create(&sw, &so, &err), KB_OK);
	ck_assert_int_eq(kb_sweep_add_bench(sw, "gqa_decode_opt2", &err), KB_OK);
	ck_assert_int_eq(kb_sweep_add_bench(sw, "gqa_decode_opt3", &err), KB_OK);
	ck_assert_int_eq(kb_sweep_add_bench(sw, "no_such_bench", &err), KB_ENOTFOUND);
	ck_assert_int_eq(kb_sweep_add_param(sw, "S_kv", "256,512", &err), KB_OK);
	ck_assert_uint_eq(kb_sweep_points(sw), 4);
	ck_assert_int_eq(kb_sweep_point(sw, 2, &bench, &values, &err), KB_OK);
	ck_assert_str_eq(bench, "gqa_decode_opt3");
	ck_assert_str_eq(values[0], "256");
	ck_assert_int_eq(kb_sweep_run(sw, on_row, &seen, &err), KB_OK);
	ck_assert_uint_eq(seen.n, 4);
	ck_assert_int_eq(seen.bad, 0);
	for (int i = 0; i < 4; i++) {
		ck_assert_str_eq(seen.bench[i], want_bench[i]);
		ck_assert_str_eq(seen.value[i], want_value[i]);
		ck_assert_uint_gt(seen.commands[i], 0);
	}
	/* More KV tiles, more commands; opt3 issues more commands than opt2. */
	ck_assert_uint_gt(seen.commands[1], seen.commands[0]);
	ck_assert_uint_gt(seen.commands[2], seen.commands[0]);
	kb_sweep_destroy(sw);
	kb_sweep_destroy(NULL);
}
END_TEST


/* ---- kernels as coroutines: stack size, overflow, stopping half-way ---- */

typedef struct long_job {
	int n, errors, reached_end;
} long_job;

/* On PE 0: more commands than the kernel stream holds, so the kernel is
 * suspended half-way when the run stops early. On PE 1: a validation error
 * at once, which stops the run. */
static void long_kernel(kb_tl *tl, void *p)
{
	long_job *j = p;

	if (kb_tl_program_id(tl) == 1) {
		kb_tl_scope_end(tl);   /* no scope open: fails the run */
		return;
	}
	for (int i = 0; i < j->n; i++)
		if (kb_tl_cpu_overhead(tl, 10) != KB_OK)
			j->errors++;
	j->reached_end = 1;
}

START_TEST(kernel_stopped_half_way_finishes)
{
	kb_sim_options so = KB_SIM_OPTIONS_INIT;
	kb_simulation *sim = NULL;
	long_job j = { 5000, 0, 0 };
	kb_result res = KB_RESULT_INIT;
	kb_error err;

	kb_topology *t = NULL;

	so.threads = _i % 3;   /* 0, 1, 2: one per engine, sequential, 2 workers */
	so.kernel_threads = _i / 3;   /* coroutines, then a thread per kernel */
	ck_assert_int_eq(kb_topology_default(&t, &err), KB_OK);
	ck_assert_int_eq(kb_topology_set(t, "pes_per_cluster", "2", &err), KB_OK);
	ck_assert_int_eq(kb_simulation_create(&sim, t, &so, &err), KB_OK);
	kb_topology_destroy(t);
	ck_assert_int_eq(kb_simulation_launch(sim, long_kernel, &j, 0, 2, &err), KB_OK);
	ck_assert_int_eq(kb_simulation_run(sim, &res, &err), KB_EVALIDATE);
	/* the run stopped; the suspended kernel was run to its end, its later
	 * tl calls failing instead of queueing commands */
	ck_assert_int_eq(j.reached_end, 1);
	ck_assert_int_gt(j.errors, 0);
	ck_assert_int_lt(j.errors, j.n);
	kb_simulation_destroy(sim);
}
END_TEST

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define KB_TEST_SANITIZED 1
#else
#define KB_TEST_SANITIZED 0
#endif
#if defined(__SANITIZE_THREAD__)
#define KB_TEST_TSAN 1
#else
#define KB_TEST_TSAN 0
#endif

static void stack_kernel(kb_tl *tl, void *p)
{
	int *kib = p;

	if (kbt_deep(*kib) > 0)
		kb_tl_cpu_overhead(tl, 10);
}

/* Runs fn(args) on PEs 0..pes-1 of the default machine widened to them. */
static int run_kernel_on(const kb_sim_options *so, kb_kernel_fn fn, void *args, uint32_t pes,
			 kb_error *err)
{
	kb_topology *t = NULL;
	kb_simulation *sim = NULL;
	kb_result res = KB_RESULT_INIT;
	char n[16];
	int rc = kb_topology_default(&t, err);

	snprintf(n, sizeof(n), "%u", (unsigned)pes);
	if (!rc)
		rc = kb_topology_set(t, "pes_per_cluster", n, err);
	if (!rc)
		rc = kb_simulation_create(&sim, t, so, err);
	kb_topology_destroy(t);
	if (!rc)
		rc = kb_simulation_launch(sim, fn, args, 0, pes, err);
	if (!rc)
		rc = kb_simulation_run(sim, &res, err);
	if (!rc)
		kb_result_clear(&res);
	kb_simulation_destroy(sim);
	return rc;
}

static int run_stack_kernel(size_t stack_bytes, int kib, kb_error *err)
{
	kb_sim_options so = KB_SIM_OPTIONS_INIT;

	so.threads = 1;
	so.kernel_stack_bytes = stack_bytes;
	return run_kernel_on(&so, stack_kernel, &kib, 1, err);
}

START_TEST(kernel_stack_size)
{
	kb_error err;

	/* out of range: an error naming the option, no run */
	ck_assert_int_eq(run_stack_kernel(1000, 1, &err), KB_ERANGE);
	ck_assert_ptr_nonnull(strstr(err.message, "kernel_stack_bytes"));
	/* the default (1 MiB) holds 600 KiB of frames; 16 KiB is enough for
	 * a shallow kernel; 2 MiB holds 1500 KiB */
	ck_assert_int_eq(run_stack_kernel(0, 600, &err), KB_OK);
	ck_assert_int_eq(run_stack_kernel(16 << 10, 2, &err), KB_OK);
	ck_assert_int_eq(run_stack_kernel(2 << 20, 1500, &err), KB_OK);
}
END_TEST

/* Overflowing the stack faults on the guard region: the process gets
 * SIGSEGV, nothing is overwritten. (Check runs this in a child process.) */
START_TEST(kernel_stack_overflow_faults)
{
	kb_error err;

	run_stack_kernel(64 << 10, 4096, &err);
}
END_TEST

/* ---- kb_kernel_stack_fault ---- */

#define FAULT_STACK ((size_t)64 << 10)

/* The three ways a kernel runs: _i 0 as a coroutine on the calling
 * thread (threads 1), 1 as a coroutine on the parallel executor's threads
 * (threads 2, 4 PEs), 2 on a thread of its own (kernel_threads). */
static void fault_options(int mode, kb_sim_options *so, uint32_t *pes)
{
	*so = (kb_sim_options)KB_SIM_OPTIONS_INIT;
	so->kernel_stack_bytes = FAULT_STACK;
	so->threads = mode == 1 ? 2 : 1;
	so->kernel_threads = mode == 2;
	*pes = mode == 1 ? 4 : 1;
}

typedef struct probe {
	int below, n_ok, own_frame, far_below;
	const char *guard;   /* an address in the guard region */
} probe;

/* Asks about addresses relative to its own first frame, which lies less
 * than the 64 KiB of the guard region below the stack's top: its frame
 * minus the stack's size is in the guard; its frame, and an address a
 * guard's width further down, are not. */
static void probe_kernel(kb_tl *tl, void *p)
{
	probe *pr = (probe *)p + kb_tl_program_id(tl);
	const char *f = __builtin_frame_address(0);
	size_t n = 0;

	pr->guard = f - FAULT_STACK - 1;
	pr->below = kb_kernel_stack_fault(pr->guard, &n);
	pr->n_ok = n == FAULT_STACK;
	pr->own_frame = kb_kernel_stack_fault(f, NULL);
	pr->far_below = kb_kernel_stack_fault(f - FAULT_STACK - (128 << 10), NULL);
	kb_tl_cpu_overhead(tl, 10);
}

/* Without a fault, in every build (sanitizers, CK_FORK=no): what the
 * query answers inside a kernel, and that it answers 0 on a thread that
 * runs none, before and after (also for the guard of the kernel that ran
 * on this thread with threads 1: the record went with the switch back). */
START_TEST(kernel_stack_fault_query)
{
	kb_sim_options so;
	probe pr[4];
	uint32_t pes;
	kb_error err;
	int here = 0;
	size_t n = 7;

	memset(pr, 0, sizeof(pr));
	fault_options(_i, &so, &pes);
	ck_assert_int_eq(kb_kernel_stack_fault(&here, &n), 0);
	ck_assert_int_eq(kb_kernel_stack_fault(NULL, NULL), 0);
	ck_assert_int_eq(run_kernel_on(&so, probe_kernel, pr, pes, &err), KB_OK);
	for (uint32_t i = 0; i < pes; i++) {
		ck_assert_int_ne(pr[i].below, 0);
		ck_assert_int_ne(pr[i].n_ok, 0);
		ck_assert_int_eq(pr[i].own_frame, 0);
		ck_assert_int_eq(pr[i].far_below, 0);
	}
	ck_assert_int_eq(kb_kernel_stack_fault(&here, &n), 0);
	ck_assert_int_eq(kb_kernel_stack_fault(pr[0].guard, &n), 0);
	ck_assert_uint_eq(n, 7);
}
END_TEST

static pthread_t fault_thread;   /* the test's own */
static int fault_off_thread;     /* the fault must come on another thread */
static char fault_alt[64 << 10];

/* The application's handler: exit status 42 when kb_kernel_stack_fault
 * knows the fault for an overflow of the configured stack (on another
 * thread than the test's where the test asks for one), 43 otherwise. */
static void on_stack_fault(int sig, siginfo_t *si, void *uctx)
{
	size_t n = 0;
	int known = kb_kernel_stack_fault(si->si_addr, &n);

	(void)sig;
	(void)uctx;
	_exit(known && n == FAULT_STACK &&
	      (!fault_off_thread || !pthread_equal(pthread_self(), fault_thread)) ? 42 : 43);
}

/* pthread_self is declared const: a loop that asks it could be given the
 * first answer again after the kernel moved to another thread. */
static pthread_t (*volatile self_now)(void) = pthread_self;

/* Queues commands until it runs on a thread other than the test's (a
 * worker: the executor moves PE_CPUs between windows), then overflows its
 * stack there. One that never gets there ends, and the test fails. */
static void roaming_kernel(kb_tl *tl, void *p)
{
	(void)p;
	for (int i = 0; i < 200000; i++) {
		if (!pthread_equal(self_now(), fault_thread) && kbt_deep(4096) > 0)
			break;
		kb_tl_cpu_overhead(tl, 10);
	}
}

/* An overflow in each of fault_options' modes, caught by a SIGSEGV handler
 * on an alternate stack: the test's own for its thread, the library's on
 * the executor's workers and kernel threads (a handler on the overflowed
 * stack could not run). Check runs it in a child: exit status 42. */
START_TEST(kernel_stack_fault_handler)
{
	kb_sim_options so;
	struct sigaction sa;
	stack_t ss;
	uint32_t pes;
	kb_error err;
	int kib = 4096;

	fault_options(_i, &so, &pes);
	fault_thread = pthread_self();
	fault_off_thread = _i != 0;
	ss.ss_sp = fault_alt;
	ss.ss_size = sizeof(fault_alt);
	ss.ss_flags = 0;
	ck_assert_int_eq(sigaltstack(&ss, NULL), 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_stack_fault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGSEGV, &sa, NULL), 0);
	if (_i == 1)
		run_kernel_on(&so, roaming_kernel, NULL, pes, &err);
	else
		run_kernel_on(&so, stack_kernel, &kib, pes, &err);
}
END_TEST

Suite *api_suite(void)
{
	Suite *s = suite_create("api");
	TCase *basic = tcase_create("basic");
	TCase *sim = tcase_create("simulation");
	TCase *errs = tcase_create("errors");
	TCase *bench = tcase_create("bench");

	tcase_add_test(basic, version_matches_macros);
	tcase_add_test(basic, strerror_names);
	tcase_add_test(basic, error_version_and_reserve);
	tcase_add_test(basic, topology_default_set_dump);
	tcase_add_test(basic, topology_errors);
	suite_add_tcase(s, basic);

	tcase_set_timeout(sim, 120);
	tcase_add_test(sim, own_kernel_data_mode);
	tcase_add_test(sim, own_kernel_threads_agree);
	tcase_add_test(sim, own_kernel_declares_tiles);
	tcase_add_test(sim, callback_stops_run);
	tcase_add_test(sim, threads_independent);
	tcase_add_loop_test(sim, kernel_stopped_half_way_finishes, 0, 6);
	tcase_add_test(sim, kernel_stack_size);
	/* Not kernel_threads under TSan: its per-thread state lives in static
	 * TLS, which glibc carves from the top of a thread's stack (TSan
	 * enlarges the stack to fit), so the kernel's first frame lies some
	 * 800 KiB below the top, not within a guard's width of it. */
	tcase_add_loop_test(sim, kernel_stack_fault_query, 0, KB_TEST_TSAN ? 2 : 3);
	/* Without fork mode the fault, or the handler's _exit, would take the
	 * runner down. */
	if (!(getenv("CK_FORK") && strcmp(getenv("CK_FORK"), "no") == 0)) {
		/* Sanitizers catch the fault themselves (and report it as an
		 * error) where the program has no handler of its own... */
		if (!KB_TEST_SANITIZED)
			tcase_add_test_raise_signal(sim, kernel_stack_overflow_faults, SIGSEGV);
		/* ...and leave it to the program's where it has one (ASan and
		 * TSan of GCC 12: these pass there too). */
		tcase_add_loop_exit_test(sim, kernel_stack_fault_handler, 42, 0, 1);
		tcase_add_loop_exit_test(sim, kernel_stack_fault_handler, 42, 2, 3);
		/* On one core the executor runs every window alone, on the
		 * test's thread: no worker would ever run the kernel. */
		if (kbt_cores() >= 2)
			tcase_add_loop_exit_test(sim, kernel_stack_fault_handler, 42, 1, 2);
	}
	suite_add_tcase(s, sim);

	tcase_set_timeout(errs, 60);
	tcase_add_test(errs, null_args);
	tcase_add_test(errs, state_errors);
	tcase_add_test(errs, destroy_without_run);
	tcase_add_test(errs, failed_run_then_destroy);
	tcase_add_test(errs, foreign_handle);
	suite_add_tcase(s, errs);

	tcase_set_timeout(bench, 120);
	tcase_add_test(bench, bench_table);
	tcase_add_test(bench, bench_run_errors);
	tcase_add_test(bench, bench_run_json);
	tcase_add_test(bench, sweep_in_order);
	tcase_add_test(bench, json_run_and_errors);
	tcase_add_test(bench, json_sweep_and_catalog);
	tcase_add_test(bench, tl_fail_and_conversions);
	suite_add_tcase(s, bench);
	return s;
}
