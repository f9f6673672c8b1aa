/*
 * embed_rsweep: the R-sweep of the decode benches through the library.
 * gqa_decode_opt2 (two composites per KV tile) and gqa_decode_opt3 (the
 * software-pipelined baseline, 12 commands per KV tile) run for each
 * dispatch cost R (pe_cost_model.r_cycles_per_byte) on a pool of threads;
 * rows arrive in a fixed order, and the program prints the per-tile
 * dispatch time of each and their ratio for each R.
 *
 * Build against an installed kernbench:
 *   cc embed_rsweep.c $(pkg-config --cflags --libs kernbench) -o embed_rsweep
 * Usage: embed_rsweep [S_kv [R,R,...]]   (defaults 4096 and 0,0.03125,0.0625,0.125,0.25)
 * Exit status: 0 success, 1 a point failed or the sweep could not run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kernbench.h>

#define MAX_R 32

typedef struct table {
	size_t n_r;
	char r[MAX_R][32];
	double per_tile_ns[2][MAX_R];  /* [opt2, opt3][R] */
	unsigned long long commands[2][MAX_R];
	int failed;
} table;

/* Point order: bench (slowest), then S_kv, then R (fastest). */
static int on_row(const kb_sweep_row *row, void *payload)
{
	table *t = payload;
	size_t bench = row->index / t->n_r, ri = row->index % t->n_r;

	if (row->status != 0) {
		fprintf(stderr, "embed_rsweep: %s %s=%s: %s\n", row->bench, row->keys[1],
			row->values[1], row->error);
		t->failed = 1;
		return 0;
	}
	snprintf(t->r[ri], sizeof(t->r[ri]), "%s", row->values[1]);
	t->per_tile_ns[bench][ri] = row->result->dispatch_per_tile_ns;
	t->commands[bench][ri] = (unsigned long long)row->result->commands;
	return 0;
}

int main(int argc, char **argv)
{
	const char *s_kv = argc > 1 ? argv[1] : "4096";
	const char *rs = argc > 2 ? argv[2] : "0,0.03125,0.0625,0.125,0.25";
	kb_sweep_options so = KB_SWEEP_OPTIONS_INIT;
	kb_sweep *sw = NULL;
	table t;
	kb_error err;
	int rc;

	memset(&t, 0, sizeof(t));
	so.jobs = 0;     /* one point per online core */
	so.threads = 1;  /* each point sequential: the pool gives the parallelism */
	rc = kb_sweep_create(&sw, &so, &err);
	if (!rc)
		rc = kb_sweep_add_bench(sw, "gqa_decode_opt2", &err);
	if (!rc)
		rc = kb_sweep_add_bench(sw, "gqa_decode_opt3", &err);
	if (!rc)
		rc = kb_sweep_add_param(sw, "S_kv", s_kv, &err);
	if (!rc)
		rc = kb_sweep_add_set(sw, "pe_cost_model.r_cycles_per_byte", rs, &err);
	if (!rc) {
		t.n_r = kb_sweep_points(sw) / 2;
		if (t.n_r == 0 || t.n_r > MAX_R || strchr(s_kv, ',')) {
			fprintf(stderr, "embed_rsweep: give one S_kv and 1..%d values of R\n", MAX_R);
			kb_sweep_destroy(sw);
			return 1;
		}
		rc = kb_sweep_run(sw, on_row, &t, &err);
	}
	kb_sweep_destroy(sw);
	if (rc) {
		fprintf(stderr, "embed_rsweep: %s: %s\n", kb_strerror(rc), err.message);
		return 1;
	}
	if (t.failed)
		return 1;

	printf("GQA decode, S_kv = %s: PE_CPU dispatch time per KV tile\n", s_kv);
	printf("%-12s %14s %14s %8s %10s %10s\n", "R (cyc/B)", "opt2 (ns)", "opt3 (ns)", "ratio",
	       "opt2 cmds", "opt3 cmds");
	for (size_t i = 0; i < t.n_r; i++)
		printf("%-12s %14.3f %14.3f %8.2f %10llu %10llu\n", t.r[i], t.per_tile_ns[0][i],
		       t.per_tile_ns[1][i], t.per_tile_ns[1][i] / t.per_tile_ns[0][i],
		       t.commands[0][i], t.commands[1][i]);
	return 0;
}
