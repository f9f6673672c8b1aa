/*
 * kbbench: speed and memory figures of kernbench, measured as ratios within
 * one run (machines are shared and noisy; nothing here is a pass/fail test).
 *
 *   kbbench core       events/s of the sequential core on the synthetic model
 *   kbbench parallel   events/s of --threads 1, 2 and 0 side by side, ratios
 *   kbbench sweep      a 32-point sweep at -j 1 and -j 2, ratio, memory per point
 *   kbbench memory     peak RSS of decode opt2 as S_kv grows (bounded memory)
 *   kbbench all        everything
 *
 * `make bench` runs `kbbench all`; `make bench-short` a quick pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kernbench.h>

static int g_short;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs a bench; params is a NULL-terminated list of "K=V". */
static int run(const char *bench, const char *const *params, int threads, kb_result *res)
{
	kb_params *p = NULL;
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	kb_error err;
	int rc = kb_params_create(&p);

	for (size_t i = 0; !rc && params[i]; i++)
		rc = kb_params_set_assignment(p, params[i], &err);
	o.threads = threads;
	if (!rc)
		rc = kb_bench_run(bench, p, NULL, &o, res, &err);
	if (rc)
		fprintf(stderr, "kbbench: %s: %s\n", bench, err.message);
	kb_params_destroy(p);
	return rc;
}

/* Best of n runs (the least disturbed by other load). */
static double best_rate(const char *bench, const char *const *params, int threads, int n,
			char sha[65])
{
	double best = 0;

	for (int i = 0; i < n; i++) {
		kb_result r;

		if (run(bench, params, threads, &r))
			return 0;
		if (r.events_per_s > best)
			best = r.events_per_s;
		memcpy(sha, r.oplog_sha256, 65);
		kb_result_clear(&r);
	}
	return best;
}

static void core(void)
{
	static const char *const sizes[][3] = {
		{ "lps=16", "events=1000000", NULL },
		{ "lps=256", "events=1000000", NULL },
		{ "lps=4096", "events=1000000", NULL },
	};
	char sha[65];

	printf("== core: sequential executor, synthetic model (op_log hashed, not written)\n");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		const char *p[] = { sizes[i][0], g_short ? "events=200000" : sizes[i][1], NULL };
		double r = best_rate("synthetic", p, 1, g_short ? 1 : 3, sha);

		printf("  %-10s %-16s %12.0f events/s\n", p[0], p[1], r);
	}
}

static void parallel_row(const char *label, const char *bench, const char *const *p)
{
	char s1[65], s2[65], s0[65];
	int n = g_short ? 1 : 3;
	double r1 = best_rate(bench, p, 1, n, s1), r2 = best_rate(bench, p, 2, n, s2),
	       r0 = best_rate(bench, p, 0, n, s0);

	printf("  %-34s %11.0f %11.0f %11.0f   %5.2fx  %5.2fx  %s\n", label, r1, r2, r0,
	       r1 > 0 ? r2 / r1 : 0, r1 > 0 ? r0 / r1 : 0,
	       strcmp(s1, s2) || strcmp(s1, s0) ? "HASH MISMATCH" : "same op_log");
}

static void parallel(void)
{
	const char *syn_big[] = { "lps=64", "population=16", "lookahead_ns=50", "work=2000",
				  g_short ? "events=50000" : "events=200000", NULL };
	const char *syn_small[] = { "lps=16", "events=200000", NULL };
	const char *dec1[] = { g_short ? "S_kv=16384" : "S_kv=65536", NULL };
	const char *dec8[] = { "H_kv=8", "P=1", g_short ? "S_kv=4096" : "S_kv=16384", NULL };
	const char *dec_split[] = { "H_kv=2", "P=4", "C=2", g_short ? "S_kv=8192" : "S_kv=32768", NULL };

	printf("== parallel: events/s by --threads (best of %d), speed-up vs sequential\n",
	       g_short ? 1 : 3);
	printf("  %-34s %11s %11s %11s   %6s  %6s\n", "workload", "threads=1", "threads=2",
	       "threads=0", "2/1", "0/1");
	parallel_row("synthetic, ample work (window 50ns)", "synthetic", syn_big);
	parallel_row("synthetic, default (window 1ns)", "synthetic", syn_small);
	parallel_row("gqa_decode_opt2, 1 PE", "gqa_decode_opt2", dec1);
	parallel_row("gqa_decode_opt3, 1 PE", "gqa_decode_opt3", dec1);
	parallel_row("gqa_decode_opt2, 8 heads x 1 PE", "gqa_decode_opt2", dec8);
	parallel_row("gqa_decode_opt3, 2 heads x 4 PEs, 2 cl.", "gqa_decode_opt3", dec_split);
}

