/*
 * Data mode: what each stage does to the memory store, when the engine
 * finishes it (so in simulated-time order).
 *
 * GEMM tiles: DMA_READ copies an HBM operand tile into the step's staging
 * slot, widened to fp32 on the way (exact for every storage dtype, so the
 * GEMM reads the staged tile in place instead of converting it again);
 * FETCH moves no data of its own (its cost is the TCM read port; the GEMM
 * reads its operands from the staging slot, or converts them from TCM);
 * GEMM accumulates in fp32 into the output tile's accumulator; K_TILE and
 * OUTPUT_TILE ops apply to the accumulator; STORE converts it to the output
 * dtype, into TCM or into the staging slot; DMA_WRITE copies that to HBM.
 * Q.K^T with K in its natural (S_kv, d) layout is a GEMM whose b operand is
 * read transposed (KB_TL_TRANS_B): the DMA moves the same bytes either way.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/fp16.h"
#include "num/kernels.h"
#include "pe/plan.h"

static kb_region region(const kb_tview *t, uint32_t pe, int64_t row0, int64_t col0, int64_t rows,
			int64_t cols)
{
	size_t es = kb__dtype_size((kb_dtype)t->dtype);
	kb_region r = {
		t->space == KB_SPACE_HBM ? KB_MEM_HBM : KB_MEM_TCM, pe,
		t->addr + (uint64_t)(row0 * t->ld + col0) * es,
		(uint64_t)rows, (uint64_t)cols * es, (uint64_t)t->ld * es, (unsigned)es,
	};
	return r;
}

static kb_region whole(const kb_tview *t, uint32_t pe)
{
	return region(t, pe, 0, 0, kb__tview_rows(t), kb__tview_cols(t));
}

/* Reads a region as fp32 rows x cols (contiguous). */
static int read_f32(kb_memstore *m, const kb_region *r, kb_dtype dt, float *dst, const char *what,
		    kb_error *err)
{
	const void *base;
	size_t es = kb__dtype_size(dt), cols = r->row_bytes / es;
	int rc = kb__mem_read(m, r, &base, what, err);

	for (uint64_t i = 0; !rc && i < r->rows; i++)
		kb__load_f32(dst + i * cols, (const uint8_t *)base + i * r->pitch, dt, cols);
	return rc;
}

static int write_f32(kb_memstore *m, const kb_region *r, kb_dtype dt, const float *src,
		     const char *what, kb_error *err)
{
	void *base;
	size_t es = kb__dtype_size(dt), cols = r->row_bytes / es;
	int rc = kb__mem_write(m, r, &base, what, err);

	for (uint64_t i = 0; !rc && i < r->rows; i++)
		kb__store_f32((uint8_t *)base + i * r->pitch, dt, src + i * cols, cols);
	return rc;
}

/* Copies bytes between two regions of the same row shape. */
static int copy_region(kb_memstore *m, const kb_region *src, const kb_region *dst, const char *what,
		       kb_error *err)
{
	const void *s;
	void *d;
	int rc = kb__mem_read(m, src, &s, what, err);

	if (!rc)
		rc = kb__mem_write(m, dst, &d, what, err);
	for (uint64_t i = 0; !rc && i < src->rows; i++)
		memmove((uint8_t *)d + i * dst->pitch, (const uint8_t *)s + i * src->pitch, src->row_bytes);
	return rc;
}

static kb_nshape nshape_of(const kb_tview *t)
{
	kb_nshape s = { t->rank, { 0 } };

	for (int i = 0; i < t->rank; i++)
		s.dim[i] = t->shape[i];
	return s;
}

static kb_math_extra extras_of(const kb_opspec *op)
{
	kb_math_extra ex = KB_MATH_EXTRA_INIT;

	for (int i = 0; i < op->n_extras; i++)
		if (strcmp(op->extras[i].name, "scale") == 0)
			ex.scale = (float)op->extras[i].value;
	return ex;
}

/*
 * The plan's fp32 scratch of one engine (0 GEMM, 1 MATH), at least n floats.
 * Each engine runs one stage at a time, so a stage owns its engine's
 * scratch until it returns; growing it once per plan replaces a malloc per
 * stage (a few per KV tile on decode). Its contents do not outlive a
 * stage, so growing frees rather than reallocs (no copy).
 */
