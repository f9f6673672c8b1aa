/*
 * Recipes: named macro ops the tl context expands into flat MATH OpSpecs
 * at emit time (ADR-0065 D5). This table is the only place that knows a
 * recipe; nothing under src/pe includes this header. Adding a recipe is
 * adding an entry to the table in recipes.c.
 */
#ifndef KB_TL_RECIPES_H
#define KB_TL_RECIPES_H

#include <stddef.h>
#include <stdint.h>

#include "num/math_op.h"

#define KB_RECIPE_MAX_OPERANDS 6
#define KB_RECIPE_MAX_SCRATCH 6
#define KB_RECIPE_MAX_STEPS 12

typedef enum kb_recipe_access { KB_RECIPE_R = 0, KB_RECIPE_RW = 1 } kb_recipe_access;
/* Shape of a scratch slot, derived from an operand's shape. */
typedef enum kb_recipe_shape { KB_RECIPE_SAME = 0, KB_RECIPE_ROWVEC = 1 } kb_recipe_shape;

typedef struct kb_recipe_slot {
	const char *name;
	kb_recipe_access access;       /* operands only */
} kb_recipe_slot;

typedef struct kb_recipe_scratch {
	const char *name;
	const char *like;              /* operand it takes shape and dtype from */
	kb_recipe_shape shape;
} kb_recipe_scratch;

/* One micro-op: dst = kind(src...), with optional axis extras. */
typedef struct kb_recipe_step {
	kb_math_kind kind;
	const char *src[3];
	const char *dst;
	int reduce_axis;               /* extra "reduce_axis" when set (not 0) */
	int bcast_axis;                /* extra "bcast_axis" when >= 0 */
} kb_recipe_step;

typedef struct kb_recipe {
	const char *name;
	kb_recipe_slot operands[KB_RECIPE_MAX_OPERANDS];
	kb_recipe_scratch scratch[KB_RECIPE_MAX_SCRATCH];
	const char *primary_out;       /* scratch slot auto-bound to the head GEMM's `a`; NULL: none */
	kb_recipe_step steps[KB_RECIPE_MAX_STEPS];
} kb_recipe;

#define KB_RECIPE_NO_AXIS (-100)

/*
 * A recipe with its names resolved to slot numbers, once per process:
 * slots 0 .. n_operands-1 are the operands in table order, the scratch
 * follows. Lowering binds slots by number, so no name is compared per
 * command (issue 13).
 */
typedef struct kb_recipe_ids {
	int n_operands, n_scratch, n_steps;
	int8_t like[KB_RECIPE_MAX_SCRATCH];   /* slot a scratch takes its shape from */
	int8_t src[KB_RECIPE_MAX_STEPS][3];
	int8_t dst[KB_RECIPE_MAX_STEPS];
	int8_t primary;                        /* slot of primary_out; -1: none */
} kb_recipe_ids;

#define KB_RECIPE_MAX_SLOTS (KB_RECIPE_MAX_OPERANDS + KB_RECIPE_MAX_SCRATCH)

const kb_recipe *kb__recipe_find(const char *name);
/* r's slot numbers (r from this table); NULL when the table entry names a
 * slot it does not have (a bug in the table). Any thread. */
const kb_recipe_ids *kb__recipe_ids(const kb_recipe *r);
size_t kb__recipe_count(void);
const kb_recipe *kb__recipe_get(size_t i);

#endif
