#include "base/str.h"

#include <errno.h>
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

int kb__parse_u64(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	if (*s < '0' || *s > '9')   /* strtoull would take a sign */
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE || v > UINT64_MAX)
		return -1;
	while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
		end++;
	if (*end)
		return -1;
	*out = (uint64_t)v;
	return 0;
}
