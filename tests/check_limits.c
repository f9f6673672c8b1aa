/*
 * Limits (issue 18): simulated time never wraps. Every engine's cost is run
 * at both ends of every documented topology range (doc/topology.md); a run
 * either gives sane figures, the same for every executor, or fails cleanly
 * with the reason. Runs whose times would pass 2^63 ps stop with KB_ERANGE
 * naming the keys that made them so.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <unistd.h>

#include "base/grow.h"
#include "base/memlimit.h"
#include "base/outfile.h"
#include "base/str.h"
#include "base/threadlimit.h"
#include "suites.h"
#include "testutil.h"

/* The documented ranges (doc/topology.md), each end as text. fail_lo /
 * fail_hi: NULL when a run at that end must succeed, else a fragment of
 * the error it must give instead (a validation rule that is not about
 * time, e.g. a TCM too small for the tile set). */
typedef struct range {
	const char *key, *lo, *hi, *below, *above;
	const char *fail_lo, *fail_hi;
} range;

static const range ranges[] = {
	{ "clock_freq_ghz", "0.001", "100", "0.000999", "100.001", NULL, NULL },
	{ "clusters", "1", "1024", "0", "1025", NULL, NULL },
	{ "pes_per_cluster", "1", "1024", "0", "1025", NULL, NULL },
	{ "pe_cost_model.fixed_cycles", "0", "1e9", "-1", "1000000001", NULL, NULL },
	{ "pe_cost_model.r_cycles_per_byte", "0", "1e6", "-0.001", "1000001", NULL, NULL },
	{ "pe_cost_model.max_composite_logical_bytes", "64", "1048576", "63", "1048577",
	  "max_composite_logical_bytes", NULL },
	{ "links.engine_latency_cycles", "1", "1000000", "0", "1000001", NULL, NULL },
	{ "links.intra_cluster_latency_cycles", "1", "1000000000", "0", "1000000001", NULL, NULL },
	{ "links.inter_cluster_latency_cycles", "1", "1000000000", "0", "1000000001", NULL, NULL },
	{ "links.intra_cluster_bytes_per_cycle", "0.001", "1e12", "0.000999", "1.001e12", NULL, NULL },
	{ "links.inter_cluster_bytes_per_cycle", "0.001", "1e12", "0.000999", "1.001e12", NULL, NULL },
	{ "memory.hbm_bytes", "1048576", "281474976710656", "1048575", "281474976710657", NULL,
	  NULL },
	{ "memory.tcm_bytes", "65536", "4294967296", "65535", "4294967297",
	  "cannot hold one GEMM tile set", NULL },
	{ "pe.dma.setup_cycles", "0", "1000000000", "-1", "1000000001", NULL, NULL },
	{ "pe.dma.bytes_per_cycle", "0.001", "1e12", "0.000999", "1.001e12", NULL, NULL },
	{ "pe.tcm.latency_cycles", "0", "1000000000", "-1", "1000000001", NULL, NULL },
	{ "pe.tcm.bytes_per_cycle", "0.001", "1e12", "0.000999", "1.001e12", NULL, NULL },
	{ "pe.gemm.macs_per_cycle", "1", "1073741824", "0", "1073741825", NULL, NULL },
	{ "pe.gemm.fill_cycles", "0", "1000000000", "-1", "1000000001", NULL, NULL },
	{ "pe.gemm.tile_m", "1", "65536", "0", "65537", NULL, "cannot hold one GEMM tile set" },
	{ "pe.gemm.tile_n", "1", "65536", "0", "65537", NULL, "cannot hold one GEMM tile set" },
	{ "pe.gemm.tile_k", "1", "65536", "0", "65537", NULL, "cannot hold one GEMM tile set" },
	{ "pe.math.vector_width", "1", "1048576", "0", "1048577", NULL, NULL },
	{ "pe.sched.max_inflight_tiles", "1", "1024", "0", "1025", NULL,
	  "cannot hold one GEMM tile set" },
	{ "pe.ipcq.setup_cycles", "0", "1000000000", "-1", "1000000001", NULL, NULL },
};
#define N_RANGES (sizeof(ranges) / sizeof(ranges[0]))

/* Two PEs of a split-KV decode: CPU, scheduler, DMA, TCM, GEMM, MATH and
 * IPCQ all do work. */
static const char *const workload[] = { "S_kv=256", "P=2", NULL };