static float *scratch(kb_plan *p, int which, size_t n, kb_error *err)
{
	if (n <= p->scratch_n[which])
		return p->scratch[which];
	free(p->scratch[which]);
	p->scratch_n[which] = 0;
	p->scratch[which] = malloc(n * sizeof(float));
	if (!p->scratch[which]) {
		kb__err(err, KB_ENOMEM, "out of memory for %zu floats of scratch", n);
		return NULL;
	}
	p->scratch_n[which] = n;
	return p->scratch[which];
}

/* Whether operand i of op was streamed by the DMA_READ just before it. */
static int streamed(const kb_plan *p, int i)
{
	return p->gemm < 0 && p->opnd[i];
}

/* Floats of MATH scratch op idx needs: the running value read back (after
 * a GEMM), the operands read from memory, the output. */
static size_t math_need(const kb_plan *p, int idx)
{
	const kb_opspec *op = &p->cmd->ops[idx];
	int mathonly = p->gemm < 0;
	size_t nout = !op->has_out ? (size_t)kb__tview_elems(kb__plan_running_out(p->cmd, p->gemm, idx))
				   : (size_t)kb__tview_elems(&op->out);
	size_t need = !op->has_out && !mathonly ? nout : 0;

	for (int i = 0; i < op->n_operands; i++)
		if (!streamed(p, i))
			need += (size_t)kb__tview_elems(&op->operands[i].t);
	return need + (mathonly ? 0 : nout);
}

/* The MATH scratch, sized on first use for every MATH op of the command
 * and the tile epilogues, so it is allocated once per plan. */
static float *math_scratch(kb_plan *p, size_t n, kb_error *err)
{
	if (!p->scratch[1]) {
		size_t most = p->gemm >= 0 ? (size_t)(p->tm * p->tn) : 1;

		for (uint32_t i = 0; i < p->cmd->n_ops; i++)
			if ((int)i != p->gemm && math_need(p, (int)i) > most)
				most = math_need(p, (int)i);
		if (n < most)
			n = most;
	}
	return scratch(p, 1, n, err);
}

/* ---- GEMM tile loop ---- */

typedef struct tile {
	uint32_t mi, ni, ki;
	int64_t me, ke, ne;
} tile;

static tile tile_of(const kb_plan *p, uint64_t step)
{
	tile t;

	kb__plan_step_tile(p, step, &t.mi, &t.ni, &t.ki);
	t.me = p->M - (int64_t)t.mi * p->tm < p->tm ? p->M - (int64_t)t.mi * p->tm : p->tm;
	t.ke = p->K - (int64_t)t.ki * p->tk < p->tk ? p->K - (int64_t)t.ki * p->tk : p->tk;
	t.ne = p->N - (int64_t)t.ni * p->tn < p->tn ? p->N - (int64_t)t.ni * p->tn : p->tn;
	return t;
}

/* Operand tile o (0 = a, 1 = b) of a step, as a region of its tensor. */
static kb_region operand_tile(const kb_plan *p, const kb_opspec *g, int o, const tile *t)
{
	const kb_tview *v = &g->operands[o].t;

	if (o == 0)
		return region(v, p->pe, (int64_t)t->mi * p->tm, (int64_t)t->ki * p->tk, t->me, t->ke);
	if (g->trans_b)
		return region(v, p->pe, (int64_t)t->ni * p->tn, (int64_t)t->ki * p->tk, t->ne, t->ke);
	return region(v, p->pe, (int64_t)t->ki * p->tk, (int64_t)t->ni * p->tn, t->ke, t->ne);
}

static uint8_t *slot_area(const kb_plan *p, uint32_t slot, int which)
{
	size_t a = (size_t)(p->tm * p->tk) * 4, b = (size_t)(p->tk * p->tn) * 4;
	uint8_t *base = p->stage_buf + (size_t)slot * p->stage_stride;

	return which == 0 ? base : which == 1 ? base + a : base + a + b;
}

/*
 * GEMM operand o of a tile as fp32 rows of its tile width: the staged copy
 * in place when the operand streams from HBM, else converted from TCM into
 * tmp.
 */
