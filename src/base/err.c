#include "base/err.h"

#include <stdio.h>
#include <string.h>

#include "kernbench/version.h"

int kb__verr(kb_error *err, int code, const char *fmt, va_list ap)
{
	if (!err)
		return code;
	err->code = code;
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

void kb__err_copy(kb_error *dst, const kb_error *src)
{
	if (dst && src && dst != src)
		*dst = *src;
}

KB_API void kb_error_clear(kb_error *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
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
		"unbalanced_scope", "unknown_op",
	};
	if (detail < 0 || (size_t)detail >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[detail];
}

KB_API const char *kb_version(void)
{
	return KB_VERSION_STRING;
}

KB_API unsigned kb_version_hex(void)
{
	return KB_VERSION_HEX;
}

KB_API size_t kb_dtype_size(kb_dtype dt)
{
	switch (dt) {
	case KB_FP32: return 4;
	case KB_FP16: case KB_BF16: return 2;
	default: return 0;
	}
}

KB_API const char *kb_dtype_name(kb_dtype dt)
{
	switch (dt) {
	case KB_FP32: return "fp32";
	case KB_FP16: return "fp16";
	case KB_BF16: return "bf16";
	default: return NULL;
	}
}

KB_API int kb_dtype_parse(const char *name, kb_dtype *out)
{
	static const kb_dtype all[] = { KB_FP32, KB_FP16, KB_BF16 };
	for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++) {
		if (strcmp(name, kb_dtype_name(all[i])) == 0) {
			*out = all[i];
			return KB_OK;
		}
	}
	return KB_EINVAL;
}
