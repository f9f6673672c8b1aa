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
 * to change nothing. When 1000 / ghz is a whole number P exactly (1 GHz:
 * 1000; checked with fma, so ghz is 1000 / P exactly):
 * - a whole number of cycles x below whole_below converts to x * P. Why
 *   that is the same integer: x * 1000.0 is exact (under 2^52), the exact
 *   quotient x * 1000 / ghz is x * P, a whole number under 2^52, so the
 *   division returns it exactly, and x * P + 0.5 is exact there too, so
 *   the rounding keeps x * P.
 * - cycles = y / 2^16 with y whole (dispatch costs such as 40 + 0.0625 *
 *   bytes) below frac_below convert to (y * P + 2^15) >> 16: the same
 *   argument with 16 bits of fraction, all of it under 2^53, and floor
 *   of the exact (y * P + 2^15) / 2^16 is that shift.
 * Everything else (other fractions, other clocks, huge counts, negatives,
 * NaN) takes kb__cycles_to_ps. */
typedef struct kb_clock {
	double ghz;
	uint64_t ps_per_cycle;   /* P; 0 when 1000 / ghz is not a whole number */
	double whole_below;      /* 0 when P is 0 */
	double frac_below;       /* 0 when P is 0 */
} kb_clock;

void kb__clock_init(kb_clock *c, double ghz);
static inline kb_time kb__clock_ps(const kb_clock *c, double cycles)
{
	if (cycles >= 0.0 && cycles < c->whole_below) {
		uint64_t x = (uint64_t)cycles;
		double y;

		if ((double)x == cycles)
			return x * c->ps_per_cycle;
		if (cycles < c->frac_below) {
			y = cycles * 65536.0;   /* exact: a power of two */
			x = (uint64_t)y;
			if ((double)x == y)
				return (x * c->ps_per_cycle + 32768) >> 16;
		}
	}
	return kb__cycles_to_ps(cycles, c->ghz);
}

/* *t += d unless the sum passes KB_TIME_MAX: then -1 and *t unchanged. */
static inline int kb__time_add(kb_time *t, kb_time d)
{
	if (*t > KB_TIME_MAX || d > KB_TIME_MAX - *t)
		return -1;
	*t += d;
	return 0;
}

#endif
