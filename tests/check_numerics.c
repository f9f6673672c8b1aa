/*
 * Tests of the data-mode numerics: fp16/bf16 conversions, every MATH kind,
 * the softmax_merge micro-op sequence against a double reference (the
 * online-softmax identity), the GEMM tile, .npy I/O and the generator.
 */
#include <check.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fp16.h"
#include "num/npy.h"
#include "bench/reference.h"
#include "bench/rng.h"
#include "num/kernels.h"
#include "suites.h"

#define SH0() ((kb_nshape){ 0, { 0 } })
#define SH1(a) ((kb_nshape){ 1, { (a) } })
#define SH2(a, b) ((kb_nshape){ 2, { (a), (b) } })
#define SH3(a, b, c) ((kb_nshape){ 3, { (a), (b), (c) } })
#define SH4(a, b, c, d) ((kb_nshape){ 4, { (a), (b), (c), (d) } })

static float bits_f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* ---- fp16 / bf16 --------------------------------------------------------- */

START_TEST(test_f16_known)
{
	ck_assert_uint_eq(kb__f32_to_f16(1.0f), 0x3C00);
	ck_assert_uint_eq(kb__f32_to_f16(-2.0f), 0xC000);
	ck_assert_uint_eq(kb__f32_to_f16(65504.0f), 0x7BFF);
	ck_assert_uint_eq(kb__f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
	ck_assert_uint_eq(kb__f32_to_f16(ldexpf(1.0f, -14)), 0x0400);
	ck_assert_uint_eq(kb__f32_to_f16(65520.0f), 0x7C00);
	ck_assert_uint_eq(kb__f32_to_f16(nextafterf(65520.0f, 0.0f)), 0x7BFF);
	ck_assert_uint_eq(kb__f32_to_f16(1e10f), 0x7C00);
	ck_assert_uint_eq(kb__f32_to_f16(-INFINITY), 0xFC00);
	ck_assert_uint_eq(kb__f32_to_f16(-0.0f), 0x8000);
	ck_assert_uint_eq(kb__f32_to_f16(0.1f), 0x2E66);
	ck_assert(kb__f16_to_f32(0x0001) == ldexpf(1.0f, -24));
	ck_assert(kb__f16_to_f32(0x03FF) == ldexpf(1023.0f, -24));
	ck_assert(kb__f16_to_f32(0x7BFF) == 65504.0f);
	ck_assert(kb__f16_to_f32(0x3555) == 0.333251953125f);
	ck_assert(isinf(kb__f16_to_f32(0xFC00)) && kb__f16_to_f32(0xFC00) < 0);
	ck_assert(signbit(kb__f16_to_f32(0x8000)) && kb__f16_to_f32(0x8000) == 0.0f);
}
END_TEST

START_TEST(test_f16_rne)
{
	/* Normal ties: 1 + 2^-11 lies between 0x3C00 (even) and 0x3C01. */
	ck_assert_uint_eq(kb__f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3C00);
	ck_assert_uint_eq(kb__f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3C02);
	ck_assert_uint_eq(kb__f32_to_f16(nextafterf(1.0f + ldexpf(1.0f, -11), 2.0f)), 0x3C01);
	/* Subnormal ties: 2^-25 -> 0, 3 * 2^-25 -> 2 * 2^-24, 1.5 * 2^-25 up. */
	ck_assert_uint_eq(kb__f32_to_f16(ldexpf(1.0f, -25)), 0x0000);
	ck_assert_uint_eq(kb__f32_to_f16(ldexpf(3.0f, -25)), 0x0002);
	ck_assert_uint_eq(kb__f32_to_f16(ldexpf(1.5f, -25)), 0x0001);
	ck_assert_uint_eq(kb__f32_to_f16(ldexpf(1.0f, -26)), 0x0000);
	ck_assert_uint_eq(kb__f32_to_f16(-ldexpf(1.0f, -30)), 0x8000);
	/* The largest subnormal plus half an ulp ties up into the smallest normal. */
	ck_assert_uint_eq(kb__f32_to_f16(ldexpf(1023.5f, -24)), 0x0400);
}
END_TEST

START_TEST(test_f16_nan_and_roundtrip)
{
	uint32_t h;
	float f;

	ck_assert_uint_eq(kb__f32_to_f16(NAN) & 0x7C00, 0x7C00);
	ck_assert_uint_ne(kb__f32_to_f16(NAN) & 0x03FF, 0);
	/* A NaN whose payload sits below fp16's fraction must not become inf. */
	ck_assert_uint_ne(kb__f32_to_f16(bits_f(0x7F800001)) & 0x03FF, 0);
	for (h = 0; h < 0x10000; h++) {
		f = kb__f16_to_f32((uint16_t)h);
		if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF))
			ck_assert_msg(isnan(f) && isnan(kb__f16_to_f32(kb__f32_to_f16(f))),
				      "NaN 0x%04x lost", (unsigned)h);
		else
			ck_assert_msg(kb__f32_to_f16(f) == h, "0x%04x -> %g -> 0x%04x",
				      (unsigned)h, f, kb__f32_to_f16(f));
	}
}
END_TEST

