/*
 * Growing an array by doubling: one place for the idiom that ~20 arrays of
 * the library repeated (cap ? 2 * cap : first, realloc, keep on failure).
 */
#ifndef KB_BASE_GROW_H
#define KB_BASE_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* arr (of *cap elements of elem bytes) reallocated to twice *cap, or to
 * first when *cap is 0. Returns the new array and sets *cap, or returns
 * NULL (the size would overflow, or no memory) with arr and *cap as they
 * were: the caller stores the result only when it is not NULL. */
static inline void *kb__grow(void *arr, size_t *cap, size_t elem, size_t first)
{
	size_t n = *cap ? 2 * *cap : first;
	void *p;

	if (n < *cap || (elem && n > SIZE_MAX / elem) || !(p = realloc(arr, n * elem)))
		return NULL;
	*cap = n;
	return p;
}

/* arr grown, by doubling from first (or *cap), until index need fits,
 * in one realloc; the new elements are zeroed. For arrays indexed by an id
 * that can jump ahead (a PE number, a bitmap word). Returns the new array
 * and sets *cap, or NULL with arr and *cap as they were. */
static inline void *kb__grow_to(void *arr, size_t *cap, size_t elem, size_t first, uint64_t need)
{
	size_t n = *cap ? *cap : first;
	char *p;

	while (n <= need) {
		if (n > SIZE_MAX / 2)
			return NULL;
		n *= 2;
	}
	if ((elem && n > SIZE_MAX / elem) || !(p = realloc(arr, n * elem)))
		return NULL;
	memset(p + *cap * elem, 0, (n - *cap) * elem);
	*cap = n;
	return p;
}

#endif
