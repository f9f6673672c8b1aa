/*
 * String helpers the modules share.
 */
#ifndef KB_BASE_STR_H
#define KB_BASE_STR_H

#include <stdint.h>
#include <string.h>

/* A malloc'd copy of s, or NULL when s is NULL (an optional string: a path,
 * a help text). When out of memory it returns NULL and sets *failed, which
 * is otherwise left as it is, so one flag covers a series of copies. */
char *kb__strdup_opt(const char *s, int *failed);

/* a equals b. A name the library hands out (an op or operand name from its
 * tables) is usually the very pointer it is compared with, as the linker
 * merges equal literals: then no strcmp runs, which matters where a name
 * is matched per command (issue 13). */
static inline int kb__same_name(const char *a, const char *b)
{
	return a == b || strcmp(a, b) == 0;
}

/* The unsigned decimal that s holds (leading blanks, then digits, then
 * only blanks or a line end), into *out: 0, or -1 when s holds none or one
 * past UINT64_MAX (a cgroup's "max" is none). */
int kb__parse_u64(const char *s, uint64_t *out);

#endif
