/*
 * The tl context: handles, scratch scopes (TCM allocation: tcm.c), and the
 * lowering of tl operations into PE commands (the compiler analog of
 * ADR-0065 D7). Composite lowering lives in composite.c.
 */
#include "tl/tl_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* ---- errors ---- */

int kb__tl_fail(kb_tl *tl, int detail, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	if (tl->failed)
		return KB_EVALIDATE;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tl->failed = 1;
	kb_error_clear(&tl->error);
	tl->error.detail = detail;
	snprintf(tl->error.source, sizeof(tl->error.source), "%s:%d", tl->op_file, tl->op_line);
	tl->error.line = tl->op_line;
	kb__err(&tl->error, KB_EVALIDATE, "%s:%d: pe%u: tl op #%llu %s: %s (%s)", tl->op_file,
		tl->op_line, tl->cfg.pe, (unsigned long long)tl->op_count, tl->op_name, msg,
		kb_validation_name(detail));
	/* Tell PE_CPU where the kernel stopped; it fails the run when it gets there. */
	if (!tl->cancelled) {
		kb_cmd *c = calloc(1, sizeof(*c));
		kb_error *e = malloc(sizeof(*e));

		if (c && e) {
			*e = tl->error;
			c->kind = KB_CMD_ERROR;
			c->pe = tl->cfg.pe;
			c->id = tl->next_cmd;
			c->error = e;
			if (tl->cfg.emit(tl->cfg.emit_ctx, c))
				tl->cancelled = 1;
		} else {
			free(c);
			free(e);
		}
	}
	return KB_EVALIDATE;
}

/* Every public operation starts here: counts it, remembers the call site. */
int kb__tl_begin(kb_tl *tl, const char *name, const char *file, int line)
{
	if (!tl)
		return -1;
	if (tl->failed || tl->cancelled)
		return -1;
	tl->op_count++;
	tl->op_name = name;
	tl->op_file = file ? file : "?";
	tl->op_line = line;
	return 0;
}

/* ---- handles ---- */

/* 64-bit handle value: tag (24 bits) | generation (16) | slot + 1 (24). */
#define SLOT_BITS 24
#define GEN_BITS 16
#define TAG_BITS 24

static kb_tl_tensor *encode(const kb_tl *tl, uint32_t slot, uint32_t gen)
{
	uint64_t v = ((uint64_t)(tl->cfg.tag & ((1u << TAG_BITS) - 1)) << (SLOT_BITS + GEN_BITS)) |
		     ((uint64_t)(gen & ((1u << GEN_BITS) - 1)) << SLOT_BITS) | (slot + 1);

	return (kb_tl_tensor *)(uintptr_t)v;
}

kb_hslot *kb__tl_slot(kb_tl *tl, const kb_tl_tensor *t, const char *what)
{
	uint64_t v = (uint64_t)(uintptr_t)t;
	uint32_t slot, gen;

	if (!t) {
		kb__tl_fail(tl, KB_V_BAD_HANDLE, "%s is NULL (did an earlier op fail?)", what);
		return NULL;
	}
	if ((uint32_t)(v >> (SLOT_BITS + GEN_BITS)) != (tl->cfg.tag & ((1u << TAG_BITS) - 1))) {
		kb__tl_fail(tl, KB_V_BAD_HANDLE,
			    "%s belongs to another kernel instance or simulation", what);
		return NULL;
	}
	slot = (uint32_t)(v & ((1u << SLOT_BITS) - 1)) - 1;
	gen = (uint32_t)(v >> SLOT_BITS) & ((1u << GEN_BITS) - 1);
	if (slot >= tl->n_slots || !KB_SLOT(tl, slot)->live ||
	    (KB_SLOT(tl, slot)->gen & ((1u << GEN_BITS) - 1)) != gen) {
		kb__tl_fail(tl, KB_V_BAD_HANDLE,
			    "%s is no longer valid (its scratch scope has ended)", what);
		return NULL;
	}
	return KB_SLOT(tl, slot);
}

