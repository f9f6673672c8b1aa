/* Commands a tl context emits, captured in program order (no simulation). */
#ifndef KB_TESTS_CAPTURE_H
#define KB_TESTS_CAPTURE_H

#include "pe/cmd.h"

#define MAX_CAP 256

typedef struct capture {
	kb_cmd *c[MAX_CAP];
	int n;
} capture;

/* A kb_tl_emit_fn: keeps the command (fails the test past MAX_CAP). */
int cap_emit(void *ctx, kb_cmd *cmd);
/* Frees every captured command. */
void cap_clear(capture *cp);

#endif
