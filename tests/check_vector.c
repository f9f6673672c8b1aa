/*
 * The vectorised numerics kernels, both the library's and the baseline
 * build (vec_baseline.c), against straightforward scalar references, bit
 * for bit (memcmp, so -0, NaN payloads and infinities count): the GEMM
 * tile (both B layouts, both packings of a transposed B, every tail of the
 * micro-tile, p chunks of the panels), the block conversions to and
 * from fp16/bf16 (every 16-bit pattern, every fp32 rounding boundary) and
 * exp_diff's vector rows (its own e^x with a fallback to exp()).
 * A tcase of the numerics suite.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fp16.h"
#include "bench/rng.h"
#include "num/kernels.h"
#include "suites.h"

/* The kernels under test: the library's (the clone this machine's loader
 * picks, AVX2 where there is one, and for fp16 the F16C variant where
 * cpuid has it) and the baseline build (vec_baseline.c). */
typedef struct impl {
	const char *name;
	void (*gemm)(float *, const float *, const float *, int64_t, int64_t, int64_t, int64_t,
		     int64_t, int64_t, int);
	void (*load)(float *, const void *, kb_dtype, size_t);
	void (*store)(void *, kb_dtype, const float *, size_t);
	int (*math)(kb_math_kind, const float *const *, const kb_nshape *, int, float *,
		    const kb_nshape *, const kb_math_extra *, kb_error *);
} impl;

void kbt_base_gemm_tile(float *acc, const float *a, const float *b, int64_t m, int64_t k,
			int64_t n, int64_t lda, int64_t ldb, int64_t ldacc, int trans_b);
void kbt_base_load_f32(float *dst, const void *src, kb_dtype dt, size_t n);
void kbt_base_store_f32(void *dst, kb_dtype dt, const float *src, size_t n);
int kbt_base_math_apply(kb_math_kind kind, const float *const *in, const kb_nshape *in_shapes,
			int n_in, float *out, const kb_nshape *out_shape, const kb_math_extra *ex,
			kb_error *err);

static const impl impls[] = {
	{ "library", kb__gemm_tile, kb__load_f32, kb__store_f32, kb__math_apply },
	{ "baseline", kbt_base_gemm_tile, kbt_base_load_f32, kbt_base_store_f32, kbt_base_math_apply },
};
#define N_IMPLS ((int)(sizeof(impls) / sizeof(impls[0])))

static float bits_f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * Normal values with, now and then (special 1), a value that is not: -0,
 * +-inf (inf * 0 and inf - inf make NaNs inside the tile), subnormals, huge
 * values (products overflow), and with special 2 also NaNs of two payloads.
 */
static void fill(kb_rng *r, float *x, size_t n, int special)
{
	static const uint32_t odd[] = { 0x80000000u, 0x7f800000u, 0xff800000u, 0x00000003u,
					0x80400000u, 0x7f000000u, 0x7fc00001u, 0xffd00000u };
	uint64_t kinds = special == 2 ? 8 : 6;

	for (size_t i = 0; i < n; i++) {
		x[i] = (float)kb__rng_normal(r);
		if (special && kb__rng_below(r, 50) == 0)
			x[i] = bits_f(odd[kb__rng_below(r, kinds)]);
	}
}

static const impl *cur; /* the impl of the running test */

static void gemm_case(kb_rng *r, int64_t m, int64_t k, int64_t n, int trans, int special)
{
	int64_t lda = k + (int64_t)kb__rng_below(r, 3), ldacc = n + (int64_t)kb__rng_below(r, 3);
	int64_t ldb = (trans ? k : n) + (int64_t)kb__rng_below(r, 3);
	size_t na = (size_t)(m * lda), nb = (size_t)((trans ? n : k) * ldb), nc = (size_t)(m * ldacc);
	float *a = malloc(na * sizeof(float)), *b = malloc(nb * sizeof(float));
	float *c1 = malloc(nc * sizeof(float)), *c2 = malloc(nc * sizeof(float));

	ck_assert(a && b && c1 && c2);
	fill(r, a, na, special);
	fill(r, b, nb, special);
	fill(r, c1, nc, special);
	memcpy(c2, c1, nc * sizeof(float));
	cur->gemm(c1, a, b, m, k, n, lda, ldb, ldacc, trans);
	kb__gemm_tile_scalar(c2, a, b, m, k, n, lda, ldb, ldacc, trans);
	for (size_t i = 0; i < nc; i++)
		if (memcmp(&c1[i], &c2[i], sizeof(float)))
			ck_abort_msg("%s gemm m=%lld k=%lld n=%lld trans=%d: element %zu is %a, scalar %a",
				     cur->name, (long long)m, (long long)k, (long long)n, trans, i, c1[i],
				     c2[i]);
	free(a);
	free(b);
	free(c1);
	free(c2);
}

