/*
 * Composite lowering (ADR-0065 D1-D8, DDD §6): prologue recipes expand
 * into flat KERNEL-scope MATH OpSpecs with their scratch allocated in the
 * current scope, the recipe's primary output auto-binds to the head GEMM's
 * `a`, epilogue ops follow the head, and the result is one CompositeCmd
 * with its rw_handles, checked against every invariant before emit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/str.h"
#include "num/kernels.h"
#include "pe/plan.h"
#include "tl/recipes.h"
#include "tl/replay.h"
#include "tl/tl_int.h"

#define MAX_OPS 48
/* Handles one composite can name: every op's operands and output. */
#define MAX_IDS (MAX_OPS * 6)

/* The recipe shapes last found consistent: a recipe's step shapes follow
 * from its operands' shapes alone (scratch takes its shape from them), so
 * a decode loop that calls it with the same shapes every tile checks them
 * once (issue 13), not per step per command. */
typedef struct shape_memo {
	const kb_recipe *r;          /* NULL: nothing checked yet */
	uint8_t rank[KB_RECIPE_MAX_OPERANDS];
	int64_t shape[KB_RECIPE_MAX_OPERANDS][4];
} shape_memo;

/* Op names remembered: a kernel's distinct names, all of them, since a
 * loop over more names than entries misses every time round-robin (opt3
 * uses nine per KV tile). */
#define N_NAMES 32

typedef struct lowering {
	kb_tl *tl;
	/* The command being built: ops are lowered into it in place, so no
	 * op is zeroed whole or copied (each ~420 bytes; together ~4% of a
	 * decode run). */
	kb_cmd *cmd;
	kb_opspec *ops;
	uint32_t n_ops, max_ops;
	kb_hslot *reads[MAX_OPS * 4];     /* read-only uses (implicit wait) */
	uint32_t n_reads;
	kb_hslot *rw[MAX_OPS];            /* rw_handles, in order, unique */
	uint32_t n_rw;
	kb_hslot *writes[MAX_OPS];        /* written, not rw (scratch, out) */
	uint32_t n_writes;
	int n_gemm;
	/* Op names seen (head and epilogue), by address: a kernel passes the
	 * same literal every time (see op_kind). */
	struct op_name {
		const char *name;
		int kind;                 /* kb_math_kind, or OP_GEMM */
	} names[N_NAMES];
	uint32_t next_name;           /* entry the next new name takes */
	shape_memo memo;
	/* Replay (replay.h): this call's key, the templates, and what this
	 * lowering allocated, in order. */
	kb_rkey key;
	kb_replay *replay;
	kb_replay_src src;
	const kb_tl_composite_desc *math_call;   /* a one-op MATH call (replay.h), else NULL */
} lowering;

#define OP_GEMM (-1)
#define OP_NONE (-2)

static const char *const unary_names[] = { "src" };
static const char *const nary_names[] = { "src_a", "src_b", "src_c" };

static void add_unique(kb_hslot **v, uint32_t *n, kb_hslot *h)
{
	for (uint32_t i = 0; i < *n; i++)
		if (v[i] == h)
			return;
	v[(*n)++] = h;
}

/* The op a head or epilogue names: OP_GEMM, a kb_math_kind, or OP_NONE.
 * A name at an address seen before is checked against its kind's name
 * (one strcmp at most, none when it is that very literal), which also
 * catches a kernel that reuses a buffer for another name. Every entry is
 * searched: a hashed slot let neighbouring literals ("gemm", "add") evict
 * each other, and a miss strcmps its way through every MATH kind. */
static int op_kind(lowering *lw, const char *name)
{
	struct op_name *c = NULL;
	kb_math_kind k;
	int kind;

	if (!name)
		return OP_NONE;
	for (int i = 0; i < N_NAMES && !c; i++)
		if (lw->names[i].name == name)
			c = &lw->names[i];
	if (c && kb__same_name(name, c->kind == OP_GEMM ? "gemm"
						       : kb__math_kind_name((kb_math_kind)c->kind)))
		return c->kind;
	if (strcmp(name, "gemm") == 0)
		kind = OP_GEMM;
	else if (kb__math_kind_parse(name, &k) == KB_OK)
		kind = (int)k;
	else
		return OP_NONE;
	if (!c)
		c = &lw->names[lw->next_name++ % N_NAMES];
	c->name = name;
	c->kind = kind;
	return kind;
}

/* " (did you mean 'x'?)" when name is close to one of the n names, else
 * " (valid: a, b, ...)"; "" when there is none. */
