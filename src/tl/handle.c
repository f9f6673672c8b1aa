/*
 * The tl context's errors (the first one stops the kernel and is reported
 * with its call site) and its tensor handles: 64-bit values that name a
 * slot and its generation, so a stale or foreign handle is an error, never
 * a wild read.
 */
#include "tl/tl_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* ---- errors ---- */

/* Records the kernel's error (code, detail; msg, and the detail's name
 * unless KB_V_NONE) and queues the ERROR command; the first failure only. */
static int fail_as(kb_tl *tl, int code, int detail, const char *msg)
{
	tl->failed = 1;
	kb_error_clear(&tl->error);
	tl->error.detail = detail;
	snprintf(tl->error.source, sizeof(tl->error.source), "%s:%d", tl->op_file, tl->op_line);
	tl->error.line = tl->op_line;
	kb__err(&tl->error, code, "%s:%d: pe%u: tl op #%llu %s: %s%s%s%s", tl->op_file,
		tl->op_line, tl->cfg.pe, (unsigned long long)tl->op_count, tl->op_name, msg,
		detail ? " (" : "", detail ? kb_validation_name(detail) : "", detail ? ")" : "");
	/* Tell PE_CPU where the kernel stopped; it fails the run when it gets there. */
	if (!tl->cancelled && tl->fail_cmd) {
		kb_cmd *c = tl->fail_cmd;

		*tl->fail_err = tl->error;
		c->kind = KB_CMD_ERROR;
		c->pe = tl->cfg.pe;
		c->id = tl->next_cmd;
		c->error = tl->fail_err;
		tl->fail_cmd = NULL;
		tl->fail_err = NULL;
		(void)kb__tl_push_or_cancel(tl, c);
	}
	return KB_EVALIDATE;
}

int kb__tl_fail(kb_tl *tl, int detail, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	if (tl->failed)
		return KB_EVALIDATE;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return fail_as(tl, KB_EVALIDATE, detail, msg);
}

/* A failure that is not the kernel's mistake: code, no validation
 * detail, the message "PRE WHAT POST". */
static int fail_not_kernel(kb_tl *tl, int code, const char *pre, const char *what, const char *post)
{
	char msg[160];

	if (tl->failed)
		return KB_EVALIDATE;
	snprintf(msg, sizeof(msg), "%s%s%s", pre, what, post);
	return fail_as(tl, code, KB_V_NONE, msg);
}

int kb__tl_fail_oom(kb_tl *tl, const char *what)
{
	return fail_not_kernel(tl, KB_ENOMEM, "out of memory for ", what, "");
}