START_TEST(test_gemm_vector_vs_scalar)
{
	kb_rng r;

	cur = &impls[_i];
	kb__rng_seed(&r, 13);
	/* The decode shapes (Q.K^T at d = 64 and 128, P.V), then every m tail,
	 * n tails around the 8-column micro-tile, k across the 128-deep panel. */
	gemm_case(&r, 8, 64, 64, 1, 0);
	gemm_case(&r, 8, 128, 64, 1, 0);
	gemm_case(&r, 8, 260, 64, 1, 1);
	gemm_case(&r, 8, 64, 128, 0, 0);
	for (int64_t m = 1; m <= 9; m++)
		for (int trans = 0; trans < 2; trans++) {
			gemm_case(&r, m, 1, 8, trans, 0);
			gemm_case(&r, m, 65, 17, trans, 1);
			gemm_case(&r, m, 130, 7, trans, 1);
			gemm_case(&r, m, 64, 24, trans, 0);
		}
	/* Transposed b with m <= n packs a instead: whole and partial blocks
	 * of 8 rows, column tails around the 8- and 4-column micro-tiles, k
	 * chunks. */
	for (int64_t m = 8; m <= 25; m += 3) {
		gemm_case(&r, m, 64, 64, 1, 0);
		gemm_case(&r, m, 130, m + 3, 1, 1);
		gemm_case(&r, m, 7, 2 * m + 1, 1, 2);
	}
	/* Tiles larger than the saved-acc buffer check their inputs instead. */
	gemm_case(&r, 65, 10, 70, 0, 2);
	gemm_case(&r, 65, 10, 70, 1, 2);
	gemm_case(&r, 65, 10, 70, 1, 0);
	for (int i = 0; i < 60; i++)
		gemm_case(&r, 1 + (int64_t)kb__rng_below(&r, 13), 1 + (int64_t)kb__rng_below(&r, 200),
			  1 + (int64_t)kb__rng_below(&r, 40), (int)kb__rng_below(&r, 2), i % 3);
}
END_TEST

/* Every 16-bit pattern, shuffled so that blocks mix classes, at every
 * offset modulo the block of 8 (tails and unaligned sources). */
START_TEST(test_load_blocks_vs_scalar)
{
	enum { N = 1 << 16 };
	uint16_t *h = malloc((N + 8) * sizeof(*h));
	float *f = malloc((N + 8) * sizeof(*f));

	ck_assert(h && f);
	cur = &impls[_i];
	for (uint32_t i = 0; i < N + 8; i++)
		h[i] = (uint16_t)(i * 40503u);
	for (int off = 0; off < 8; off++) {
		cur->load(f, h + off, KB_FP16, N - (size_t)off);
		for (uint32_t i = 0; i + (uint32_t)off < N; i++) {
			float w = kb__f16_to_f32(h[off + i]);

			if (memcmp(&w, &f[i], sizeof(w)))
				ck_abort_msg("%s fp16 0x%04x: %a, scalar %a", cur->name, h[off + i],
					     f[i], w);
		}
		cur->load(f, h + off, KB_BF16, N - (size_t)off);
		for (uint32_t i = 0; i + (uint32_t)off < N; i++) {
			float w = kb__bf16_to_f32(h[off + i]);

			if (memcmp(&w, &f[i], sizeof(w)))
				ck_abort_msg("%s bf16 0x%04x: %a, scalar %a", cur->name, h[off + i],
					     f[i], w);
		}
	}
	free(h);
	free(f);
}
END_TEST

/* fp32 patterns: a stride through all 2^32, and every pattern within 2^12
 * of each rounding boundary and of each fp16 value's midpoints. */
static size_t store_patterns(uint32_t *u)
{
	static const uint32_t edge[] = { 0x33000000u, 0x38800000u, 0x477fe000u, 0x477ff000u,
					 0x7f800000u, 0x00000000u, 0x3f800000u };
	size_t n = 0;

	for (uint64_t x = 0; x < (UINT64_C(1) << 32); x += 65521)
		u[n++] = (uint32_t)x;
	for (size_t e = 0; e < sizeof(edge) / sizeof(edge[0]); e++)
		for (uint32_t d = 0; d < 8192; d++)
			u[n++] = (edge[e] - 4096 + d) ^ (d & 1 ? 0x80000000u : 0);
	for (uint32_t h = 0; h < 0x8000; h++)
		for (uint32_t d = 0; d < 4; d++)
			u[n++] = ((h << 13) + 0x1000 - 1 + d) ^ (h & 1 ? 0x80000000u : 0);
	return n;
}

START_TEST(test_store_blocks_vs_scalar)
{
	uint32_t *u = malloc(300000 * sizeof(*u));
	uint16_t *h = malloc(300000 * sizeof(*h));
	size_t n;

	ck_assert(u && h);
	cur = &impls[_i];
	n = store_patterns(u);
	ck_assert(n <= 300000);
	for (int off = 0; off < 8; off += 3) {
		cur->store(h, KB_FP16, (const float *)(u + off), n - (size_t)off);
		for (size_t i = 0; i + (size_t)off < n; i++)
			if (h[i] != kb__f32_to_f16(bits_f(u[off + i])))
				ck_abort_msg("%s fp16 of 0x%08x: 0x%04x", cur->name, u[off + i], h[i]);
		cur->store(h, KB_BF16, (const float *)(u + off), n - (size_t)off);
		for (size_t i = 0; i + (size_t)off < n; i++)
			if (h[i] != kb__f32_to_bf16(bits_f(u[off + i])))
				ck_abort_msg("%s bf16 of 0x%08x: 0x%04x", cur->name, u[off + i], h[i]);
	}
	free(u);
	free(h);
}
END_TEST

