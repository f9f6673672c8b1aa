/*
 * KB_VEC_CLONES: compile a hot vector kernel twice, for AVX2 and for the
 * baseline, and pick one at load time (GCC/Clang function multi-versioning,
 * an ifunc). The kernels are written with GCC vector types 8 floats or 8
 * uint32 wide: the baseline clone lowers each to two SSE2 operations, the
 * AVX2 clone to one 256-bit operation. The operations are the same IEEE
 * ones either way (no FMA is enabled, and the build keeps
 * -ffp-contract=off), so both clones give the same bits; the choice only
 * changes speed. Elsewhere (not x86-64, no ifunc) it is empty, and so with
 * KB_NO_VEC_CLONES (tests/vec_baseline.c builds the baseline code that way).
 */
#ifndef KB_BASE_SIMD_H
#define KB_BASE_SIMD_H

#include "base/tsan.h"

/* Not under ThreadSanitizer: the ifunc resolver runs while the dynamic
 * loader relocates the library, before the TSan runtime is set up, and
 * its instrumented entry crashes the process. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) && defined(__linux__) && \
	!defined(KB_NO_VEC_CLONES) && !defined(KB_TSAN)
#define KB_VEC_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KB_VEC_CLONES
#endif

/*
 * KB_F16C: the fp16 block conversions have a third variant built for
 * AVX2 with F16C (vcvtph2ps / vcvtps2ph, one instruction per 8 values),
 * chosen at run time by cpuid (__builtin_cpu_supports). The hardware
 * conversion is trusted only with lanes whose result cannot depend on
 * MXCSR (DAZ) or on how a signalling NaN is quieted; blocks holding any
 * other lane are redone by the scalar functions, so it gives the same
 * bits as the clones. It needs no ifunc, so it is there under TSan too.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(KB_NO_VEC_CLONES)
#define KB_F16C 1
#define KB_TARGET_F16C __attribute__((target("avx2,f16c")))
#endif

#endif