static const char *name_hint(char *buf, size_t len, const char *name, const char *const *names,
			     size_t n)
{
	const char *best = kb_suggest(name, names, n);
	size_t used;

	buf[0] = 0;
	if (best) {
		snprintf(buf, len, " (did you mean '%s'?)", best);
		return buf;
	}
	if (!n)
		return buf;
	used = (size_t)snprintf(buf, len, " (valid:");
	for (size_t i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s %s", i ? "," : "", names[i]);
	if (used < len)
		snprintf(buf + used, len - used, ")");
	return buf;
}

/* An unknown op name, with the MATH kinds (and "gemm" at the head). */
static int fail_unknown_op(kb_tl *tl, const char *what, const char *name, int head)
{
	const char *names[KB_MATH_KIND_COUNT + 1];
	size_t n = 0;
	char hint[256];

	if (head)
		names[n++] = "gemm";
	for (int k = 0; k < KB_MATH_KIND_COUNT; k++)
		names[n++] = kb__math_kind_name((kb_math_kind)k);
	return kb__tl_fail(tl, KB_V_UNKNOWN_OP, "unknown %s op '%s'%s", what, name ? name : "(null)",
			   name ? name_hint(hint, sizeof(hint), name, names, n) : "");
}

/* The extras a MATH op takes: only scale reads one ("scale"). */
static int check_extras(kb_tl *tl, const char *what, const char *op, kb_math_kind kind,
			const kb_tl_extra *extras)
{
	static const char *const scale_names[] = { "scale" };
	size_t n = kind == KB_MATH_SCALE ? 1 : 0;
	char hint[128];

	for (int i = 0; i < KB_TL_MAX_EXTRAS && extras[i].name; i++) {
		if (n && kb__same_name(extras[i].name, scale_names[0]))
			continue;
		return kb__tl_fail(tl, KB_V_UNKNOWN_EXTRA, "%s %s has no extra '%s'%s", what, op,
				   extras[i].name,
				   n ? name_hint(hint, sizeof(hint), extras[i].name, scale_names, n)
				     : " (it takes none)");
	}
	return KB_OK;
}

/* The next op, its counts zero. Operands and extras past their counts
 * are never read, so only the header and the output are cleared. */
static kb_opspec *new_op(lowering *lw, uint16_t kind, kb_scope_kind scope)
{
	kb_opspec *op;

	if (lw->n_ops == lw->max_ops) {
		kb__tl_fail(lw->tl, KB_V_OVER_CAP, "more than %d ops in one composite", MAX_OPS);
		return NULL;
	}
	op = &lw->ops[lw->n_ops++];
	op->kind = kind;
	op->scope = (uint8_t)scope;
	op->n_operands = op->n_extras = op->has_out = op->trans_b = 0;
	op->out = (kb_tview){ 0 };
	return op;
}

static void op_operand(kb_opspec *op, const char *name, const kb_hslot *h)
{
	op->operands[op->n_operands].name = name;
	op->operands[op->n_operands].t = h->view;
	op->n_operands++;
}

static void op_extra(kb_opspec *op, const char *name, double v)
{
	op->extras[op->n_extras].name = name;
	op->extras[op->n_extras].value = v;
	op->n_extras++;
}

static void view_nshape(const kb_tview *t, kb_nshape *s)
{
	s->rank = t->rank;
	for (int i = 0; i < t->rank; i++)
		s->dim[i] = t->shape[i];
}

static int nshape_equal_2d(const kb_nshape *a, const kb_tview *t)
{
	int64_t rows = 1, cols = a->rank ? a->dim[a->rank - 1] : 1;

	for (int i = 0; i + 1 < a->rank; i++)
		rows *= a->dim[i];
	return rows == kb__tview_rows(t) && cols == kb__tview_cols(t);
}

/* Output shape of a MATH kind by NumPy broadcasting, or a reduction. */
static int math_out_shape(kb_math_kind kind, const kb_hslot *const *in, int n, kb_nshape *out)
{
	kb_nshape s;

	view_nshape(&in[0]->view, out);
	if (kind == KB_MATH_RMAX || kind == KB_MATH_RSUM) {
		out->dim[out->rank - 1] = 1;
		return 0;
	}
	for (int i = 1; i < n; i++) {
		view_nshape(&in[i]->view, &s);
		while (out->rank < s.rank) {
			memmove(&out->dim[1], &out->dim[0], (size_t)out->rank * sizeof(out->dim[0]));
			out->dim[0] = 1;
			out->rank++;
		}
		for (int k = 0; k < s.rank; k++) {
			int64_t *d = &out->dim[out->rank - s.rank + k], e = s.dim[k];

			if (*d == 1)
				*d = e;
			else if (e != 1 && e != *d)
				return -1;
		}
	}
	return 0;
}

static const char *shape_text(const kb_tview *t, char *buf, size_t len)
{
	int n = snprintf(buf, len, "(");

	for (int i = 0; i < t->rank && n > 0 && (size_t)n < len; i++)
		n += snprintf(buf + n, len - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
	if (n > 0 && (size_t)n < len)
		snprintf(buf + n, len - n, t->rank == 1 ? ",)" : ")");   /* (8,) as NumPy */
	return buf;
}

static int same_2d(const kb_tview *a, const kb_tview *b)
{
	return kb__tview_rows(a) == kb__tview_rows(b) && kb__tview_cols(a) == kb__tview_cols(b);
}

/* Binds the call's named args to the recipe's operand contract: slot k of
 * the recipe gets the handle of the arg named like operand k. */
static int bind_recipe_operands(lowering *lw, const kb_recipe *r, const kb_recipe_ids *ids,
				const kb_tl_recipe_call *call, kb_hslot **slot)
{
	kb_tl *tl = lw->tl;
	int8_t of[KB_TL_MAX_ARGS];   /* operand each arg names */
	int n_args = 0;

	for (; n_args < KB_TL_MAX_ARGS && call->args[n_args].name; n_args++) {
		const char *name = call->args[n_args].name;

		/* The table's own literal first: no strcmp against the others. */
		of[n_args] = -1;
		for (int k = 0; k < ids->n_operands && of[n_args] < 0; k++)
			if (r->operands[k].name == name)
				of[n_args] = (int8_t)k;
		for (int k = 0; k < ids->n_operands && of[n_args] < 0; k++)
			if (strcmp(r->operands[k].name, name) == 0)
				of[n_args] = (int8_t)k;
		if (of[n_args] < 0) {
			const char *names[KB_RECIPE_MAX_OPERANDS];
			char hint[160];

			for (int k = 0; k < ids->n_operands; k++)
				names[k] = r->operands[k].name;
			return kb__tl_fail(tl, KB_V_MISSING_OPERAND, "recipe %s has no operand '%s'%s",
					   r->name, name,
					   name_hint(hint, sizeof(hint), name, names, (size_t)ids->n_operands));
		}
	}
	for (int k = 0; k < ids->n_operands; k++) {
		const char *name = r->operands[k].name;
		kb_hslot *h = NULL;

		for (int i = 0; i < n_args; i++) {
			if (of[i] != k)
				continue;
			h = kb__tl_slot_find(tl, call->args[i].t);
			if (!h) {
				/* Only now the text kb__tl_slot's message needs. */
				char what[96];

				snprintf(what, sizeof(what), "recipe %s operand '%s'", r->name, name);
				kb__tl_slot(tl, call->args[i].t, what);
				return KB_EVALIDATE;
			}
		}
		if (!h)
			return kb__tl_fail(tl, KB_V_MISSING_OPERAND, "recipe %s needs operand '%s'",
					   r->name, name);
		if (h->view.space != KB_SPACE_TCM)
			return kb__tl_fail(tl, KB_V_PROLOGUE_HBM,
					   "prologue recipe %s operand '%s' lives in HBM; prologue operands must be in TCM (tl.load it first)",
					   r->name, name);
		if (r->operands[k].access == KB_RECIPE_RW)
			add_unique(lw->rw, &lw->n_rw, h);
		else
			add_unique(lw->reads, &lw->n_reads, h);
		slot[k] = h;
	}
	return KB_OK;
}

/* Remembers an allocation this lowering made, for replay. */
static void note_alloc(lowering *lw, kb_hslot *h, kb_tl_tensor *t)
{
	kb_replay_src *s = &lw->src;

	if (s->n_alloc == KB_REPLAY_ALLOCS) {
		s->alloc_over = 1;
		return;
	}
	s->alloc[s->n_alloc] = h;
	s->alloc_t[s->n_alloc++] = t;
}

static int alloc_recipe_scratch(lowering *lw, const kb_recipe *r, const kb_recipe_ids *ids,
				kb_hslot **slot)
{
	for (int k = 0; k < ids->n_scratch; k++) {
		const kb_recipe_scratch *sc = &r->scratch[k];
		kb_hslot *like = slot[ids->like[k]], *h;
		int64_t shape[KB_TL_MAX_RANK];
		kb_tl_tensor *t;

		for (int i = 0; i < like->view.rank; i++)
			shape[i] = like->view.shape[i];
		if (sc->shape == KB_RECIPE_ROWVEC)
			shape[like->view.rank - 1] = 1;
		/* Per-row statistics (max, sum, correction) stay fp32 whatever the
		 * scores' dtype: reductions accumulate in fp32. */
		h = kb__tl_new_tcm(lw->tl, sc->shape == KB_RECIPE_ROWVEC ? KB_FP32 : (kb_dtype)like->view.dtype,
				   like->view.rank, shape, &t);
		if (!h)
			return KB_EVALIDATE;
		note_alloc(lw, h, t);
		add_unique(lw->writes, &lw->n_writes, h);
		slot[ids->n_operands + k] = h;
	}
	return KB_OK;
}

/* One recipe micro-op (step i) as a flat KERNEL-scope MATH OpSpec. */
static int expand_step(lowering *lw, const kb_recipe *r, const kb_recipe_ids *ids, int i_step,
		       kb_hslot *const *slot, int checked)
{
	const kb_recipe_step *st = &r->steps[i_step];
	const kb_hslot *in[3];
	kb_hslot *dst = slot[ids->dst[i_step]];
	int n = kb__math_arity(st->kind);
	kb_nshape want;
	kb_opspec *op = new_op(lw, (uint16_t)st->kind, KB_SCOPE_KERNEL);
	char s1[64], s2[64];

	if (!op)
		return KB_EVALIDATE;
	for (int i = 0; i < n; i++) {
		in[i] = slot[ids->src[i_step][i]];
		op_operand(op, n == 1 ? unary_names[0] : nary_names[i], in[i]);
	}
	op->has_out = 1;
	op->out = dst->view;
	if (st->reduce_axis)
		op_extra(op, "reduce_axis", st->reduce_axis);
	if (st->bcast_axis != KB_RECIPE_NO_AXIS)
		op_extra(op, "bcast_axis", st->bcast_axis);
	if (!checked && (math_out_shape(st->kind, in, n, &want) || !nshape_equal_2d(&want, &dst->view))) {
		/* Name every input with its shape and what they broadcast to:
		 * the culprit may be any of them (a user's m of (8,) against
		 * the (8, 1) statistics it meets). */
		char srcs[256], s3[64];
		size_t used = 0;
		kb_tview w = { 0 };

		for (int i = 0; i < n && used < sizeof(srcs); i++)
			used += (size_t)snprintf(srcs + used, sizeof(srcs) - used, "%s'%s' %s",
						 i ? (i + 1 == n ? " and " : ", ") : "", st->src[i],
						 shape_text(&in[i]->view, s1, sizeof(s1)));
		if (math_out_shape(st->kind, in, n, &want))
			return kb__tl_fail(lw->tl, KB_V_SHAPE, "recipe %s step %s: %s do not broadcast",
					   r->name, kb__math_kind_name(st->kind), srcs);
		w.rank = (uint8_t)want.rank;
		for (int i = 0; i < want.rank; i++)
			w.shape[i] = want.dim[i];
		return kb__tl_fail(lw->tl, KB_V_SHAPE,
				   "recipe %s step %s: %s%s give %s, which does not fit '%s' %s",
				   r->name, kb__math_kind_name(st->kind), n == 1 ? "operand " : "", srcs,
				   shape_text(&w, s3, sizeof(s3)), st->dst,
				   shape_text(&dst->view, s2, sizeof(s2)));
	}
	return KB_OK;
}

/* Whether r's operands in slot have the shapes last found consistent. */
static int memo_hit(const shape_memo *mo, const kb_recipe *r, const kb_recipe_ids *ids,
		    kb_hslot *const *slot)
{
	if (mo->r != r)
		return 0;
	for (int k = 0; k < ids->n_operands; k++) {
		const kb_tview *v = &slot[k]->view;

		if (v->rank != mo->rank[k] || memcmp(v->shape, mo->shape[k], v->rank * sizeof(v->shape[0])))
			return 0;
	}
	return 1;
}

static void memo_set(shape_memo *mo, const kb_recipe *r, const kb_recipe_ids *ids,
		     kb_hslot *const *slot)
{
	for (int k = 0; k < ids->n_operands; k++) {
		mo->rank[k] = slot[k]->view.rank;
		memcpy(mo->shape[k], slot[k]->view.shape, sizeof(mo->shape[k]));
	}
	mo->r = r;
}

static int lower_prologue(lowering *lw, const kb_tl_recipe_call *call, kb_hslot **primary)
{
	const kb_recipe *r = kb__recipe_find(call->recipe);
	const kb_recipe_ids *ids = r ? kb__recipe_ids(r) : NULL;
	kb_hslot *slot[KB_RECIPE_MAX_SLOTS];
	int checked;

	if (!r) {
		char known[256] = "";
		size_t used = 0;

		for (size_t i = 0; i < kb__recipe_count() && used < sizeof(known); i++)
			used += (size_t)snprintf(known + used, sizeof(known) - used, "%s%s",
						 i ? ", " : "", kb__recipe_get(i)->name);
		const char *names[8], *best;
		size_t n = 0;

		for (size_t i = 0; i < kb__recipe_count() && n < 8; i++)
			names[n++] = kb__recipe_get(i)->name;
		best = call->recipe ? kb_suggest(call->recipe, names, n) : NULL;
		return kb__tl_fail(lw->tl, KB_V_UNKNOWN_RECIPE, "unknown recipe '%s' (%s%s%sknown: %s)",
				   call->recipe ? call->recipe : "(null)", best ? "did you mean '" : "",
				   best ? best : "", best ? "'? " : "", known);
	}
	if (!ids)
		return kb__tl_fail(lw->tl, KB_V_UNKNOWN_RECIPE,
				   "recipe %s names a slot it does not have (a bug in src/tl/recipes.c)",
				   r->name);
	if (bind_recipe_operands(lw, r, ids, call, slot) || alloc_recipe_scratch(lw, r, ids, slot))
		return KB_EVALIDATE;
	checked = memo_hit(&lw->memo, r, ids, slot);
	for (int i = 0; i < ids->n_steps; i++)
		if (expand_step(lw, r, ids, i, slot, checked))
			return KB_EVALIDATE;
	if (!checked)
		memo_set(&lw->memo, r, ids, slot);
	if (ids->primary >= 0) {
		if (*primary)
			return kb__tl_fail(lw->tl, KB_V_AUTOBIND_CONFLICT,
					   "two prologue recipes both produce a primary output");
		*primary = slot[ids->primary];
	}
	return KB_OK;
}

/* The head GEMM: a (M, K) and b (K, N), or b (N, K) with KB_TL_TRANS_B. */
static int lower_gemm(lowering *lw, kb_hslot *a, kb_hslot *b, unsigned flags, int64_t mkn[3])
{
	int trans = (flags & KB_TL_TRANS_B) != 0;
	int64_t kb_ = trans ? kb__tview_cols(&b->view) : kb__tview_rows(&b->view);
	kb_opspec *op;
	char s1[64], s2[64];

	mkn[0] = kb__tview_rows(&a->view);
	mkn[1] = kb__tview_cols(&a->view);
	mkn[2] = trans ? kb__tview_rows(&b->view) : kb__tview_cols(&b->view);
	if (kb_ != mkn[1])
		return kb__tl_fail(lw->tl, KB_V_SHAPE, "gemm: a %s and b%s %s disagree on K",
				   shape_text(&a->view, s1, sizeof(s1)), trans ? "^T" : "",
				   shape_text(&b->view, s2, sizeof(s2)));
	if (a->view.dtype != b->view.dtype)
		return kb__tl_fail(lw->tl, KB_V_DTYPE, "gemm: a is %s but b is %s",
				   kb_dtype_name((kb_dtype)a->view.dtype),
				   kb_dtype_name((kb_dtype)b->view.dtype));
	op = new_op(lw, KB_OP_GEMM, KB_SCOPE_KERNEL);
	if (!op)
		return KB_EVALIDATE;
	op_operand(op, "a", a);
	op_operand(op, "b", b);
	op_extra(op, "m", (double)mkn[0]);
	op_extra(op, "k", (double)mkn[1]);
	op_extra(op, "n", (double)mkn[2]);
	if (trans) {
		op_extra(op, "trans_b", 1);
		op->trans_b = 1;
	}
	op->has_out = 1;
	add_unique(lw->reads, &lw->n_reads, a);
	add_unique(lw->reads, &lw->n_reads, b);
	lw->n_gemm++;
	return KB_OK;
}

/* A MATH head op on a (and b): its output shape by broadcasting. */
static int lower_math_head(lowering *lw, kb_math_kind kind, kb_hslot *a, kb_hslot *b,
			   const kb_tl_extra *extras, kb_nshape *out_shape)
{
	const kb_hslot *in[2] = { a, b };
	int n = kb__math_arity(kind);
	kb_opspec *op;

	if (n > 2)
		return kb__tl_fail(lw->tl, KB_V_UNKNOWN_OP, "%s takes %d operands; a composite head takes at most 2",
				   kb__math_kind_name(kind), n);
	if (!a || (n == 2 && !b))
		return kb__tl_fail(lw->tl, KB_V_MISSING_OPERAND, "%s needs operand%s a%s",
				   kb__math_kind_name(kind), n == 2 ? "s" : "", n == 2 ? " and b" : "");
	if (math_out_shape(kind, in, n, out_shape))
		return kb__tl_fail(lw->tl, KB_V_SHAPE, "%s: shapes of a and b do not broadcast",
				   kb__math_kind_name(kind));
	op = new_op(lw, (uint16_t)kind, KB_SCOPE_KERNEL);
	if (!op)
		return KB_EVALIDATE;
	op_operand(op, n == 1 ? "src" : "src_a", a);
	add_unique(lw->reads, &lw->n_reads, a);
	if (n == 2) {
		op_operand(op, "src_b", b);
		add_unique(lw->reads, &lw->n_reads, b);
	}
	if (check_extras(lw->tl, "head", kb__math_kind_name(kind), kind, extras))
		return KB_EVALIDATE;
	for (int i = 0; i < KB_TL_MAX_EXTRAS && extras[i].name; i++)
		op_extra(op, "scale", extras[i].value);
	op->has_out = 1;
	return KB_OK;
}

/* Epilogue op on the running value (the head's result), plus operands. */
static int lower_epilogue(lowering *lw, const kb_tl_op *e, const kb_hslot *out)
{
	kb_math_kind kind;
	kb_opspec *op;
	kb_scope_kind scope = e->scope == KB_TL_KERNEL ? KB_SCOPE_KERNEL :
			      e->scope == KB_TL_K_TILE ? KB_SCOPE_K_TILE : KB_SCOPE_OUTPUT_TILE;
	int need;

	int found = op_kind(lw, e->op);

	if (found == OP_GEMM)
		return kb__tl_fail(lw->tl, KB_V_TWO_GEMMS,
				   "a composite holds at most one GEMM; this epilogue adds a second");
	if (found == OP_NONE)
		return fail_unknown_op(lw->tl, "epilogue", e->op, 0);
	kind = (kb_math_kind)found;
	op = new_op(lw, (uint16_t)kind, scope);
	if (!op)
		return KB_EVALIDATE;
	need = kb__math_arity(kind) - 1;  /* the running value is the first input */
	for (int i = 0; i < KB_TL_MAX_ARGS && e->args[i].name; i++) {
		static const char *const names[] = { "other", "bias", "src_b", "src_c" };
		const char *nm = NULL;
		kb_hslot *h;
		char what[64];

		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]) && !nm; k++)
			if (names[k] == e->args[i].name)
				nm = names[k];
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]) && !nm; k++)
			if (strcmp(names[k], e->args[i].name) == 0)
				nm = names[k];
		if (!nm || i >= need) {
			char hint[160] = "";

			if (!nm)
				name_hint(hint, sizeof(hint), e->args[i].name, names,
					  sizeof(names) / sizeof(names[0]));
			return kb__tl_fail(lw->tl, KB_V_MISSING_OPERAND,
					   "epilogue %s takes %d operand(s); '%s' is not one of them%s",
					   e->op, need, e->args[i].name, hint);
		}
		if (!(h = kb__tl_slot_find(lw->tl, e->args[i].t))) {
			snprintf(what, sizeof(what), "epilogue %s operand '%s'", e->op, nm);
			kb__tl_slot(lw->tl, e->args[i].t, what);
			return KB_EVALIDATE;
		}
		if (h->view.space != KB_SPACE_TCM)
			return kb__tl_fail(lw->tl, KB_V_SPACE,
					   "epilogue %s operand '%s' lives in HBM; tl.load it into TCM first",
					   e->op, nm);
		if (kind != KB_MATH_BIAS && !same_2d(&h->view, &out->view))
			return kb__tl_fail(lw->tl, KB_V_SHAPE, "epilogue %s operand '%s' must have the output's shape",
					   e->op, nm);
		if (kind == KB_MATH_BIAS && kb__tview_elems(&h->view) != kb__tview_cols(&out->view))
			return kb__tl_fail(lw->tl, KB_V_SHAPE, "bias must have one value per output column (%lld)",
					   (long long)kb__tview_cols(&out->view));
		op_operand(op, nm, h);
		/* Reading the output it accumulates into makes it a read-write handle. */
		if (h == out)
			add_unique(lw->rw, &lw->n_rw, (kb_hslot *)h);
		else
			add_unique(lw->reads, &lw->n_reads, h);
	}
	if (op->n_operands != need)
		return kb__tl_fail(lw->tl, KB_V_MISSING_OPERAND, "epilogue %s needs %d operand(s), got %d",
				   e->op, need, op->n_operands);
	if (check_extras(lw->tl, "epilogue", e->op, kind, e->extras))
		return KB_EVALIDATE;
	for (int i = 0; i < KB_TL_MAX_EXTRAS && e->extras[i].name; i++)
		op_extra(op, "scale", e->extras[i].value);
	if (kind == KB_MATH_SCALE && op->n_extras == 0)
		return kb__tl_fail(lw->tl, KB_V_MISSING_OPERAND, "epilogue scale needs the extra 'scale'");
	if (scope == KB_SCOPE_KERNEL && out->view.space != KB_SPACE_TCM && lw->n_gemm)
		return kb__tl_fail(lw->tl, KB_V_SPACE,
				   "a KERNEL-scope epilogue after the GEMM runs on the whole output, which must be in TCM");
	return KB_OK;
}