START_TEST(test_bf16)
{
	uint32_t h;
	float f;

	ck_assert_uint_eq(kb__f32_to_bf16(1.0f), 0x3F80);
	ck_assert_uint_eq(kb__f32_to_bf16(-3.0f), 0xC040);
	ck_assert_uint_eq(kb__f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3F80);     /* tie, even */
	ck_assert_uint_eq(kb__f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3F82); /* tie, even */
	ck_assert_uint_eq(kb__f32_to_bf16(bits_f(0x3F808001)), 0x3F81);
	ck_assert_uint_eq(kb__f32_to_bf16(3.4028235e38f), 0x7F80); /* overflow to inf */
	ck_assert_uint_eq(kb__f32_to_bf16(bits_f(0x00008000)), 0x0000); /* subnormal tie */
	ck_assert_uint_eq(kb__f32_to_bf16(bits_f(0x00018000)), 0x0002);
	ck_assert_uint_eq(kb__f32_to_bf16(INFINITY), 0x7F80);
	ck_assert(isnan(kb__bf16_to_f32(kb__f32_to_bf16(bits_f(0x7F800001)))));
	ck_assert(isnan(kb__bf16_to_f32(kb__f32_to_bf16(NAN))));
	ck_assert(kb__bf16_to_f32(0x4049) == 3.140625f);
	for (h = 0; h < 0x10000; h++) {
		f = kb__bf16_to_f32((uint16_t)h);
		if (isnan(f))
			ck_assert(isnan(kb__bf16_to_f32(kb__f32_to_bf16(f))));
		else
			ck_assert_msg(kb__f32_to_bf16(f) == h, "bf16 0x%04x", (unsigned)h);
	}
}
END_TEST

START_TEST(test_load_store)
{
	const float src[5] = { 1.0f, -0.5f, 65504.0f, 0.1f, 3.0e-8f };
	float back[5];
	uint16_t h[5];
	int i;

	kb__store_f32(h, KB_FP16, src, 5);
	ck_assert_uint_eq(h[0], 0x3C00);
	ck_assert_uint_eq(h[3], 0x2E66);
	kb__load_f32(back, h, KB_FP16, 5);
	for (i = 0; i < 5; i++)
		ck_assert(back[i] == kb__f16_to_f32(kb__f32_to_f16(src[i])));
	kb__store_f32(h, KB_BF16, src, 5);
	kb__load_f32(back, h, KB_BF16, 5);
	ck_assert(back[1] == -0.5f);
	ck_assert_float_eq_tol(back[3], 0.1f, 1e-3f);
	kb__store_f32(back, KB_FP32, src, 5);
	ck_assert(memcmp(back, src, sizeof(src)) == 0);
}
END_TEST

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/*
 * What __builtin_cpu_supports answers (and so which clone each resolver
 * picks, base/simd.h) against CPUID's own bits: base/cpu_model.c fills
 * GCC's feature words from glibc's answer, at positions of GCC's ABI, and a
 * wrong position would report a feature as absent or, worse, present.
 * GCC's only: Clang (14) keeps compiler-rt's probe and takes neither
 * "f16c" nor "sha" here.
 */
START_TEST(test_cpu_features)
{
	unsigned a, b, c1, d, c7 = 0, b7 = 0, xlo = 0, xhi = 0;
	int ymm;

	ck_assert(__get_cpuid(1, &a, &b, &c1, &d));
	(void)__get_cpuid_count(7, 0, &a, &b7, &c7, &d);
	if (c1 & (1u << 27)) /* OSXSAVE: XCR0 readable */
		__asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
	ymm = (c1 & (1u << 28)) && (xlo & 6) == 6; /* AVX, and the OS saves its state */
	__builtin_cpu_init();
	ck_assert_int_eq(!!__builtin_cpu_supports("ssse3"), !!(c1 & (1u << 9)));
	ck_assert_int_eq(!!__builtin_cpu_supports("sse4.1"), !!(c1 & (1u << 19)));
	ck_assert_int_eq(!!__builtin_cpu_supports("avx"), ymm);
	ck_assert_int_eq(!!__builtin_cpu_supports("f16c"), ymm && (c1 & (1u << 29)));
	ck_assert_int_eq(!!__builtin_cpu_supports("avx2"), ymm && (b7 & (1u << 5)));
	ck_assert_int_eq(!!__builtin_cpu_supports("sha"), !!(b7 & (1u << 29)));
}
END_TEST
#endif

/* ---- MATH kinds ------------------------------------------------------------ */

static int apply(kb_math_kind kind, int n_in, const float *a, kb_nshape sa, const float *b,
		 kb_nshape sb, const float *c, kb_nshape sc, float *out, kb_nshape so,
		 kb_error *err)
{
	const float *in[3] = { a, b, c };
	const kb_nshape sh[3] = { sa, sb, sc };
	const kb_math_extra ex = { 0.5f };

	return kb__math_apply(kind, in, sh, n_in, out, &so, &ex, err);
}

#define APPLY1(k, a, sa, o, so) apply(k, 1, a, sa, NULL, SH0(), NULL, SH0(), o, so, &err)
#define APPLY2(k, a, sa, b, sb, o, so) apply(k, 2, a, sa, b, sb, NULL, SH0(), o, so, &err)

/* s (G=3, T=5) with distinct rows, used by most tests below. */
static const float S35[15] = { 0.5f, -1.0f, 2.0f, 0.25f, 1.5f,  -3.0f, -2.0f, -2.5f,
			       -4.0f, -1.0f, 7.0f, 7.0f, 0.0f, 6.5f, -7.0f };

START_TEST(test_names)
{
	kb_math_kind k;
	int i;

	for (i = 0; i < KB_MATH_KIND_COUNT; i++) {
		ck_assert_int_eq(kb__math_kind_parse(kb__math_kind_name((kb_math_kind)i), &k), 0);
		ck_assert_int_eq(k, i);
		ck_assert(kb__math_arity(k) >= 1 && kb__math_arity(k) <= 3);
	}
	ck_assert_str_eq(kb__math_kind_name(KB_MATH_EXP_DIFF), "exp_diff");
	ck_assert_str_eq(kb__math_kind_name(KB_MATH_MUL_BCAST), "mul_bcast");
	ck_assert_str_eq(kb__math_kind_name(KB_MATH_KIND_COUNT), "?");
	ck_assert_int_eq(kb__math_kind_parse("softmax", &k), KB_EINVAL);
	ck_assert_int_eq(kb__math_arity(KB_MATH_FMA), 3);
	ck_assert_int_eq(kb__math_arity(KB_MATH_RMAX), 1);
	ck_assert_int_eq(kb__math_arity(KB_MATH_EXP_DIFF), 2);
}
END_TEST

