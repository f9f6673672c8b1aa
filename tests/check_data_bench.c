/*
 * Data mode, whole benches (check_data.c has the suite): gqa_decode_opt2 /
 * opt3 against a double-precision attention recomputed here from the dumped
 * q, k, v (plain loops), against the bench's own figures, and against each
 * other, single and multi PE; gemm with each epilogue, against the bench and
 * against the dump; --dump file shapes, dtypes and the .npy format.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "suites.h"
#include "testutil.h"
#include "datautil.h"

/* Attention per KV head in double, plain loops: o = softmax(q k^T / sqrt(d)) v. */
static void attention(const double *q, const double *k, const double *v, double *o, int64_t H,
		      int64_t G, int64_t S, int64_t D)
{
	double *w = malloc((size_t)S * sizeof(double)), sc = 1.0 / sqrt((double)D);

	ck_assert_ptr_nonnull(w);
	for (int64_t h = 0; h < H; h++)
		for (int64_t g = 0; g < G; g++) {
			const double *qr = q + (h * G + g) * D;
			double mx = -INFINITY, sum = 0;

			for (int64_t j = 0; j < S; j++) {
				const double *kr = k + (h * S + j) * D;
				double dot = 0;

				for (int64_t c = 0; c < D; c++)
					dot += qr[c] * kr[c];
				w[j] = dot * sc;
				mx = w[j] > mx ? w[j] : mx;
			}
			for (int64_t j = 0; j < S; j++) {
				w[j] = exp(w[j] - mx);
				sum += w[j];
			}
			for (int64_t c = 0; c < D; c++) {
				double acc = 0;

				for (int64_t j = 0; j < S; j++)
					acc += w[j] * v[(h * S + j) * D + c];
				o[(h * G + g) * D + c] = acc / sum;
			}
		}
	free(w);
}

typedef struct dcase {
	const char *dtype;
	double std;
	int S, H, P, C;
} dcase;

#define DG 4
#define DD 32

/*
 * Tolerances, relative to max |o| (norm-wise: single outputs can be near 0):
 * - fp32: every stage is fp32 (S, P, m, l, O; exp in double rounded once);
 *   S = q.k / sqrt(d) with |S| up to ~60 at input_std 4 carries ~1e-6
 *   absolute error, which becomes ~1e-6 relative in P. 1e-5 leaves a margin
 *   of ~5x over the measured ~1.3e-6 (ragged, std 4).
 * - fp16: q, k, v are stored in fp16 and the dump holds those same rounded
 *   values, so the reference sees the kernel's inputs exactly. But S and P
 *   are stored in fp16 between stages (2^-11 ~ 4.9e-4 relative each); at
 *   input_std 4, |S| reaches ~60 where an fp16 ulp is 1/32, an error of up
 *   to ~1.6e-2 in exp(S - m) relative; o is an average of those weights
 *   over v, so the error relative to max |o| is a few 1e-3 (measured
 *   ~2.2e-3). 1e-2 relative. High contrast (std 4) must pass: K is read
 *   transposed (KB_TL_TRANS_B), not reshaped, so the attention is exact.
 * opt2 vs opt3: the same arithmetic in a different grouping of commands;
 * fp32 1e-6 relative, fp16 1e-2.
 */
static double decode_tol(const char *dtype)
{
	return !strcmp(dtype, "fp32") ? 1e-5 : 1e-2;
}

/* Runs one decode bench with a dump; returns the dumped o (H,G,D). */
static double *decode_run(const char *name, const dcase *c, int threads, double *bench_rel,
			  double *own_rel, double *own_abs)
{
	char *dir = kbt_tmpdir(), ps[9][48];
	const char *params[10];
	kb_dtype dt = !strcmp(c->dtype, "fp32") ? KB_FP32 : KB_FP16;
	int64_t sq[3] = { c->H, DG, DD }, skv[3] = { c->H, c->S, DD };
	size_t no = (size_t)(c->H * DG * DD);
	double *q, *k, *v, *o, *want;
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc;

	ck_assert_ptr_nonnull(dir);
	snprintf(ps[0], 48, "G=%d", DG);
	snprintf(ps[1], 48, "d=%d", DD);
	snprintf(ps[2], 48, "S_kv=%d", c->S);
	snprintf(ps[3], 48, "dtype=%s", c->dtype);
	snprintf(ps[4], 48, "input_std=%g", c->std);
	snprintf(ps[5], 48, "H_kv=%d", c->H);
	snprintf(ps[6], 48, "P=%d", c->P);
	snprintf(ps[7], 48, "C=%d", c->C);
	snprintf(ps[8], 48, "TILE=64");
	for (int i = 0; i < 9; i++)
		params[i] = ps[i];
	params[9] = NULL;
	rc = kbt_data_bench(name, params, 1, threads, dir, &res, &err);
	ck_assert_msg(rc == 0, "%s %s std %g S_kv %d H_kv %d P %d C %d: %s", name, c->dtype, c->std,
		      c->S, c->H, c->P, c->C, err.message);
	ck_assert_uint_eq(res.pes, (unsigned)(c->H * c->P));
	*bench_rel = res.max_rel_err;
	kb_result_clear(&res);
	q = kbt_npy_read(dir, "q", dt, 3, sq);
	k = kbt_npy_read(dir, "k", dt, 3, skv);
	v = kbt_npy_read(dir, "v", dt, 3, skv);
	o = kbt_npy_read(dir, "o", dt, 3, sq);
	want = malloc(no * sizeof(double));
	ck_assert_ptr_nonnull(want);
	attention(q, k, v, want, c->H, DG, c->S, DD);
	*own_rel = kbt_normwise_rel(o, want, no, own_abs);
	free(q);
	free(k);
	free(v);
	free(want);
	kbt_rm_dump(dir);
	return o;
}

