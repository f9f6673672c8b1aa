/*
 * fp16 / bf16 <-> fp32 by bit manipulation.
 *
 * Notation: an fp32 value is sign | 8-bit biased exponent e | 23-bit
 * fraction; fp16 is sign | 5-bit exponent (bias 15) | 10-bit fraction;
 * bf16 is the top half of an fp32.
 */
#include "base/fp16.h"

#include <string.h>

#include "base/simd.h"

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * Shifts m right by `shift` (1..31) rounding to nearest, ties to even. A
 * carry out of the kept bits is what we want: it bumps the exponent field
 * (or turns the largest subnormal into the smallest normal).
 */
static uint32_t shift_rne(uint32_t m, unsigned shift)
{
	uint32_t kept = m >> shift;
	uint32_t rem = m & ((UINT32_C(1) << shift) - 1);
	uint32_t half = UINT32_C(1) << (shift - 1);

	if (rem > half || (rem == half && (kept & 1)))
		kept++;
	return kept;
}

uint16_t kb__f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t e;

	x &= 0x7fffffff;
	if (x > 0x7f800000) /* NaN: keep the top payload bits, force quiet. */
		return (uint16_t)(sign | 0x7e00 | ((x >> 13) & 0x3ff));
	/* 0x477ff000 is 65520, the midpoint above 65504: ties go to inf (even). */
	if (x >= 0x477ff000)
		return (uint16_t)(sign | 0x7c00);
	e = x >> 23;
	if (e >= 113) /* normal fp16: rebias 127 -> 15 and round the fraction */
		return (uint16_t)(sign | shift_rne(x - (UINT32_C(112) << 23), 13));
	/*
	 * fp16 subnormal: value = m * 2^-24 with m = M >> (126 - e), M the
	 * 24-bit significand. Below 2^-25 (e < 102) everything rounds to zero;
	 * exactly 2^-25 is a tie and also goes to zero (even).
	 */
	if (e < 102)
		return sign;
	return (uint16_t)(sign | shift_rne((x & 0x7fffff) | 0x800000, 126 - e));
}

float kb__f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f;
	uint32_t m = h & 0x3ff;

	if (e == 0x1f)
		return bits_f32(sign | 0x7f800000 | (m << 13));
	if (e != 0)
		return bits_f32(sign | ((e + 112) << 23) | (m << 13));
	if (m == 0)
		return bits_f32(sign);
	/* Subnormal: normalise so the leading one becomes the implicit bit. */
	e = 113;
	while (!(m & 0x400)) {
		m <<= 1;
		e--;
	}
	return bits_f32(sign | (e << 23) | ((m & 0x3ff) << 13));
}

