/*
 * String helpers the modules share.
 */
#ifndef KB_BASE_STR_H
#define KB_BASE_STR_H

/* A malloc'd copy of s, or NULL when s is NULL (an optional string: a path,
 * a help text). When out of memory it returns NULL and sets *failed, which
 * is otherwise left as it is, so one flag covers a series of copies. */
char *kb__strdup_opt(const char *s, int *failed);

#endif
