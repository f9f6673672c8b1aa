/*
 * The C twin of the Python kernel of tests/python/test_kernel.py: the same
 * tl calls in the same order, so both must give the same op_log hash.
 * Usage: twin_kernel THREADS PES ITERS; prints the result as JSON.
 */
#include <stdio.h>
#include <stdlib.h>

#include <kernbench.h>

enum { M = 32, K = 64, N = 32 };

typedef struct twin_args {
	uint64_t a, b, bias, c;
	int iters;
} twin_args;

static void twin(kb_tl *tl, void *p)
{
	const twin_args *g = p;
	int64_t sa[2] = { M, K }, sb[2] = { K, N }, sc[2] = { M, N }, sn[1] = { N };

	for (int i = 0; i < g->iters; i++) {
		kb_tl_op epi[2] = { { .op = "bias" }, { .op = "relu" } };
		kb_tl_composite_desc d = { .op = "gemm" };
		kb_tl_tensor *out;

		kb_tl_scope_begin(tl);
		epi[0].args[0] = (kb_tl_arg){ "bias", kb_tl_load(tl, kb_tl_ref(tl, g->bias, KB_FP32, 1, sn), NULL) };
		d.a = kb_tl_ref(tl, g->a, KB_FP32, 2, sa);
		d.b = kb_tl_ref(tl, g->b, KB_FP32, 2, sb);
		d.out = kb_tl_ref(tl, g->c, KB_FP32, 2, sc);
		d.epilogue = epi;
		d.n_epilogue = 2;
		out = kb_tl_composite(tl, &d);
		kb_tl_wait(tl, out);
		kb_tl_cpu_overhead(tl, 5 + kb_tl_program_id(tl));
		kb_tl_scope_end(tl);
	}
}

int main(int argc, char **argv)
{
	int64_t sa[2] = { M, K }, sb[2] = { K, N }, sc[2] = { M, N }, sn[1] = { N };
	char opts[64], *out = NULL;
	kb_simulation *sim = NULL;
	twin_args g = { 0, 0, 0, 0, 0 };
	kb_error err;
	int rc, pes;

	if (argc != 4)
		return 2;
	pes = atoi(argv[2]);
	g.iters = atoi(argv[3]);
	snprintf(opts, sizeof(opts), "{\"threads\": %d}", atoi(argv[1]));
	rc = kb_simulation_create_json(&sim, "{\"clusters\": 1, \"pes_per_cluster\": 4}", opts, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 2, sa, 1, &g.a, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 2, sb, 1, &g.b, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 1, sn, 1, &g.bias, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 2, sc, 1, &g.c, &err);
	if (!rc)
		rc = kb_simulation_launch(sim, twin, &g, 0, (uint32_t)pes, &err);
	if (!rc)
		rc = kb_simulation_run_json(sim, &out, &err);
	if (rc) {
		fprintf(stderr, "twin_kernel: %s\n", err.message);
		kb_simulation_destroy(sim);
		return 1;
	}
	printf("%s\n", out);
	kb_free(out);
	kb_simulation_destroy(sim);
	return 0;
}