static int64_t shape_elems(int rank, const int64_t *shape)
{
	int64_t n = 1;

	for (int i = 0; i < rank; i++) {
		if (shape[i] <= 0 || n > INT64_MAX / shape[i])
			return -1;
		n *= shape[i];
	}
	return n;
}

int kb__tl_check_shape(kb_tl *tl, int rank, const int64_t *shape, kb_dtype dt, uint64_t *bytes)
{
	int64_t n;

	if (rank < 1 || rank > KB_TL_MAX_RANK || !shape)
		return kb__tl_fail(tl, KB_V_SHAPE, "rank %d is not in 1..%d", rank, KB_TL_MAX_RANK);
	if (!kb_dtype_size(dt))
		return kb__tl_fail(tl, KB_V_DTYPE, "unknown dtype %d", (int)dt);
	n = shape_elems(rank, shape);
	if (n < 0 || (uint64_t)n > (UINT64_C(1) << 50))
		return kb__tl_fail(tl, KB_V_SHAPE, "shape has a non-positive or enormous dimension");
	*bytes = (uint64_t)n * kb_dtype_size(dt);
	return KB_OK;
}

kb_hslot *kb__tl_new_handle(kb_tl *tl, kb_space space, uint64_t addr, kb_dtype dt, int rank,
			    const int64_t *shape, kb_tl_tensor **out)
{
	kb_hslot *h;
	uint32_t slot;

	if (tl->free_slot != UINT32_MAX) {
		slot = tl->free_slot;
		tl->free_slot = KB_SLOT(tl, slot)->next_free;
	} else {
		if (tl->n_slots == tl->cap_slots) {
			size_t nc = tl->cap_slots / KB_TL_CHUNK + 1;
			kb_hslot **c;

			if (tl->cap_slots + KB_TL_CHUNK >= (1u << SLOT_BITS))
				goto oom;
			c = realloc(tl->chunks, nc * sizeof(*c));
			if (!c)
				goto oom;
			tl->chunks = c;
			c[nc - 1] = calloc(KB_TL_CHUNK, sizeof(kb_hslot));
			if (!c[nc - 1])
				goto oom;
			tl->cap_slots += KB_TL_CHUNK;
		}
		slot = (uint32_t)tl->n_slots++;
		KB_SLOT(tl, slot)->gen = 0;
	}
	h = KB_SLOT(tl, slot);
	h->gen++;
	h->live = 1;
	h->scope = tl->depth;
	h->writer = -1;
	h->fence = 0;
	h->owns_alloc = 0;
	h->next_free = UINT32_MAX;
	memset(&h->view, 0, sizeof(h->view));
	h->view.id = ++tl->next_id;
	h->view.addr = addr;
	h->view.space = (uint8_t)space;
	h->view.dtype = (uint8_t)dt;
	h->view.rank = (uint8_t)rank;
	for (int i = 0; i < rank; i++)
		h->view.shape[i] = shape[i];
	h->view.ld = shape[rank - 1];
	if (kb__scope_track(tl, slot))
		goto oom_slot;
	*out = encode(tl, slot, h->gen);
	return h;
oom_slot:
	h->live = 0;
	h->next_free = tl->free_slot;
	tl->free_slot = slot;
oom:
	kb__tl_fail(tl, KB_V_TCM_EXHAUSTED, "out of host memory for handles");
	return NULL;
}

static void release_slot(kb_tl *tl, uint32_t slot)
{
	kb_hslot *h = KB_SLOT(tl, slot);

	if (h->owns_alloc)
		kb__tcm_free(&tl->tcm, h->view.addr, h->alloc_size, tl->next_cmd);
	h->live = 0;
	h->next_free = tl->free_slot;
	tl->free_slot = slot;
}

/* ---- scratch scopes ---- */

