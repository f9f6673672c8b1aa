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