/* Runs the workload with sets under threads; rc and the message. */
static int run(const char *const *sets, int threads, kb_result *res, kb_error *err)
{
	*res = (kb_result)KB_RESULT_INIT;
	kb_error_clear(err);
	return kbt_run("gqa_decode_opt2", workload, sets, threads, 0, res, err);
}

/* Every figure a run reports is a time inside [0, 2^63) that adds up. */
static void check_sane(const char *what, const kb_result *r)
{
	ck_assert_msg(r->sim_time_ps <= (uint64_t)INT64_MAX, "%s: sim_time_ps %llu", what,
		      (unsigned long long)r->sim_time_ps);
	ck_assert_msg(r->sim_time_ps > 0, "%s: sim_time_ps 0", what);
	ck_assert_msg(r->dispatch_ps <= (uint64_t)INT64_MAX, "%s: dispatch_ps", what);
	for (size_t i = 0; i < r->n_busy; i++) {
		/* Busy time is time the engine works, inside the run, even for
		 * the DMA engine's read and write channels at once. */
		ck_assert_msg(r->busy[i].busy_ps <= r->sim_time_ps,
			      "%s: pe%u.%s busy %llu ps in a run of %llu ps", what, r->busy[i].pe,
			      r->busy[i].eng, (unsigned long long)r->busy[i].busy_ps,
			      (unsigned long long)r->sim_time_ps);
	}
}

/* One end of one range: the sequential and the one-thread-per-engine
 * executor agree, and the run is sane or fails as the table says. */
static void check_end(const range *rg, const char *value, const char *fail)
{
	char set[160], what[200];
	const char *const sets[] = { set, NULL };
	kb_result r1 = KB_RESULT_INIT, r0 = KB_RESULT_INIT;
	kb_error e1, e0;
	int rc1, rc0;

	snprintf(set, sizeof(set), "%s=%s", rg->key, value);
	snprintf(what, sizeof(what), "--set %s", set);
	rc1 = run(sets, 1, &r1, &e1);
	rc0 = run(sets, 0, &r0, &e0);
	ck_assert_msg(rc1 == rc0, "%s: threads 1 gives %d (%s), threads 0 gives %d (%s)", what, rc1,
		      e1.message, rc0, e0.message);
	if (fail) {
		ck_assert_msg(rc1 != KB_OK, "%s: ran, expected '%s'", what, fail);
		ck_assert_msg(strstr(e1.message, fail), "%s: '%s' lacks '%s'", what, e1.message, fail);
		ck_assert_str_eq(e1.message, e0.message);
	} else {
		ck_assert_msg(rc1 == KB_OK, "%s: %s", what, e1.message);
		check_sane(what, &r1);
		check_sane(what, &r0);
		ck_assert_str_eq(r1.oplog_sha256, r0.oplog_sha256);
		ck_assert_uint_eq(r1.sim_time_ps, r0.sim_time_ps);
	}
	kb_result_clear(&r1);
	kb_result_clear(&r0);
}

/* Rule: at each end of every documented range the engines' costs stay
 * inside simulated time, and the executors agree. */
START_TEST(test_range_ends)
{
	const range *rg = &ranges[_i];

	check_end(rg, rg->lo, rg->fail_lo);
	check_end(rg, rg->hi, rg->fail_hi);
}
END_TEST

/* Rule: the table above is the code's: just outside each end is
 * KB_ERANGE naming the key (so a range changed in one place fails here). */
START_TEST(test_range_table_matches)
{
	const range *rg = &ranges[_i];
	const char *const out[] = { rg->below, rg->above };
	kb_topology *t = NULL;
	kb_error err;

	ck_assert_int_eq(kb_topology_default(&t, &err), KB_OK);
	for (int i = 0; i < 2; i++) {
		int rc = kb_topology_set(t, rg->key, out[i], &err);

		ck_assert_msg(rc == KB_ERANGE || rc == KB_ETYPE, "%s=%s: %d %s", rg->key, out[i], rc,
			      err.message);
		ck_assert_msg(strstr(err.message, rg->key), "%s", err.message);
	}
	/* The ends themselves pass the key's own range; a cross-key rule
	 * (the tile set must fit the TCM) may still refuse them. */
	for (int i = 0; i < 2; i++) {
		const char *v = i ? rg->hi : rg->lo, *fail = i ? rg->fail_hi : rg->fail_lo;
		int rc = kb_topology_set(t, rg->key, v, &err);

		ck_assert_msg(rc == KB_OK || (fail && strstr(err.message, fail)), "%s=%s: %s",
			      rg->key, v, err.message);
	}
	kb_topology_destroy(t);
}
END_TEST