typedef struct sweep_acc {
	size_t rows, failed;
} sweep_acc;

static int count_row(const kb_sweep_row *row, void *payload)
{
	sweep_acc *a = payload;

	a->rows++;
	a->failed += row->status != 0;
	return 0;
}

static double sweep_once(unsigned jobs, size_t *rows)
{
	kb_sweep_options o = KB_SWEEP_OPTIONS_INIT;
	kb_sweep *s = NULL;
	kb_error err;
	sweep_acc acc = { 0, 0 };
	double t0;
	int rc;

	o.jobs = jobs;
	rc = kb_sweep_create(&s, &o, &err);
	if (!rc)
		rc = kb_sweep_add_bench(s, "gqa_decode_opt2", &err);
	if (!rc)
		rc = kb_sweep_add_bench(s, "gqa_decode_opt3", &err);
	if (!rc)
		rc = kb_sweep_add_param(s, "S_kv", g_short ? "1024,2048" : "16384,32768", &err);
	if (!rc)
		rc = kb_sweep_add_set(s, "pe_cost_model.r_cycles_per_byte",
				      "0.25,0.125,0.0625,0.03125,0.015625,0.0078125,0.00390625,0", &err);
	t0 = now_s();
	if (!rc)
		rc = kb_sweep_run(s, count_row, &acc, &err);
	t0 = now_s() - t0;
	if (rc)
		fprintf(stderr, "kbbench: sweep: %s\n", err.message);
	kb_sweep_destroy(s);
	*rows = acc.rows;
	return rc ? 0 : t0;
}

static long maxrss_kb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static void sweep(void)
{
	size_t rows1, rows2;
	long rss0 = maxrss_kb();
	double t1 = sweep_once(1, &rows1);
	long rss1 = maxrss_kb();
	double t2 = sweep_once(2, &rows2);

	/* Best of three of each: the least disturbed by other load. */
	for (int i = 0; i < (g_short ? 0 : 2); i++) {
		double a = sweep_once(1, &rows1), b = sweep_once(2, &rows2);

		t1 = a < t1 ? a : t1;
		t2 = b < t2 ? b : t2;
	}

	printf("== sweep: %zu points (2 benches x 2 S_kv x 8 R), -j 1 vs -j 2\n", rows1);
	printf("  -j 1: %.3f s   -j 2: %.3f s   speed-up %.2fx (goal >= 1.85x on 2 cores)\n", t1, t2,
	       t2 > 0 ? t1 / t2 : 0);
	printf("  peak RSS growth over the -j 1 sweep: %ld KiB (%.1f KiB per point)\n", rss1 - rss0,
	       rows1 ? (double)(rss1 - rss0) / (double)rows1 : 0);
	(void)rows2;
}

/* Peak RSS of one decode run in a child process. */
static long child_rss(const char *bench, const char *skv)
{
	pid_t pid = fork();
	int status;
	struct rusage ru;

	if (pid == 0) {
		const char *p[] = { skv, NULL };
		kb_result r;

		_exit(run(bench, p, 1, &r) ? 1 : 0);
	}
	if (pid < 0 || wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		return -1;
	return ru.ru_maxrss;
}

static void memory(void)
{
	static const char *const skv[] = { "S_kv=4096", "S_kv=16384", "S_kv=65536", "S_kv=262144" };
	size_t n = g_short ? 3 : 4;

	printf("== memory: peak RSS of one run (child process), sequential executor\n");
	for (size_t i = 0; i < n; i++)
		printf("  gqa_decode_opt2 %-12s %8ld KiB   gqa_decode_opt3 %8ld KiB\n", skv[i],
		       child_rss("gqa_decode_opt2", skv[i]), child_rss("gqa_decode_opt3", skv[i]));
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "all";

	g_short = getenv("KB_BENCH_SHORT") != NULL;
	printf("kernbench %s, %ld online cores%s\n", kb_version(), sysconf(_SC_NPROCESSORS_ONLN),
	       g_short ? ", short run" : "");
	if (!strcmp(what, "core") || !strcmp(what, "all"))
		core();
	if (!strcmp(what, "parallel") || !strcmp(what, "all"))
		parallel();
	if (!strcmp(what, "sweep") || !strcmp(what, "all"))
		sweep();
	if (!strcmp(what, "memory") || !strcmp(what, "all"))
		memory();
	return 0;
}