int kb__scope_track(kb_tl *tl, uint32_t slot)
{
	kb_scope *s = &tl->scopes[tl->depth];

	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		uint32_t *v = realloc(s->slots, cap * sizeof(*v));

		if (!v)
			return -1;
		s->slots = v;
		s->cap = cap;
	}
	s->slots[s->n++] = slot;
	return 0;
}

KB_API int kb_tl_scope_begin_at(kb_tl *tl, const char *file, int line)
{
	if (kb__tl_begin(tl, "kb_tl_scope_begin", file, line))
		return KB_EVALIDATE;
	if (tl->depth + 1 >= KB_TL_MAX_SCOPES)
		return kb__tl_fail(tl, KB_V_SCOPE, "scratch scopes nested deeper than %d",
				   KB_TL_MAX_SCOPES - 1);
	tl->depth++;
	tl->scopes[tl->depth].n = 0;
	return KB_OK;
}

KB_API int kb_tl_scope_end_at(kb_tl *tl, const char *file, int line)
{
	kb_scope *s;

	if (kb__tl_begin(tl, "kb_tl_scope_end", file, line))
		return KB_EVALIDATE;
	if (tl->depth == 0)
		return kb__tl_fail(tl, KB_V_SCOPE, "scope end without a matching scope begin");
	s = &tl->scopes[tl->depth];
	/* Memory is reusable only after every command issued so far is done:
	 * the next user of it carries that fence (see kb__tcm_alloc). */
	for (size_t i = s->n; i-- > 0;)
		release_slot(tl, s->slots[i]);
	s->n = 0;
	tl->depth--;
	return KB_OK;
}

/* A new TCM tensor in the current scope. */
kb_hslot *kb__tl_new_tcm(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
			 kb_tl_tensor **out)
{
	uint64_t bytes, off, fence;
	kb_hslot *h;

	if (kb__tl_check_shape(tl, rank, shape, dt, &bytes))
		return NULL;
	if (kb__tcm_alloc(&tl->tcm, bytes, &off, &fence)) {
		kb__tl_fail(tl, KB_V_TCM_EXHAUSTED,
			    "TCM exhausted: %llu bytes requested, %llu of %llu free, largest free block %llu",
			    (unsigned long long)bytes,
			    (unsigned long long)(tl->cfg.tcm_bytes - tl->tcm.used),
			    (unsigned long long)tl->cfg.tcm_bytes,
			    (unsigned long long)kb__tcm_largest_free(&tl->tcm));
		return NULL;
	}
	h = kb__tl_new_handle(tl, KB_SPACE_TCM, off, dt, rank, shape, out);
	if (!h) {
		kb__tcm_free(&tl->tcm, off, bytes, tl->next_cmd);
		return NULL;
	}
	h->owns_alloc = 1;
	h->alloc_size = bytes;
	h->fence = fence;
	return h;
}

/* ---- commands ---- */

kb_cmd *kb__tl_cmd_new(kb_tl *tl, kb_cmd_kind kind)
{
	kb_cmd *c = calloc(1, sizeof(*c));

	if (!c) {
		kb__tl_fail(tl, KB_V_TCM_EXHAUSTED, "out of host memory for a command");
		return NULL;
	}
	c->kind = kind;
	c->pe = tl->cfg.pe;
	c->id = tl->next_cmd;
	c->file = tl->op_file;
	c->line = tl->op_line;
	return c;
}

static int push_u64(uint64_t **v, uint32_t *n, uint64_t x)
{
	uint64_t *nv;

	for (uint32_t i = 0; i < *n; i++)
		if ((*v)[i] == x)
			return 0;
	nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv)
		return -1;
	nv[(*n)++] = x;
	*v = nv;
	return 0;
}

/* Records that c reads h: a hazard-set entry, and (read-only use) an
 * implicit wait for h's producer. */