/* Rule: a run that would pass 2^63 ps stops with KB_ERANGE naming the
 * keys of the engine that got there, for every engine whose cost can
 * within the ranges and a bench's limits (MATH and IPCQ stages are bounded
 * by the TCM; their keys go through the same kb__pe_after). */
typedef struct slow {
	const char *engine;        /* the LP named in the message */
	const char *sets[10];
	const char *bench;
	const char *params[5];
	const char *key;           /* must be named */
} slow;

static const slow slows[] = {
	{ "dma",
	  { "clock_freq_ghz=0.001", "pe.dma.bytes_per_cycle=0.001", "pe.dma.setup_cycles=1000000000",
	    NULL },
	  "gemm", { "M=8192", "K=8192", "N=8192", NULL }, "pe.dma.bytes_per_cycle" },
	{ "tcm",
	  { "clock_freq_ghz=0.001", "pe.tcm.bytes_per_cycle=0.001", "pe.tcm.latency_cycles=1000000000",
	    NULL },
	  "gemm", { "M=8192", "K=8192", "N=8192", NULL }, "pe.tcm.bytes_per_cycle" },
	{ "gemm",
	  { "clock_freq_ghz=0.001", "pe.gemm.macs_per_cycle=1", "pe.gemm.fill_cycles=1000000000",
	    "pe.tcm.bytes_per_cycle=1e12", "pe.dma.bytes_per_cycle=1e12",
	    "memory.tcm_bytes=4294967296", "pe.gemm.tile_m=1024", "pe.gemm.tile_n=1024",
	    "pe.gemm.tile_k=1024", NULL },
	  "gemm", { "M=20480", "K=20480", "N=20480", NULL }, "pe.gemm.macs_per_cycle" },
};
#define N_SLOWS (sizeof(slows) / sizeof(slows[0]))

START_TEST(test_time_end)
{
	const slow *s = &slows[_i];
	kb_result r = KB_RESULT_INIT;
	kb_error err;
	char lp[32];
	int rc;

	r = (kb_result)KB_RESULT_INIT;
	rc = kbt_run(s->bench, s->params, s->sets, 1, 0, &r, &err);
	if (rc == KB_OK)
		printf("%s: ran to %llu ps\n", s->engine, (unsigned long long)r.sim_time_ps);
	kb_result_clear(&r);
	ck_assert_msg(rc == KB_ERANGE, "%s: %d %s", s->engine, rc, err.message);
	snprintf(lp, sizeof(lp), ".%s at t=", s->engine);
	ck_assert_msg(strstr(err.message, lp), "%s: %s", s->engine, err.message);
	ck_assert_msg(strstr(err.message, "2^63 ps"), "%s", err.message);
	ck_assert_msg(strstr(err.message, s->key), "%s: %s", s->key, err.message);
	ck_assert_msg(strstr(err.message, "clock_freq_ghz"), "%s", err.message);
}
END_TEST

/* Rule (issue 18 §1): each example of the issue, which used to exit 0 with
 * a wrapped time (sim_time_ps -74, a utilization of 16.5, op_logs that
 * differ between executors), is KB_ERANGE naming the key, under the
 * sequential and the one-thread-per-engine executor alike. */
static const char *const wrap_examples[][2] = {
	{ "clock_freq_ghz=1e-300", "clock_freq_ghz = 1e-300" },
	{ "clock_freq_ghz=1e-12", "clock_freq_ghz = 1e-12" },
	{ "pe.dma.bytes_per_cycle=1e-10", "pe.dma.bytes_per_cycle = 1e-10" },
};
#define N_WRAP (sizeof(wrap_examples) / sizeof(wrap_examples[0]))

START_TEST(test_wrap_examples)
{
	const char *const sets[] = { wrap_examples[_i][0], NULL };
	static const char *const benches[] = { "gemm", "synthetic" };
	static const int threads[] = { 1, 0 };

	for (int b = 0; b < 2; b++)
		for (int t = 0; t < 2; t++) {
			kb_result r = KB_RESULT_INIT;
			kb_error err;
			int rc;

			r = (kb_result)KB_RESULT_INIT;
			rc = kbt_run(benches[b], NULL, sets, threads[t], 0, &r, &err);
			kb_result_clear(&r);
			ck_assert_msg(rc == KB_ERANGE, "%s --set %s --threads %d: %d %s", benches[b],
				      sets[0], threads[t], rc, err.message);
			ck_assert_msg(strstr(err.message, wrap_examples[_i][1]), "%s", err.message);
		}
}
END_TEST