static void decode_check(const dcase *c)
{
	double *o2, *o3, r2, r3, b2, b3, a2, a3, x, tol = decode_tol(c->dtype);
	size_t no = (size_t)(c->H * DG * DD);

	o2 = decode_run("gqa_decode_opt2", c, 0, &b2, &r2, &a2);
	o3 = decode_run("gqa_decode_opt3", c, 0, &b3, &r3, &a3);
	ck_assert_msg(b2 <= tol && b3 <= tol,
		      "%s std %g S_kv %d (%d,%d,%d): bench max_rel_err opt2 %.3g opt3 %.3g > %.0e",
		      c->dtype, c->std, c->S, c->H, c->P, c->C, b2, b3, tol);
	ck_assert_msg(r2 <= tol, "%s std %g S_kv %d (%d,%d,%d): opt2 vs own reference: abs %.3g rel %.3g > %.0e",
		      c->dtype, c->std, c->S, c->H, c->P, c->C, a2, r2, tol);
	ck_assert_msg(r3 <= tol, "%s std %g S_kv %d (%d,%d,%d): opt3 vs own reference: abs %.3g rel %.3g > %.0e",
		      c->dtype, c->std, c->S, c->H, c->P, c->C, a3, r3, tol);
	x = kbt_normwise_rel(o2, o3, no, NULL);
	ck_assert_msg(x <= (!strcmp(c->dtype, "fp32") ? 1e-6 : 1e-2),
		      "%s std %g S_kv %d (%d,%d,%d): opt2 vs opt3 differ by %.3g relative", c->dtype,
		      c->std, c->S, c->H, c->P, c->C, x);
	if (getenv("KB_TEST_VERBOSE"))
		fprintf(stderr, "decode %s std %g S %d (%d,%d,%d): bench %.3g/%.3g own %.3g/%.3g o2-o3 %.3g\n",
			c->dtype, c->std, c->S, c->H, c->P, c->C, b2, b3, r2, r3, x);
	free(o2);
	free(o3);
}

static const dcase dcases[] = {
	{ "fp32", 1, 256, 1, 1, 1 }, { "fp32", 1, 200, 1, 1, 1 },
	{ "fp32", 4, 256, 1, 1, 1 }, { "fp32", 4, 200, 1, 1, 1 },
	{ "fp16", 1, 256, 1, 1, 1 }, { "fp16", 1, 200, 1, 1, 1 },
	{ "fp16", 4, 256, 1, 1, 1 }, { "fp16", 4, 200, 1, 1, 1 },
};

START_TEST(decode_reference)
{
	decode_check(&dcases[_i]);
}
END_TEST

/* Multi-PE: split-KV partials merged through PE_IPCQ. input_std 4 so the
 * partials' maxima differ and the merge's rescaling matters. S_kv 200 with
 * P 4: 4 tiles, the last ragged (8 rows); 300 with P 4: 5 tiles over 4 PEs,
 * one PE takes two, the last ragged. */
static const dcase pcases[] = {
	{ "fp32", 4, 256, 1, 1, 1 }, { "fp32", 4, 256, 1, 4, 1 }, { "fp32", 4, 256, 2, 2, 2 },
	{ "fp32", 4, 256, 8, 1, 1 }, { "fp32", 4, 200, 1, 4, 1 }, { "fp32", 4, 300, 2, 4, 2 },
	{ "fp16", 4, 200, 2, 4, 2 },
};

START_TEST(decode_multi_pe)
{
	decode_check(&pcases[_i]);
}
END_TEST

