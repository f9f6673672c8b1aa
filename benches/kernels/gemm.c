/*
 * gemm: C = epilogue(A @ B) through one composite, A (M, K) and B (K, N)
 * streamed from HBM, C written back to HBM. Epilogues: none, bias (a row
 * of N values, loaded into TCM first), relu, add (C = A @ B + D, D loaded
 * into TCM first).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/memlimit.h"
#include "bench/bench_util.h"
#include "bench/reference.h"

typedef struct gemm_args {
	int64_t M, K, N;
	kb_dtype dt;
	const char *epilogue;
	uint64_t a, b, c, extra;
	double *ha, *hb, *hx;   /* data mode: the inputs as stored, for the check */
} gemm_args;

static void gemm_kernel(kb_tl *tl, void *p)
{
	const gemm_args *g = p;
	int64_t sa[2] = { g->M, g->K }, sb[2] = { g->K, g->N }, sc[2] = { g->M, g->N };
	kb_tl_op epi = { .op = g->epilogue, .scope = KB_TL_OUTPUT_TILE };
	kb_tl_composite_desc d = {
		.op = "gemm",
		.a = kb_tl_ref(tl, g->a, g->dt, 2, sa),
		.b = kb_tl_ref(tl, g->b, g->dt, 2, sb),
		.out = kb_tl_ref(tl, g->c, g->dt, 2, sc),
	};

	if (strcmp(g->epilogue, "bias") == 0) {
		int64_t sn[1] = { g->N };

		epi.args[0] = (kb_tl_arg){ "bias", kb_tl_load(tl, kb_tl_ref(tl, g->extra, g->dt, 1, sn), NULL) };
	} else if (strcmp(g->epilogue, "add") == 0) {
		epi.args[0] = (kb_tl_arg){ "other", kb_tl_load(tl, kb_tl_ref(tl, g->extra, g->dt, 2, sc), NULL) };
	}
	if (strcmp(g->epilogue, "none") != 0) {
		d.epilogue = &epi;
		d.n_epilogue = 1;
	}
	kb_tl_composite(tl, &d);
}

/* The same computation on the host, in double, with plain loops. */
static void reference(const gemm_args *g, const double *a, const double *b, const double *x,
		      double *c)
{
	kb__ref_gemm(a, b, c, g->M, g->K, g->N);
	for (int64_t i = 0; i < g->M; i++)
		for (int64_t j = 0; j < g->N; j++) {
			double *v = &c[i * g->N + j];

			if (strcmp(g->epilogue, "bias") == 0)
				*v += x[j];
			else if (strcmp(g->epilogue, "add") == 0)
				*v += x[i * g->N + j];
			else if (strcmp(g->epilogue, "relu") == 0 && *v < 0)
				*v = 0;
		}
}

/* Data mode, after the run (kb_bench_simulate): C against the host
 * computation from the inputs as stored. */
static int gemm_check(kb_bench_ctx *ctx, kb_simulation *sim, void *state, kb_result *res,
		      kb_error *err)
{
	const gemm_args *g = state;
	size_t n = (size_t)(g->M * g->N);
	double *want = malloc(n * sizeof(*want));
	int rc;

	(void)ctx;
	if (!want)
		return kb__err(err, KB_ENOMEM, "out of memory checking the result");
	reference(g, g->ha, g->hb, g->hx, want);
	rc = kb_bench_compare(sim, g->dt, g->c, want, n, res, err);
	free(want);
	return rc;
}

/* Data mode holds A, B (and the bias or D) on the host in double beside
 * their HBM copies, and checks C against a double reference: refuse up
 * front, naming the shape, what cannot fit. */
static int check_memory(kb_bench_ctx *ctx, const gemm_args *g, int has_x, kb_error *err)
{
	uint64_t es = kb_dtype_size(g->dt), hbm = es + es / 8 + 1;
	uint64_t mk = (uint64_t)g->M * (uint64_t)g->K, kn = (uint64_t)g->K * (uint64_t)g->N;
	uint64_t mn = (uint64_t)g->M * (uint64_t)g->N, x = has_x ? mn : 0;
	uint64_t need = kb__add_sat(kb__mul_sat(mk + kn + x, 8 + hbm),
				    kb__mul_sat(mn, sizeof(double) + sizeof(float) + hbm));
	double hbm_bytes = 0;
	char why[160];

	/* Past the simulated HBM the allocation names memory.hbm_bytes. */
	kb_topology_get_number(kb_bench_topology(ctx), "memory.hbm_bytes", &hbm_bytes, NULL);
	if ((double)(mk + kn + mn + x) * (double)es > hbm_bytes)
		return KB_OK;
	snprintf(why, sizeof(why), "data mode with M = %lld, K = %lld, N = %lld",
		 (long long)g->M, (long long)g->K, (long long)g->N);
	return kb__mem_need(need, why, err);
}