/* The output: a given handle, an HBM address, or auto TCM scratch. */
static kb_hslot *resolve_out(lowering *lw, const kb_tl_composite_desc *d, const kb_nshape *shape,
			     kb_dtype dt, kb_tl_tensor **out)
{
	kb_tl *tl = lw->tl;
	kb_hslot *h;
	int64_t dims[KB_TL_MAX_RANK];
	char s1[64];

	for (int i = 0; i < shape->rank; i++)
		dims[i] = shape->dim[i];
	if (d->out && d->out_hbm) {
		kb__tl_fail(tl, KB_V_MISSING_OPERAND, "give either out or out_hbm, not both");
		return NULL;
	}
	if (d->out) {
		if (!(h = kb__tl_slot(tl, d->out, "composite out")))
			return NULL;
		if (!nshape_equal_2d(shape, &h->view)) {
			kb__tl_fail(tl, KB_V_SHAPE, "out %s does not match the head's result (%lld, %lld)",
				    shape_text(&h->view, s1, sizeof(s1)),
				    (long long)(shape->rank > 1 ? shape->dim[shape->rank - 2] : 1),
				    (long long)shape->dim[shape->rank - 1]);
			return NULL;
		}
		*out = d->out;
		return h;
	}
	if (d->out_hbm) {
		uint64_t bytes;

		if (kb__tl_check_shape(tl, shape->rank, dims, dt, &bytes))
			return NULL;
		if (d->out_hbm > tl->cfg.hbm_bytes || bytes > tl->cfg.hbm_bytes - d->out_hbm) {
			kb__tl_fail(tl, KB_V_SPACE, "out_hbm 0x%llx + %llu bytes is outside HBM",
				    (unsigned long long)d->out_hbm, (unsigned long long)bytes);
			return NULL;
		}
		return kb__tl_new_handle(tl, KB_SPACE_HBM, d->out_hbm, dt, shape->rank, dims, out);
	}
	if ((h = kb__tl_new_tcm(tl, dt, shape->rank, dims, out)))
		note_alloc(lw, h, *out);
	return h;
}

