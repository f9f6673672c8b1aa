/*
 * Storage-type conversions for data mode: IEEE binary16 (fp16) and bfloat16
 * to and from fp32, done with integer bit manipulation so the results do not
 * depend on the compiler's _Float16 support or the host's rounding mode.
 *
 * Every narrowing conversion rounds to nearest, ties to even. NaN stays NaN
 * (quiet, sign kept); values too large for the target become infinity.
 *
 * Thread rules: pure functions, any thread.
 */
#ifndef KB_BASE_FP16_H
#define KB_BASE_FP16_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/common.h"

/* fp32 to fp16 bits (RNE; subnormals kept; >= 65520 in magnitude -> inf). */
uint16_t kb__f32_to_f16(float f);
/* fp16 bits to fp32 (exact). */
float kb__f16_to_f32(uint16_t h);
/* fp32 to bf16 bits (RNE; overflow -> inf). */
uint16_t kb__f32_to_bf16(float f);
/* bf16 bits to fp32 (exact). */
float kb__bf16_to_f32(uint16_t h);

/*
 * Converts n elements stored as dt (host byte order, 2 or 4 bytes each; src
 * need not be aligned) to fp32. An invalid dt is treated as fp32.
 */
void kb__load_f32(float *dst, const void *src, kb_dtype dt, size_t n);
/* Converts n fp32 values to storage type dt (dst need not be aligned).
 * For fp16/bf16, src and dst of either function must not overlap. */
void kb__store_f32(void *dst, kb_dtype dt, const float *src, size_t n);

#endif