START_TEST(test_reductions)
{
	kb_error err;
	float out[3], want_max[3], want_sum[3];
	int r, j;

	for (r = 0; r < 3; r++) {
		want_max[r] = S35[r * 5];
		want_sum[r] = 0.0f;
		for (j = 0; j < 5; j++) {
			want_max[r] = S35[r * 5 + j] > want_max[r] ? S35[r * 5 + j] : want_max[r];
			want_sum[r] += S35[r * 5 + j];
		}
	}
	ck_assert_int_eq(APPLY1(KB_MATH_RMAX, S35, SH2(3, 5), out, SH2(3, 1)), 0);
	ck_assert(memcmp(out, want_max, sizeof(out)) == 0);
	ck_assert(out[0] == 2.0f && out[1] == -1.0f && out[2] == 7.0f);
	ck_assert_int_eq(APPLY1(KB_MATH_RMAX, S35, SH2(3, 5), out, SH1(3)), 0);
	ck_assert(memcmp(out, want_max, sizeof(out)) == 0);
	ck_assert_int_eq(APPLY1(KB_MATH_RSUM, S35, SH2(3, 5), out, SH2(3, 1)), 0);
	for (r = 0; r < 3; r++)
		ck_assert_float_eq(out[r], want_sum[r]);
	ck_assert_float_eq(out[0], 3.25f);
	ck_assert_int_eq(APPLY1(KB_MATH_RSUM, S35, SH1(5), out, SH0()), 0);
	ck_assert_float_eq(out[0], 3.25f);
	ck_assert_int_eq(APPLY1(KB_MATH_RMAX, S35, SH2(3, 5), out, SH2(5, 1)), KB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "rmax"));
	ck_assert_int_eq(APPLY1(KB_MATH_RSUM, S35, SH2(3, 5), out, SH2(3, 5)), KB_EINVAL);
}
END_TEST

START_TEST(test_exp_diff_bcast)
{
	const float m[3] = { 2.0f, -1.0f, 7.0f };
	float p[15];
	kb_error err;
	int r, j;

	ck_assert_int_eq(APPLY2(KB_MATH_EXP_DIFF, S35, SH2(3, 5), m, SH2(3, 1), p, SH2(3, 5)), 0);
	for (r = 0; r < 3; r++) {
		for (j = 0; j < 5; j++) {
			float want = expf(S35[r * 5 + j] - m[r]);

			ck_assert_float_eq_tol(p[r * 5 + j], want, 1e-6f * want);
		}
	}
	ck_assert_float_eq(p[2], 1.0f);
	ck_assert_float_eq(p[10], 1.0f);
	/* The same m as a leading-1 rank-3 (1,3,1) still broadcasts to (3,5). */
	ck_assert_int_eq(APPLY2(KB_MATH_EXP_DIFF, S35, SH2(3, 5), m, SH3(1, 3, 1), p, SH2(3, 5)),
			 0);
	ck_assert_float_eq(p[10], 1.0f);
}
END_TEST

START_TEST(test_shape_errors)
{
	float out[64];
	kb_error err;

	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(APPLY2(KB_MATH_EXP_DIFF, S35, SH2(3, 5), S35, SH2(3, 4), out, SH2(3, 5)),
			 KB_EINVAL);
	ck_assert_int_eq(err.code, KB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "exp_diff"));
	ck_assert_ptr_nonnull(strstr(err.message, "(3, 5)"));
	ck_assert_ptr_nonnull(strstr(err.message, "(3, 4)"));
	/* Broadcasting works but the result is not the out shape. */
	ck_assert_int_eq(APPLY2(KB_MATH_ADD, S35, SH2(3, 5), S35, SH2(3, 1), out, SH2(3, 1)),
			 KB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "add"));
	ck_assert_ptr_nonnull(strstr(err.message, "(3, 1)"));
	/* As in NumPy, (3) and (3,1) make (3,3), not (3,1). */
	ck_assert_int_eq(APPLY2(KB_MATH_MAX_ELEM, S35, SH1(3), S35, SH2(3, 1), out, SH2(3, 1)),
			 KB_EINVAL);
	ck_assert_int_eq(apply(KB_MATH_FMA, 2, S35, SH1(3), S35, SH1(3), NULL, SH0(), out,
			       SH1(3), &err), KB_EINVAL);
	ck_assert_int_eq(APPLY2(KB_MATH_ADD, S35, SH2(3, -1), S35, SH1(3), out, SH1(3)),
			 KB_EINVAL);
	ck_assert_int_eq(APPLY2(KB_MATH_BIAS, S35, SH2(3, 5), S35, SH2(3, 5), out, SH2(3, 5)),
			 KB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.message, "bias"));
	ck_assert_int_eq(kb__math_apply(KB_MATH_SCALE, (const float *const[]){ S35 },
					(const kb_nshape[]){ SH1(3) }, 1, out, &SH1(3), NULL,
					&err), KB_EINVAL);
}
END_TEST