/* Data results do not depend on the thread count. */
START_TEST(decode_threads_same_bits)
{
	dcase c = { "fp32", 4, 200, 2, 2, 2 };
	double *o1, *o4, b, r, a;
	size_t no = (size_t)(c.H * DG * DD);

	o1 = decode_run("gqa_decode_opt2", &c, 1, &b, &r, &a);
	o4 = decode_run("gqa_decode_opt2", &c, 4, &b, &r, &a);
	ck_assert_msg(memcmp(o1, o4, no * sizeof(double)) == 0, "o differs between threads 1 and 4");
	free(o1);
	free(o4);
}
END_TEST

/* gemm: M 72 (tile_m 64: a ragged second row of tiles), K 100 (two K tiles,
 * the last ragged), N 140 (tile_n 128: ragged). */
#define GM 72
#define GK 100
#define GN 140

static const char *const gemm_epi[] = { "none", "bias", "relu", "add" };

/*
 * Tolerances, relative to max |c|: fp32 accumulates 100 fp32 products in
 * fp32 (measured ~5e-7): 1e-5. fp16: inputs are fp16 (the dump holds them
 * exactly), accumulation is fp32, and c is rounded once to fp16 (2^-11 ~
 * 4.9e-4 of |c| at most): 1e-3.
 */
START_TEST(gemm_epilogues)
{
	const char *epi = gemm_epi[_i % 4], *dtn = _i < 4 ? "fp32" : "fp16";
	kb_dtype dt = _i < 4 ? KB_FP32 : KB_FP16;
	double tol = _i < 4 ? 1e-5 : 1e-3, rel, ab;
	char *dir = kbt_tmpdir(), pe[48], pd[48];
	const char *params[] = { "M=72", "K=100", "N=140", pe, pd, NULL };
	int64_t sa[2] = { GM, GK }, sb[2] = { GK, GN }, sc[2] = { GM, GN }, sn[1] = { GN };
	double *a, *b, *c, *x = NULL, *want = malloc(GM * GN * sizeof(double));
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc, relu_zeroed = 0;

	snprintf(pe, sizeof(pe), "epilogue=%s", epi);
	snprintf(pd, sizeof(pd), "dtype=%s", dtn);
	rc = kbt_data_bench("gemm", params, 1, 0, dir, &res, &err);
	ck_assert_msg(rc == 0, "gemm %s %s: %s", epi, dtn, err.message);
	ck_assert_msg(res.max_rel_err <= tol, "gemm %s %s: bench max_rel_err %.3g > %.0e", epi, dtn,
		      res.max_rel_err, tol);
	kb_result_clear(&res);
	a = kbt_npy_read(dir, "a", dt, 2, sa);
	b = kbt_npy_read(dir, "b", dt, 2, sb);
	c = kbt_npy_read(dir, "c", dt, 2, sc);
	if (!strcmp(epi, "bias"))
		x = kbt_npy_read(dir, "bias", dt, 1, sn);
	else if (!strcmp(epi, "add"))
		x = kbt_npy_read(dir, "d", dt, 2, sc);
	for (int i = 0; i < GM; i++)
		for (int j = 0; j < GN; j++) {
			double acc = 0;

			for (int p = 0; p < GK; p++)
				acc += a[i * GK + p] * b[p * GN + j];
			if (!strcmp(epi, "bias"))
				acc += x[j];
			else if (!strcmp(epi, "add"))
				acc += x[i * GN + j];
			else if (!strcmp(epi, "relu") && acc < 0) {
				acc = 0;
				relu_zeroed++;
				ck_assert_msg(c[i * GN + j] == 0, "relu: c[%d][%d] = %g", i, j,
					      c[i * GN + j]);
			}
			want[i * GN + j] = acc;
		}
	rel = kbt_normwise_rel(c, want, GM * GN, &ab);
	ck_assert_msg(rel <= tol, "gemm %s %s vs dump: abs %.3g rel %.3g > %.0e", epi, dtn, ab, rel,
		      tol);
	if (!strcmp(epi, "relu"))
		ck_assert_int_gt(relu_zeroed, 0);
	if (getenv("KB_TEST_VERBOSE"))
		fprintf(stderr, "gemm %s %s: rel %.3g\n", epi, dtn, rel);
	free(a);
	free(b);
	free(c);
	free(x);
	free(want);
	kbt_rm_dump(dir);
}
END_TEST


/* ------------------------------------------------------------------ */
/* --dump files                                                        */
/* ------------------------------------------------------------------ */

/* The .npy header: magic, version 1.0, dict with descr, fortran_order
 * False and the shape, padded so the data starts at a multiple of 64. */