static int gemm_operand(kb_plan *p, const kb_opspec *g, int o, const tile *t, uint32_t slot,
			float *tmp, const float **src, kb_error *err)
{
	kb_region r = operand_tile(p, g, o, t);
	kb_dtype dt = (kb_dtype)g->operands[o].t.dtype;

	if (g->operands[o].t.space == KB_SPACE_HBM) {
		*src = (const float *)(const void *)slot_area(p, slot, o);
		return KB_OK;
	}
	*src = tmp;
	return read_f32(p->m->mem, &r, dt, tmp, o ? "gemm operand b" : "gemm operand a", err);
}

static int tile_epilogue(kb_plan *p, const kb_opspec *op, const tile *t, float *acc, kb_error *err)
{
	const kb_opspec *g = &p->cmd->ops[p->gemm];
	kb_nshape sh[2] = { { 2, { t->me, t->ne } }, { 2, { t->me, t->ne } } };
	const float *in[2] = { acc, NULL };
	kb_math_extra ex = extras_of(op);
	float *opnd;
	int rc;

	if (op->n_operands) {
		const kb_tview *v = &op->operands[0].t;
		kb_region r = op->kind == KB_MATH_BIAS
			? region(v, p->pe, 0, (int64_t)t->ni * p->tn, 1, t->ne)
			: region(v, p->pe, (int64_t)t->mi * p->tm, (int64_t)t->ni * p->tn, t->me, t->ne);

		if (op->kind == KB_MATH_BIAS) {
			/* A bias is one row of N values, whatever its rank. */
			kb_tview row = *v;

			row.rank = 2;
			row.shape[0] = 1;
			row.shape[1] = kb__tview_elems(v);
			row.ld = row.shape[1];
			r = region(&row, p->pe, 0, (int64_t)t->ni * p->tn, 1, t->ne);
			sh[1] = (kb_nshape){ 2, { 1, t->ne } };
		}
		opnd = math_scratch(p, (size_t)(t->me * t->ne), err);
		if (!opnd)
			return KB_ENOMEM;
		rc = read_f32(p->m->mem, &r, (kb_dtype)v->dtype, opnd, kb__math_kind_name((kb_math_kind)op->kind), err);
		if (rc)
			return rc;
		in[1] = opnd;
	}
	(void)g;
	return kb__math_apply((kb_math_kind)op->kind, in, sh, 1 + op->n_operands, acc, &sh[0], &ex, err);
}

static int exec_loop(kb_plan *p, uint64_t step, const kb_stage_ref *st, uint32_t slot,
		     uint32_t accs, kb_error *err)
{
	const kb_opspec *g = &p->cmd->ops[p->gemm];
	kb_memstore *m = p->m->mem;
	tile t = tile_of(p, step);
	float *acc = p->acc + (size_t)accs * (size_t)(p->tm * p->tn);
	kb_dtype odt = (kb_dtype)g->out.dtype;
	kb_region ro = region(&g->out, p->pe, (int64_t)t.mi * p->tm, (int64_t)t.ni * p->tn, t.me, t.ne);
	int rc = KB_OK;

	switch (st->kind) {
	case KB_ST_DMA_READ: {
		kb_region r = operand_tile(p, g, st->operand, &t);

		/* the slot holds fp32 rows of the tile's width (slot_area) */
		return read_f32(m, &r, (kb_dtype)g->operands[st->operand].t.dtype,
				(float *)(void *)slot_area(p, slot, st->operand), "dma_read", err);
	}
	case KB_ST_FETCH:
		return KB_OK;
	case KB_ST_GEMM: {
		float *fa = scratch(p, 0, (size_t)(t.me * t.ke + t.ke * t.ne), err);
		const float *a, *b;

		if (!fa)
			return KB_ENOMEM;
		rc = gemm_operand(p, g, 0, &t, slot, fa, &a, err);
		if (!rc)
			rc = gemm_operand(p, g, 1, &t, slot, fa + t.me * t.ke, &b, err);
		if (!rc) {
			if (t.ki == 0)
				memset(acc, 0, (size_t)(t.me * t.ne) * sizeof(float));
			kb__gemm_tile(acc, a, b, t.me, t.ke, t.ne, t.ke, g->trans_b ? t.ke : t.ne,
				      t.ne, g->trans_b);
		}
		return rc;
	}
	case KB_ST_MATH:
		return tile_epilogue(p, &p->cmd->ops[st->op], &t, acc, err);
	case KB_ST_STORE:
		if (g->out.space == KB_SPACE_TCM)
			return write_f32(m, &ro, odt, acc, "store", err);
		for (int64_t i = 0; i < t.me; i++)
			kb__store_f32(slot_area(p, slot, 2) + (size_t)i * ro.row_bytes, odt,
				      acc + i * t.ne, (size_t)t.ne);
		return KB_OK;
	case KB_ST_DMA_WRITE: {
		void *d;

		rc = kb__mem_write(m, &ro, &d, "dma_write", err);
		for (uint64_t i = 0; !rc && i < ro.rows; i++)
			memcpy((uint8_t *)d + i * ro.pitch, slot_area(p, slot, 2) + i * ro.row_bytes,
			       ro.row_bytes);
		return rc;
	}
	default:
		return kb__err(err, KB_EINTERNAL, "stage kind %d in a tile loop", st->kind);
	}
}