START_TEST(test_fma_mul_copy)
{
	const float l[3] = { 1.0f, 2.0f, 3.0f }, corr[3] = { 0.5f, 0.25f, 2.0f };
	const float lloc[3] = { 10.0f, 20.0f, 30.0f }, row[5] = { 1, 2, 3, 4, 5 };
	float o[12], out[15], one = 1.0f;
	kb_error err;
	int i;

	ck_assert_int_eq(apply(KB_MATH_FMA, 3, l, SH2(3, 1), corr, SH2(3, 1), lloc, SH2(3, 1),
			       out, SH2(3, 1), &err), 0);
	ck_assert(out[0] == 10.5f && out[1] == 20.5f && out[2] == 36.0f);
	/* fma broadcasting three different shapes: (3,5) * (5) + (1). */
	ck_assert_int_eq(apply(KB_MATH_FMA, 3, S35, SH2(3, 5), row, SH1(5), &one, SH1(1),
			       out, SH2(3, 5), &err), 0);
	for (i = 0; i < 15; i++)
		ck_assert_float_eq(out[i], S35[i] * row[i % 5] + 1.0f);
	for (i = 0; i < 12; i++)
		o[i] = (float)i;
	/* In place, as softmax_merge does O *= corr. */
	ck_assert_int_eq(APPLY2(KB_MATH_MUL_BCAST, o, SH2(3, 4), corr, SH2(3, 1), o, SH2(3, 4)),
			 0);
	for (i = 0; i < 12; i++)
		ck_assert_float_eq(o[i], (float)i * corr[i / 4]);
	ck_assert_int_eq(APPLY1(KB_MATH_COPY, S35, SH2(3, 5), out, SH2(3, 5)), 0);
	ck_assert(memcmp(out, S35, sizeof(S35)) == 0);
}
END_TEST

START_TEST(test_binary_rank3_rank4)
{
	float a[6], b[8], out[48];
	kb_error err;
	int i, j, k, l;

	for (i = 0; i < 6; i++)
		a[i] = (float)(i + 1);
	for (i = 0; i < 8; i++)
		b[i] = (float)(10 * (i + 1));
	/* (2,1,3) op (4,1) -> (2,4,3). */
	ck_assert_int_eq(APPLY2(KB_MATH_ADD, a, SH3(2, 1, 3), b, SH2(4, 1), out, SH3(2, 4, 3)), 0);
	for (i = 0; i < 2; i++)
		for (j = 0; j < 4; j++)
			for (k = 0; k < 3; k++)
				ck_assert_float_eq(out[(i * 4 + j) * 3 + k], a[i * 3 + k] + b[j]);
	ck_assert_int_eq(APPLY2(KB_MATH_SUB, a, SH3(2, 1, 3), b, SH2(4, 1), out, SH3(2, 4, 3)), 0);
	ck_assert_float_eq(out[1 * 12 + 2 * 3 + 1], a[4] - b[2]);
	ck_assert_int_eq(APPLY2(KB_MATH_DIV, a, SH3(2, 1, 3), b, SH2(4, 1), out, SH3(2, 4, 3)), 0);
	ck_assert_float_eq(out[1 * 12 + 3 * 3 + 2], a[5] / b[3]);
	/* (2,1,3,1) op (1,2,1,4) -> (2,2,3,4). */
	ck_assert_int_eq(APPLY2(KB_MATH_MUL, a, SH4(2, 1, 3, 1), b, SH4(1, 2, 1, 4), out,
				SH4(2, 2, 3, 4)), 0);
	for (i = 0; i < 2; i++)
		for (j = 0; j < 2; j++)
			for (k = 0; k < 3; k++)
				for (l = 0; l < 4; l++)
					ck_assert_float_eq(out[((i * 2 + j) * 3 + k) * 4 + l],
							   a[i * 3 + k] * b[j * 4 + l]);
	/* Scalar (rank 0) operand. */
	ck_assert_int_eq(APPLY2(KB_MATH_MAX_ELEM, S35, SH2(3, 5), &b[0], SH0(), out, SH2(3, 5)),
			 0);
	for (i = 0; i < 15; i++)
		ck_assert_float_eq(out[i], S35[i] > 10.0f ? S35[i] : 10.0f);
}
END_TEST

START_TEST(test_bias_scale_unary)
{
	const float bias[5] = { 1, 2, 3, 4, 5 }, xs[4] = { -1.0f, 0.0f, 1.0f, 3.0f };
	float out[15];
	kb_error err;
	int i;

	ck_assert_int_eq(APPLY2(KB_MATH_BIAS, S35, SH2(3, 5), bias, SH1(5), out, SH2(3, 5)), 0);
	for (i = 0; i < 15; i++)
		ck_assert_float_eq(out[i], S35[i] + bias[i % 5]);
	ck_assert_int_eq(APPLY2(KB_MATH_BIAS, S35, SH2(3, 5), bias, SH2(1, 5), out, SH2(3, 5)), 0);
	ck_assert_float_eq(out[14], S35[14] + 5.0f);
	ck_assert_int_eq(APPLY1(KB_MATH_SCALE, S35, SH2(3, 5), out, SH2(3, 5)), 0);
	for (i = 0; i < 15; i++)
		ck_assert_float_eq(out[i], S35[i] * 0.5f);
	ck_assert_int_eq(APPLY1(KB_MATH_RELU, S35, SH2(3, 5), out, SH2(3, 5)), 0);
	for (i = 0; i < 15; i++)
		ck_assert_float_eq(out[i], S35[i] > 0 ? S35[i] : 0.0f);
	ck_assert_int_eq(APPLY1(KB_MATH_EXP, S35, SH2(3, 5), out, SH2(3, 5)), 0);
	for (i = 0; i < 15; i++)
		ck_assert_float_eq_tol(out[i], expf(S35[i]), 1e-6f * expf(S35[i]));
	/* gelu, tanh form: values from 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))). */
	ck_assert_int_eq(APPLY1(KB_MATH_GELU, xs, SH1(4), out, SH1(4)), 0);
	ck_assert_float_eq_tol(out[0], -0.15880801f, 1e-6f);
	ck_assert_float_eq(out[1], 0.0f);
	ck_assert_float_eq_tol(out[2], 0.84119199f, 1e-6f);
	ck_assert_float_eq_tol(out[3], 2.99636261f, 1e-5f);
}
END_TEST

/* ---- GEMM tile ---------------------------------------------------------------- */

static void fill_normal(kb_rng *r, float *x, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		x[i] = (float)kb__rng_normal(r);
}

static void widen(double *dst, const float *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = src[i];
}

