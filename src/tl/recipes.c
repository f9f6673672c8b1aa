/* The recipe table (ADR-0065 D5). */
#include "tl/recipes.h"

#include <pthread.h>
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
	/* The table's own literal first (a kernel built with the library
	 * passes it, the linker merging equal literals): no strcmp per
	 * composite then. */
	for (size_t i = 0; name && i < sizeof(recipes) / sizeof(recipes[0]); i++)
		if (recipes[i].name == name)
			return &recipes[i];
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

#define N_RECIPES (sizeof(recipes) / sizeof(recipes[0]))

static kb_recipe_ids ids[N_RECIPES];
static int ids_ok[N_RECIPES];
static pthread_once_t ids_once = PTHREAD_ONCE_INIT;

/* Slot of name in r: operands, then scratch; -1: none. */
static int slot_of(const kb_recipe *r, const char *name)
{
	int n = 0;

	for (int k = 0; k < KB_RECIPE_MAX_OPERANDS && r->operands[k].name; k++, n++)
		if (name && strcmp(r->operands[k].name, name) == 0)
			return n;
	for (int k = 0; k < KB_RECIPE_MAX_SCRATCH && r->scratch[k].name; k++, n++)
		if (name && strcmp(r->scratch[k].name, name) == 0)
			return n;
	return -1;
}

static int resolve(const kb_recipe *r, kb_recipe_ids *d)
{
	int ok = 1;

	memset(d, 0, sizeof(*d));
	while (d->n_operands < KB_RECIPE_MAX_OPERANDS && r->operands[d->n_operands].name)
		d->n_operands++;
	while (d->n_scratch < KB_RECIPE_MAX_SCRATCH && r->scratch[d->n_scratch].name) {
		d->like[d->n_scratch] = (int8_t)slot_of(r, r->scratch[d->n_scratch].like);
		/* a scratch takes its shape from an operand, or an earlier scratch */
		ok &= d->like[d->n_scratch] >= 0 && d->like[d->n_scratch] < d->n_operands + d->n_scratch;
		d->n_scratch++;
	}
	while (d->n_steps < KB_RECIPE_MAX_STEPS && r->steps[d->n_steps].dst) {
		const kb_recipe_step *st = &r->steps[d->n_steps];

		for (int i = 0; i < kb__math_arity(st->kind) && i < 3; i++) {
			d->src[d->n_steps][i] = (int8_t)slot_of(r, st->src[i]);
			ok &= d->src[d->n_steps][i] >= 0;
		}
		d->dst[d->n_steps] = (int8_t)slot_of(r, st->dst);
		ok &= d->dst[d->n_steps] >= 0 && kb__math_arity(st->kind) <= 3;
		d->n_steps++;
	}
	d->primary = (int8_t)(r->primary_out ? slot_of(r, r->primary_out) : -1);
	ok &= !r->primary_out || d->primary >= 0;
	return ok;
}

static void resolve_all(void)
{
	for (size_t i = 0; i < N_RECIPES; i++)
		ids_ok[i] = resolve(&recipes[i], &ids[i]);
}

const kb_recipe_ids *kb__recipe_ids(const kb_recipe *r)
{
	size_t i = (size_t)(r - recipes);

	if (i >= N_RECIPES)
		return NULL;
	pthread_once(&ids_once, resolve_all);
	return ids_ok[i] ? &ids[i] : NULL;
}
