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

void kb__load_f32(float *dst, const void *src, kb_dtype dt, size_t n)
{
	const unsigned char *p = src;
	uint16_t h;
	size_t i;

	if (dt != KB_FP16 && dt != KB_BF16) {
		memmove(dst, src, n * sizeof(float));
		return;
	}
	for (i = 0; i < n; i++) {
		memcpy(&h, p + 2 * i, sizeof(h));
		dst[i] = dt == KB_FP16 ? kb__f16_to_f32(h) : kb__bf16_to_f32(h);
	}
}

void kb__store_f32(void *dst, kb_dtype dt, const float *src, size_t n)
{
	unsigned char *p = dst;
	uint16_t h;
	size_t i;

	if (dt != KB_FP16 && dt != KB_BF16) {
		memmove(dst, src, n * sizeof(float));
		return;
	}
	for (i = 0; i < n; i++) {
		h = dt == KB_FP16 ? kb__f32_to_f16(src[i]) : kb__f32_to_bf16(src[i]);
		memcpy(p + 2 * i, &h, sizeof(h));
	}
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
