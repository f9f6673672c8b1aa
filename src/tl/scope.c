/*
 * Scratch scopes: every handle belongs to the scope it was made in and is
 * released when that scope ends, or before by kb_tl_release; a TCM tensor's
 * memory goes back to the allocator (tcm.c) then.
 */
#include "tl/tl_int.h"
#include "base/grow.h"

#include <stdlib.h>

/* Memory is reusable only after every command issued so far is done: the
 * next user of it carries that fence (see kb__tcm_alloc). The handle's id
 * is never handed out again, so commands already issued on it keep their
 * hazards and pending completion. */
static inline kb_hslot *free_push(kb_hslot *head, kb_hslot *h)
{
	h->key = KB_TL_DEAD;
	h->next_free = head;
	return h;
}

static inline void free_slot(kb_tl *tl, kb_hslot *h)
{
	tl->free_slot = free_push(tl->free_slot, h);
}

/* h goes: its memory, then its slot. */
static void release_slot(kb_tl *tl, kb_hslot *h)
{
	if (h->owns_alloc)
		kb__tcm_free(&tl->tcm, h->view.addr, h->alloc_size, tl->next_cmd);
	free_slot(tl, h);
}

/* ---- scratch scopes ---- */

int kb__scope_grow(kb_scope *s)
{
	uint32_t *v = kb__grow(s->slots, &s->cap, sizeof(*v), 16);

	if (!v)
		return -1;
	s->slots = v;
	return 0;
}

/* Drops the holes of s, keeping the order of the rest. */
static void compact(kb_tl *tl, kb_scope *s)
{
	size_t w = 0;

	for (size_t i = 0; i < s->n; i++) {
		uint32_t slot = s->slots[i];

		if (slot == KB_TL_NO_SLOT)
			continue;
		if (!(slot & KB_TL_RAW))   /* a raw entry's two words stay as they are */
			KB_SLOT(tl, slot)->scope_pos = (uint32_t)w;
		s->slots[w++] = slot;
	}
	s->n = w;
	s->dead = 0;
}

/* Takes h out of the scope that holds it (the one open at its depth: had
 * that scope ended, h would be released already). */
static void untrack(kb_tl *tl, const kb_hslot *h)
{
	kb_scope *s = &tl->scopes[h->scope];

	/* Trailing holes go at once: a loop that releases what it made last
	 * keeps the array as long as its live handles (a decode opt3 tile's
	 * K and V views: h is the last, and leaves no hole). */
	if (h->scope_pos + 1 == s->n) {
		s->n--;
	} else {
		s->slots[h->scope_pos] = KB_TL_NO_SLOT;
		s->dead++;
	}
	while (s->n && s->slots[s->n - 1] == KB_TL_NO_SLOT) {
		s->n--;
		s->dead--;
	}
	/* Holes elsewhere go when they are over half of it: O(n) once in
	 * n / 2 releases. */
	if (s->dead > 16 && s->dead * 2 > s->n)
		compact(tl, s);
}

KB_API int kb_tl_release_at(kb_tl *tl, kb_tl_tensor *t, const char *file, int line)
{
	kb_hslot *h;

	if (kb__tl_begin(tl, "kb_tl_release", file, line))
		return KB_EVALIDATE;
	/* kb__tl_slot only to say why t is not a handle (the look-up
	 * inline: a call a release, two a decode tile) */
	if (!(h = kb__tl_slot_find(tl, t)) && !(h = kb__tl_slot(tl, t, "released tensor")))
		return KB_EVALIDATE;
	untrack(tl, h);
	release_slot(tl, h);
	return KB_OK;
}

KB_API int kb_tl_scope_begin_at(kb_tl *tl, const char *file, int line)
{
	if (kb__tl_begin(tl, "kb_tl_scope_begin", file, line))
		return KB_EVALIDATE;
	if (tl->depth + 1 >= KB_TL_MAX_SCOPES)
		return kb__tl_fail(tl, KB_V_SCOPE, "scratch scopes nested deeper than %d",
				   KB_TL_MAX_SCOPES - 1);
	tl->depth++;
	tl->scope++;
	tl->scope->n = 0;
	tl->scope->dead = 0;
	return KB_OK;
}

#define SPAN_BATCH 16

KB_API int kb_tl_scope_end_at(kb_tl *tl, const char *file, int line)
{
	kb_tcm_span span[SPAN_BATCH];
	size_t n_span = 0;
	kb_scope *s;
	const uint32_t *slots;
	kb_hslot *const *chunks;
	kb_hslot *free;

	if (kb__tl_begin(tl, "kb_tl_scope_end", file, line))
		return KB_EVALIDATE;
	if (tl->depth == 0)
		return kb__tl_fail(tl, KB_V_SCOPE, "scope end without a matching scope begin");
	s = tl->scope;
	/* The memory goes back in the order of the releases (it decides how
	 * freed blocks merge), a batch at a time, all with this fence; a
	 * slot's release touches no memory but its own. The slots array,
	 * the chunks and the free list's head in locals: read through tl
	 * and s, each slot's stores made the loop load them again (three
	 * loads and a store a handle, six a decode opt3 tile). */
	slots = s->slots;
	chunks = tl->chunks;
	free = tl->free_slot;
	for (size_t i = s->n; i-- > 0;) {
		uint32_t slot = slots[i];
		kb_hslot *h;

		if (__builtin_expect(slot & KB_TL_RAW, 0)) {
			if (slot == KB_TL_NO_SLOT)
				continue;
			/* memory without a handle: offset, then size */
			i--;
			span[n_span].off = (uint64_t)(slots[i] & ~KB_TL_RAW) * KB_TCM_ALIGN;
			span[n_span++].bytes = (uint64_t)(slot & ~KB_TL_RAW) * KB_TCM_ALIGN;
		} else {
			h = KB_SLOT_IN(chunks, slot);
			if (h->owns_alloc) {
				span[n_span].off = h->view.addr;
				span[n_span++].bytes = h->alloc_size;
			}
			free = free_push(free, h);
		}
		if (n_span == SPAN_BATCH) {
			kb__tcm_free_n(&tl->tcm, span, n_span, tl->next_cmd);
			n_span = 0;
		}
	}
	tl->free_slot = free;
	if (n_span)
		kb__tcm_free_n(&tl->tcm, span, n_span, tl->next_cmd);
	s->n = 0;
	s->dead = 0;
	tl->depth--;
	tl->scope--;
	return KB_OK;
}

/* A new TCM tensor in the current scope. */
kb_hslot *kb__tl_new_tcm(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
			 kb_tl_tensor **out)
{
	uint64_t bytes;

	if (kb__tl_check_shape(tl, rank, shape, dt, &bytes))
		return NULL;
	return kb__tl_new_tcm_sized(tl, dt, rank, shape, bytes, out);
}
