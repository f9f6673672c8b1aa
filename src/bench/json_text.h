/*
 * JSON text written directly, byte for byte as jansson's compact dump
 * (JSON_COMPACT | JSON_PRESERVE_ORDER) writes the same values, for the
 * texts of every run (the result, its parameters, its provenance): building
 * jansson objects and dumping them was a third of a short run's own work
 * (issue 13). Only what is sure to come out the same is written; the
 * rest (a string that is not plain ASCII, a stored text this writer does
 * not reproduce) sets bad, and the caller takes jansson's path instead.
 */
#ifndef KB_BENCH_JSON_TEXT_H
#define KB_BENCH_JSON_TEXT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct kb__jtext {
	char *p;
	size_t n, cap;
	bool bad;   /* out of memory, or a value to leave to jansson */
} kb__jtext;

#define KB__JTEXT_INIT { NULL, 0, 0, false }

/* n bytes as they are. */
void kb__jt_put(kb__jtext *b, const char *s, size_t n);
/* A string of ASCII, escaped as jansson escapes it (\" \\ \b \f \n \r \t);
 * another control character or a byte past ASCII: bad. */
void kb__jt_string(kb__jtext *b, const char *s);
/* "name": (a comma first unless first). */
void kb__jt_key(kb__jtext *b, const char *name, bool first);
/* An integer, as "%lld". */
void kb__jt_int(kb__jtext *b, long long v);
/* A finite real as jansson's dtostr writes it at precision (1 to 17). */
void kb__jt_real(kb__jtext *b, double v, int precision);
/* A stored JSON text (an object or array, as json_loads with flags 0
 * reads it) as a parse and a dump at precision would write it again. */
void kb__jt_copy(kb__jtext *b, const char *text, int precision);
/* The text, NUL-terminated (a malloc'ed string), or NULL when bad (the
 * buffer freed). */
char *kb__jt_finish(kb__jtext *b);

#endif
