/* Internal error helpers: fill a caller's kb_error and return the code. */
#ifndef KB_BASE_ERR_H
#define KB_BASE_ERR_H

#include <stdarg.h>
#include "kernbench/common.h"

/* Sets err (may be NULL) to code and a printf-style message; returns code. */
int kb__err(kb_error *err, int code, const char *fmt, ...) KB_PRINTF(3, 4);
int kb__verr(kb_error *err, int code, const char *fmt, va_list ap) KB_PRINTF(3, 0);
/* Like kb__err, and records a source (file or key) with line and column. */
int kb__err_at(kb_error *err, int code, const char *source, int line, int column,
	       const char *fmt, ...) KB_PRINTF(6, 7);
/* Prefixes an existing error message with "prefix: ". */
void kb__err_prefix(kb_error *err, const char *fmt, ...) KB_PRINTF(2, 3);
/* What to tell of an error: err's message, or kb_strerror(code) when err
 * is NULL or has none (a callee that returned a code without a text). */
const char *kb__err_text(const kb_error *err, int code);
/* Copies src into dst (either may be NULL). */
void kb__err_copy(kb_error *dst, const kb_error *src);

#define KB_UNUSED(x) ((void)(x))

#endif
