#include "base/str.h"

#include <stdlib.h>
#include <string.h>

char *kb__strdup_opt(const char *s, int *failed)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*failed = 1;
	return d;
}
