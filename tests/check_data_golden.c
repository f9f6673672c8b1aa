/*
 * Golden data-mode outputs (issue 13: data-mode speed work must leave every
 * output byte alone). The op_log of a data-mode run is the timing op_log,
 * and the other data tests compare results with tolerances or with each
 * other, so none of them sees a change in rounding, summation order or a
 * NaN payload. These cases hash the dumped output tensor (.npy bytes) of
 * the decode and gemm benches and compare it with a hash recorded at
 * fe57170, before the numerics were touched for speed: fp32 and fp16,
 * ragged last tiles, several PEs merging through IPCQ, every gemm
 * epilogue. A hash that changes is a bug in the change that moved it
 * (ARCHITECTURE.md §7 and §8), never a golden to regenerate.
 * A tcase of the data suite.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"
#include "datautil.h"
#include "suites.h"
#include "testutil.h"

typedef struct dgold {
	const char *bench, *out; /* bench, dumped output tensor */
	const char *params[8];
	const char *sha256;
} dgold;

static const dgold golds[] = {
	{ "gqa_decode_opt2",
	  "o",
	  { "dtype=fp32", "S_kv=200", "input_std=4", "TILE=64", NULL },
	  "a7947dd0260c6dfe6bb944c6ab901ae485247b5db422e91062bfdea3ce0e6845" },
	{ "gqa_decode_opt3",
	  "o",
	  { "dtype=fp32", "S_kv=200", "input_std=4", "TILE=64", NULL },
	  "a7947dd0260c6dfe6bb944c6ab901ae485247b5db422e91062bfdea3ce0e6845" },
	{ "gqa_decode_opt2",
	  "o",
	  { "dtype=fp16", "S_kv=200", "input_std=4", "TILE=64", NULL },
	  "2e385be107123c5a83fc86ec4807e5e7b63c7dc1d1640085aa6027047aad052c" },
	{ "gqa_decode_opt3",
	  "o",
	  { "dtype=fp16", "S_kv=200", "input_std=4", "TILE=64", NULL },
	  "2e385be107123c5a83fc86ec4807e5e7b63c7dc1d1640085aa6027047aad052c" },
	{ "gqa_decode_opt2",
	  "o",
	  { "dtype=fp32", "S_kv=300", "input_std=4", "TILE=64", "H_kv=2", "P=4", "C=2", NULL },
	  "79b6311e61e59a9903219b7a890c87b8d7b396b46215aa0939693cc2bab9c630" },
	{ "gqa_decode_opt3",
	  "o",
	  { "dtype=fp16", "S_kv=300", "input_std=4", "TILE=64", "H_kv=2", "P=4", "C=2", NULL },
	  "3ab22ff76a9a999eb91bcf95af8d939f4d5138d381af2b993d8ba5396060e1bb" },
	{ "gemm",
	  "c",
	  { "M=72", "K=100", "N=140", "epilogue=none", "dtype=fp32", NULL },
	  "0a790ffc3daaef5029564b4b128b9ae0a62ea772b69d2563f3f14b0006d9fa4f" },
	{ "gemm",
	  "c",
	  { "M=72", "K=100", "N=140", "epilogue=bias", "dtype=fp32", NULL },
	  "b8d4155a997ed566c4a9c6ef42685fac16b7d038cd92f45a7f9022286a9cf488" },
	{ "gemm",
	  "c",
	  { "M=72", "K=100", "N=140", "epilogue=relu", "dtype=fp16", NULL },
	  "c2f10d4f61e9c209f20963a88de1cf7a6838d3858fcb5e66d467ead73e4e0413" },
	{ "gemm",
	  "c",
	  { "M=72", "K=100", "N=140", "epilogue=add", "dtype=fp16", NULL },
	  "fffaf935638bb406b65bdcd226b9c498f35e15229c2f72d6ea195a21f618610d" },
};

static void sha256_file(const char *path, char hex[65])
{
	size_t len = 0;
	char *bytes = kbt_slurp(path, &len);
	kb_sha256 s;

	ck_assert_msg(bytes != NULL, "cannot read %s", path);
	kb__sha256_init(&s);
	kb__sha256_update(&s, bytes, len);
	kb__sha256_hex(&s, hex);
	free(bytes);
}

START_TEST(data_golden_output)
{
	const dgold *g = &golds[_i];
	char *dir = kbt_tmpdir(), path[4096], hex[65];
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc;

	ck_assert_ptr_nonnull(dir);
	rc = kbt_data_bench(g->bench, g->params, 1, 1, dir, &res, &err);
	ck_assert_msg(rc == 0, "%s golden %d: %s", g->bench, _i, err.message);
	kb_result_clear(&res);
	snprintf(path, sizeof(path), "%s/%s.npy", dir, g->out);
	sha256_file(path, hex);
	kbt_rm_dump(dir);
	ck_assert_msg(strcmp(hex, g->sha256) == 0,
		      "%s golden %d: %s.npy sha256 %s, want %s (see the comment at the top of "
		      "tests/check_data_golden.c)",
		      g->bench, _i, g->out, hex, g->sha256);
}
END_TEST

TCase *data_golden_tcase(void)
{
	TCase *tc = tcase_create("golden");

	tcase_add_loop_test(tc, data_golden_output, 0, (int)(sizeof(golds) / sizeof(golds[0])));
	tcase_set_timeout(tc, 60);
	return tc;
}
