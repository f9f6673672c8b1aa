/*
 * databench: data-mode speed and memory of decode (issue 13, data part).
 *
 * For gqa_decode_opt2 and opt3 at S_kv = 65536 (--threads 1), each run in a
 * child process of its own so that its peak RSS is its own:
 *   - the simulated run's wall_s in timing mode and in data mode (best of
 *     n), and the difference, which is what the numbers cost;
 *   - effective attention arithmetic: 2 GEMMs per KV tile of 2*G*d*TILE
 *     flops each, over that difference, in GFLOP/s;
 *   - the whole data-mode run (inputs, simulation, reference check), wall
 *     and CPU time (the child's rusage, which load does not inflate);
 *   - peak RSS in data mode against the bytes of q, k, v and o in HBM.
 * Figures are ratios and rates measured in one run on a shared machine:
 * nothing here is a pass/fail test. `make bench-data` runs it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kernbench.h>

enum { G = 8, D = 128, TILE = 64 };

typedef struct sample {
	int ok;
	double sim_s, whole_s, cpu_s;
	long rss_kib;
} sample;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run(const char *bench, const char *skv, int data, sample *s)
{
	kb_params *p = NULL;
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	kb_result r = KB_RESULT_INIT;
	kb_error err;
	double t0 = now_s();
	int rc = kb_params_create(&p, &err);

	if (!rc)
		rc = kb_params_set_assignment(p, skv, &err);
	o.threads = 1;
	o.data = data;
	if (!rc)
		rc = kb_bench_run(bench, p, NULL, &o, &r, &err);
	s->whole_s = now_s() - t0;
	if (rc) {
		fprintf(stderr, "databench: %s: %s\n", bench, err.message);
	} else {
		s->sim_s = r.wall_s;
		kb_result_clear(&r);
	}
	kb_params_destroy(p);
	return rc;
}

/* One run in a child process; its figures come back through a pipe. */
static sample child(const char *bench, const char *skv, int data)
{
	sample s = { 0, 0, 0, 0, -1 };
	struct rusage ru;
	int fd[2], status;
	pid_t pid;

	if (pipe(fd))
		return s;
	pid = fork();
	if (pid == 0) {
		close(fd[0]);
		s.ok = run(bench, skv, data, &s) == 0;
		if (write(fd[1], &s, sizeof(s)) != (ssize_t)sizeof(s))
			_exit(1);
		_exit(0);
	}
	close(fd[1]);
	if (pid < 0 || read(fd[0], &s, sizeof(s)) != (ssize_t)sizeof(s))
		s.ok = 0;
	close(fd[0]);
	if (pid > 0 && (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)))
		s.ok = 0;
	else if (pid > 0) {
		s.rss_kib = ru.ru_maxrss;
		s.cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
			  (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
	}
	return s;
}

static void best(sample *b, const sample *s)
{
	if (!s->ok)
		return;
	if (!b->ok || s->sim_s < b->sim_s)
		b->sim_s = s->sim_s;
	if (!b->ok || s->whole_s < b->whole_s)
		b->whole_s = s->whole_s;
	if (!b->ok || s->cpu_s < b->cpu_s)
		b->cpu_s = s->cpu_s;
	if (!b->ok || s->rss_kib > b->rss_kib)
		b->rss_kib = s->rss_kib;
	b->ok = 1;
}

int main(void)
{
	static const char *const benches[] = { "gqa_decode_opt2", "gqa_decode_opt3" };
	const long s_kv = getenv("KB_BENCH_SHORT") ? 16384 : 65536;
	const int reps = getenv("KB_BENCH_SHORT") ? 1 : 3;
	const double flops = 2.0 * 2.0 * G * D * TILE * (double)(s_kv / TILE);
	const double hbm_mib = (double)(2 * G * D + 2 * s_kv * D) * 2.0 / 1048576.0;
	char skv[32];

	snprintf(skv, sizeof(skv), "S_kv=%ld", s_kv);
	printf("kernbench %s, data mode, %s, --threads 1, best of %d (timing/data interleaved)\n",
	       kb_version(), skv, reps);
	printf("  flops per run: %.0f (2 GEMMs x 2*G*d*TILE per tile); q,k,v,o in HBM: %.1f MiB\n",
	       flops, hbm_mib);
	printf("  %-16s %10s %10s %10s %9s %10s %10s %10s %8s\n", "bench", "timing_s", "data_s",
	       "numbers_s", "GFLOP/s", "whole_s", "whole_cpu", "RSS_MiB", "RSS/HBM");
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]); i++) {
		sample t = { 0, 0, 0, 0, 0 }, d = { 0, 0, 0, 0, 0 }, s;
		double num;

		for (int r = 0; r < reps; r++) {
			s = child(benches[i], skv, 0);
			best(&t, &s);
			s = child(benches[i], skv, 1);
			best(&d, &s);
		}
		if (!t.ok || !d.ok) {
			printf("  %-16s failed\n", benches[i]);
			continue;
		}
		num = d.sim_s - t.sim_s;
		printf("  %-16s %10.4f %10.4f %10.4f %9.2f %10.3f %10.3f %10.1f %8.2f\n", benches[i],
		       t.sim_s, d.sim_s, num, num > 0 ? flops / num * 1e-9 : 0.0, d.whole_s, d.cpu_s,
		       (double)d.rss_kib / 1024.0, (double)d.rss_kib / 1024.0 / hbm_mib);
	}
	return 0;
}
