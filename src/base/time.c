#include "base/time.h"

#include <math.h>

kb_time kb__cycles_to_ps(double cycles, double clock_ghz)
{
	double ps = cycles * 1000.0 / clock_ghz;

	if (!(ps > 0.0))
		return 0;
	if (ps >= 18446744073709549568.0)
		return KB_TIME_INF - 1;
	return (kb_time)floor(ps + 0.5);
}