/* The command the ops are lowered into, with room for as many ops and
 * handle ids as d can produce (the ops capped at MAX_OPS, past which
 * new_op fails as it always has): each recipe's steps, the head and the
 * epilogue; each recipe's operands and scratch, a, b, the output and the
 * epilogue's operands. */
static int new_cmd(lowering *lw, const kb_tl_composite_desc *d)
{
	uint64_t n_ops = 1, n_ids = 3;

	if (d->n_epilogue > MAX_OPS)
		n_ops = n_ids = MAX_IDS;
	else {
		n_ops += d->n_epilogue;
		n_ids += d->n_epilogue * KB_TL_MAX_ARGS;
	}
	for (size_t i = 0; d->prologue && i < d->n_prologue && n_ops < MAX_OPS; i++) {
		const kb_recipe *r = kb__recipe_find(d->prologue[i].recipe);
		const kb_recipe_ids *ids = r ? kb__recipe_ids(r) : NULL;

		if (ids) {
			n_ops += (uint64_t)ids->n_steps;
			n_ids += (uint64_t)(ids->n_operands + ids->n_scratch);
		}
	}
	if (d->n_prologue && n_ops >= MAX_OPS)
		n_ids = MAX_IDS;
	lw->max_ops = n_ops < MAX_OPS ? (uint32_t)n_ops : MAX_OPS;
	lw->cmd = kb__tl_cmd_new_n(lw->tl, KB_CMD_COMPOSITE, lw->max_ops,
				   n_ids < MAX_IDS ? (uint32_t)n_ids : MAX_IDS);
	lw->ops = lw->cmd ? lw->cmd->ops : NULL;
	lw->src.max_ops = lw->max_ops;
	lw->src.cap_ids = n_ids < MAX_IDS ? (uint32_t)n_ids : MAX_IDS;
	return lw->cmd ? KB_OK : KB_EVALIDATE;
}