uint16_t kb__f32_to_bf16(float f)
{
	uint32_t x = f32_bits(f);

	if ((x & 0x7fffffff) > 0x7f800000) /* NaN: truncating could give inf */
		return (uint16_t)((x >> 16) | 0x40);
	/* Adding 0x7fff plus the kept lsb rounds half to even; overflow of the
	 * largest finite values carries into the exponent and yields inf. */
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

float kb__bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

/*
 * Blocks of 8 elements as one 8-lane GCC vector of uint32 (no intrinsics):
 * built for AVX2 and for plain SSE2, which takes two registers per vector
 * (KB_VEC_CLONES, base/simd.h), the generic lowering elsewhere. The lanes
 * do the integer bit manipulation of the scalar functions above; a block
 * holding a lane the fast path does not cover (fp16 subnormals) takes the
 * scalar path, so no result depends on the FPU's rounding or DAZ mode.
 */
#define VL 8
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint16_t v8h __attribute__((vector_size(16)));

/*
 * The helpers take and return 32-byte vectors through pointers: by value
 * they would change the ABI between the baseline and the AVX2 clone (GCC's
 * -Wpsabi). They are inlined into each clone anyway.
 */

/* 8 halves at p -> 8 zero-extended lanes. */
static inline void load_h8(v8u *x, const unsigned char *p)
{
	v8h h;

	memcpy(&h, p, sizeof(h));
	*x = __builtin_convertvector(h, v8u);
}

/* The low halves of 8 lanes -> 8 halves at p. */
static inline void store_h8(unsigned char *p, const v8u *x)
{
	v8h h = __builtin_convertvector(*x, v8h);

	memcpy(p, &h, sizeof(h));
}

/*
 * Lane masks (all ones or zero) without vector comparisons: GCC lowers an
 * 8 x uint32 comparison element by element when the target has no 256-bit
 * vectors (the baseline clone), while shifts and adds split into two SSE2
 * halves. The operands are below 2^31, so differences fit an int32 and its
 * sign bit, spread by an arithmetic shift, is the mask.
 */
#define lt_mask(a, c) ((v8i)((a) - (c)) >> 31) /* a < c */

static inline int any_lane(const v8i *m)
{
	v8i x = *m;

	return (x[0] | x[1] | x[2] | x[3] | x[4] | x[5] | x[6] | x[7]) != 0;
}

/* fp16 -> fp32 bits of 8 lanes; ORs the lanes that are subnormal into *miss. */
static inline void f16_lanes(const v8u *hp, v8u *out, v8i *miss)
{
	v8u h = *hp, sign = (h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	v8i zero_e = lt_mask(e, 1), top = ~lt_mask(e, 0x1f);
	v8u norm = ((e + 112) << 23) | (m << 13), inf = 0x7f800000 | (m << 13);

	*out = sign | ((v8u)top & inf) | ((v8u)~(top | zero_e) & norm);
	*miss |= zero_e & ~lt_mask(m, 1);
}

/* fp32 bits -> fp16 of 8 lanes; ORs the lanes in the fp16 subnormal range into *miss. */
static inline void f32_lanes(const v8u *xp, v8u *out, v8i *miss)
{
	v8u x = *xp, sign = (x >> 16) & 0x8000, a = x & 0x7fffffff;
	v8u y = a - (UINT32_C(112) << 23);
	v8u norm = (y + 0xfff + ((y >> 13) & 1)) >> 13;
	v8u nan = 0x7e00 | ((a >> 13) & 0x3ff);
	v8i is_nan = ~lt_mask(a, 0x7f800001), is_inf = ~lt_mask(a, 0x477ff000) & ~is_nan;
	v8i is_norm = ~lt_mask(a, UINT32_C(113) << 23) & ~is_inf & ~is_nan;

	/* Below 2^-25 (and exactly it) everything rounds to a signed zero. */
	*out = sign | ((v8u)is_nan & nan) | ((v8u)is_inf & 0x7c00) | ((v8u)is_norm & norm);
	*miss |= ~lt_mask(a, UINT32_C(102) << 23) & lt_mask(a, UINT32_C(113) << 23);
}

/*
 * Two passes: the vector pass converts every block and ORs the lanes it
 * does not cover into one mask, tested once at the end (a horizontal test
 * per block cost as much as the conversion); only when some lane was not
 * covered does a second pass redo those blocks with the scalar function.
 */
KB_VEC_CLONES
static void load_f16(float *dst, const unsigned char *p, size_t n)
{
	size_t i, blocks = n / VL * VL;
	v8u x, r;
	v8i miss = { 0 }, one;
	uint16_t h;

	for (i = 0; i < blocks; i += VL) {
		load_h8(&x, p + 2 * i);
		f16_lanes(&x, &r, &miss);
		memcpy(dst + i, &r, sizeof(r));
	}
	for (i = 0; any_lane(&miss) && i < blocks; i += VL) {
		one = (v8i){ 0 };
		load_h8(&x, p + 2 * i);
		f16_lanes(&x, &r, &one);
		if (!any_lane(&one))
			continue;
		for (size_t j = i; j < i + VL; j++) {
			memcpy(&h, p + 2 * j, sizeof(h));
			dst[j] = kb__f16_to_f32(h);
		}
	}
	for (i = blocks; i < n; i++) {
		memcpy(&h, p + 2 * i, sizeof(h));
		dst[i] = kb__f16_to_f32(h);
	}
}

KB_VEC_CLONES
static void store_f16(unsigned char *p, const float *src, size_t n)
{
	size_t i, blocks = n / VL * VL;
	v8u x, r;
	v8i miss = { 0 }, one;
	uint16_t h;

	for (i = 0; i < blocks; i += VL) {
		memcpy(&x, src + i, sizeof(x));
		f32_lanes(&x, &r, &miss);
		store_h8(p + 2 * i, &r);
	}
	for (i = 0; any_lane(&miss) && i < blocks; i += VL) {
		one = (v8i){ 0 };
		memcpy(&x, src + i, sizeof(x));
		f32_lanes(&x, &r, &one);
		if (!any_lane(&one))
			continue;
		for (size_t j = i; j < i + VL; j++) {
			h = kb__f32_to_f16(src[j]);
			memcpy(p + 2 * j, &h, sizeof(h));
		}
	}
	for (i = blocks; i < n; i++) {
		h = kb__f32_to_f16(src[i]);
		memcpy(p + 2 * i, &h, sizeof(h));
	}
}

KB_VEC_CLONES
static void load_bf16(float *dst, const unsigned char *p, size_t n)
{
	size_t i = 0;
	v8u r;
	uint16_t h;

	for (; i + VL <= n; i += VL) {
		load_h8(&r, p + 2 * i);
		r <<= 16;
		memcpy(dst + i, &r, sizeof(r));
	}
	for (; i < n; i++) {
		memcpy(&h, p + 2 * i, sizeof(h));
		dst[i] = kb__bf16_to_f32(h);
	}
}

KB_VEC_CLONES
static void store_bf16(unsigned char *p, const float *src, size_t n)
{
	size_t i = 0;
	v8u x;
	v8i is_nan;
	uint16_t h;

	for (; i + VL <= n; i += VL) {
		memcpy(&x, src + i, sizeof(x));
		is_nan = ~lt_mask(x & 0x7fffffff, 0x7f800001);
		x = ((v8u)is_nan & ((x >> 16) | 0x40)) |
		    ((v8u)~is_nan & ((x + 0x7fff + ((x >> 16) & 1)) >> 16));
		store_h8(p + 2 * i, &x);
	}
	for (; i < n; i++) {
		h = kb__f32_to_bf16(src[i]);
		memcpy(p + 2 * i, &h, sizeof(h));
	}
}

#ifdef KB_F16C
#include <immintrin.h>

/*
 * fp16 -> fp32, 16 values a step: vcvtph2ps is exact for zeros, normals
 * and infinities whatever MXCSR holds; a step holding a subnormal (which
 * DAZ would flush) or a NaN (a signalling one comes back quieted) is done
 * by kb__f16_to_f32 instead. Random fp16 data has a subnormal in about one
 * value of 20000, so the scalar steps cost nothing that shows.
 */
KB_TARGET_F16C
static void load_f16_f16c(float *dst, const unsigned char *p, size_t n)
{
	const __m256i mag = _mm256_set1_epi16(0x7fff), inf = _mm256_set1_epi16(0x7c00),
		      low = _mm256_set1_epi16(0x0400), zero = _mm256_setzero_si256();
	size_t i = 0;
	uint16_t h;

	for (; i + 16 <= n; i += 16) {
		__m256i x = _mm256_loadu_si256((const void *)(p + 2 * i));
		__m256i a = _mm256_and_si256(x, mag); /* 0..0x7fff: signed compares hold */
		__m256i odd = _mm256_or_si256(_mm256_cmpgt_epi16(a, inf),
					      _mm256_andnot_si256(_mm256_cmpeq_epi16(a, zero),
								  _mm256_cmpgt_epi16(low, a)));

		if (_mm256_testz_si256(odd, odd)) {
			_mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_castsi256_si128(x)));
			_mm256_storeu_ps(dst + i + 8, _mm256_cvtph_ps(_mm256_extracti128_si256(x, 1)));
			continue;
		}
		for (size_t j = i; j < i + 16; j++) {
			memcpy(&h, p + 2 * j, sizeof(h));
			dst[j] = kb__f16_to_f32(h);
		}
	}
	for (; i < n; i++) {
		memcpy(&h, p + 2 * i, sizeof(h));
		dst[i] = kb__f16_to_f32(h);
	}
}

