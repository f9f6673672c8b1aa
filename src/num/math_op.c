/*
 * The MATH op vocabulary. See math_op.h.
 */
#include "num/math_op.h"

#include <string.h>

#include "kernbench/common.h"

/* ---- kind table -------------------------------------------------------- */

static const struct {
	const char *name;
	int arity;
} kinds[KB_MATH_KIND_COUNT] = {
	[KB_MATH_RMAX] = { "rmax", 1 },           [KB_MATH_MAX_ELEM] = { "max_elem", 2 },
	[KB_MATH_EXP_DIFF] = { "exp_diff", 2 },   [KB_MATH_RSUM] = { "rsum", 1 },
	[KB_MATH_FMA] = { "fma", 3 },             [KB_MATH_MUL_BCAST] = { "mul_bcast", 2 },
	[KB_MATH_COPY] = { "copy", 1 },           [KB_MATH_ADD] = { "add", 2 },
	[KB_MATH_SUB] = { "sub", 2 },             [KB_MATH_MUL] = { "mul", 2 },
	[KB_MATH_BIAS] = { "bias", 2 },           [KB_MATH_SCALE] = { "scale", 1 },
	[KB_MATH_RELU] = { "relu", 1 },           [KB_MATH_GELU] = { "gelu", 1 },
	[KB_MATH_EXP] = { "exp", 1 },             [KB_MATH_DIV] = { "div", 2 },
};

static int kind_valid(kb_math_kind kind)
{
	return (int)kind >= 0 && kind < KB_MATH_KIND_COUNT;
}

const char *kb__math_kind_name(kb_math_kind kind)
{
	return kind_valid(kind) ? kinds[kind].name : "?";
}

int kb__math_kind_parse(const char *name, kb_math_kind *out)
{
	int i;

	for (i = 0; name && i < KB_MATH_KIND_COUNT; i++) {
		if (strcmp(name, kinds[i].name) == 0) {
			*out = (kb_math_kind)i;
			return KB_OK;
		}
	}
	return KB_EINVAL;
}

int kb__math_arity(kb_math_kind kind)
{
	return kind_valid(kind) ? kinds[kind].arity : 0;
}

/* ---- shapes ------------------------------------------------------------ */