int kb__tl_fail_internal(kb_tl *tl, const char *what)
{
	return fail_not_kernel(tl, KB_EINTERNAL, "internal error: ", what,
			       " (a bug in kernbench: please report it)");
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

/* The handle layout: tl_int.h. */
#define SLOT_BITS KB_TL_SLOT_BITS
#define GEN_BITS KB_TL_GEN_BITS
#define TAG_BITS KB_TL_TAG_BITS

kb_hslot *kb__tl_slot(kb_tl *tl, const kb_tl_tensor *t, const char *what)
{
	uint64_t v = (uint64_t)(uintptr_t)t;
	kb_hslot *h = kb__tl_slot_find(tl, t);

	if (h)
		return h;
	if (!t) {
		kb__tl_fail(tl, KB_V_BAD_HANDLE, "%s is NULL (did an earlier op fail?)", what);
		return NULL;
	}
	if ((uint32_t)(v >> (SLOT_BITS + GEN_BITS)) != tl->tag) {
		kb__tl_fail(tl, KB_V_BAD_HANDLE,
			    "%s belongs to another kernel instance or simulation", what);
		return NULL;
	}
	kb__tl_fail(tl, KB_V_BAD_HANDLE,
		    "%s is no longer valid (released, or its scratch scope has ended)", what);
	return NULL;
}

void kb__tl_shape_fail(kb_tl *tl, kb_tl_shape_err e, int rank, kb_dtype dt)
{
	if (e == KB_TL_SHAPE_RANK)
		kb__tl_fail(tl, KB_V_SHAPE, "rank %d is not in 1..%d", rank, KB_TL_MAX_RANK);
	else if (e == KB_TL_SHAPE_DTYPE)
		kb__tl_fail(tl, KB_V_DTYPE, "unknown dtype %d", (int)dt);
	else
		kb__tl_fail(tl, KB_V_SHAPE, "shape has a non-positive or enormous dimension");
}

kb_hslot *kb__tl_slot_new(kb_tl *tl)
{
	kb_hslot *h;

	if (tl->n_slots > KB_TL_MAX_SLOT)
		return NULL;
	if (tl->n_slots == tl->cap_slots) {
		size_t nc = tl->cap_slots / KB_TL_CHUNK + 1;
		kb_hslot **c;

		c = realloc(tl->chunks, nc * sizeof(*c));
		if (!c)
			return NULL;
		tl->chunks = c;
		/* Not zeroed: a slot is written in full before anything
		 * reads it (lookups stop at n_slots), so only the slots a
		 * kernel uses are touched. calloc faulted in the whole
		 * chunk (~60 KB, 16 pages) at a kernel's first handle, most
		 * of a small run's heap faults. */
		c[nc - 1] = malloc(KB_TL_CHUNK * sizeof(kb_hslot));
		if (!c[nc - 1])
			return NULL;
		tl->cap_slots += KB_TL_CHUNK;
		if (!tl->n_slots) {
			/* slot 0, the NULL handle's: dead for good (tl_int.h) */
			KB_SLOT(tl, 0)->key = KB_TL_DEAD;
			tl->n_slots = 1;
		}
	}
	h = KB_SLOT(tl, tl->n_slots);
	h->slot = (uint32_t)tl->n_slots++;
	h->gen = 0;
	h->mark = 0;
	return h;
}

kb_hslot *kb__tl_handle_oom(kb_tl *tl, kb_hslot *h)
{
	if (h) {
		h->key = KB_TL_DEAD;
		h->next_free = tl->free_slot;
		tl->free_slot = h;
	}
	kb__tl_fail_oom(tl, "handles");
	return NULL;
}

kb_hslot *kb__tl_new_handle(kb_tl *tl, kb_space space, uint64_t addr, kb_dtype dt, int rank,
			    const int64_t *shape, kb_tl_tensor **out)
{
	return kb__tl_handle(tl, addr, NULL, space, dt, rank, shape, out);
}

void kb__tl_tcm_exhausted(kb_tl *tl, uint64_t bytes)
{
	kb__tl_fail(tl, KB_V_TCM_EXHAUSTED,
		    "TCM exhausted: %llu bytes requested, %llu of %llu free, largest free block %llu",
		    (unsigned long long)bytes, (unsigned long long)(tl->cfg.tcm_bytes - tl->tcm.used),
		    (unsigned long long)tl->cfg.tcm_bytes,
		    (unsigned long long)kb__tcm_largest_free(&tl->tcm));
}

void kb__tl_tcm_exhausted_for(kb_tl *tl, const kb_tview *proto)
{
	kb__tl_tcm_exhausted(tl, kb__tview_bytes(proto));
}

kb_hslot *kb__tl_new_tcm_sized(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
			       uint64_t bytes, kb_tl_tensor **out)
{
	uint64_t off, fence;

	if (kb__tcm_alloc_inline(&tl->tcm, bytes, &off, &fence)) {
		kb__tl_tcm_exhausted(tl, bytes);
		return NULL;
	}
	return kb__tl_owning(tl, kb__tl_new_handle(tl, KB_SPACE_TCM, off, dt, rank, shape, out), off,
			     bytes, fence);
}

kb_hslot *kb__tl_new_tcm_view(kb_tl *tl, const kb_tview *proto, uint64_t size, kb_tl_tensor **out)
{
	return kb__tl_new_tcm_at(tl, proto, size, out);
}

kb_hslot *kb__tl_new_tcm_temp(kb_tl *tl, const kb_tview *proto, uint64_t size, kb_hslot *tmp)
{
	kb_scope *s = tl->scope;
	uint64_t off, fence;

	if (kb__tcm_alloc_size(&tl->tcm, size, &off, &fence)) {
		kb__tl_tcm_exhausted_for(tl, proto);
		return NULL;
	}
	if (__builtin_expect(s->cap - s->n < 2, 0) &&
	    (kb__scope_grow(s) || (s->cap - s->n < 2 && kb__scope_grow(s)))) {
		kb__tcm_free(&tl->tcm, off, size, tl->next_cmd);
		kb__tl_fail_oom(tl, "handles");
		return NULL;
	}
	return kb__tl_temp_at(tl, s, off, size, fence, tmp);
}
