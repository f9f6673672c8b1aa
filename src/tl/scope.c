/*
 * Scratch scopes: every TCM tensor belongs to the scope it was made in and
 * is freed when that scope ends (the allocator itself: tcm.c).
 */
#include "tl/tl_int.h"
#include "base/grow.h"

#include <stdlib.h>

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
		uint32_t *v = kb__grow(s->slots, &s->cap, sizeof(*v), 16);

		if (!v)
			return -1;
		s->slots = v;
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
	uint64_t bytes;

	if (kb__tl_check_shape(tl, rank, shape, dt, &bytes))
		return NULL;
	return kb__tl_new_tcm_sized(tl, dt, rank, shape, bytes, out);
}

kb_hslot *kb__tl_new_tcm_sized(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
			       uint64_t bytes, kb_tl_tensor **out)
{
	uint64_t off, fence;
	kb_hslot *h;

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
