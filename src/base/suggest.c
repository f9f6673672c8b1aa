#include "base/suggest.h"

#include <stdint.h>
#include <string.h>

#include "kernbench/common.h"

/* Longer names are never typos of each other worth suggesting. */
#define SUGGEST_MAX_LEN 128

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Levenshtein distance, letter case ignored (S_kv for s_kv is one fix, not
 * two); SIZE_MAX when either is too long. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
	size_t row[SUGGEST_MAX_LEN + 1], i, j, diag, up;

	if (la > SUGGEST_MAX_LEN || lb > SUGGEST_MAX_LEN)
		return SIZE_MAX;
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		diag = row[0];
		row[0] = i;
		for (j = 1; j <= lb; j++) {
			up = row[j];
			row[j] = diag + (lower(a[i - 1]) != lower(b[j - 1]));
			if (up + 1 < row[j])
				row[j] = up + 1;
			if (row[j - 1] + 1 < row[j])
				row[j] = row[j - 1] + 1;
			diag = up;
		}
	}
	return row[lb];
}

void kb__suggest_init(kb__suggest *s, const char *name, size_t len)
{
	s->name = name;
	s->len = len;
	s->best = NULL;
	s->best_len = 0;
	s->best_d = SIZE_MAX;
}

void kb__suggest_offer(kb__suggest *s, const char *cand, size_t len)
{
	size_t d;

	if (len == s->len && memcmp(cand, s->name, len) == 0)
		return; /* the name itself is no suggestion */
	d = edit_distance(s->name, s->len, cand, len);
	/* The first of equally close candidates wins: the order is the caller's. */
	if (d < s->best_d) {
		s->best_d = d;
		s->best = cand;
		s->best_len = len;
	}
}

const char *kb__suggest_best(const kb__suggest *s, size_t *len)
{
	/* Close enough to be a typo: about one edit per three characters; a
	 * one-letter name only in another case ("m" for "M"), since every other
	 * one-letter name is one edit away. */
	size_t allowed = s->len < 2 ? 0 : (s->len + 2) / 3;

	if (!s->best || !s->len || s->best_d > allowed)
		return NULL;
	if (len)
		*len = s->best_len;
	return s->best;
}

const char *kb_suggest(const char *name, const char *const *candidates, size_t n)
{
	kb__suggest s;
	size_t len;

	if (!name || !candidates)
		return NULL;
	kb__suggest_init(&s, name, strlen(name));
	for (size_t i = 0; i < n; i++)
		if (candidates[i])
			kb__suggest_offer(&s, candidates[i], strlen(candidates[i]));
	return kb__suggest_best(&s, &len);
}
