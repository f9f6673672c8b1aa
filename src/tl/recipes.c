/* The recipe table (ADR-0065 D5). */
#include "tl/recipes.h"

#include <string.h>

#define NO KB_RECIPE_NO_AXIS

static const kb_recipe recipes[] = {
	{
		/* Online-softmax merge of one KV tile's scores s into the running
		 * (m, l, O); emits P = exp(s - m_new) for the P.V GEMM. */
		.name = "softmax_merge",
		.operands = {
			{ "s", KB_RECIPE_R }, { "m", KB_RECIPE_RW },
			{ "l", KB_RECIPE_RW }, { "O", KB_RECIPE_RW },
		},
		.scratch = {
			{ "m_loc", "s", KB_RECIPE_ROWVEC }, { "m_new", "s", KB_RECIPE_ROWVEC },
			{ "corr", "s", KB_RECIPE_ROWVEC }, { "P", "s", KB_RECIPE_SAME },
			{ "l_loc", "s", KB_RECIPE_ROWVEC },
		},
		.primary_out = "P",
		.steps = {
			{ KB_MATH_RMAX, { "s" }, "m_loc", -1, NO },
			{ KB_MATH_MAX_ELEM, { "m", "m_loc" }, "m_new", 0, NO },
			{ KB_MATH_EXP_DIFF, { "m", "m_new" }, "corr", 0, NO },
			{ KB_MATH_EXP_DIFF, { "s", "m_new" }, "P", 0, 0 },
			{ KB_MATH_RSUM, { "P" }, "l_loc", -1, NO },
			{ KB_MATH_FMA, { "l", "corr", "l_loc" }, "l", 0, NO },
			{ KB_MATH_MUL_BCAST, { "O", "corr" }, "O", 0, 1 },
			{ KB_MATH_COPY, { "m_new" }, "m", 0, NO },
		},
	},
};

const kb_recipe *kb__recipe_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof(recipes) / sizeof(recipes[0]); i++)
		if (strcmp(recipes[i].name, name) == 0)
			return &recipes[i];
	return NULL;
}

size_t kb__recipe_count(void)
{
	return sizeof(recipes) / sizeof(recipes[0]);
}

const kb_recipe *kb__recipe_get(size_t i)
{
	return i < kb__recipe_count() ? &recipes[i] : NULL;
}
