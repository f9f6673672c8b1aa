/*
 * A seeded random generator for bench inputs and tests: the same seed gives
 * the same numbers on every machine.
 *
 * Thread rules: a kb_rng must not be shared between threads without a lock.
 */
#ifndef KB_BENCH_RNG_H
#define KB_BENCH_RNG_H

#include <stddef.h>
#include <stdint.h>

/* xoshiro256** generator state, seeded through splitmix64. */
typedef struct kb_rng {
	uint64_t s[4];
} kb_rng;

/* Seeds r from a 64-bit seed (any value, 0 included). */
void kb__rng_seed(kb_rng *r, uint64_t seed);
/* Next 64 random bits. */
uint64_t kb__rng_next(kb_rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double kb__rng_uniform(kb_rng *r);
/* Standard normal deviate (Marsaglia's polar method, one value per call). */
double kb__rng_normal(kb_rng *r);
/* n standard normal deviates, the same values (and the same generator
 * state after) as n calls of kb__rng_normal, faster. */
void kb__rng_normal_n(kb_rng *r, double *out, size_t n);
/* Unbiased integer in [0, n); 0 when n == 0. */
uint64_t kb__rng_below(kb_rng *r, uint64_t n);

#endif
