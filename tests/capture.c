#include "capture.h"

#include <check.h>

int cap_emit(void *ctx, kb_cmd *cmd)
{
	capture *cp = ctx;

	ck_assert_int_lt(cp->n, MAX_CAP);
	cp->c[cp->n++] = cmd;
	return 0;
}

void cap_clear(capture *cp)
{
	for (int i = 0; i < cp->n; i++)
		kb__cmd_free(cp->c[i]);
	cp->n = 0;
}