static int build_cmd(lowering *lw, kb_hslot *out, kb_tl_tensor *result)
{
	kb_tl *tl = lw->tl;
	kb_cmd *c = lw->cmd;
	uint64_t lbytes, cap = tl->cfg.cost.max_composite_logical_bytes;
	int in_rw = 0, bad;
	uint32_t max;

	/* PE_SCHEDULER plans the command from the digest of these ops, made
	 * here while they are in cache; a plan over its limits is the
	 * kernel's error, caught here (DDD §6.9), not an internal one at
	 * admission. */
	c->n_ops = lw->n_ops;
	if (kb__cmd_digest(c))
		return kb__tl_fail(tl, KB_V_OVER_CAP, "composite of %u ops has no room for its digest (a bug in src/tl)",
				   lw->n_ops);
	if (kb__plan_check_ops(c->dig, &bad, &max))
		return kb__tl_fail(tl, KB_V_TOO_MANY_STAGES,
				   "composite of %u ops: op %d (%s) needs a stage past the plan's limit of %u %s; split it into smaller composites",
				   lw->n_ops, bad,
				   lw->ops[bad].kind == KB_OP_GEMM ? "gemm"
								 : kb__math_kind_name((kb_math_kind)lw->ops[bad].kind),
				   max, max == KB_PLAN_MAX_STAGES ? "stages per tile" : "KERNEL-scope ops before or after the GEMM");
	for (uint32_t i = 0; i < lw->n_rw; i++)
		in_rw |= lw->rw[i] == out;
	if (!in_rw)
		add_unique(lw->writes, &lw->n_writes, out);
	c->n_rw = lw->n_rw;
	lbytes = kb__composite_lbytes(c->ops, c->n_ops, c->n_rw);
	c->lbytes = lbytes;   /* emit keeps it */
	if (lbytes > cap) {
		return kb__tl_fail(tl, KB_V_OVER_CAP,
				   "composite is %llu logical bytes, over pe_cost_model.max_composite_logical_bytes = %llu; split it into smaller composites",
				   (unsigned long long)lbytes, (unsigned long long)cap);
	}
	if (kb__cmd_sets(c, lw->reads, lw->n_reads, lw->rw, lw->n_rw, lw->writes, lw->n_writes))
		return kb__tl_fail_internal(tl, KB_TL_SETS_FULL);
	/* a one-op MATH command is kept for kb__replay_math, not as a template */
	if (!(lw->math_call && kb__replay_math_save(&lw->replay, lw->math_call, c)) && lw->key.ok) {
		kb_replay_src *s = &lw->src;

		s->cmd = c;
		s->result = result;
		s->reads = lw->reads;
		s->n_reads = lw->n_reads;
		s->rw = lw->rw;
		s->n_rw = lw->n_rw;
		s->writes = lw->writes;
		s->n_writes = lw->n_writes;
		kb__replay_save(&lw->replay, &lw->key, s);
	}
	lw->cmd = NULL;   /* PE_CPU's now, whatever emit says */
	return kb__tl_emit(tl, c);
}