/* The same in a topology file: the smallest denormal clock. */
START_TEST(test_wrap_denormal_file)
{
	kb_topology *t = NULL;
	kb_error err;
	int rc = kb_topology_load_string(
		&t, "{\"schema\": \"kernbench-topology/1\", \"clock_freq_ghz\": 5e-324}", &err);

	ck_assert_int_eq(rc, KB_ERANGE);
	ck_assert_ptr_null(t);
	ck_assert_msg(strstr(err.message, "clock_freq_ghz = 5e-324"), "%s", err.message);
	ck_assert_str_eq(err.source, "clock_freq_ghz");
}
END_TEST

/* Rule (issue 18 §6): spaces and tabs around a name or a value are trimmed
 * the same way by every setter; inside a value they are an error. */
START_TEST(test_trim_everywhere)
{
	static const char *const forms[] = { "lps=2", "lps= 2", "lps=2 ", " lps =\t2\t" };
	kb_topology *t = NULL;
	kb_params *p = NULL;
	kb_error err;
	double v;

	ck_assert_int_eq(kb_topology_default(&t, &err), KB_OK);
	ck_assert_int_eq(kb_topology_set(t, " clusters ", " 2\t", &err), KB_OK);
	ck_assert_int_eq(kb_topology_get_number(t, "clusters", &v, &err), KB_OK);
	ck_assert(v == 2);
	ck_assert_int_eq(kb_topology_set_assignment(t, "clusters = 3 ", &err), KB_OK);
	ck_assert_int_eq(kb_topology_get_number(t, "clusters", &v, &err), KB_OK);
	ck_assert(v == 3);
	ck_assert_int_ne(kb_topology_set(t, "clusters", "2 2", &err), KB_OK);
	kb_topology_destroy(t);
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		const char *const params[] = { "events=10", forms[i], NULL };
		kb_result r = KB_RESULT_INIT;
		int rc;

		r = (kb_result)KB_RESULT_INIT;
		rc = kbt_run("synthetic", params, NULL, 1, 0, &r, &err);
		ck_assert_msg(rc == KB_OK, "'%s': %s", forms[i], err.message);
		ck_assert_msg(strstr(r.params_json, "\"lps\":2"), "'%s': %s", forms[i], r.params_json);
		kb_result_clear(&r);
	}
	ck_assert_int_eq(kb_params_create(&p, &err), KB_OK);
	ck_assert_int_ne(kb_params_set(p, "lps", " ", &err), KB_OK);
	kb_params_destroy(p);
}
END_TEST

/* Entries of dir other than . and .. */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void slurp(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "r");
	size_t got;

	ck_assert_ptr_nonnull(f);
	got = fread(buf, 1, n - 1, f);
	buf[got] = '\0';
	fclose(f);
}

/* Rule (issue 18 §3): an output is whole or absent. While it is written
 * nothing is at its name; kept, it is renamed there; discarded, the
 * temporary goes and an earlier file at the name stays as it was. */
START_TEST(test_outfile_whole_or_absent)
{
	char *dir = kbt_tmpdir(), path[512], buf[64];
	kb_outfile o;

	snprintf(path, sizeof(path), "%s/out.jsonl", dir);
	ck_assert_int_eq(kb__outfile_open(&o, path, "w"), 0);
	fputs("new\n", o.f);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(entries(dir), 1);
	ck_assert_int_eq(kb__outfile_close(&o, 1), 0);
	slurp(path, buf, sizeof(buf));
	ck_assert_str_eq(buf, "new\n");
	ck_assert_int_eq(entries(dir), 1);
	ck_assert_int_eq(kb__outfile_open(&o, path, "w"), 0);
	fputs("half", o.f);
	ck_assert_int_eq(kb__outfile_close(&o, 0), 0);
	slurp(path, buf, sizeof(buf));
	ck_assert_str_eq(buf, "new\n");
	ck_assert_int_eq(entries(dir), 1);
	/* A closed object closes again harmlessly. */
	ck_assert_int_eq(kb__outfile_close(&o, 1), 0);
	/* Devices are written directly: /dev/full's error shows at close. */
	ck_assert_int_eq(kb__outfile_open(&o, "/dev/full", "w"), 0);
	ck_assert_ptr_null(o.tmp);
	fputs("x", o.f);
	ck_assert_int_eq(kb__outfile_close(&o, 1), -1);
	snprintf(path, sizeof(path), "%s/no/such/dir.jsonl", dir);
	ck_assert_int_eq(kb__outfile_open(&o, path, "w"), -1);
	snprintf(path, sizeof(path), "%s/out.jsonl", dir);
	remove(path);
	rmdir(dir);
	free(dir);
}
END_TEST

