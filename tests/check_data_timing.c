/*
 * Data mode leaves timing alone (check_data.c has the suite): the same
 * oplog_sha256, sim time and events with and without data, the same
 * numbers under every scheduler policy; a bench without data mode says so.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"
#include "datautil.h"

/* ------------------------------------------------------------------ */
/* data mode leaves timing alone                                       */
/* ------------------------------------------------------------------ */

static const char *const *small_params(const char *name, int variant)
{
	static const char *const dec[] = { "G=4", "d=32", "S_kv=200", "H_kv=2", "P=2", "C=2", NULL };
	static const char *const dec16[] = { "G=8", "d=64", "S_kv=256", "dtype=fp16", NULL };
	static const char *const gemm1[] = { "M=72", "K=100", "N=140", "epilogue=add", NULL };
	static const char *const gemm2[] = { "M=72", "K=100", "N=140", "epilogue=bias", "dtype=fp32", NULL };

	if (!strncmp(name, "gqa_decode", 10))
		return variant ? dec16 : dec;
	if (!strcmp(name, "gemm"))
		return variant ? gemm2 : gemm1;
	return NULL;   /* a bench this suite does not know: its defaults */
}

START_TEST(oplog_same_in_data_mode)
{
	size_t n = kb_bench_count();
	int checked = 0;

	ck_assert_uint_gt(n, 0);
	for (size_t i = 0; i < n; i++) {
		const kb_bench_info *b = kb_bench_get(i);

		if (!strcmp(b->name, "synthetic"))
			continue;
		for (int variant = 0; variant < 2; variant++) {
			const char *const *p = small_params(b->name, variant);
			kb_result t = KB_RESULT_INIT, d = KB_RESULT_INIT;
			kb_error err;
			int rc;

			if (variant && !p)
				continue;
			rc = kbt_data_bench(b->name, p, 0, 0, NULL, &t, &err);
			ck_assert_msg(rc == 0, "%s timing: %s", b->name, err.message);
			rc = kbt_data_bench(b->name, p, 1, 0, NULL, &d, &err);
			ck_assert_msg(rc == 0, "%s data: %s", b->name, err.message);
			ck_assert_msg(!strcmp(t.oplog_sha256, d.oplog_sha256),
				      "%s (%d): oplog_sha256 %s in timing mode, %s in data mode",
				      b->name, variant, t.oplog_sha256, d.oplog_sha256);
			ck_assert_uint_eq(t.sim_time_ps, d.sim_time_ps);
			ck_assert_uint_eq(t.events, d.events);
			ck_assert_uint_eq(t.records, d.records);
			ck_assert_uint_eq(t.commands, d.commands);
			ck_assert_uint_eq(t.dispatch_ps, d.dispatch_ps);
			ck_assert_msg(isnan(t.max_abs_err) && isnan(t.max_rel_err),
				      "%s: timing mode reports an error figure", b->name);
			ck_assert_msg(isfinite(d.max_abs_err) && isfinite(d.max_rel_err),
				      "%s: data mode has no finite error figure", b->name);
			ck_assert_int_eq(t.data, 0);
			ck_assert_int_eq(d.data, 1);
			kb_result_clear(&t);
			kb_result_clear(&d);
			checked++;
		}
	}
	ck_assert_int_ge(checked, 3);
}
END_TEST

/* A bench in data mode under a scheduler policy, its tensors dumped. */
static char *policy_run(const char *name, const char *const *params, const char *policy,
			kb_result *res)
{
	kb_params *p = NULL;
	kb_topology *t = NULL;
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	char *dir = kbt_tmpdir();
	kb_error err;
	int rc = kb_params_create(&p, &err);

	ck_assert_ptr_nonnull(dir);
	for (size_t i = 0; !rc && params && params[i]; i++)
		rc = kb_params_set_assignment(p, params[i], &err);
	if (!rc)
		rc = kb_topology_default(&t, &err);
	if (!rc)
		rc = kb_topology_set(t, "pe.scheduler.policy", policy, &err);
	o.data = 1;
	o.threads = 1;
	o.dump_dir = dir;
	*res = (kb_result)KB_RESULT_INIT;
	if (!rc)
		rc = kb_bench_run(name, p, t, &o, res, &err);
	ck_assert_msg(rc == 0, "%s under %s: %s", name, policy, err.message);
	kb_params_destroy(p);
	kb_topology_destroy(t);
	return dir;
}

/*
 * pe.scheduler.policy = rw_aware only lets a command pass blocked ones it
 * shares no handle with, so every bench computes the same bytes under both
 * policies (every dumped tensor compared). (That the policy changes timing
 * is the pe suite's test_rw_aware.)
 */
START_TEST(policies_same_numbers)
{
	static const char *const names[] = { "q", "k", "v", "o", "a", "b", "c", "bias" };
	size_t n = kb_bench_count();
	int checked = 0;

	for (size_t i = 0; i < n; i++) {
		const kb_bench_info *b = kb_bench_get(i);

		if (!strcmp(b->name, "synthetic"))
			continue;
		for (int variant = 0; variant < 2; variant++) {
			const char *const *p = small_params(b->name, variant);
			kb_result rf = KB_RESULT_INIT, rw = KB_RESULT_INIT;
			char *df, *dw;
			int files = 0;

			if (variant && !p)
				continue;
			df = policy_run(b->name, p, "strict_fifo", &rf);
			dw = policy_run(b->name, p, "rw_aware", &rw);
			for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
				char pf[4096], pw[4096];
				size_t lf, lw;
				char *bf, *bw;

				snprintf(pf, sizeof(pf), "%s/%s.npy", df, names[k]);
				snprintf(pw, sizeof(pw), "%s/%s.npy", dw, names[k]);
				bf = kbt_slurp(pf, &lf);
				bw = kbt_slurp(pw, &lw);
				ck_assert_msg((bf == NULL) == (bw == NULL), "%s: %s.npy under one policy only",
					      b->name, names[k]);
				if (bf) {
					ck_assert_msg(lf == lw && memcmp(bf, bw, lf) == 0,
						      "%s (%d): %s.npy differs between strict_fifo and rw_aware",
						      b->name, variant, names[k]);
					files++;
				}
				free(bf);
				free(bw);
			}
			ck_assert_int_ge(files, 3);
			ck_assert(rf.max_abs_err == rw.max_abs_err);
			kb_result_clear(&rf);
			kb_result_clear(&rw);
			kbt_rm_dump(df);
			kbt_rm_dump(dw);
			checked++;
		}
	}
	ck_assert_int_ge(checked, 6);
}
END_TEST

START_TEST(synthetic_has_no_data_mode)
{
	const char *const p[] = { "events=1000", "lps=4", NULL };
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc = kbt_data_bench("synthetic", p, 0, 0, NULL, &res, &err);

	ck_assert_msg(rc == 0, "synthetic timing: %s", err.message);
	kb_result_clear(&res);
	err.message[0] = '\0';
	rc = kbt_data_bench("synthetic", p, 1, 0, NULL, &res, &err);
	ck_assert_int_ne(rc, 0);
	ck_assert_int_eq(err.code, rc);
	ck_assert_msg(strstr(err.message, "data") != NULL, "message '%s' does not name data mode",
		      err.message);
}
END_TEST

TCase *data_timing_tcase(void)
{
	TCase *tc = tcase_create("timing");

	tcase_add_test(tc, oplog_same_in_data_mode);
	tcase_add_test(tc, synthetic_has_no_data_mode);
	tcase_add_test(tc, policies_same_numbers);
	tcase_set_timeout(tc, 60);
	return tc;
}