/* ---- whole-tensor MATH ops (prologue, post-loop, GEMM-less composites) ----
 *
 * An op with an output of its own reads its operands; an op without one
 * (an epilogue) continues on the running value, the output of the latest op
 * that has one (the GEMM's output after a GEMM). A value is written to its
 * TCM output once it is final, i.e. when the next op has an output of its
 * own; an HBM output is written by its DMA_WRITE stage. */

static int exec_math_op(kb_plan *p, int idx, kb_error *err)
{
	const kb_cmd *c = p->cmd;
	const kb_opspec *op = &c->ops[idx];
	int mathonly = p->gemm < 0, running = !op->has_out;
	float *taken[KB_OP_MAX_OPERANDS] = { 0 };
	kb_nshape sh[KB_OP_MAX_OPERANDS + 1];
	const float *in[KB_OP_MAX_OPERANDS + 1];
	kb_math_extra ex = extras_of(op);
	const kb_tview *outv = running ? kb__plan_running_out(c, p->gemm, idx) : &op->out;
	kb_nshape osh = nshape_of(outv);
	size_t nout = (size_t)kb__tview_elems(outv), need = math_need(p, idx);
	float *out, *next;
	int n = 0, rc = KB_OK;

	/* One scratch holds the running value read back (after a GEMM), the
	 * operands read from memory and the output, side by side. */
	next = math_scratch(p, need ? need : 1, err);
	if (!next)
		return KB_ENOMEM;
	if (running) {
		sh[0] = osh;
		if (mathonly) {
			in[n++] = p->run;
		} else {
			kb_region r = whole(outv, p->pe);

			rc = read_f32(p->m->mem, &r, (kb_dtype)outv->dtype, next, "post-loop op", err);
			in[n++] = next;
			next += nout;
		}
	}
	for (int i = 0; !rc && i < op->n_operands; i++) {
		const kb_tview *v = &op->operands[i].t;

		sh[n] = nshape_of(v);
		if (streamed(p, i)) {
			/* the DMA_READ just before this op staged it; this op frees it */
			taken[i] = p->opnd[i];
			p->opnd[i] = NULL;
			in[n++] = taken[i];
		} else {
			kb_region r = whole(v, p->pe);

			rc = read_f32(p->m->mem, &r, (kb_dtype)v->dtype, next,
				      kb__math_kind_name((kb_math_kind)op->kind), err);
			in[n++] = next;
			next += kb__tview_elems(v);
		}
	}
	if (rc)
		goto done;
	out = mathonly ? p->run : next;
	rc = kb__math_apply((kb_math_kind)op->kind, in, sh, n, out, &osh, &ex, err);
	if (!rc && (!mathonly || ((idx + 1 == (int)c->n_ops || c->ops[idx + 1].has_out) &&
				  outv->space == KB_SPACE_TCM))) {
		kb_region r = whole(outv, p->pe);

		rc = write_f32(p->m->mem, &r, (kb_dtype)outv->dtype, out,
			       kb__math_kind_name((kb_math_kind)op->kind), err);
	}
done:
	for (int i = 0; i < KB_OP_MAX_OPERANDS; i++)
		free(taken[i]);
	return rc;
}

