/*
 * Zeroing a small fixed-size block (a few hundred bytes) on a hot path.
 */
#ifndef KB_BASE_ZERO_H
#define KB_BASE_ZERO_H

#include <stddef.h>
#include <string.h>

/* Zeroes n bytes at p. For a constant n, GCC turns a memset above 64
 * bytes into `rep stos`, whose start-up (some 30-40 cycles) was most of
 * the time zeroing a command or a plan took, once per command (issue 13):
 * here each 64-byte piece becomes four 16-byte stores. */
static inline void kb__zero(void *p, size_t n)
{
	unsigned char *b = p;
	size_t i = 0;

	for (; i + 64 <= n; i += 64)
		memset(b + i, 0, 64);
	if (i < n)
		memset(b + i, 0, n - i);
}

#endif
