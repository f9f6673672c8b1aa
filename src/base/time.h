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
#define KB_PS_PER_NS 1000u

/* Cycles (possibly fractional, >= 0) at clock_ghz to picoseconds. */
kb_time kb__cycles_to_ps(double cycles, double clock_ghz);
/* ceil(a / b) for b > 0. */
static inline uint64_t kb__ceil_div(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

#endif