/* The scratch of tl's composites, made at its first. */
static __attribute__((noinline)) lowering *lowering_new(kb_tl *tl)
{
	lowering *lw = malloc(sizeof(*lw));

	if (!lw) {
		kb__tl_fail_oom(tl, "a composite's scratch");
		return NULL;
	}
	memset(lw->names, 0, sizeof(lw->names));
	lw->next_name = 0;
	lw->memo.r = NULL;
	lw->replay = NULL;
	tl->lowering = lw;
	return lw;
}

/* kb_tl_composite_at's full lowering, out of line: what it keeps in
 * registers and on the stack was saved and restored by every replay
 * too (a push and a pop each of six registers and more, ~30
 * instructions a decode command). */
static __attribute__((noinline)) kb_tl_tensor *lower_full(kb_tl *tl, lowering *lw,
							  const kb_tl_composite_desc *d)
{
	kb_hslot *primary = NULL, *a = NULL, *b = NULL, *out;
	kb_tl_tensor *result = NULL;
	kb_nshape shape;
	kb_math_kind kind = KB_MATH_COPY;
	int is_gemm, head;

	lw->src.n_alloc = 0;
	lw->src.alloc_over = 0;
	head = op_kind(lw, d->op);
	is_gemm = head == OP_GEMM;
	if (head == OP_NONE) {
		fail_unknown_op(tl, "head", d->op, 1);
		return NULL;
	}
	if (!is_gemm)
		kind = (kb_math_kind)head;
	if (is_gemm && d->extras[0].name) {
		kb__tl_fail(tl, KB_V_UNKNOWN_EXTRA, "head gemm has no extra '%s' (it takes none)",
			    d->extras[0].name);
		return NULL;
	}
	lw->tl = tl;
	lw->n_ops = lw->n_reads = lw->n_rw = lw->n_writes = 0;
	lw->n_gemm = 0;
	if (new_cmd(lw, d))
		return NULL;
	if (d->n_prologue && !d->prologue) {
		kb__tl_fail(tl, KB_V_MISSING_OPERAND, "n_prologue is %zu but prologue is NULL", d->n_prologue);
		goto done;
	}
	for (size_t i = 0; i < d->n_prologue; i++)
		if (lower_prologue(lw, &d->prologue[i], &primary))
			goto done;
	if (primary && d->a) {
		kb__tl_fail(tl, KB_V_AUTOBIND_CONFLICT,
			    "auto-bind conflict: the prologue recipe's primary output binds to the head's 'a', and the kernel also passed 'a'; omit one");
		goto done;
	}
	if ((d->a && !(a = kb__tl_slot(tl, d->a, "head operand 'a'"))) ||
	    (d->b && !(b = kb__tl_slot(tl, d->b, "head operand 'b'"))))
		goto done;
	if (primary)
		a = primary;
	if (is_gemm) {
		int64_t mkn[3];

		if (!a || !b) {
			kb__tl_fail(tl, KB_V_MISSING_OPERAND, "gemm needs operands a and b");
			goto done;
		}
		if (lower_gemm(lw, a, b, d->flags, mkn))
			goto done;
		shape.rank = 2;
		shape.dim[0] = mkn[0];
		shape.dim[1] = mkn[2];
	} else if (lower_math_head(lw, kind, a, b, d->extras, &shape)) {
		goto done;
	}
	/* An automatic output keeps the operands' dtype, except reductions,
	 * whose per-row results stay fp32. */
	out = resolve_out(lw, d, &shape,
			  (!is_gemm && (kind == KB_MATH_RMAX || kind == KB_MATH_RSUM)) || !a
				  ? KB_FP32 : (kb_dtype)a->view.dtype, &result);
	if (!out)
		goto done;
	/* The head op is the first op after the prologue. */
	lw->ops[lw->n_ops - 1].out = out->view;
	if (d->n_epilogue && !d->epilogue) {
		kb__tl_fail(tl, KB_V_MISSING_OPERAND, "n_epilogue is %zu but epilogue is NULL", d->n_epilogue);
		result = NULL;
		goto done;
	}
	for (size_t i = 0; i < d->n_epilogue; i++)
		if (lower_epilogue(lw, &d->epilogue[i], out)) {
			result = NULL;
			goto done;
		}
	if (build_cmd(lw, out, result))
		result = NULL;
done:
	kb__cmd_free(lw->cmd);   /* not emitted: failed */
	lw->cmd = NULL;
	return result;
}