static int run_gemm(kb_bench_ctx *ctx, kb_result *res, kb_error *err)
{
	gemm_args g = { kb_bench_param_int(ctx, "M"), kb_bench_param_int(ctx, "K"),
			kb_bench_param_int(ctx, "N"), KB_FP16, kb_bench_param_str(ctx, "epilogue"),
			0, 0, 0, 0, NULL, NULL, NULL };
	int64_t sa[2] = { g.M, g.K }, sb[2] = { g.K, g.N }, sc[2] = { g.M, g.N }, sn[1] = { g.N };
	double std = kb_bench_param_real(ctx, "input_std");
	int bias = strcmp(g.epilogue, "bias") == 0, add = strcmp(g.epilogue, "add") == 0;
	kb_simulation *sim = NULL;
	int rc;

	kb_dtype_parse(kb_bench_param_str(ctx, "dtype"), &g.dt);
	kb_bench_seed(ctx, (uint64_t)kb_bench_param_int(ctx, "seed"));
	rc = kb_bench_options(ctx)->data ? check_memory(ctx, &g, bias || add, err) : KB_OK;
	if (!rc)
		rc = kb_bench_simulation(ctx, 1, &sim, err);
	if (!rc)
		rc = kb_bench_input(ctx, sim, g.dt, 2, sa, std, &g.a, &g.ha, err);
	if (!rc)
		rc = kb_bench_input(ctx, sim, g.dt, 2, sb, std, &g.b, &g.hb, err);
	if (!rc && (bias || add))
		rc = kb_bench_input(ctx, sim, g.dt, bias ? 1 : 2, bias ? sn : sc, std, &g.extra, &g.hx,
				    err);
	if (!rc)
		rc = kb_simulation_alloc(sim, g.dt, 2, sc, 0, &g.c, err);
	/* What --dump writes (doc/benches.md). */
	if (!rc)
		rc = kb_bench_tensor(ctx, "a", g.dt, 2, sa, g.a, err);
	if (!rc)
		rc = kb_bench_tensor(ctx, "b", g.dt, 2, sb, g.b, err);
	if (!rc)
		rc = kb_bench_tensor(ctx, "c", g.dt, 2, sc, g.c, err);
	if (!rc && (bias || add))
		rc = kb_bench_tensor(ctx, bias ? "bias" : "d", g.dt, bias ? 1 : 2, bias ? sn : sc,
				     g.extra, err);
	if (!rc)
		rc = kb_simulation_launch(sim, gemm_kernel, &g, 0, 1, err);
	if (!rc)
		rc = kb_bench_simulate(ctx, sim, &g, res, err);
	if (!rc) {
		const kb_topo_params *tp = kb__simulation_params(sim);

		res->tiles = (uint64_t)((g.M + (int64_t)tp->gemm.tile_m - 1) / (int64_t)tp->gemm.tile_m) *
			     (uint64_t)((g.N + (int64_t)tp->gemm.tile_n - 1) / (int64_t)tp->gemm.tile_n);
		/* The kernel is its one composite: loop and kernel figures agree. */
		res->dispatch_per_tile_ns = (double)res->dispatch_ps / (double)res->tiles / 1000.0;
		res->dispatch_kernel_per_tile_ns = res->dispatch_per_tile_ns;
	}
	kb_simulation_destroy(sim);
	free(g.ha);
	free(g.hb);
	free(g.hx);
	return rc;
}

static const kb_param_info params[] = {
	{ "M", KB_PARAM_INT, "256", "rows of A and C", NULL, 1, 1 << 20 },
	{ "K", KB_PARAM_INT, "256", "columns of A, rows of B", NULL, 1, 1 << 20 },
	{ "N", KB_PARAM_INT, "256", "columns of B and C", NULL, 1, 1 << 20 },
	{ "dtype", KB_PARAM_STRING, "fp16", "element type", "fp16|fp32|bf16", 0, 0 },
	{ "epilogue", KB_PARAM_STRING, "none", "op applied to each output tile", "none|bias|relu|add", 0, 0 },
	{ "seed", KB_PARAM_INT, "1", "seed of the inputs (data mode)", NULL, 0, 9e18 },
	{ "input_std", KB_PARAM_REAL, "1", "standard deviation of the inputs", NULL, 0, 1e6 },
};

const kb_bench_def kb__bench_gemm = {
	KB_BENCH_ABI,
	{ "gemm", "C = epilogue(A @ B) through one GEMM composite", params,
	  sizeof(params) / sizeof(params[0]) },
	run_gemm, gemm_check, NULL,
};
