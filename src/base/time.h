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

/* kb__cycles_to_ps at one clock, without its division where that is sure
 * to change nothing: when 1000 / ghz is a whole number P exactly (1 GHz:
 * 1000), a whole number of cycles x below exact_below converts to x * P.
 * Why that is the same integer: x * 1000.0 is exact (under 2^52), the
 * exact quotient x * 1000 / ghz is x * P, a whole number under 2^52, so
 * the division returns it exactly, and x * P + 0.5 is exact there too, so
 * the rounding keeps x * P. Everything else (fractional cycles, other
 * clocks, huge counts, negatives, NaN) takes kb__cycles_to_ps. */
typedef struct kb_clock {
	double ghz;
	uint64_t ps_per_cycle;   /* P; 0 when 1000 / ghz is not a whole number */
	double exact_below;      /* 0 when P is 0 */
} kb_clock;

void kb__clock_init(kb_clock *c, double ghz);
static inline kb_time kb__clock_ps(const kb_clock *c, double cycles)
{
	if (cycles >= 0.0 && cycles < c->exact_below) {
		uint64_t x = (uint64_t)cycles;

		if ((double)x == cycles)
			return x * c->ps_per_cycle;
	}
	return kb__cycles_to_ps(cycles, c->ghz);
}
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
