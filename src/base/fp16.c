/*
 * fp16 / bf16 <-> fp32 by bit manipulation.
 *
 * Notation: an fp32 value is sign | 8-bit biased exponent e | 23-bit
 * fraction; fp16 is sign | 5-bit exponent (bias 15) | 10-bit fraction;
 * bf16 is the top half of an fp32.
 */
#include "base/fp16.h"

#include <string.h>

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
 * Blocks of 8 elements as two 4-lane GCC vectors (one SSE2 register each on
 * x86-64, the generic lowering elsewhere; no intrinsics). The lanes do the
 * integer bit manipulation of the scalar functions above; a block holding
 * a lane the fast path does not cover (fp16 subnormals) takes the scalar
 * path, so no result depends on the FPU's rounding or DAZ mode.
 */
#define VL 8
typedef uint32_t v4u __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint16_t v8h __attribute__((vector_size(16)));

/* 8 halves at p -> two vectors of 4 zero-extended lanes. */
static void load_h8(v4u x[2], const unsigned char *p)
{
	const v8h zero = { 0 };
	v8h h;

	memcpy(&h, p, sizeof(h));
	x[0] = (v4u)__builtin_shuffle(h, zero, (v8h){ 0, 8, 1, 9, 2, 10, 3, 11 });
	x[1] = (v4u)__builtin_shuffle(h, zero, (v8h){ 4, 12, 5, 13, 6, 14, 7, 15 });
}

/* The low halves of two vectors of 4 lanes -> 8 halves at p. */
static void store_h8(unsigned char *p, const v4u x[2])
{
	v8h h = __builtin_shuffle((v8h)x[0], (v8h)x[1], (v8h){ 0, 2, 4, 6, 8, 10, 12, 14 });

	memcpy(p, &h, sizeof(h));
}

static int any_lane(v4i m)
{
	return (m[0] | m[1] | m[2] | m[3]) != 0;
}

/* fp16 -> fp32 bits of 4 lanes; returns the lanes that are subnormal. */
static inline v4i f16_lanes(v4u h, v4u *out)
{
	v4u sign = (h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	v4i zero_e = (v4i)(e == 0), top = (v4i)(e == 0x1f);
	v4u norm = ((e + 112) << 23) | (m << 13), inf = 0x7f800000 | (m << 13);

	*out = sign | ((v4u)top & inf) | ((v4u)~(top | zero_e) & norm);
	return zero_e & (v4i)(m != 0);
}

/* fp32 bits -> fp16 of 4 lanes; returns the lanes in the fp16 subnormal range. */
static inline v4i f32_lanes(v4u x, v4u *out)
{
	v4u sign = (x >> 16) & 0x8000, a = x & 0x7fffffff;
	v4u y = a - (UINT32_C(112) << 23);
	v4u norm = (y + 0xfff + ((y >> 13) & 1)) >> 13;
	v4u nan = 0x7e00 | ((a >> 13) & 0x3ff);
	v4i is_nan = (v4i)(a > 0x7f800000), is_inf = (v4i)(a >= 0x477ff000) & ~is_nan;
	v4i is_norm = (v4i)(a >= (UINT32_C(113) << 23)) & ~is_inf & ~is_nan;

	/* Below 2^-25 (and exactly it) everything rounds to a signed zero. */
	*out = sign | ((v4u)is_nan & nan) | ((v4u)is_inf & 0x7c00) | ((v4u)is_norm & norm);
	return (v4i)(a >= (UINT32_C(102) << 23)) & (v4i)(a < (UINT32_C(113) << 23));
}

/*
 * Two passes: the vector pass converts every block and ORs the lanes it
 * does not cover into one mask, tested once at the end (a horizontal test
 * per block cost as much as the conversion); only when some lane was not
 * covered does a second pass redo those blocks with the scalar function.
 */
static void load_f16(float *dst, const unsigned char *p, size_t n)
{
	size_t i, blocks = n / VL * VL;
	v4u x[2], r[2];
	v4i miss = { 0 };
	uint16_t h;

	for (i = 0; i < blocks; i += VL) {
		load_h8(x, p + 2 * i);
		miss |= f16_lanes(x[0], &r[0]) | f16_lanes(x[1], &r[1]);
		memcpy(dst + i, r, sizeof(r));
	}
	for (i = 0; any_lane(miss) && i < blocks; i += VL) {
		load_h8(x, p + 2 * i);
		if (!any_lane(f16_lanes(x[0], &r[0]) | f16_lanes(x[1], &r[1])))
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

static void store_f16(unsigned char *p, const float *src, size_t n)
{
	size_t i, blocks = n / VL * VL;
	v4u x[2], r[2];
	v4i miss = { 0 };
	uint16_t h;

	for (i = 0; i < blocks; i += VL) {
		memcpy(x, src + i, sizeof(x));
		miss |= f32_lanes(x[0], &r[0]) | f32_lanes(x[1], &r[1]);
		store_h8(p + 2 * i, r);
	}
	for (i = 0; any_lane(miss) && i < blocks; i += VL) {
		memcpy(x, src + i, sizeof(x));
		if (!any_lane(f32_lanes(x[0], &r[0]) | f32_lanes(x[1], &r[1])))
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

static void load_bf16(float *dst, const unsigned char *p, size_t n)
{
	size_t i = 0;
	v4u r[2];
	uint16_t h;

	for (; i + VL <= n; i += VL) {
		load_h8(r, p + 2 * i);
		r[0] <<= 16;
		r[1] <<= 16;
		memcpy(dst + i, &r, sizeof(r));
	}
	for (; i < n; i++) {
		memcpy(&h, p + 2 * i, sizeof(h));
		dst[i] = kb__bf16_to_f32(h);
	}
}

static void store_bf16(unsigned char *p, const float *src, size_t n)
{
	size_t i = 0;
	v4u x[2];
	v4i is_nan;
	uint16_t h;

	for (; i + VL <= n; i += VL) {
		memcpy(x, src + i, sizeof(x));
		for (int k = 0; k < 2; k++) {
			is_nan = (v4i)((x[k] & 0x7fffffff) > 0x7f800000);
			x[k] = ((v4u)is_nan & ((x[k] >> 16) | 0x40)) |
			       ((v4u)~is_nan & ((x[k] + 0x7fff + ((x[k] >> 16) & 1)) >> 16));
		}
		store_h8(p + 2 * i, x);
	}
	for (; i < n; i++) {
		h = kb__f32_to_bf16(src[i]);
		memcpy(p + 2 * i, &h, sizeof(h));
	}
}

void kb__load_f32(float *dst, const void *src, kb_dtype dt, size_t n)
{
	if (dt == KB_FP16)
		load_f16(dst, src, n);
	else if (dt == KB_BF16)
		load_bf16(dst, src, n);
	else
		memmove(dst, src, n * sizeof(float));
}

void kb__store_f32(void *dst, kb_dtype dt, const float *src, size_t n)
{
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