int kb__cmd_read(kb_cmd *c, const kb_hslot *h, int implicit_wait)
{
	if (h->fence > c->fence)
		c->fence = h->fence;
	if (push_u64(&c->reads, &c->n_reads, h->view.id))
		return -1;
	if (implicit_wait && h->writer >= 0)
		return push_u64(&c->deps, &c->n_deps, (uint64_t)h->writer);
	return 0;
}

int kb__cmd_write(kb_cmd *c, const kb_hslot *h)
{
	if (h->fence > c->fence)
		c->fence = h->fence;
	return push_u64(&c->writes, &c->n_writes, h->view.id);
}

/* Hands the command to PE_CPU; it now belongs to the consumer. */
int kb__tl_emit(kb_tl *tl, kb_cmd *c)
{
	c->lbytes = kb__cmd_lbytes(c);
	if (c->kind < KB_CMD_WAIT)
		tl->dispatch_ps += kb__dispatch_ps(&tl->cfg.cost, c);
	tl->next_cmd++;
	if (tl->cfg.emit(tl->cfg.emit_ctx, c)) {
		tl->cancelled = 1;
		return KB_ESTATE;
	}
	return KB_OK;
}

/* ---- the context ---- */

kb_tl *kb__tl_create(const kb_tl_config *cfg)
{
	kb_tl *tl = calloc(1, sizeof(*tl));

	if (!tl)
		return NULL;
	tl->cfg = *cfg;
	tl->free_slot = UINT32_MAX;
	if (kb__tcm_init(&tl->tcm, cfg->tcm_bytes)) {
		free(tl);
		return NULL;
	}
	return tl;
}

void kb__tl_destroy(kb_tl *tl)
{
	if (!tl)
		return;
	for (int i = 0; i < KB_TL_MAX_SCOPES; i++)
		free(tl->scopes[i].slots);
	for (size_t i = 0; i < tl->cap_slots / KB_TL_CHUNK; i++)
		free(tl->chunks[i]);
	free(tl->chunks);
	kb__tcm_fini(&tl->tcm);
	free(tl->lowering);
	free(tl);
}

int kb__tl_finish(kb_tl *tl)
{
	kb_cmd *c;

	if (tl->failed || tl->cancelled)
		return tl->failed ? KB_EVALIDATE : KB_ESTATE;
	tl->op_name = "kernel end";
	if (tl->depth != 0)
		return kb__tl_fail(tl, KB_V_SCOPE, "the kernel returned with %d scratch scope(s) open",
				   tl->depth);
	c = kb__tl_cmd_new(tl, KB_CMD_END);
	if (!c)
		return KB_EVALIDATE;
	return kb__tl_emit(tl, c);
}

const kb_error *kb__tl_error(const kb_tl *tl)
{
	return tl->failed ? &tl->error : NULL;
}

void kb__tl_cancel(kb_tl *tl)
{
	tl->cancelled = 1;
}

uint64_t kb__tl_dispatch_ps(const kb_tl *tl)
{
	return tl->dispatch_ps;
}

void kb__tl_tiles(const kb_tl *tl, uint64_t *tiles, uint64_t *loop_ps)
{
	*tiles = tl->tiles;
	*loop_ps = tl->loop_ps;
}

KB_API void kb_tl_tile_loop_begin(kb_tl *tl)
{
	if (tl)
		tl->loop0_ps = tl->dispatch_ps;
}

/* Without a begin, loop0_ps is 0: the loop counts from the kernel's start. */
KB_API void kb_tl_tile_loop_end(kb_tl *tl, uint64_t tiles)
{
	if (!tl)
		return;
	tl->loop_ps += tl->dispatch_ps - tl->loop0_ps;
	tl->tiles += tiles;
	tl->loop0_ps = tl->dispatch_ps;
}

uint64_t kb__tl_commands(const kb_tl *tl)
{
	return tl->next_cmd;
}

/* ---- simple public operations ---- */

