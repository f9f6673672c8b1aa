/* The tl context as the PE model drives it (the compiler analog). */
#ifndef KB_TL_TL_IMPL_H
#define KB_TL_TL_IMPL_H

#include "kernbench/tl.h"
#include "pe/cmd.h"

/* Receives each command in program order and owns it from then on.
 * Returns nonzero when nobody will consume commands any more. */
typedef int (*kb_tl_emit_fn)(void *ctx, kb_cmd *cmd);

typedef struct kb_tl_config {
	uint32_t pe, program_id, num_programs, n_pes;
	kb_cost_model cost;
	uint64_t tcm_bytes;      /* TCM usable by kernels (staging excluded) */
	uint64_t hbm_bytes;
	uint32_t tag;            /* distinguishes handles of different contexts (24 bits used) */
	kb_tl_emit_fn emit;
	void *emit_ctx;
	/* 1: the run has no data memory, and nothing reads the ids and
	 * addresses of the tensors in a composite's ops (only data mode
	 * computes with them; timing reads their shapes, dtypes, spaces and
	 * names): a replayed composite may then point at its template's ops
	 * and digest, whose views keep the ids and addresses of the call
	 * the template was made from (replay.c). 0: each command has ops
	 * of its own, every field as the full lowering writes it. */
	int timing_only;
} kb_tl_config;

kb_tl *kb__tl_create(const kb_tl_config *cfg);
void kb__tl_destroy(kb_tl *tl);
/* tl's ring of commands for its consumer, who sets its room (0, the
 * default: every command through cfg.emit) and takes from it (cmd.h). */
kb_cmd_ring *kb__tl_ring(kb_tl *tl);
/* After the kernel function returns: checks scopes and emits END (or
 * nothing when an ERROR was already emitted). */
int kb__tl_finish(kb_tl *tl);
/* The recorded validation error, or NULL. */
const kb_error *kb__tl_error(const kb_tl *tl);
/* Tells the context that the consumer is gone: every later op is a no-op. */
void kb__tl_cancel(kb_tl *tl);
/* Number of commands emitted so far. */
uint64_t kb__tl_commands(const kb_tl *tl);
/* PE_CPU dispatch time (ps) of the commands emitted so far: what PE_CPU
 * will pay for them (FIXED + R * lbytes, or the explicit CPU cost). A
 * kernel reads it around a loop to know that loop's dispatch. */
uint64_t kb__tl_dispatch_ps(const kb_tl *tl);
/* What the kernel declared with kb_tl_tile_loop_begin/end: tiles, and the
 * dispatch time (ps) of the commands between each begin and end. */
void kb__tl_tiles(const kb_tl *tl, uint64_t *tiles, uint64_t *loop_ps);

#endif
