/* Helpers of the tl and pe suites: commands a tl context emits, captured in
 * program order (no simulation), and 2-D tensors made with checks. */
#ifndef KB_TESTS_CAPTURE_H
#define KB_TESTS_CAPTURE_H

#include "kernbench/tl.h"
#include "pe/cmd.h"

#define MAX_CAP 512

typedef struct capture {
	kb_cmd *c[MAX_CAP];
	int n;
} capture;

/* A kb_tl_emit_fn: keeps the command (fails the test past MAX_CAP). */
int cap_emit(void *ctx, kb_cmd *cmd);
/* Frees every captured command. */
void cap_clear(capture *cp);
/* A (r, c) TCM tensor in the current scope; an HBM view at addr. */
kb_tl_tensor *tcm2(kb_tl *tl, kb_dtype dt, int64_t r, int64_t c);
kb_tl_tensor *hbm2(kb_tl *tl, uint64_t addr, kb_dtype dt, int64_t r, int64_t c);

#endif