START_TEST(test_gemm_tile)
{
	enum { M = 5, K = 7, N = 6, LDA = 9, LDB = 8, LDBT = 11, LDC = 10 };
	float a[M * LDA], b[K * LDB], bt[N * LDBT], c1[M * LDC], c2[M * LDC];
	double ad[M * K], bd[K * N], cd[M * N], cmax, diff;
	kb_rng r;
	int i, j, p;

	kb__rng_seed(&r, 7);
	fill_normal(&r, a, M * LDA);
	fill_normal(&r, b, K * LDB);
	fill_normal(&r, c1, M * LDC);
	memcpy(c2, c1, sizeof(c1));
	for (j = 0; j < N; j++)
		for (p = 0; p < K; p++)
			bt[j * LDBT + p] = b[p * LDB + j];
	for (i = 0; i < M; i++)
		widen(ad + i * K, a + i * LDA, K);
	for (p = 0; p < K; p++)
		widen(bd + p * N, b + p * LDB, N);
	kb__ref_gemm(ad, bd, cd, M, K, N);
	kb__gemm_tile(c1, a, b, M, K, N, LDA, LDB, LDC, 0);
	kb__gemm_tile(c2, a, bt, M, K, N, LDA, LDBT, LDC, 1);
	/* Same fp32 operation sequence in both layouts: bit-identical. */
	ck_assert(memcmp(c1, c2, sizeof(c1)) == 0);
	kb__rng_seed(&r, 7);
	fill_normal(&r, a, M * LDA);
	fill_normal(&r, b, K * LDB);
	fill_normal(&r, c2, M * LDC); /* the original acc again */
	for (i = 0; i < M; i++) {
		for (j = 0; j < N; j++) {
			cmax = fabs(cd[i * N + j] + c2[i * LDC + j]) + 1.0;
			diff = fabs(c1[i * LDC + j] - (cd[i * N + j] + c2[i * LDC + j]));
			ck_assert_msg(diff < 1e-5 * cmax, "c[%d][%d] off by %g", i, j, diff);
		}
		/* Columns past n are untouched padding. */
		ck_assert(c1[i * LDC + N] == c2[i * LDC + N]);
	}
}
END_TEST

/* ---- softmax_merge: the eight micro-ops plus P @ V over two tiles -------------- */

enum { G = 3, D = 4, T = 5, NT = 2, SKV = T * NT };

typedef struct merge_state {
	float m[G], l[G], o[G * D];
	float s[G * T], m_loc[G], m_new[G], corr[G], p[G * T], l_loc[G];
} merge_state;

static void must(int rc, kb_error *err)
{
	ck_assert_msg(rc == 0, "math op failed: %s", err->message);
}

/* The recipe's engine_seq, in order, on one (G,T) score tile. */
static void softmax_merge(merge_state *st)
{
	const kb_nshape col = SH2(G, 1), tile = SH2(G, T), od = SH2(G, D);
	kb_error err;

	must(APPLY1(KB_MATH_RMAX, st->s, tile, st->m_loc, col), &err);
	must(APPLY2(KB_MATH_MAX_ELEM, st->m, col, st->m_loc, col, st->m_new, col), &err);
	must(APPLY2(KB_MATH_EXP_DIFF, st->m, col, st->m_new, col, st->corr, col), &err);
	must(APPLY2(KB_MATH_EXP_DIFF, st->s, tile, st->m_new, col, st->p, tile), &err);
	must(APPLY1(KB_MATH_RSUM, st->p, tile, st->l_loc, col), &err);
	must(apply(KB_MATH_FMA, 3, st->l, col, st->corr, col, st->l_loc, col, st->l, col, &err),
	     &err);
	must(APPLY2(KB_MATH_MUL_BCAST, st->o, od, st->corr, col, st->o, od), &err);
	must(APPLY1(KB_MATH_COPY, st->m_new, col, st->m, col), &err);
}

START_TEST(test_softmax_merge_two_tiles)
{
	float q[G * D], k[SKV * D], v[SKV * D], out[G * D];
	double qd[G * D], kd[SKV * D], vd[SKV * D], od[G * D], max_abs, max_rel;
	const double scale = 1.0 / sqrt((double)D);
	float min_corr = 1.0f;
	merge_state st;
	kb_error err;
	kb_rng r;
	int i, t;

	kb__rng_seed(&r, 2024);
	fill_normal(&r, q, G * D);
	fill_normal(&r, k, SKV * D);
	fill_normal(&r, v, SKV * D);
	/* Larger keys in tile 2 make the running max move, so corr < 1 matters. */
	for (i = T * D; i < SKV * D; i++)
		k[i] *= 3.0f;
	memset(&st, 0, sizeof(st));
	for (i = 0; i < G; i++)
		st.m[i] = -INFINITY;
	for (t = 0; t < NT; t++) {
		/* s = (q k_t^T) * scale via the GEMM tile (k rows are B^T) and scale. */
		memset(st.s, 0, sizeof(st.s));
		kb__gemm_tile(st.s, q, k + t * T * D, G, D, T, D, D, T, 1);
		must(kb__math_apply(KB_MATH_SCALE, (const float *const[]){ st.s },
				    (const kb_nshape[]){ SH2(G, T) }, 1, st.s, &SH2(G, T),
				    &(kb_math_extra){ (float)scale }, &err), &err);
		softmax_merge(&st);
		kb__gemm_tile(st.o, st.p, v + t * T * D, G, T, D, T, D, D, 0);
		for (i = 0; t > 0 && i < G; i++)
			min_corr = st.corr[i] < min_corr ? st.corr[i] : min_corr;
	}
	ck_assert_msg(min_corr < 0.5f, "tile 2 never rescaled O (corr %g)", min_corr);
	must(APPLY2(KB_MATH_DIV, st.o, SH2(G, D), st.l, SH2(G, 1), out, SH2(G, D)), &err);
	widen(qd, q, G * D);
	widen(kd, k, SKV * D);
	widen(vd, v, SKV * D);
	ck_assert_int_eq(kb__ref_attention(qd, kd, vd, od, G, SKV, D, scale), 0);
	kb__err_stats(out, od, G * D, &max_abs, &max_rel);
	ck_assert_msg(max_rel < 1e-5, "online softmax off: abs %g rel %g", max_abs, max_rel);
	/* And the tiles really mattered: one tile alone gives another answer. */
	ck_assert_int_eq(kb__ref_attention(qd, kd, vd, od, G, T, D, scale), 0);
	kb__err_stats(out, od, G * D, &max_abs, &max_rel);
	ck_assert(max_rel > 1e-3);
}
END_TEST

