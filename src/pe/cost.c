/* Logical bytes of commands and the dispatch cost model. */
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "pe/cmd.h"

int64_t kb__tview_rows(const kb_tview *t)
{
	int64_t r = 1;

	for (int i = 0; i + 1 < t->rank; i++)
		r *= t->shape[i];
	return r;
}

int64_t kb__tview_cols(const kb_tview *t)
{
	return t->rank ? t->shape[t->rank - 1] : 1;
}

int64_t kb__tview_elems(const kb_tview *t)
{
	return kb__tview_rows(t) * kb__tview_cols(t);
}

uint64_t kb__tview_bytes(const kb_tview *t)
{
	return (uint64_t)kb__tview_elems(t) * kb_dtype_size((kb_dtype)t->dtype);
}

const char *kb__cmd_kind_name(int kind)
{
	static const char *const names[KB_CMD_KIND_COUNT] = {
		"composite", "load", "store", "fill", "send", "recv", "cpu_overhead",
		"wait", "end", "error",
	};
	return kind >= 0 && kind < KB_CMD_KIND_COUNT ? names[kind] : "?";
}

uint64_t kb__opspec_lbytes(const kb_opspec *op)
{
	return 2 + (1 + 8u * op->n_operands) + (op->has_out ? 8u : 0u) + (1 + 4u * op->n_extras);
}

uint64_t kb__composite_lbytes(const kb_opspec *ops, uint32_t n_ops, uint32_t n_rw)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < n_ops; i++)
		sum += kb__opspec_lbytes(&ops[i]);
	return 4 + (1 + sum) + (1 + 8u * n_rw);
}

/* Same style as the composite: 4 framing bytes, then counted lists of
 * 8-byte handles and 4-byte scalars (doc/commands.md). */
uint64_t kb__cmd_lbytes(const kb_cmd *c)
{
	switch (c->kind) {
	case KB_CMD_COMPOSITE:
		return kb__composite_lbytes(c->ops, c->n_ops, c->n_rw);
	case KB_CMD_LOAD:
	case KB_CMD_STORE:
		return 4 + (1 + 8 * 2) + 1;
	case KB_CMD_FILL:
		return 4 + (1 + 8) + (1 + 4);
	case KB_CMD_SEND:
	case KB_CMD_RECV:
		return 4 + (1 + 8) + (1 + 4 * 2);
	case KB_CMD_CPU:
		return 4 + 1 + (1 + 4);
	default:
		return 0;
	}
}

double kb__dispatch_cycles(const kb_cost_model *m, const kb_cmd *cmd)
{
	return cmd->kind == KB_CMD_CPU ? cmd->cpu_cycles
				       : m->fixed_cycles + m->r_cycles_per_byte * (double)cmd->lbytes;
}

uint64_t kb__dispatch_ps(const kb_cost_model *m, const kb_cmd *cmd)
{
	return kb__cycles_to_ps(kb__dispatch_cycles(m, cmd), m->clock_ghz);
}

kb_cmd *kb__cmd_alloc(uint32_t n_ops, uint32_t cap_ids)
{
	/* The ops first after the header: kb_opspec's alignment is 8, as are
	 * the ids'. One block instead of five, each grown id by id, was 8% of
	 * a decode run (malloc, realloc, calloc). */
	size_t size = sizeof(kb_cmd) + (size_t)n_ops * sizeof(kb_opspec) +
		      3 * (size_t)cap_ids * sizeof(uint64_t);
	kb_cmd *c = malloc(size);
	uint64_t *ids;

	if (!c)
		return NULL;
	memset(c, 0, sizeof(*c));
	c->ops = n_ops ? (kb_opspec *)(c + 1) : NULL;
	ids = (uint64_t *)((kb_opspec *)(c + 1) + n_ops);
	c->cap_ids = cap_ids;
	c->deps = ids;
	c->reads = ids + cap_ids;
	c->writes = ids + 2 * (size_t)cap_ids;
	return c;
}

void kb__cmd_free(kb_cmd *cmd)
{
	if (!cmd)
		return;
	free(cmd->error);
	free(cmd);
}
