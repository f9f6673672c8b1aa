#include "base/err.h"

#include <stdio.h>
#include <string.h>

int kb__verr(kb_error *err, int code, const char *fmt, va_list ap)
{
	if (!err)
		return code;
	err->code = code;
	err->version = KB_ERROR_VERSION;
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	return code;
}

int kb__err(kb_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kb__verr(err, code, fmt, ap);
	va_end(ap);
	return code;
}

int kb__err_at(kb_error *err, int code, const char *source, int line, int column,
	       const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	va_start(ap, fmt);
	kb__verr(err, code, fmt, ap);
	va_end(ap);
	snprintf(err->source, sizeof(err->source), "%s", source ? source : "");
	err->line = line;
	err->column = column;
	return code;
}

void kb__err_prefix(kb_error *err, const char *fmt, ...)
{
	char prefix[256], old[sizeof(err->message)];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->message, sizeof(old));
	snprintf(err->message, sizeof(err->message), "%.250s: %.500s", prefix, old);
}

const char *kb__err_text(const kb_error *err, int code)
{
	return err && err->message[0] ? err->message : kb_strerror(code);
}

void kb__err_copy(kb_error *dst, const kb_error *src)
{
	if (dst && src && dst != src)
		*dst = *src;
}

KB_API void kb_error_clear(kb_error *err)
{
	if (err) {
		memset(err, 0, sizeof(*err));
		err->version = KB_ERROR_VERSION;
	}
}

KB_API const char *kb_strerror(int code)
{
	switch (code) {
	case KB_OK: return "success";
	case KB_EINVAL: return "invalid argument";
	case KB_ENOMEM: return "out of memory";
	case KB_EIO: return "input/output error";
	case KB_EPARSE: return "parse error";
	case KB_EKEY: return "unknown key";
	case KB_ERANGE: return "value out of range";
	case KB_ETYPE: return "wrong type";
	case KB_ELOOKAHEAD: return "lookahead violation";
	case KB_EDEADLOCK: return "deadlock";
	case KB_EVALIDATE: return "kernel validation error";
	case KB_EMEM: return "simulated memory fault";
	case KB_ENOTFOUND: return "not found";
	case KB_ESTATE: return "invalid state";
	case KB_EINTERNAL: return "internal error";
	default: return "unknown error";
	}
}

KB_API const char *kb_validation_name(int detail)
{
	static const char *const names[] = {
		"none", "autobind_conflict", "prologue_hbm_operand", "two_gemms",
		"over_size_cap", "unknown_recipe", "missing_operand", "tcm_exhausted",
		"shape_mismatch", "dtype_mismatch", "bad_handle", "wrong_space",
		"unbalanced_scope", "unknown_op", "kernel_fail", "too_many_stages",
		"unknown_extra",
	};
	if (detail < 0 || (size_t)detail >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[detail];
}