KB_API uint32_t kb_tl_program_id(const kb_tl *tl) { return tl ? tl->cfg.program_id : 0; }
KB_API uint32_t kb_tl_num_programs(const kb_tl *tl) { return tl ? tl->cfg.num_programs : 0; }
KB_API uint32_t kb_tl_pe(const kb_tl *tl) { return tl ? tl->cfg.pe : 0; }
KB_API int kb_tl_failed(const kb_tl *tl) { return !tl || tl->failed || tl->cancelled; }

KB_API uint64_t kb_tl_tcm_free(const kb_tl *tl)
{
	return tl ? tl->cfg.tcm_bytes - tl->tcm.used : 0;
}

KB_API int kb_tl_fail_at(kb_tl *tl, const char *message, const char *file, int line)
{
	if (kb__tl_begin(tl, "kb_tl_fail", file, line))
		return KB_EVALIDATE;
	return kb__tl_fail(tl, KB_V_KERNEL, "%s", message && *message ? message : "kernel failed");
}

KB_API int kb_tl_shape(const kb_tl *tl, const kb_tl_tensor *t, int *rank, int64_t *shape)
{
	kb_hslot *h;

	if (!tl || tl->failed)
		return KB_EINVAL;
	h = kb__tl_slot((kb_tl *)tl, t, "tensor");
	if (!h)
		return KB_EINVAL;
	*rank = h->view.rank;
	for (int i = 0; i < h->view.rank; i++)
		shape[i] = h->view.shape[i];
	return KB_OK;
}

KB_API int kb_tl_type(const kb_tl *tl, const kb_tl_tensor *t, kb_dtype *dtype, kb_tl_space *space)
{
	kb_hslot *h;

	if (!tl || tl->failed)
		return KB_EINVAL;
	h = kb__tl_slot((kb_tl *)tl, t, "tensor");
	if (!h)
		return KB_EINVAL;
	if (dtype)
		*dtype = (kb_dtype)h->view.dtype;
	if (space)
		*space = h->view.space == KB_SPACE_TCM ? KB_TL_TCM : KB_TL_HBM;
	return KB_OK;
}

KB_API kb_tl_tensor *kb_tl_ref_at(kb_tl *tl, uint64_t addr, kb_dtype dt, int rank,
				  const int64_t *shape, const char *file, int line)
{
	kb_tl_tensor *out = NULL;
	uint64_t bytes;

	if (kb__tl_begin(tl, "kb_tl_ref", file, line) || kb__tl_check_shape(tl, rank, shape, dt, &bytes))
		return NULL;
	if (addr > tl->cfg.hbm_bytes || bytes > tl->cfg.hbm_bytes - addr) {
		kb__tl_fail(tl, KB_V_SPACE, "HBM range 0x%llx + %llu bytes is outside HBM (%llu bytes)",
			    (unsigned long long)addr, (unsigned long long)bytes,
			    (unsigned long long)tl->cfg.hbm_bytes);
		return NULL;
	}
	kb__tl_new_handle(tl, KB_SPACE_HBM, addr, dt, rank, shape, &out);
	return out;
}

KB_API kb_tl_tensor *kb_tl_alloc_at(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
				    const char *file, int line)
{
	kb_tl_tensor *out = NULL;

	if (kb__tl_begin(tl, "kb_tl_alloc", file, line))
		return NULL;
	kb__tl_new_tcm(tl, dt, rank, shape, &out);
	return out;
}

KB_API kb_tl_tensor *kb_tl_full_at(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
				   double value, const char *file, int line)
{
	kb_tl_tensor *out = NULL;
	kb_hslot *h;
	kb_cmd *c;

	if (kb__tl_begin(tl, "kb_tl_full", file, line))
		return NULL;
	h = kb__tl_new_tcm(tl, dt, rank, shape, &out);
	if (!h)
		return NULL;
	c = kb__tl_cmd_new(tl, KB_CMD_FILL);
	if (!c)
		return NULL;
	c->dst = h->view;
	c->fill_value = value;
	if (kb__cmd_write(c, h)) {
		kb__cmd_free(c);
		kb__tl_fail(tl, KB_V_TCM_EXHAUSTED, "out of host memory");
		return NULL;
	}
	h->writer = (int64_t)c->id;
	return kb__tl_emit(tl, c) ? NULL : out;
}