/*
 * The reference attention as it was written first, plain loops, one dot
 * product at a time: kb__ref_attention (vectorised across query rows and
 * key rows) must give its bits exactly.
 */
static double plain_dot(const double *x, const double *y, int64_t n)
{
	double s = 0.0;

	for (int64_t i = 0; i < n; i++)
		s += x[i] * y[i];
	return s;
}

static void plain_attention(const double *q, const double *k, const double *v, double *o,
			    int64_t g, int64_t s_kv, int64_t d, double scale)
{
	for (int64_t i = 0; i < g; i++) {
		double mx = -INFINITY, sum = 0.0, w;

		for (int64_t c = 0; c < d; c++)
			o[i * d + c] = 0.0;
		for (int64_t j = 0; j < s_kv; j++)
			mx = fmax(mx, plain_dot(q + i * d, k + j * d, d) * scale);
		for (int64_t j = 0; j < s_kv; j++) {
			w = exp(plain_dot(q + i * d, k + j * d, d) * scale - mx);
			sum += w;
			for (int64_t c = 0; c < d; c++)
				o[i * d + c] += w * v[j * d + c];
		}
		for (int64_t c = 0; c < d; c++)
			o[i * d + c] /= sum;
	}
}

START_TEST(test_ref_attention_plain_bits)
{
	static const int64_t shapes[][3] = { /* g, s_kv, d */
		{ 8, 600, 128 }, { 1, 1, 1 }, { 3, 257, 7 }, { 5, 300, 9 }, { 4, 5, 4 }, { 9, 513, 33 },
	};
	kb_rng r;

	kb__rng_seed(&r, 77);
	for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
		int64_t g = shapes[t][0], s_kv = shapes[t][1], d = shapes[t][2];
		double *q = malloc((size_t)(g * d) * sizeof(double));
		double *k = malloc((size_t)(s_kv * d) * sizeof(double));
		double *v = malloc((size_t)(s_kv * d) * sizeof(double));
		double *o = malloc((size_t)(g * d) * sizeof(double));
		double *want = malloc((size_t)(g * d) * sizeof(double));

		ck_assert(q && k && v && o && want);
		for (int64_t i = 0; i < g * d; i++)
			q[i] = kb__rng_normal(&r) * 3.0;
		for (int64_t i = 0; i < s_kv * d; i++) {
			k[i] = kb__rng_normal(&r);
			v[i] = kb__rng_normal(&r);
		}
		if (t == 2) { /* signed zeros and an infinity among the products */
			q[0] = -0.0;
			k[d + 1] = -0.0;
			v[3] = INFINITY;
		}
		plain_attention(q, k, v, want, g, s_kv, d, 1.0 / sqrt((double)d));
		ck_assert_int_eq(kb__ref_attention(q, k, v, o, g, s_kv, d, 1.0 / sqrt((double)d)), 0);
		for (int64_t i = 0; i < g * d; i++)
			if (memcmp(&o[i], &want[i], sizeof(double)))
				ck_abort_msg("g %lld s_kv %lld d %lld: o[%lld] = %a, plain loops %a",
					     (long long)g, (long long)s_kv, (long long)d, (long long)i,
					     o[i], want[i]);
		free(q);
		free(k);
		free(v);
		free(o);
		free(want);
	}
}
END_TEST

START_TEST(test_err_stats)
{
	const float got[3] = { 1.0f, 2.5f, -4.0f };
	const double want[3] = { 1.0, 2.0, -4.0 }, zero[3] = { 0, 0, 0 };
	float bad[3] = { 1.0f, 2.0f, -4.0f };
	double ma, mr;

	kb__err_stats(got, want, 3, &ma, &mr);
	ck_assert_double_eq(ma, 0.5);
	ck_assert_double_eq(mr, 0.125);
	kb__err_stats(got, zero, 3, &ma, &mr);
	ck_assert_double_eq(ma, 4.0);
	ck_assert_double_eq(mr, 4.0);
	bad[1] = NAN;
	kb__err_stats(bad, want, 3, &ma, &mr);
	ck_assert(isnan(ma) && isnan(mr));
	kb__err_stats(got, want, 0, &ma, &mr);
	ck_assert(ma == 0.0 && mr == 0.0);
}
END_TEST

/* ---- npy ------------------------------------------------------------------------- */

