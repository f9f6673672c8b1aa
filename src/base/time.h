/*
 * Simulated time: an unsigned 64-bit count of picoseconds.
 *
 * Rounding rule (the only one): a latency given in cycles converts once to
 * picoseconds as round-half-away-from-zero(cycles * 1000 / clock_ghz),
 * computed in IEEE-754 double with contraction disabled (-ffp-contract=off),
 * so every machine with the same build gets the same integer. No
 * floating-point value ever takes part in event ordering.
 */
#ifndef KB_BASE_TIME_H
#define KB_BASE_TIME_H

#include <stdint.h>

typedef uint64_t kb_time;
#define KB_TIME_INF UINT64_MAX
/* The end of simulated time: no event may be later than 2^63 - 1 ps, so a
 * time always fits an int64 (JSON figures, differences) and a sum of two
 * times never wraps. Reaching it is KB_ERANGE, never a wrapped time. */
#define KB_TIME_MAX ((kb_time)INT64_MAX)
#define KB_PS_PER_NS 1000u

/* Cycles (possibly fractional, >= 0) at clock_ghz to picoseconds;
 * KB_TIME_INF when the result is beyond KB_TIME_MAX. */
kb_time kb__cycles_to_ps(double cycles, double clock_ghz);
/* ceil(a / b) for b > 0. */
/* *t += d unless the sum passes KB_TIME_MAX: then -1 and *t unchanged. */
static inline int kb__time_add(kb_time *t, kb_time d)
{
	if (*t > KB_TIME_MAX || d > KB_TIME_MAX - *t)
		return -1;
	*t += d;
	return 0;
}
static inline uint64_t kb__ceil_div(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

#endif
