/*
 * embed_gemm: an embedding program that drives kernbench through its public
 * API only. It builds a topology, sets the dispatch cost R, writes its own
 * kernel against tl.h (one GEMM composite whose epilogue adds a bias row and
 * applies relu), runs it in data mode, checks C against a host computation,
 * and counts the op_log records it receives through the callback.
 *
 * Build against an installed kernbench:
 *   cc embed_gemm.c $(pkg-config --cflags --libs kernbench) -o embed_gemm
 * Usage: embed_gemm [R]   (R in cycles per logical byte; default 0.125)
 * Exit status: 0 the numbers match, 1 they do not or a call failed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kernbench.h>

enum { M = 64, K = 128, N = 96 };

/* What the kernel needs: the HBM addresses of its tensors. */
typedef struct gemm_args {
	uint64_t a, b, bias, c;
} gemm_args;

/* C = relu(A @ B + bias): one composite, so one dispatch for the whole GEMM. */
static void gemm_bias_relu(kb_tl *tl, void *p)
{
	const gemm_args *g = p;
	int64_t sa[2] = { M, K }, sb[2] = { K, N }, sc[2] = { M, N }, sn[1] = { N };
	kb_tl_op epi[2] = { { .op = "bias" }, { .op = "relu" } };
	kb_tl_composite_desc d = { .op = "gemm" };

	/* The bias row is loaded into TCM first; A and B stream from HBM. */
	epi[0].args[0] = (kb_tl_arg){ "bias", kb_tl_load(tl, kb_tl_ref(tl, g->bias, KB_FP32, 1, sn), NULL) };
	d.a = kb_tl_ref(tl, g->a, KB_FP32, 2, sa);
	d.b = kb_tl_ref(tl, g->b, KB_FP32, 2, sb);
	d.out = kb_tl_ref(tl, g->c, KB_FP32, 2, sc);
	d.epilogue = epi;
	d.n_epilogue = 2;
	kb_tl_composite(tl, &d);
}

/* The op_log as the callback sees it. */
typedef struct log_stats {
	unsigned long records, dispatches, bytes_moved;
	unsigned long long last_t1;
	int out_of_order;
} log_stats;

static int on_record(const kb_oplog_record *r, void *payload)
{
	log_stats *s = payload;

	if (r->t1_ps < s->last_t1)
		s->out_of_order = 1;
	s->last_t1 = r->t1_ps;
	s->records++;
	if (strcmp(r->eng, "cpu") == 0 && strcmp(r->op, "dispatch") == 0)
		s->dispatches++;
	if (r->bytes > 0)
		s->bytes_moved += (unsigned long)r->bytes;
	return 0;  /* nonzero would stop the run */
}

static void fill(float *x, size_t n, unsigned salt)
{
	/* Small multiples of 1/16: sums of products are exact in fp32. */
	for (size_t i = 0; i < n; i++)
		x[i] = (float)((int)((i * 5 + salt * 11) % 15) - 7) / 16.0f;
}

int main(int argc, char **argv)
{
	static float a[M * K], b[K * N], bias[N], c[M * N];
	int64_t sa[2] = { M, K }, sb[2] = { K, N }, sc[2] = { M, N }, sn[1] = { N };
	const char *r_value = argc > 1 ? argv[1] : "0.125";
	kb_sim_options so = KB_SIM_OPTIONS_INIT;
	kb_topology *topo = NULL;
	kb_simulation *sim = NULL;
	kb_result res = KB_RESULT_INIT;
	log_stats stats = { 0 };
	gemm_args g = { 0, 0, 0, 0 };
	kb_error err;
	double max_err = 0;
	uint64_t gemm_busy = 0;
	int rc;

	printf("kernbench %s (built against %s)\n", kb_version(), KB_VERSION_STRING);
	fill(a, M * K, 1);
	fill(b, K * N, 2);
	fill(bias, N, 3);

	rc = kb_topology_default(&topo, &err);
	if (!rc)
		rc = kb_topology_set(topo, "pe_cost_model.r_cycles_per_byte", r_value, &err);
	so.data = 1;
	so.threads = 0;  /* one thread per engine */
	so.on_record = on_record;
	so.payload = &stats;
	if (!rc)
		rc = kb_simulation_create(&sim, topo, &so, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 2, sa, 0, &g.a, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 2, sb, 0, &g.b, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 1, sn, 0, &g.bias, &err);
	if (!rc)
		rc = kb_simulation_alloc(sim, KB_FP32, 2, sc, 1, &g.c, &err);
	if (!rc)
		rc = kb_simulation_upload(sim, g.a, a, sizeof(a), &err);
	if (!rc)
		rc = kb_simulation_upload(sim, g.b, b, sizeof(b), &err);
	if (!rc)
		rc = kb_simulation_upload(sim, g.bias, bias, sizeof(bias), &err);
	if (!rc)
		rc = kb_simulation_launch(sim, gemm_bias_relu, &g, 0, 1, &err);
	if (!rc)
		rc = kb_simulation_run(sim, &res, &err);
	if (!rc)
		rc = kb_simulation_download(sim, g.c, c, sizeof(c), &err);
	if (rc) {
		fprintf(stderr, "embed_gemm: %s: %s\n", kb_strerror(rc), err.message);
		goto out;
	}

	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double want = bias[j];

			for (int k = 0; k < K; k++)
				want += (double)a[i * K + k] * (double)b[k * N + j];
			want = want > 0 ? want : 0;
			max_err = fmax(max_err, fabs(want - (double)c[i * N + j]));
		}
	for (size_t i = 0; i < res.n_busy; i++)
		if (strcmp(res.busy[i].eng, "gemm") == 0)
			gemm_busy += res.busy[i].busy_ps;

	printf("R = %s cycles/byte: sim time %.3f ns, %llu events, %llu commands, dispatch %.3f ns\n",
	       r_value, (double)res.sim_time_ps / 1000.0, (unsigned long long)res.events,
	       (unsigned long long)res.commands, (double)res.dispatch_ps / 1000.0);
	printf("GEMM engine busy %.3f ns; op_log sha256 %s\n", (double)gemm_busy / 1000.0,
	       res.oplog_sha256);
	printf("op_log callback: %lu records (%lu dispatches, %lu bytes moved)%s\n", stats.records,
	       stats.dispatches, stats.bytes_moved, stats.out_of_order ? ", OUT OF ORDER" : "");
	printf("C = relu(A @ B + bias), %dx%d: max abs error %g\n", M, N, max_err);

	if (max_err > 1e-4 || stats.records != res.records || stats.dispatches != res.commands ||
	    stats.out_of_order) {
		fprintf(stderr, "embed_gemm: mismatch\n");
		rc = 1;
	}
out:
	kb_result_clear(&res);
	kb_simulation_destroy(sim);
	kb_topology_destroy(topo);
	return rc ? 1 : 0;
}