static int exec_mathonly(kb_plan *p, const kb_stage_ref *st, kb_error *err)
{
	const kb_opspec *op = &p->cmd->ops[st->op];
	kb_memstore *m = p->m->mem;

	switch (st->kind) {
	case KB_ST_DMA_READ: {
		const kb_tview *v = &op->operands[st->operand].t;
		kb_region r = whole(v, p->pe);

		free(p->opnd[st->operand]);
		p->opnd[st->operand] = malloc((size_t)kb__tview_elems(v) * sizeof(float));
		if (!p->opnd[st->operand])
			return kb__err(err, KB_ENOMEM, "out of memory");
		return read_f32(m, &r, (kb_dtype)v->dtype, p->opnd[st->operand], "dma_read", err);
	}
	case KB_ST_MATH:
		return exec_math_op(p, st->op, err);
	case KB_ST_DMA_WRITE: {
		kb_region r = whole(&op->out, p->pe);

		return write_f32(m, &r, (kb_dtype)op->out.dtype, p->run, "dma_write", err);
	}
	default:
		return kb__err(err, KB_EINTERNAL, "stage kind %d in a composite without GEMM", st->kind);
	}
}

/* ---- the other commands ---- */

static int exec_simple(kb_plan *p, const kb_stage_ref *st, kb_error *err)
{
	const kb_cmd *c = p->cmd;
	kb_memstore *m = p->m->mem;
	kb_region src = whole(&c->src, p->pe), dst = whole(&c->dst, p->pe);

	switch (st->kind) {
	case KB_ST_DMA_READ:
		return copy_region(m, &src, &dst, "load (dma_read)", err);
	case KB_ST_DMA_WRITE:
		return copy_region(m, &src, &dst, "store (dma_write)", err);
	case KB_ST_FILL: {
		int64_t n = kb__tview_elems(&c->dst);
		float *v = malloc((size_t)n * sizeof(float));
		int rc;

		if (!v)
			return kb__err(err, KB_ENOMEM, "out of memory");
		for (int64_t i = 0; i < n; i++)
			v[i] = (float)c->fill_value;
		rc = write_f32(m, &dst, (kb_dtype)c->dst.dtype, v, "fill", err);
		free(v);
		return rc;
	}
	case KB_ST_SEND: {
		const void *s;
		uint64_t bytes = kb__tview_bytes(&c->src);
		int rc = kb__mem_read(m, &src, &s, "send", err);

		if (rc)
			return rc;
		free(p->run);
		p->run = malloc(bytes ? bytes : 1);
		if (!p->run)
			return kb__err(err, KB_ENOMEM, "out of memory");
		for (uint64_t i = 0; i < src.rows; i++)
			memcpy((uint8_t *)p->run + i * src.row_bytes, (const uint8_t *)s + i * src.pitch,
			       src.row_bytes);
		return KB_OK;
	}
	case KB_ST_RECV: {
		void *d;
		int rc = kb__mem_write(m, &dst, &d, "recv", err);

		for (uint64_t i = 0; !rc && i < dst.rows; i++)
			memcpy((uint8_t *)d + i * dst.pitch, (const uint8_t *)p->run + i * dst.row_bytes,
			       dst.row_bytes);
		return rc;
	}
	default:
		return kb__err(err, KB_EINTERNAL, "stage kind %d of a simple command", st->kind);
	}
}

int kb__plan_exec(kb_plan *p, kb_phase ph, uint64_t step, const kb_stage_ref *st, uint32_t slot,
		  uint32_t acc, kb_error *err)
{
	if (p->cmd->kind != KB_CMD_COMPOSITE)
		return exec_simple(p, st, err);
	if (ph != KB_PH_LOOP)
		return exec_math_op(p, st->op, err);
	if (p->gemm >= 0)
		return exec_loop(p, step, st, slot, acc, err);
	return exec_mathonly(p, st, err);
}
