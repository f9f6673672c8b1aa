#include "capture.h"

#include <check.h>

#include "pe/hazard.h"

int cap_emit(void *ctx, kb_cmd *cmd)
{
	capture *cp = ctx;

	ck_assert_int_lt(cp->n, MAX_CAP);
	/* a signature the tl context kept is the one of its sets */
	if (cmd->has_sig) {
		kb_hazard_sig sig = kb__hazard_sign(cmd);

		ck_assert_uint_eq(kb__cmd_sig(cmd)[0], sig.r);
		ck_assert_uint_eq(kb__cmd_sig(cmd)[1], sig.w);
	}
	cp->c[cp->n++] = cmd;
	return 0;
}

void cap_clear(capture *cp)
{
	for (int i = 0; i < cp->n; i++)
		kb__cmd_free(cp->c[i]);
	cp->n = 0;
}

kb_tl_tensor *tcm2(kb_tl *tl, kb_dtype dt, int64_t r, int64_t c)
{
	int64_t s[2] = { r, c };
	kb_tl_tensor *t = kb_tl_alloc(tl, dt, 2, s);

	ck_assert_ptr_nonnull(t);
	return t;
}

kb_tl_tensor *hbm2(kb_tl *tl, uint64_t addr, kb_dtype dt, int64_t r, int64_t c)
{
	int64_t s[2] = { r, c };
	kb_tl_tensor *t = kb_tl_ref(tl, addr, dt, 2, s);

	ck_assert_ptr_nonnull(t);
	return t;
}
