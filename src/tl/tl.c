/*
 * The tl context: its life (create, finish, destroy), the dispatch and tile
 * figures it keeps, and the public queries. The rest is split by job:
 * errors and handles (handle.c), scratch scopes (scope.c), the TCM
 * allocator (tcm.c), commands and the simple operations (commands.c),
 * composites (composite.c).
 */
#include "tl/tl_int.h"

#include <stdlib.h>

/* ---- the context ---- */

kb_tl *kb__tl_create(const kb_tl_config *cfg)
{
	kb_tl *tl = calloc(1, sizeof(*tl));

	if (!tl)
		return NULL;
	tl->cfg = *cfg;
	tl->scope = &tl->scopes[0];
	tl->tag = cfg->tag & ((1u << KB_TL_TAG_BITS) - 1);
	tl->tag_bits = (uint64_t)tl->tag << (KB_TL_SLOT_BITS + KB_TL_GEN_BITS);
	kb__clock_init(&tl->clock, cfg->cost.clock_ghz);
	for (int i = 0; i < 8; i++)
		tl->disp_lbytes[i] = UINT64_MAX;
	tl->fail_cmd = calloc(1, sizeof(*tl->fail_cmd));
	tl->fail_err = malloc(sizeof(*tl->fail_err));
	if (!tl->fail_cmd || !tl->fail_err || kb__tcm_init(&tl->tcm, cfg->tcm_bytes)) {
		free(tl->fail_cmd);
		free(tl->fail_err);
		free(tl);
		return NULL;
	}
	return tl;
}

kb_cmd_ring *kb__tl_ring(kb_tl *tl)
{
	return &tl->ring;
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
	kb__tl_lowering_free(tl->lowering);
	free(tl->fail_cmd);
	free(tl->fail_err);
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
