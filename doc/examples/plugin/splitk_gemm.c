/*
 * splitk_gemm: a kernbench plugin adding a split-K GEMM bench, a kernel
 * the built-in benches lack. C (M, N) = A (M, K) @ B (K, N) with K cut
 * into `splits` parts, one per PE: PE p computes the partial product of
 * its K slice into TCM, sends it to PE 0 over the inter-PE queue, and PE 0
 * adds the partials in order and writes C back to HBM. The machine grows
 * to `splits` PEs when it has fewer.
 *
 * A is stored K-split, the layout a split-K kernel packs it into: `splits`
 * blocks of (M, K / splits), so that each PE's slice is contiguous (a.npy
 * has shape (splits, M, K / splits)); B is (K, N), C is (M, N), fp32.
 * In data mode the check compares C with sum_p A_p @ B_p in double.
 *
 * Build against an installed kernbench:
 *   cc -shared -fPIC -o libsplitk.so splitk_gemm.c $(pkg-config --cflags --libs kernbench)
 * Use:
 *   kernbench --plugin ./libsplitk.so run splitk_gemm --param splits=4 --data
 *   KERNBENCH_PLUGIN_PATH=$PWD kernbench sweep splitk_gemm --param splits=1,2,4 -j 2
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <kernbench.h>

typedef struct splitk_args {
	int64_t m, k, n, splits;
	uint64_t a, b, c;     /* HBM addresses */
	double *ha, *hb;      /* data mode: the inputs as stored, for the check */
} splitk_args;

static void splitk_kernel(kb_tl *tl, void *p)
{
	const splitk_args *g = p;
	uint32_t part = kb_tl_program_id(tl), root = kb_tl_pe(tl) - part;
	int64_t kp = g->k / g->splits;
	int64_t sa[2] = { g->m, kp }, sb[2] = { kp, g->n }, sc[2] = { g->m, g->n };
	uint64_t es = sizeof(float);
	kb_tl_composite_desc d = { .op = "gemm" };
	kb_tl_tensor *acc;

	/* The partial product stays in TCM (no `out`: auto scratch). */
	d.a = kb_tl_ref(tl, g->a + (uint64_t)part * (uint64_t)(g->m * kp) * es, KB_FP32, 2, sa);
	d.b = kb_tl_ref(tl, g->b + (uint64_t)part * (uint64_t)(kp * g->n) * es, KB_FP32, 2, sb);
	acc = kb_tl_composite(tl, &d);
	if (part != 0) {
		kb_tl_send(tl, acc, root, 0);
		return;
	}
	/* PE 0 adds the partials in a fixed order: the same sum every run. */
	for (uint32_t q = 1; q < (uint32_t)g->splits; q++) {
		kb_tl_composite_desc add = { .op = "add" };
		kb_tl_tensor *t;

		kb_tl_scope_begin(tl);
		t = kb_tl_alloc(tl, KB_FP32, 2, sc);
		kb_tl_recv(tl, t, root + q, 0);
		add.a = acc;
		add.b = t;
		add.out = acc;
		kb_tl_composite(tl, &add);
		kb_tl_scope_end(tl);
	}
	kb_tl_store(tl, kb_tl_ref(tl, g->c, KB_FP32, 2, sc), acc);
}

/* The data-mode check: C against sum_p A_p @ B_p in double. */
static int splitk_check(kb_bench_ctx *ctx, kb_simulation *sim, void *state, kb_result *res,
			kb_error *err)
{
	const splitk_args *g = state;
	int64_t kp = g->k / g->splits;
	size_t n = (size_t)(g->m * g->n);
	double *want = calloc(n, sizeof(*want));
	int rc;

	(void)ctx;
	if (!want)
		return KB_ENOMEM;
	for (int64_t p = 0; p < g->splits; p++)
		for (int64_t i = 0; i < g->m; i++)
			for (int64_t kk = 0; kk < kp; kk++) {
				double a = g->ha[(p * g->m + i) * kp + kk];
				const double *b = &g->hb[(p * kp + kk) * g->n];

				for (int64_t j = 0; j < g->n; j++)
					want[i * g->n + j] += a * b[j];
			}
	rc = kb_bench_compare(sim, KB_FP32, g->c, want, n, res, err);
	free(want);
	return rc;
}