static void npy_header(const char *path, const char *descr, const char *shape)
{
	size_t len = 0;
	char *f = kbt_slurp(path, &len), *h;
	unsigned hl;

	ck_assert_msg(f != NULL, "cannot read %s", path);
	ck_assert_msg(len > 10 && !memcmp(f, "\x93NUMPY\x01\x00", 8), "%s: bad magic/version", path);
	hl = (unsigned)(unsigned char)f[8] | (unsigned)(unsigned char)f[9] << 8;
	ck_assert_msg((10 + hl) % 64 == 0, "%s: data offset %u is not a multiple of 64", path, 10 + hl);
	ck_assert(10 + hl <= len && f[10 + hl - 1] == '\n');
	h = strndup(f + 10, hl);
	ck_assert_msg(strstr(h, descr) && strstr(h, "'fortran_order': False") && strstr(h, shape),
		      "%s: header %s lacks %s or %s", path, h, descr, shape);
	free(h);
	free(f);
}

START_TEST(dump_decode_files)
{
	char *dir = kbt_tmpdir(), path[4096];
	const char *params[] = { "G=4", "d=32", "S_kv=128", "H_kv=2", "P=2", "C=1", "dtype=fp16", NULL };
	int64_t sq[3] = { 2, 4, 32 }, skv[3] = { 2, 128, 32 };
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc = kbt_data_bench("gqa_decode_opt3", params, 1, 0, dir, &res, &err);

	ck_assert_msg(rc == 0, "%s", err.message);
	kb_result_clear(&res);
	free(kbt_npy_read(dir, "q", KB_FP16, 3, sq));
	free(kbt_npy_read(dir, "k", KB_FP16, 3, skv));
	free(kbt_npy_read(dir, "v", KB_FP16, 3, skv));
	free(kbt_npy_read(dir, "o", KB_FP16, 3, sq));
	snprintf(path, sizeof(path), "%s/k.npy", dir);
	npy_header(path, "'descr': '<f2'", "(2, 128, 32)");
	snprintf(path, sizeof(path), "%s/o.npy", dir);
	npy_header(path, "'descr': '<f2'", "(2, 4, 32)");
	kbt_rm_dump(dir);
}
END_TEST

START_TEST(dump_gemm_files)
{
	char *dir = kbt_tmpdir(), path[4096];
	const char *params[] = { "M=24", "K=40", "N=56", "dtype=fp32", NULL };
	int64_t sa[2] = { 24, 40 }, sb[2] = { 40, 56 }, sc[2] = { 24, 56 };
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc = kbt_data_bench("gemm", params, 1, 0, dir, &res, &err);

	ck_assert_msg(rc == 0, "%s", err.message);
	kb_result_clear(&res);
	free(kbt_npy_read(dir, "a", KB_FP32, 2, sa));
	free(kbt_npy_read(dir, "b", KB_FP32, 2, sb));
	free(kbt_npy_read(dir, "c", KB_FP32, 2, sc));
	snprintf(path, sizeof(path), "%s/a.npy", dir);
	npy_header(path, "'descr': '<f4'", "(24, 40)");
	kbt_rm_dump(dir);
}
END_TEST

/* Without data mode nothing is dumped (the directory stays empty). */
START_TEST(dump_needs_data_mode)
{
	char *dir = kbt_tmpdir(), path[4096];
	const char *params[] = { "M=24", "K=40", "N=56", NULL };
	kb_result res = KB_RESULT_INIT;
	kb_error err;
	int rc = kbt_data_bench("gemm", params, 0, 0, dir, &res, &err);

	if (rc == 0)
		kb_result_clear(&res);
	snprintf(path, sizeof(path), "%s/c.npy", dir);
	ck_assert_msg(access(path, F_OK) != 0, "timing mode wrote %s", path);
	kbt_rm_dump(dir);
}
END_TEST

TCase *data_decode_tcase(void)
{
	TCase *tc = tcase_create("decode");

	tcase_add_loop_test(tc, decode_reference, 0, (int)(sizeof(dcases) / sizeof(dcases[0])));
	tcase_add_loop_test(tc, decode_multi_pe, 0, (int)(sizeof(pcases) / sizeof(pcases[0])));
	tcase_add_test(tc, decode_threads_same_bits);
	tcase_set_timeout(tc, 60);
	return tc;
}

TCase *data_gemm_tcase(void)
{
	TCase *tc = tcase_create("gemm");

	tcase_add_loop_test(tc, gemm_epilogues, 0, 8);
	tcase_set_timeout(tc, 30);
	return tc;
}

TCase *data_dump_tcase(void)
{
	TCase *tc = tcase_create("dump");

	tcase_add_test(tc, dump_decode_files);
	tcase_add_test(tc, dump_gemm_files);
	tcase_add_test(tc, dump_needs_data_mode);
	return tc;
}