/*
 * fp32 -> fp16, 8 values a step, rounding to nearest even by the
 * instruction's immediate (not MXCSR.RC); vcvtps2ph ignores FTZ, and an
 * fp32 subnormal rounds to a signed zero with or without DAZ. A step
 * holding a NaN is done by kb__f32_to_f16 (payload and quieting as it
 * defines them).
 */
KB_TARGET_F16C
static void store_f16_f16c(unsigned char *p, const float *src, size_t n)
{
	const __m256i mag = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
	size_t i = 0;
	uint16_t h;

	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_loadu_ps(src + i);
		__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(x), mag), inf);

		if (_mm256_testz_si256(nan, nan)) {
			_mm_storeu_si128((void *)(p + 2 * i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
			continue;
		}
		for (size_t j = i; j < i + 8; j++) {
			h = kb__f32_to_f16(src[j]);
			memcpy(p + 2 * j, &h, sizeof(h));
		}
	}
	for (; i < n; i++) {
		h = kb__f32_to_f16(src[i]);
		memcpy(p + 2 * i, &h, sizeof(h));
	}
}

#if defined(__clang__)
#include <cpuid.h>

/* Clang before 16 takes no "f16c" in __builtin_cpu_supports (the build
 * failed there): CPUID leaf 1, ECX bit 29, asked once (in a VM each CPUID
 * exits to the hypervisor). */
