/*
 * A caller's kb_result and its size field (kernbench/bench.h): which sizes
 * the library accepts, and how a result the library filled in full reaches
 * a caller whose struct is smaller (built against an older header) or
 * larger (a newer one).
 */
#ifndef KB_RUNTIME_RESULT_H
#define KB_RUNTIME_RESULT_H

#include <stddef.h>

#include "kernbench/bench.h"

/* Whether res's size covers a field (the field lies whole within it). */
#define KB__RESULT_HAS(res, field) \
	((res)->size >= offsetof(kb_result, field) + sizeof((res)->field))

/* 0 when res->size is at least KB_RESULT_SIZE_V1, else KB_EINVAL naming fn
 * and res->size (a struct not set with KB_RESULT_INIT). */
int kb__result_check(const kb_result *res, const char *fn, kb_error *err);
/* kb__result_check, then zeroes every field within res->size but size
 * itself, so that kb_result_clear is safe whatever the run does next. */
int kb__result_begin(kb_result *res, const char *fn, kb_error *err);
/* A result the library fills in full: zeroed, size = sizeof(kb_result). */
void kb__result_init(kb_result *res);
/*
 * Hands full (size sizeof(kb_result), filled by the library) over to dst
 * (dst->size checked): the first min(dst->size, sizeof(kb_result)) bytes
 * are copied, what full owns beyond them is freed, the rest of dst is not
 * touched, and dst->size becomes the number of bytes written. full is left
 * as kb__result_init leaves it.
 */
void kb__result_deliver(kb_result *dst, kb_result *full);

#endif