/* Grows the run's machine to at least pes PEs (one cluster wider). */
static int fit_machine(kb_bench_ctx *ctx, int64_t pes, kb_error *err)
{
	kb_topology *t = kb_bench_topology(ctx);
	double clusters = 1, per = 1;
	char buf[32];
	int rc;

	rc = kb_topology_get_number(t, "clusters", &clusters, err);
	if (!rc)
		rc = kb_topology_get_number(t, "pes_per_cluster", &per, err);
	if (rc || clusters * per >= (double)pes)
		return rc;
	snprintf(buf, sizeof(buf), "%.0f", ceil((double)pes / clusters));
	return kb_topology_set(t, "pes_per_cluster", buf, err);
}

static int splitk_run(kb_bench_ctx *ctx, kb_result *res, kb_error *err)
{
	splitk_args g = { kb_bench_param_int(ctx, "M"), kb_bench_param_int(ctx, "K"),
			  kb_bench_param_int(ctx, "N"), kb_bench_param_int(ctx, "splits"),
			  0, 0, 0, NULL, NULL };
	int64_t kp = g.k / g.splits;
	int64_t sa[3] = { g.splits, g.m, kp }, sb[2] = { g.k, g.n }, sc[2] = { g.m, g.n };
	double std = kb_bench_param_real(ctx, "input_std");
	kb_simulation *sim = NULL;
	int rc;

	/* A rule between parameters: the message names one of them. */
	if (g.k % g.splits != 0)
		return kb_bench_error(err, KB_ERANGE, "splits",
				      "splitk_gemm: K = %lld is not a multiple of splits = %lld",
				      (long long)g.k, (long long)g.splits);
	kb_bench_seed(ctx, (uint64_t)kb_bench_param_int(ctx, "seed"));
	rc = fit_machine(ctx, g.splits, err);
	if (!rc)
		rc = kb_bench_simulation(ctx, (uint32_t)g.splits, &sim, err);
	if (!rc)
		rc = kb_bench_input(ctx, sim, KB_FP32, 3, sa, std, &g.a, &g.ha, err);
	if (!rc)
		rc = kb_bench_input(ctx, sim, KB_FP32, 2, sb, std, &g.b, &g.hb, err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 2, sc, 0, &g.c, err);
	/* What --dump writes: a.npy, b.npy, c.npy. */
	if (!rc)
		rc = kb_bench_tensor(ctx, "a", KB_FP32, 3, sa, g.a, err);
	if (!rc)
		rc = kb_bench_tensor(ctx, "b", KB_FP32, 2, sb, g.b, err);
	if (!rc)
		rc = kb_bench_tensor(ctx, "c", KB_FP32, 2, sc, g.c, err);
	if (!rc)
		rc = kb_simulation_launch(sim, splitk_kernel, &g, 0, (uint32_t)g.splits, err);
	if (!rc)
		rc = kb_bench_simulate(ctx, sim, &g, res, err);
	kb_simulation_destroy(sim);
	free(g.ha);
	free(g.hb);
	return rc;
}

static const kb_param_info splitk_params[] = {
	{ "M", KB_PARAM_INT, "64", "rows of A and C", NULL, 1, 1024 },
	{ "K", KB_PARAM_INT, "512", "columns of A, rows of B (a multiple of splits)", NULL, 1,
	  1 << 16 },
	{ "N", KB_PARAM_INT, "64", "columns of B and C", NULL, 1, 1024 },
	{ "splits", KB_PARAM_INT, "4", "parts of K, one PE each", NULL, 1, 64 },
	{ "seed", KB_PARAM_INT, "1", "seed of the inputs (data mode)", NULL, 0, 9e18 },
	{ "input_std", KB_PARAM_REAL, "1", "standard deviation of the inputs", NULL, 0, 1e6 },
};

static const kb_bench_def splitk_def = {
	KB_BENCH_ABI,
	{ "splitk_gemm", "C = A @ B with K split over PEs, partials summed on PE 0",
	  splitk_params, sizeof(splitk_params) / sizeof(splitk_params[0]) },
	splitk_run,
	splitk_check,
	NULL,
};

/* The one entry point: called once per registry the plugin is loaded into. */
KB_PLUGIN_EXPORT int kb_plugin_init(kb_registry *reg, unsigned abi, kb_error *err)
{
	(void)abi;  /* kb_registry_add refuses the definition if the ABIs differ */
	return kb_registry_add(reg, &splitk_def, err);
}