/* A fresh directory per test so parallel runs never collide. */
static void tmpdir(char *dir, size_t size)
{
	snprintf(dir, size, "/tmp/kbnpyXXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static size_t slurp(const char *path, unsigned char *buf, size_t size)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, size, f);
	fclose(f);
	return n;
}

START_TEST(test_npy_header_fp32)
{
	static const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
	const float x[6] = { 1, -2, 3.5f, 0, 1e-3f, 65504 };
	const int64_t shape[2] = { 2, 3 };
	unsigned char raw[256];
	char dir[32], path[64];
	int64_t rshape[4];
	kb_dtype dt;
	kb_error err;
	void *data;
	size_t n, i;
	int rank;

	tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/a.npy", dir);
	ck_assert_int_eq(kb__npy_write(path, KB_FP32, 2, shape, x, &err), 0);
	n = slurp(path, raw, sizeof(raw));
	/* 10 + 60 dict + 20 growth spaces + '\n' = 91, padded to 128. */
	ck_assert_uint_eq(n, 128 + sizeof(x));
	ck_assert(memcmp(raw, "\x93NUMPY\x01\x00", 8) == 0);
	ck_assert_uint_eq(raw[8] | raw[9] << 8, 128 - 10);
	ck_assert(memcmp(raw + 10, dict, strlen(dict)) == 0);
	for (i = 10 + strlen(dict); i < 127; i++)
		ck_assert_uint_eq(raw[i], ' ');
	ck_assert_uint_eq(raw[127], '\n');
	ck_assert(memcmp(raw + 128, x, sizeof(x)) == 0); /* the test host is little-endian */
	ck_assert_int_eq(kb__npy_read(path, &dt, &rank, rshape, &data, &err), 0);
	ck_assert_int_eq(dt, KB_FP32);
	ck_assert_int_eq(rank, 2);
	ck_assert(rshape[0] == 2 && rshape[1] == 3);
	ck_assert(memcmp(data, x, sizeof(x)) == 0);
	free(data);
	remove(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_npy_fp16_bf16_rank)
{
	const uint16_t h[5] = { 0x3C00, 0x0001, 0x7BFF, 0xC000, 0x3555 };
	const int64_t five = 5, big[4] = { 123456, 0, 7, 1000000007 };
	unsigned char raw[512];
	char dir[32], path[64];
	int64_t rs[4];
	kb_dtype dt;
	kb_error err;
	void *data;
	int rank;

	tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/h.npy", dir);
	ck_assert_int_eq(kb__npy_write(path, KB_FP16, 1, &five, h, &err), 0);
	ck_assert_uint_eq(slurp(path, raw, sizeof(raw)), 128 + sizeof(h));
	ck_assert_ptr_nonnull(strstr((char *)raw + 10, "'descr': '<f2'"));
	ck_assert_ptr_nonnull(strstr((char *)raw + 10, "'shape': (5,), }"));
	ck_assert_int_eq(kb__npy_read(path, &dt, &rank, rs, &data, &err), 0);
	ck_assert(dt == KB_FP16 && rank == 1 && rs[0] == 5);
	ck_assert(memcmp(data, h, sizeof(h)) == 0);
	free(data);
	/* bf16 is widened to '<f4'. */
	ck_assert_int_eq(kb__npy_write(path, KB_BF16, 1, &five, h, &err), 0);
	ck_assert_int_eq(kb__npy_read(path, &dt, &rank, rs, &data, &err), 0);
	ck_assert(dt == KB_FP32 && rank == 1 && rs[0] == 5);
	ck_assert(((float *)data)[0] == kb__bf16_to_f32(0x3C00));
	ck_assert(((float *)data)[4] == kb__bf16_to_f32(0x3555));
	free(data);
	/* Rank 0 and a zero-sized rank 4 with long dims: alignment still holds. */
	ck_assert_int_eq(kb__npy_write(path, KB_FP32, 0, NULL, h, &err), 0);
	ck_assert_uint_eq(slurp(path, raw, sizeof(raw)), 128 + 4);
	ck_assert_ptr_nonnull(strstr((char *)raw + 10, "'shape': (), }"));
	ck_assert_int_eq(kb__npy_write(path, KB_FP32, 4, big, NULL, &err), 0);
	ck_assert_uint_eq(slurp(path, raw, sizeof(raw)) % 64, 0);
	ck_assert_int_eq(kb__npy_read(path, &dt, &rank, rs, &data, &err), 0);
	ck_assert(rank == 4 && rs[0] == 123456 && rs[1] == 0 && rs[3] == 1000000007);
	ck_assert_ptr_null(data);
	remove(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_npy_errors)
{
	const float x[6] = { 0 };
	const int64_t shape[2] = { 2, 3 };
	char dir[32], path[64];
	struct stat st;
	int64_t rs[4];
	kb_dtype dt;
	kb_error err;
	void *data;
	FILE *f;
	int rank;

	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(kb__npy_write("/dev/full", KB_FP32, 2, shape, x, &err), KB_EIO);
	ck_assert_ptr_nonnull(strstr(err.message, "/dev/full"));
	ck_assert_ptr_nonnull(strstr(err.message, "space"));
	ck_assert_int_eq(stat("/dev/full", &st), 0); /* never removed */
	ck_assert(S_ISCHR(st.st_mode));
	tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/no/such/dir.npy", dir);
	ck_assert_int_eq(kb__npy_write(path, KB_FP32, 2, shape, x, &err), KB_EIO);
	ck_assert_ptr_nonnull(strstr(err.message, path));
	ck_assert_int_eq(kb__npy_read(path, &dt, &rank, rs, &data, &err), KB_EIO);
	ck_assert_int_eq(kb__npy_write(path, KB_FP32, 5, shape, x, &err), KB_EINVAL);
	snprintf(path, sizeof(path), "%s/bad.npy", dir);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	fwrite("\x93NUMPY\x01\x00\x10\x00{'descr': '<i8'}", 1, 26, f);
	fclose(f);
	ck_assert_int_eq(kb__npy_read(path, &dt, &rank, rs, &data, &err), KB_EPARSE);
	ck_assert_int_eq(kb__npy_write(path, KB_FP32, 2, shape, x, &err), 0);
	ck_assert_int_eq(truncate(path, 70), 0);
	ck_assert_int_eq(kb__npy_read(path, &dt, &rank, rs, &data, &err), KB_EIO);
	ck_assert_ptr_null(data);
	remove(path);
	rmdir(dir);
}
END_TEST

/*
 * A write that fails half-way (file size limit) must leave no partial file.
 * The limit and the SIGXFSZ disposition are restored for CK_NOFORK runs.
 */
START_TEST(test_npy_partial_removed)
{
	static float x[4096];
	const int64_t n = 4096;
	struct rlimit old, lim;
	void (*old_sig)(int);
	char dir[32], path[64];
	kb_error err;
	int rc;

	tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/part.npy", dir);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 1000;
	old_sig = signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	rc = kb__npy_write(path, KB_FP32, 1, &n, x, &err);
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, old_sig);
	ck_assert_int_eq(rc, KB_EIO);
	ck_assert_ptr_nonnull(strstr(err.message, path));
	ck_assert_int_ne(access(path, F_OK), 0);
	rmdir(dir);
}
END_TEST

/* ---- rng ---------------------------------------------------------------------------- */

/* Published known answers: xoshiro256** from state {1,2,3,4}; splitmix64(0). */
START_TEST(test_rng_known_answers)
{
	static const uint64_t want[6] = { 11520u, 0u, 1509978240u,
					  UINT64_C(1215971899390074240),
					  UINT64_C(1216172134540287360),
					  UINT64_C(607988272756665600) };
	kb_rng r = { { 1, 2, 3, 4 } };
	int i;

	for (i = 0; i < 6; i++)
		ck_assert_uint_eq(kb__rng_next(&r), want[i]);
	kb__rng_seed(&r, 0);
	ck_assert_uint_eq(r.s[0], UINT64_C(0xe220a8397b1dcdaf));
	ck_assert_uint_eq(r.s[1], UINT64_C(0x6e789e6aa1b965f4));
}
END_TEST

/* kb__rng_normal_n is n calls of kb__rng_normal: the same values bit for
 * bit and the same state after, across block edges and odd counts. */
START_TEST(test_rng_normal_n)
{
	static const size_t counts[] = { 0, 1, 2, 3, 255, 256, 257, 1000, 5003 };
	double *got = malloc(5003 * sizeof(double)), want;
	kb_rng a, b;

	ck_assert(got);
	for (uint64_t seed = 1; seed <= 3; seed++) {
		kb__rng_seed(&a, seed);
		kb__rng_seed(&b, seed);
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			kb__rng_normal_n(&a, got, counts[c]);
			for (size_t i = 0; i < counts[c]; i++) {
				want = kb__rng_normal(&b);
				if (memcmp(&want, &got[i], sizeof(want)))
					ck_abort_msg("seed %llu count %zu: deviate %zu is %a, not %a",
						     (unsigned long long)seed, counts[c], i, got[i], want);
			}
			ck_assert(memcmp(&a, &b, sizeof(a)) == 0);
		}
	}
	free(got);
}
END_TEST

START_TEST(test_rng)
{
	kb_rng a, b;
	double x, sum = 0.0, sq = 0.0, mean, var;
	long counts[7] = { 0 };
	const int n = 100000;
	int i, same = 1;

	kb__rng_seed(&a, 42);
	kb__rng_seed(&b, 42);
	for (i = 0; i < 1000; i++)
		ck_assert_uint_eq(kb__rng_next(&a), kb__rng_next(&b));
	kb__rng_seed(&b, 43);
	for (i = 0; i < 4; i++)
		same &= kb__rng_next(&a) == kb__rng_next(&b);
	ck_assert(!same);
	for (i = 0; i < n; i++) {
		x = kb__rng_uniform(&a);
		ck_assert(x >= 0.0 && x < 1.0);
		x = kb__rng_normal(&a);
		sum += x;
		sq += x * x;
		counts[kb__rng_below(&a, 7)]++;
	}
	mean = sum / n;
	var = sq / n - mean * mean;
	ck_assert_msg(fabs(mean) < 0.02, "normal mean %g", mean);
	ck_assert_msg(fabs(var - 1.0) < 0.03, "normal var %g", var);
	for (i = 0; i < 7; i++)
		ck_assert_msg(counts[i] > n / 7 - 600 && counts[i] < n / 7 + 600,
			      "below(7) bucket %d has %ld", i, counts[i]);
	ck_assert_uint_eq(kb__rng_below(&a, 0), 0);
	ck_assert_uint_eq(kb__rng_below(&a, 1), 0);
}
END_TEST

Suite *numerics_suite(void)
{
	Suite *s = suite_create("numerics");
	TCase *fp = tcase_create("fp16"), *math = tcase_create("math");
	TCase *io = tcase_create("npy"), *rng = tcase_create("rng");

	tcase_add_test(fp, test_f16_known);
	tcase_add_test(fp, test_f16_rne);
	tcase_add_test(fp, test_f16_nan_and_roundtrip);
	tcase_add_test(fp, test_bf16);
	tcase_add_test(fp, test_load_store);
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
	tcase_add_test(fp, test_cpu_features);
#endif
	tcase_add_test(math, test_names);
	tcase_add_test(math, test_reductions);
	tcase_add_test(math, test_exp_diff_bcast);
	tcase_add_test(math, test_shape_errors);
	tcase_add_test(math, test_fma_mul_copy);
	tcase_add_test(math, test_binary_rank3_rank4);
	tcase_add_test(math, test_bias_scale_unary);
	tcase_add_test(math, test_gemm_tile);
	tcase_add_test(math, test_softmax_merge_two_tiles);
	tcase_add_test(math, test_err_stats);
	tcase_add_test(math, test_ref_attention_plain_bits);
	tcase_add_test(io, test_npy_header_fp32);
	tcase_add_test(io, test_npy_fp16_bf16_rank);
	tcase_add_test(io, test_npy_errors);
	tcase_add_test(io, test_npy_partial_removed);
	tcase_add_test(rng, test_rng_known_answers);
	tcase_add_test(rng, test_rng);
	tcase_add_test(rng, test_rng_normal_n);
	suite_add_tcase(s, fp);
	suite_add_tcase(s, math);
	suite_add_tcase(s, io);
	suite_add_tcase(s, rng);
	suite_add_tcase(s, numerics_vector_tcase());
	return s;
}