static int same_shape(const kb_tview *a, const kb_tview *b)
{
	return kb__tview_rows(a) == kb__tview_rows(b) && kb__tview_cols(a) == kb__tview_cols(b);
}

KB_API kb_tl_tensor *kb_tl_load_at(kb_tl *tl, kb_tl_tensor *src, kb_tl_tensor *dst,
				   const char *file, int line)
{
	kb_hslot *s, *d;
	kb_cmd *c;

	if (kb__tl_begin(tl, "kb_tl_load", file, line) || !(s = kb__tl_slot(tl, src, "load source")))
		return NULL;
	if (s->view.space != KB_SPACE_HBM) {
		kb__tl_fail(tl, KB_V_SPACE, "load source must live in HBM (it is already in TCM)");
		return NULL;
	}
	if (dst) {
		if (!(d = kb__tl_slot(tl, dst, "load destination")))
			return NULL;
		if (d->view.space != KB_SPACE_TCM || !same_shape(&d->view, &s->view) ||
		    d->view.dtype != s->view.dtype) {
			kb__tl_fail(tl, d->view.space != KB_SPACE_TCM ? KB_V_SPACE :
				    d->view.dtype != s->view.dtype ? KB_V_DTYPE : KB_V_SHAPE,
				    "load destination must be a TCM tensor of the source's shape and dtype");
			return NULL;
		}
	} else {
		d = kb__tl_new_tcm(tl, (kb_dtype)s->view.dtype, s->view.rank, s->view.shape, &dst);
		if (!d)
			return NULL;
	}
	c = kb__tl_cmd_new(tl, KB_CMD_LOAD);
	if (!c)
		return NULL;
	c->src = s->view;
	c->dst = d->view;
	if (kb__cmd_read(c, s, 1) || kb__cmd_write(c, d)) {
		kb__cmd_free(c);
		kb__tl_fail(tl, KB_V_TCM_EXHAUSTED, "out of host memory");
		return NULL;
	}
	d->writer = (int64_t)c->id;
	return kb__tl_emit(tl, c) ? NULL : dst;
}

KB_API int kb_tl_store_at(kb_tl *tl, kb_tl_tensor *dst_hbm, kb_tl_tensor *src_tcm,
			  const char *file, int line)
{
	kb_hslot *s, *d;
	kb_cmd *c;

	if (kb__tl_begin(tl, "kb_tl_store", file, line))
		return KB_EVALIDATE;
	if (!(d = kb__tl_slot(tl, dst_hbm, "store destination")) ||
	    !(s = kb__tl_slot(tl, src_tcm, "store source")))
		return KB_EVALIDATE;
	if (d->view.space != KB_SPACE_HBM || s->view.space != KB_SPACE_TCM)
		return kb__tl_fail(tl, KB_V_SPACE, "store moves a TCM tensor to an HBM tensor");
	if (!same_shape(&d->view, &s->view) || d->view.dtype != s->view.dtype)
		return kb__tl_fail(tl, same_shape(&d->view, &s->view) ? KB_V_DTYPE : KB_V_SHAPE,
				   "store source and destination differ in shape or dtype");
	c = kb__tl_cmd_new(tl, KB_CMD_STORE);
	if (!c)
		return KB_EVALIDATE;
	c->src = s->view;
	c->dst = d->view;
	if (kb__cmd_read(c, s, 1) || kb__cmd_write(c, d)) {
		kb__cmd_free(c);
		return kb__tl_fail(tl, KB_V_TCM_EXHAUSTED, "out of host memory");
	}
	d->writer = (int64_t)c->id;
	return kb__tl_emit(tl, c);
}