/*
 * exp_diff, whose vector rows compute e^x by their own polynomial and
 * fall back to exp() near a rounding boundary: (float)exp((double)a -
 * (double)b) for every element, bit for bit. Inputs: a stride through
 * all 2^32 patterns (b = 0 and b = 1.5), random pairs, the specials and
 * range edges, and pairs whose exact difference lies within a few double
 * ulps of log of an fp32 midpoint or of an fp32 (so the fallback runs);
 * all of fp32 with b = 0 was compared once by hand.
 */
static void exp_diff_check(const float *a, const float *b, size_t n, int stretch_b)
{
	kb_nshape sa = { 2, { 1, (int64_t)n } }, sb = { 2, { 1, stretch_b ? 1 : (int64_t)n } };
	const float *in[2] = { a, b };
	kb_nshape sh[2] = { sa, sb };
	float *o = malloc(n * sizeof(float));
	kb_error err;

	ck_assert(o);
	ck_assert_int_eq(cur->math(KB_MATH_EXP_DIFF, in, sh, 2, o, &sa, NULL, &err), 0);
	for (size_t i = 0; i < n; i++) {
		float bv = stretch_b ? b[0] : b[i], w = (float)exp((double)a[i] - (double)bv);

		if (memcmp(&w, &o[i], sizeof(w)))
			ck_abort_msg("%s exp_diff(%a, %a) = %a, (float)exp gives %a", cur->name, a[i], bv,
				     o[i], w);
	}
	free(o);
}

START_TEST(test_exp_diff_vs_scalar)
{
	enum { N = 70000 };
	static const float bs[] = { 0.0f, 1.5f };
	static const uint32_t odd[] = { 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
					0x80000000u, 0x00000000u, 0x00000001u };
	float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float));
	kb_rng r;
	size_t n = 0;

	ck_assert(a && b);
	cur = &impls[_i];
	kb__rng_seed(&r, 5);
	for (size_t k = 0; k < sizeof(bs) / sizeof(bs[0]); k++) {
		n = 0;
		for (uint64_t x = k; x < (UINT64_C(1) << 32); x += 65521)
			a[n++] = bits_f((uint32_t)x);
		exp_diff_check(a, &bs[k], n, 1);
	}
	/* random pairs, specials and the edges of the fast range in both places */
	for (n = 0; n < 20000; n++) {
		a[n] = (float)(kb__rng_normal(&r) * 30.0);
		b[n] = (float)(kb__rng_normal(&r) * 30.0);
		if (kb__rng_below(&r, 40) == 0)
			a[n] = bits_f(odd[kb__rng_below(&r, 7)]);
		if (kb__rng_below(&r, 40) == 0)
			b[n] = bits_f(odd[kb__rng_below(&r, 7)]);
		if (kb__rng_below(&r, 20) == 0) {
			static const float edge[] = { -87.0f, 88.0f, -87.5f, 88.5f, -104.0f, 89.0f };

			a[n] = nextafterf(edge[kb__rng_below(&r, 6)], (float)kb__rng_normal(&r) * 1e3f);
			b[n] = 0.0f;
		}
	}
	exp_diff_check(a, b, n, 0);
	/* near boundaries: x = log(t), t an fp32 (d = 0) or a midpoint between
	 * two (d = 2^28), written as a - b with b the part a cannot hold */
	for (n = 0; n + 1 < N; n++) {
		double t = exp(kb__rng_uniform(&r) * 170.0 - 85.0);
		float f = (float)t;
		double bound = (n & 1) ? (double)f : ((double)f + (double)nextafterf(f, INFINITY)) / 2;
		double x = log(bound) + (double)((int64_t)kb__rng_below(&r, 9) - 4) * 0x1p-52 * fabs(log(bound));

		a[n] = (float)x;
		b[n] = -(float)(x - (double)a[n]);
	}
	exp_diff_check(a, b, n, 0);
	free(a);
	free(b);
}
END_TEST

TCase *numerics_vector_tcase(void)
{
	TCase *tc = tcase_create("vector");

	tcase_add_loop_test(tc, test_gemm_vector_vs_scalar, 0, N_IMPLS);
	tcase_add_loop_test(tc, test_load_blocks_vs_scalar, 0, N_IMPLS);
	tcase_add_loop_test(tc, test_store_blocks_vs_scalar, 0, N_IMPLS);
	tcase_add_loop_test(tc, test_exp_diff_vs_scalar, 0, N_IMPLS);
	tcase_set_timeout(tc, 60); /* sanitizer builds on a shared machine */
	return tc;
}
