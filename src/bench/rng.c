/*
 * The seeded generator of bench inputs. See rng.h.
 */
#include "bench/rng.h"

#include <math.h>

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

uint64_t kb__rng_next(kb_rng *r)
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

double kb__rng_uniform(kb_rng *r)
{
	return (double)(kb__rng_next(r) >> 11) * 0x1.0p-53;
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