KB_API int kb_tl_wait_at(kb_tl *tl, kb_tl_tensor *t, const char *file, int line)
{
	kb_hslot *h;
	kb_cmd *c;

	if (kb__tl_begin(tl, "kb_tl_wait", file, line) || !(h = kb__tl_slot(tl, t, "tensor")))
		return KB_EVALIDATE;
	if (h->writer < 0)
		return KB_OK;
	c = kb__tl_cmd_new(tl, KB_CMD_WAIT);
	if (!c)
		return KB_EVALIDATE;
	if (kb__cmd_read(c, h, 1)) {
		kb__cmd_free(c);
		return kb__tl_fail(tl, KB_V_TCM_EXHAUSTED, "out of host memory");
	}
	/* A wait is not a hardware command: it keeps no id of its own. */
	c->id = UINT64_MAX;
	if (tl->cfg.emit(tl->cfg.emit_ctx, c)) {
		tl->cancelled = 1;
		return KB_ESTATE;
	}
	return KB_OK;
}

KB_API int kb_tl_cpu_overhead_at(kb_tl *tl, double cycles, const char *file, int line)
{
	kb_cmd *c;

	if (kb__tl_begin(tl, "kb_tl_cpu_overhead", file, line))
		return KB_EVALIDATE;
	if (!(cycles >= 0.0) || cycles > 1e12)
		return kb__tl_fail(tl, KB_V_SHAPE, "CPU overhead of %g cycles is not in 0..1e12", cycles);
	c = kb__tl_cmd_new(tl, KB_CMD_CPU);
	if (!c)
		return KB_EVALIDATE;
	c->cpu_cycles = cycles;
	return kb__tl_emit(tl, c);
}

static int ipcq_cmd(kb_tl *tl, kb_cmd_kind kind, kb_tl_tensor *t, uint32_t peer, uint32_t tag)
{
	kb_hslot *h = kb__tl_slot(tl, t, kind == KB_CMD_SEND ? "send source" : "receive destination");
	kb_cmd *c;
	int rc;

	if (!h)
		return KB_EVALIDATE;
	if (h->view.space != KB_SPACE_TCM)
		return kb__tl_fail(tl, KB_V_SPACE, "IPCQ tensors must live in TCM");
	if (peer >= tl->cfg.n_pes || peer == tl->cfg.pe)
		return kb__tl_fail(tl, KB_V_MISSING_OPERAND, "peer PE %u is not another PE of this machine (0..%u)",
				   peer, tl->cfg.n_pes - 1);
	c = kb__tl_cmd_new(tl, kind);
	if (!c)
		return KB_EVALIDATE;
	c->peer_pe = peer;
	c->tag = tag;
	if (kind == KB_CMD_SEND) {
		c->src = h->view;
		rc = kb__cmd_read(c, h, 1);
	} else {
		c->dst = h->view;
		rc = kb__cmd_write(c, h);
		h->writer = (int64_t)c->id;
	}
	if (rc) {
		kb__cmd_free(c);
		return kb__tl_fail(tl, KB_V_TCM_EXHAUSTED, "out of host memory");
	}
	return kb__tl_emit(tl, c);
}

KB_API int kb_tl_send_at(kb_tl *tl, kb_tl_tensor *src, uint32_t dst_pe, uint32_t tag,
			 const char *file, int line)
{
	if (kb__tl_begin(tl, "kb_tl_send", file, line))
		return KB_EVALIDATE;
	return ipcq_cmd(tl, KB_CMD_SEND, src, dst_pe, tag);
}

KB_API int kb_tl_recv_at(kb_tl *tl, kb_tl_tensor *dst, uint32_t src_pe, uint32_t tag,
			 const char *file, int line)
{
	if (kb__tl_begin(tl, "kb_tl_recv", file, line))
		return KB_EVALIDATE;
	return ipcq_cmd(tl, KB_CMD_RECV, dst, src_pe, tag);
}
