/*
 * The MATH op vocabulary: the kinds of micro-op the MATH engine runs, their
 * names in the op_log and their arity. The command set (pe/cmd.h), the
 * recipes (tl) and the fp32 kernels (num/kernels.h) all speak it, so it
 * sits at the bottom, beside the kernels that define what each kind does.
 *
 * Thread rules: every function is reentrant and may be called from any
 * thread.
 */
#ifndef KB_NUM_MATH_OP_H
#define KB_NUM_MATH_OP_H

/* MATH micro-op kinds; names as in the op_log ("rmax", "exp_diff", ...). */
typedef enum kb_math_kind {
	KB_MATH_RMAX = 0,   /* max over the last axis */
	KB_MATH_MAX_ELEM,   /* max(a, b) */
	KB_MATH_EXP_DIFF,   /* exp(a - b) */
	KB_MATH_RSUM,       /* sum over the last axis */
	KB_MATH_FMA,        /* a * b + c (two fp32 roundings, not fused) */
	KB_MATH_MUL_BCAST,  /* a * b, b usually a per-row column (G,1) */
	KB_MATH_COPY,       /* a */
	KB_MATH_ADD,        /* a + b */
	KB_MATH_SUB,        /* a - b */
	KB_MATH_MUL,        /* a * b */
	KB_MATH_BIAS,       /* a + bias, bias a row vector (C) or (1,C) */
	KB_MATH_SCALE,      /* a * ex->scale */
	KB_MATH_RELU,       /* max(a, 0) */
	KB_MATH_GELU,       /* tanh approximation, see kb__math_apply */
	KB_MATH_EXP,        /* exp(a) */
	KB_MATH_DIV,        /* a / b */
	KB_MATH_KIND_COUNT
} kb_math_kind;

/* Extra operands of a MATH op. */
typedef struct kb_math_extra {
	float scale; /* KB_MATH_SCALE multiplier */
} kb_math_extra;

#define KB_MATH_EXTRA_INIT { 1.0f }

/* "rmax", "max_elem", ...; "?" for an invalid kind. */
const char *kb__math_kind_name(kb_math_kind kind);
/* Parses a kind name; KB_EINVAL (err untouched) for an unknown name. */
int kb__math_kind_parse(const char *name, kb_math_kind *out);
/* Number of tensor inputs of a kind (1, 2 or 3); 0 for an invalid kind. */
int kb__math_arity(kb_math_kind kind);

#endif