/* Rule (issue 18 §2): a need over the limit is KB_ENOMEM with both
 * figures and the limit's name; a need within it passes; an estimate that
 * overflows saturates instead of wrapping to a small number. */
START_TEST(test_mem_need)
{
	const char *what = NULL;
	uint64_t limit = kb__mem_limit(&what);
	kb_error err;

	ck_assert_ptr_nonnull(what);
	ck_assert_int_eq(kb__mem_need(1024, "a small run", &err), KB_OK);
	ck_assert_int_eq(kb__mem_need(UINT64_MAX, "lps = 7", &err),
			 limit == UINT64_MAX ? KB_OK : KB_ENOMEM);
	if (limit != UINT64_MAX) {
		ck_assert_msg(strstr(err.message, "lps = 7 needs about"), "%s", err.message);
		ck_assert_msg(strstr(err.message, what), "%s", err.message);
		/* Small needs skip the look-up (issue 13), a need just over
		 * the limit does not. */
		ck_assert_int_eq(kb__mem_need(limit + 1, "lps = 8", &err), KB_ENOMEM);
		ck_assert_msg(strstr(err.message, what), "%s", err.message);
	}
	ck_assert_uint_eq(kb__mul_sat(UINT64_MAX / 2, 3), UINT64_MAX);
	ck_assert_uint_eq(kb__mul_sat(65536, 1048576), 68719476736ull);
	ck_assert_uint_eq(kb__add_sat(UINT64_MAX - 1, 2), UINT64_MAX);
}
END_TEST

/* ---- kernel_threads against the thread limit ---- */

static void nop_kernel(kb_tl *tl, void *p)
{
	(void)p;
	kb_tl_cpu_overhead(tl, 10);
}

/* Runs a no-op kernel on n PEs with kernel_threads; rc and the message. */
static int run_kernel_threads(uint32_t n, kb_result *res, kb_error *err)
{
	kb_topology *t = NULL;
	kb_simulation *sim = NULL;
	kb_sim_options o = KB_SIM_OPTIONS_INIT;
	int rc = kb_topology_default(&t, err);

	o.threads = 1;
	o.pes = n;
	o.kernel_threads = 1;
	rc = rc ? rc : kb_topology_set_assignment(t, "clusters=4", err);
	rc = rc ? rc : kb_topology_set_assignment(t, "pes_per_cluster=1024", err);
	rc = rc ? rc : kb_simulation_create(&sim, t, &o, err);
	rc = rc ? rc : kb_simulation_launch(sim, nop_kernel, NULL, 0, n, err);
	*res = (kb_result)KB_RESULT_INIT;
	rc = rc ? rc : kb_simulation_run(sim, res, err);
	kb_simulation_destroy(sim);
	kb_topology_destroy(t);
	return rc;
}

/* The rule: the threads asked for plus the ones running must fit in the
 * limit; the message names the option, its value, the count and the limit. */
START_TEST(test_threads_fit_rule)
{
	const kb_thread_limit l = { 100, 3, "RLIMIT_NPROC (ulimit -u)" };
	const kb_thread_limit none = { UINT64_MAX, 5, "no limit" };
	const kb_thread_limit over = { 10, 12, "the cgroup's pids.max" };
	kb_error err;

	ck_assert_int_eq(kb__threads_fit(97, "kernel_threads = 1", "h", &l, &err), KB_OK);
	ck_assert_int_eq(kb__threads_fit(98, "kernel_threads = 1", "hint", &l, &err), KB_ERANGE);
	ck_assert_str_eq(err.message, "kernel_threads = 1 needs 98 threads, more than "
			 "RLIMIT_NPROC (ulimit -u) allows: 100, with 3 running; hint");
	ck_assert_int_eq(kb__threads_fit(UINT64_MAX - 1, "x", "h", &none, &err), KB_OK);
	ck_assert_int_eq(kb__threads_fit(0, "x", "h", &over, &err), KB_ERANGE);
}
END_TEST

/*
 * A run whose kernel threads cannot all start is refused before the first
 * starts, naming kernel_threads and the limit; one that fits runs. The
 * refusal needs a limit a run of at most 4096 PEs reaches: make check's
 * tests/kernel_threads_nproc.sh runs this under `ulimit -u`.
 */
