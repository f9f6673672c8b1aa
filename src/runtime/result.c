/*
 * The size field of kb_result: a program built against an older header
 * passes a smaller struct, one built against a newer header a larger one,
 * and the library writes only what both know (kernbench/bench.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "runtime/result.h"

int kb__result_check(const kb_result *res, const char *fn, kb_error *err)
{
	if (!res)
		return kb__err(err, KB_EINVAL, "%s: res is NULL", fn);
	if (res->size < KB_RESULT_SIZE_V1)
		return kb__err(err, KB_EINVAL,
			       "%s: res->size is %zu, under the %zu bytes of the first kb_result "
			       "layout: initialise the struct with KB_RESULT_INIT",
			       fn, res->size, (size_t)KB_RESULT_SIZE_V1);
	return KB_OK;
}

int kb__result_begin(kb_result *res, const char *fn, kb_error *err)
{
	int rc = kb__result_check(res, fn, err);
	size_t n;

	if (rc)
		return rc;
	n = res->size < sizeof(*res) ? res->size : sizeof(*res);
	memset((char *)res + sizeof(res->size), 0, n - sizeof(res->size));
	return KB_OK;
}

void kb__result_init(kb_result *res)
{
	memset(res, 0, sizeof(*res));
	res->size = sizeof(*res);
}

/* Frees full's owned field when dst (of size n) has no room for it. */
#define DROP_UNLESS_FITS(full, n, field)                                       \
	do {                                                                   \
		if ((n) < offsetof(kb_result, field) + sizeof((full)->field)) { \
			free((full)->field);                                   \
			(full)->field = NULL;                                  \
		}                                                              \
	} while (0)

void kb__result_deliver(kb_result *dst, kb_result *full)
{
	size_t n = dst->size < sizeof(*dst) ? dst->size : sizeof(*dst);

	DROP_UNLESS_FITS(full, n, busy);
	DROP_UNLESS_FITS(full, n, params_json);
	DROP_UNLESS_FITS(full, n, meta_json);
	memcpy(dst, full, n);
	dst->size = n;
	kb__result_init(full);
}

KB_API void kb_result_clear(kb_result *res)
{
	/* Field by field within size: a struct of an older, smaller layout
	 * owns only what lies in it (a zeroed one, size 0, owns nothing). */
	if (!res)
		return;
	if (KB__RESULT_HAS(res, busy)) {
		free(res->busy);
		res->busy = NULL;
	}
	if (KB__RESULT_HAS(res, n_busy))
		res->n_busy = 0;
	if (KB__RESULT_HAS(res, params_json)) {
		free(res->params_json);
		res->params_json = NULL;
	}
	if (KB__RESULT_HAS(res, meta_json)) {
		free(res->meta_json);
		res->meta_json = NULL;
	}
}
