/*
 * "Did you mean ...?" for mistyped names: offer the known names one by one,
 * then ask for the closest, which is given only when it is close enough to
 * be a typo. The one helper behind every suggestion the library and the
 * command make (topology keys, benches, parameters, options, commands).
 */
#ifndef KB_BASE_SUGGEST_H
#define KB_BASE_SUGGEST_H

#include <stddef.h>

typedef struct kb__suggest {
	const char *name;        /* the mistyped name */
	size_t len;
	const char *best;        /* closest candidate so far (not NUL-terminated) */
	size_t best_len;
	size_t best_d;           /* its edit distance */
} kb__suggest;

void kb__suggest_init(kb__suggest *s, const char *name, size_t len);
/* Offers a candidate of len bytes (need not be NUL-terminated). */
void kb__suggest_offer(kb__suggest *s, const char *cand, size_t len);
/* The closest candidate when it is a likely typo (about one edit in three
 * characters, letter case ignored), with its length in *len; else NULL. */
const char *kb__suggest_best(const kb__suggest *s, size_t *len);

#endif