static int has_f16c(void)
{
	static _Atomic int known = -1;
	int k = known;

	if (k < 0) {
		unsigned a, b, c, d;

		k = __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) &&
		    (c & bit_F16C);
		known = k;
	}
	return k;
}
#else
/* cpuid, as read at load time (base/cpu_model.c): a load and a test per
 * call. */
static int has_f16c(void)
{
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}
#endif
#endif

void kb__load_f32(float *dst, const void *src, kb_dtype dt, size_t n)
{
#ifdef KB_F16C
	if (dt == KB_FP16 && has_f16c()) {
		load_f16_f16c(dst, src, n);
		return;
	}
#endif
	if (dt == KB_FP16)
		load_f16(dst, src, n);
	else if (dt == KB_BF16)
		load_bf16(dst, src, n);
	else
		memmove(dst, src, n * sizeof(float));
}

void kb__store_f32(void *dst, kb_dtype dt, const float *src, size_t n)
{
#ifdef KB_F16C
	if (dt == KB_FP16 && has_f16c()) {
		store_f16_f16c(dst, src, n);
		return;
	}
#endif
	if (dt == KB_FP16)
		store_f16(dst, src, n);
	else if (dt == KB_BF16)
		store_bf16(dst, src, n);
	else
		memmove(dst, src, n * sizeof(float));
}

KB_API void kb_fp16_to_fp32(float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = kb__f16_to_f32(src[i]);
}

KB_API void kb_fp32_to_fp16(uint16_t *dst, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = kb__f32_to_f16(src[i]);
}

KB_API void kb_bf16_to_fp32(float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = kb__bf16_to_f32(src[i]);
}

KB_API void kb_fp32_to_bf16(uint16_t *dst, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = kb__f32_to_bf16(src[i]);
}
