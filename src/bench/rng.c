/*
 * The seeded generator of bench inputs. See rng.h.
 */
#include "bench/rng.h"

#include <math.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ---- xoshiro256** ----------------------------------------------------------- */

static uint64_t rotl64(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* splitmix64 spreads any seed (even 0) into a non-zero 256-bit state. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

void kb__rng_seed(kb_rng *r, uint64_t seed)
{
	int i;

	for (i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

/* Static, so that the block draw below inlines them (an exported
 * function of a shared library is not inlined: it could be interposed). */
static inline uint64_t next_bits(kb_rng *r)
{
	uint64_t *s = r->s;
	const uint64_t result = rotl64(s[1] * 5, 7) * 9;
	const uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl64(s[3], 45);
	return result;
}

static inline double uniform(kb_rng *r)
{
	return (double)(next_bits(r) >> 11) * 0x1.0p-53;
}

uint64_t kb__rng_next(kb_rng *r)
{
	return next_bits(r);
}

double kb__rng_uniform(kb_rng *r)
{
	return uniform(r);
}

double kb__rng_normal(kb_rng *r)
{
	double u, v, s;

	do {
		u = 2.0 * kb__rng_uniform(r) - 1.0;
		v = 2.0 * kb__rng_uniform(r) - 1.0;
		s = u * u + v * v;
	} while (s >= 1.0 || s == 0.0);
	/* The polar method yields two deviates; the state has no room for the
	 * spare, so v's partner is dropped to keep kb_rng a plain 4-word state. */
	return u * sqrt(-2.0 * log(s) / s);
}

/*
 * The same draws as n calls of kb__rng_normal, a block at a time: the
 * pairs are drawn in order and kept or rejected without a branch (the
 * generator steps exactly as in the loop of kb__rng_normal), then log()
 * runs over the kept s, then the last step, u * sqrt(-2 log(s) / s),
 * two lanes at a time: IEEE division and square root are correctly
 * rounded, so the lanes give the scalar expression's bits. What it saves is
 * the mispredicted rejection branch and the latency of one division and
 * one square root after another.
 */
enum { NORMAL_BLOCK = 256 };

void kb__rng_normal_n(kb_rng *r, double *out, size_t n)
{
	double u[NORMAL_BLOCK], s[NORMAL_BLOCK], l[NORMAL_BLOCK];

	while (n > 0) {
		size_t want = n < NORMAL_BLOCK ? n : NORMAL_BLOCK, k = 0, i = 0;

		while (k < want) {
			double uu = 2.0 * uniform(r) - 1.0;
			double vv = 2.0 * uniform(r) - 1.0;
			double ss = uu * uu + vv * vv;

			u[k] = uu;
			s[k] = ss;
			k += (size_t)((ss < 1.0) & (ss != 0.0)); /* kb__rng_normal's test, negated */
		}
		for (i = 0; i < want; i++)
			l[i] = log(s[i]);
		i = 0;
#ifdef __SSE2__
		for (; i + 2 <= want; i += 2) {
			__m128d q = _mm_div_pd(_mm_mul_pd(_mm_set1_pd(-2.0), _mm_loadu_pd(l + i)),
					       _mm_loadu_pd(s + i));

			_mm_storeu_pd(out + i, _mm_mul_pd(_mm_loadu_pd(u + i), _mm_sqrt_pd(q)));
		}
#endif
		for (; i < want; i++)
			out[i] = u[i] * sqrt(-2.0 * l[i] / s[i]);
		out += want;
		n -= want;
	}
}

uint64_t kb__rng_below(kb_rng *r, uint64_t n)
{
	/* Reject the lowest (2^64 mod n) values so every residue is equally likely. */
	uint64_t threshold, x;

	if (n == 0)
		return 0;
	threshold = (0 - n) % n;
	do {
		x = kb__rng_next(r);
	} while (x < threshold);
	return x % n;
}
