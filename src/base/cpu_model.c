/*
 * The CPU features GCC's __builtin_cpu_supports reads, for the
 * target_clones resolvers (base/simd.h) and the fp16 and SHA-NI checks,
 * taken from the dynamic loader's answer instead of libgcc's.
 *
 * Why: libgcc's __cpu_indicator_init asks CPUID about ten times (leaves
 * 0, 1, 7.0, 7.1, 0xd, 0x14, 0x19, 0x80000000, ...). In a VM each CPUID
 * exits to the hypervisor, ~7 us here, so libgcc's probe cost every
 * process ~0.07-0.1 ms, ~10% of a short run's task-clock (issue 13).
 * glibc's ld.so has asked the same questions before any of our code runs
 * and publishes the answer (<sys/platform/x86.h>, glibc 2.33; usable
 * from ifunc resolvers: the function is ld.so's, relocated first).
 * Defining libgcc's three symbols here keeps the linker from taking
 * libgcc's cpuinfo.o at all, and so its constructor too.
 *
 * Only the features this code tests are filled; any other reads as
 * absent, which can only pick a slower path, never a wrong one (each
 * clone and each variant gives the same bits). The positions are GCC's
 * enum processor_features, an ABI that code compiled by every GCC since
 * 4.8 and libgcc share (objects built by one GCC link with another's
 * libgcc). tests/check_numerics.c compares what __builtin_cpu_supports
 * says with CPUID's own answer. The types are GCC 12's (its own
 * declarations, which LTO compares them with); another GCC or Clang keeps
 * libgcc's or compiler-rt's probe. Not
 * under a sanitizer: the resolvers run while ld.so relocates the program,
 * before the sanitizer's runtime is set up, and this file's code would be
 * instrumented (libgcc's is not).
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12 && \
	!defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && defined(__has_include)
#if __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h>

/* GCC 12's types, as its builtins declare them (libgcc's cpuinfo.h gives
 * __cpu_features one word: only the first is used). */
struct __processor_model {
	unsigned int __cpu_vendor, __cpu_type, __cpu_subtype;
	unsigned int __cpu_features[2]; /* processor_features 0-31 */
};

enum {
	VENDOR_OTHER = 3, /* a nonzero vendor says "already asked" */
	FEATURE_SSSE3 = 6,
	FEATURE_SSE4_1 = 7,
	FEATURE_AVX = 9,
	FEATURE_AVX2 = 10,
	FEATURE_F16C = 49,
	FEATURE_SHA = 74,
	FEATURES_2_WORDS = 4 /* processor_features from 32 */
};

int __cpu_indicator_init(void);

__attribute__((visibility("hidden"), used)) struct __processor_model __cpu_model;
__attribute__((visibility("hidden"), used)) unsigned int __cpu_features2[FEATURES_2_WORDS];

static void set_feature(unsigned f)
{
	if (f < 32)
		__cpu_model.__cpu_features[0] |= 1u << f;
	else
		__cpu_features2[f / 32 - 1] |= 1u << f % 32;
}

/* Called by each resolver (and, like libgcc's, run as a constructor, for
 * __builtin_cpu_supports without a resolver before it). */
__attribute__((visibility("hidden"), used, constructor(101)))
int __cpu_indicator_init(void)
{
	if (__cpu_model.__cpu_vendor)
		return 0;
	if (CPU_FEATURE_ACTIVE(SSSE3))
		set_feature(FEATURE_SSSE3);
	if (CPU_FEATURE_ACTIVE(SSE4_1))
		set_feature(FEATURE_SSE4_1);
	if (CPU_FEATURE_ACTIVE(AVX))
		set_feature(FEATURE_AVX);
	if (CPU_FEATURE_ACTIVE(AVX2))
		set_feature(FEATURE_AVX2);
	if (CPU_FEATURE_ACTIVE(F16C))
		set_feature(FEATURE_F16C);
	if (CPU_FEATURE_ACTIVE(SHA))
		set_feature(FEATURE_SHA);
	__cpu_model.__cpu_vendor = VENDOR_OTHER;
	return 0;
}
#endif
#endif