KB_API kb_tl_tensor *kb_tl_composite_at(kb_tl *tl, const kb_tl_composite_desc *d,
					const char *file, int line)
{
	lowering *lw;
	/* not cleared: each replay that answers 1 sets it (a store a call) */
	kb_tl_tensor *result;

	if (kb__tl_begin(tl, "kb_tl_composite", file, line))
		return NULL;
	if (!d || !d->op) {
		kb__tl_fail(tl, KB_V_UNKNOWN_OP, "composite needs a head op (\"gemm\" or a MATH kind)");
		return NULL;
	}
	/* One scratch per context: a composite lowers in a few hundred bytes of
	 * it, and zeroing it per command showed in long decode runs (only its
	 * caches start zeroed). */
	lw = tl->lowering;
	if (!lw && !(lw = lowering_new(tl)))
		return NULL;
	/* A call like one lowered before is that lowering replayed. */
	lw->math_call = !tl->replay_off && kb__replay_math_call(d) ? d : NULL;
	if (lw->math_call && kb__replay_math(&lw->replay, tl, d, &result)) {
		tl->replays++;
		return result;
	}
	/* no key yet (a MATH replay needs none) */
	lw->key.ok = 0;
	if (!tl->replay_off) {
		if (kb__replay_like(&lw->replay, tl, d, &lw->key, &result)) {
			tl->replays++;
			return result;
		}
		kb__replay_key(tl, d, &lw->key);
	}
	if (lw->key.ok && kb__replay_run(&lw->replay, tl, &lw->key, &result)) {
		kb__replay_snap(lw->replay, tl, d, &lw->key);
		tl->replays++;
		return result;
	}
	return lower_full(tl, lw, d);
}

void kb__tl_lowering_free(void *p)
{
	lowering *lw = p;

	if (lw)
		kb__replay_free(lw->replay);
	free(lw);
}

KB_API kb_tl_tensor *kb_tl_dot_at(kb_tl *tl, kb_tl_tensor *a, kb_tl_tensor *b, unsigned flags,
				  const char *file, int line)
{
	kb_tl_composite_desc d = { .op = "gemm", .a = a, .b = b, .flags = flags };

	return kb_tl_composite_at(tl, &d, file, line);
}
