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

void kb__clock_init(kb_clock *c, double ghz)
{
	double p = ghz > 0.0 ? 1000.0 / ghz : 0.0, top;

	*c = (kb_clock){ .ghz = ghz };
	/* P must be whole and P * ghz exactly 1000 (fma rounds once, so its
	 * zero means no remainder at all): then ghz is 1000 / P exactly. */
	if (!(p >= 1.0 && p < 4503599627370496.0) || p != floor(p) || fma(p, ghz, -1000.0) != 0.0)
		return;
	c->ps_per_cycle = (uint64_t)p;
	top = p > 1000.0 ? p : 1000.0;
	/* x * P and x * 1000 under 2^52 */
	c->whole_below = floor(4503599627370496.0 / top);
	/* y = cycles * 2^16: y * P + 2^15 and y * 1000 under 2^52 */
	c->frac_below = floor(4503599627370496.0 / top / 65536.0 - 1.0);
}
