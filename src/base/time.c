#include "base/time.h"

#include <math.h>

kb_time kb__cycles_to_ps(double cycles, double clock_ghz)
{
	double ps = cycles * 1000.0 / clock_ghz;

	if (!(ps > 0.0))
		return 0;
	/* 2^63 exactly: the first double past KB_TIME_MAX (NaN is caught above). */
	if (ps >= 9223372036854775808.0)
		return KB_TIME_INF;
	return (kb_time)floor(ps + 0.5);
}

/* Whether P * ghz is 1000 exactly, for a whole P in [1, 2^52): what
 * fma(P, ghz, -1000.0) == 0 says, without libm (the command loads libm
 * only when a run first calls into it, src/cli/libm.c, and every run comes
 * here). 1000 / P in lowest terms has a power of two below only if P's odd
 * part divides 125 (1000 = 2^3 * 5^3); then 1000 / P is 5^i * 2^j, a
 * double, the division returns it exactly, and ghz must be it. Otherwise
 * 1000 / P is no double, so no ghz gives 1000 exactly. */
static int times_ghz_is_1000(double p, double ghz)
{
	uint64_t q = (uint64_t)p;

	q /= q & (~q + 1);   /* the odd part: P over its lowest set bit */
	return (q == 1 || q == 5 || q == 25 || q == 125) && 1000.0 / p == ghz;
}

void kb__clock_init(kb_clock *c, double ghz)
{
	double p = ghz > 0.0 ? 1000.0 / ghz : 0.0, top;

	*c = (kb_clock){ .ghz = ghz };
	/* P must be whole and P * ghz exactly 1000: then ghz is 1000 / P
	 * exactly. */
	if (!(p >= 1.0 && p < 4503599627370496.0) || p != floor(p) || !times_ghz_is_1000(p, ghz))
		return;
	c->ps_per_cycle = (uint64_t)p;
	top = p > 1000.0 ? p : 1000.0;
	/* x * P and x * 1000 under 2^52 */
	c->whole_below = floor(4503599627370496.0 / top);
	/* y = cycles * 2^16: y * P + 2^15 and y * 1000 under 2^52 */
	c->frac_below = floor(4503599627370496.0 / top / 65536.0 - 1.0);
}