START_TEST(test_kernel_threads_limit)
{
	kb_thread_limit l;
	kb_result res;
	kb_error err;
	int rc;

	kb__thread_limit(&l);
	rc = run_kernel_threads(2, &res, &err);
	ck_assert_msg(rc == KB_OK, "2 kernel threads under %s %llu: %s", l.what,
		      (unsigned long long)l.limit, err.message);
	ck_assert_uint_eq(res.commands, 2);
	kb_result_clear(&res);
	if (l.limit == UINT64_MAX || l.used >= l.limit || l.limit - l.used >= 4096) {
		printf("kernel_threads: %s %llu, with %llu running: no refusal to test here\n",
		       l.what, (unsigned long long)l.limit, (unsigned long long)l.used);
		return;
	}
	rc = run_kernel_threads((uint32_t)(l.limit - l.used + 1), &res, &err);
	ck_assert_int_eq(rc, KB_ERANGE);
	ck_assert_msg(strstr(err.message, "kernel_threads = 1 (a thread per kernel instance)") &&
		      strstr(err.message, l.what),
		      "%s", err.message);
	printf("kernel_threads refused: %s\n", err.message);
}
END_TEST

/* kb__grow_to: one realloc to the first doubling that holds the index,
 * the old elements kept, the new ones zero; a size that cannot be reached
 * leaves the array and its capacity as they were. */
/* The cgroup and /proc numbers (memory.max, pids.max, "Threads:"): a
 * number with blanks around it, or nothing (a "max", a sign, junk after
 * it, one past UINT64_MAX). */
START_TEST(test_parse_u64)
{
	static const struct {
		const char *s;
		int rc;
		uint64_t v;
	} cases[] = {
		{ "123\n", 0, 123 },
		{ "\t 42 \r\n", 0, 42 },
		{ "0", 0, 0 },
		{ "18446744073709551615\n", 0, UINT64_MAX },
		{ "18446744073709551616\n", -1, 0 },
		{ "max\n", -1, 0 },
		{ "", -1, 0 },
		{ "-1", -1, 0 },
		{ "+7", -1, 0 },
		{ "12x", -1, 0 },
		{ "12 34", -1, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 99;
		int rc = kb__parse_u64(cases[i].s, &v);

		ck_assert_msg(rc == cases[i].rc, "\"%s\": rc %d", cases[i].s, rc);
		ck_assert_msg(v == (rc ? 99 : cases[i].v), "\"%s\": %llu", cases[i].s,
			      (unsigned long long)v);
	}
}
END_TEST

START_TEST(test_grow_to)
{
	size_t cap = 0;
	uint32_t *a = kb__grow_to(NULL, &cap, sizeof(*a), 4, 2), *b;

	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(cap, 4);
	for (size_t i = 0; i < cap; i++) {
		ck_assert_uint_eq(a[i], 0);
		a[i] = (uint32_t)i + 1;
	}
	b = kb__grow_to(a, &cap, sizeof(*a), 4, 37);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(cap, 64);
	for (size_t i = 0; i < cap; i++)
		ck_assert_uint_eq(b[i], i < 4 ? (uint32_t)i + 1 : 0);
	ck_assert_ptr_null(kb__grow_to(b, &cap, sizeof(*b), 4, SIZE_MAX / 2));
	ck_assert_uint_eq(cap, 64);
	ck_assert_uint_eq(b[3], 4);
	free(b);
}
END_TEST

Suite *limits_suite(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tcase_create("time");

	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_range_ends, 0, N_RANGES);
	tcase_add_loop_test(tc, test_range_table_matches, 0, N_RANGES);
	tcase_add_loop_test(tc, test_time_end, 0, N_SLOWS);
	tcase_add_loop_test(tc, test_wrap_examples, 0, N_WRAP);
	tcase_add_test(tc, test_wrap_denormal_file);
	suite_add_tcase(s, tc);
	tc = tcase_create("resources");
	tcase_add_test(tc, test_outfile_whole_or_absent);
	tcase_add_test(tc, test_mem_need);
	tcase_add_test(tc, test_grow_to);
	tcase_add_test(tc, test_parse_u64);
	tcase_add_test(tc, test_threads_fit_rule);
	tcase_add_test(tc, test_kernel_threads_limit);
	suite_add_tcase(s, tc);
	tc = tcase_create("consistency");
	tcase_add_test(tc, test_trim_everywhere);
	suite_add_tcase(s, tc);
	return s;
}
