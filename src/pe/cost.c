/* Logical bytes of commands and the dispatch cost model. */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "base/time.h"
#include "base/zero.h"
#include "pe/cmd.h"

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

#define CACHE_CLASSES KB_CMD_CACHE_CLASSES
#define CACHE_MIN KB_CMD_CACHE_MIN
#define CACHE_KEEP KB_CMD_CACHE_KEEP
#define CACHE_BYTES KB_CMD_CACHE_BYTES

typedef kb_cmd_cache cmd_cache;

/* cmd.h says why a thread's cache, and why initial-exec */
_Thread_local kb_cmd_cache kb__cmd_cache __attribute__((tls_model("initial-exec")));

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_key_ok;

static void cache_drain(void *arg)
{
	cmd_cache *cc = arg;

	cc->state = 2;
	for (int k = 0; k < CACHE_CLASSES; k++) {
		/* kb__cmd_free's inline path keeps nothing more (cmd.h) */
		cc->cap[k] = 0;
		cc->n[k] = 0;
	}
	for (int k = 0; k < CACHE_CLASSES; k++)
		while (cc->head[k]) {
			kb_cmd *c = cc->head[k];

			cc->head[k] = (kb_cmd *)(void *)c->ops;
			free(c);
		}
}

/* The thread that ends the process (or unloads the library) gives its
 * cache back too: no key destructor runs for it, and its blocks, as many
 * as it had in flight (cmd.h), would be left to the end. */
__attribute__((destructor)) static void cache_at_exit(void)
{
	if (kb__cmd_cache.state == 1)
		cache_drain(&kb__cmd_cache);
}

static void cache_key_make(void)
{
	cache_key_ok = pthread_key_create(&cache_key, cache_drain) == 0;
}

/* A thread's first use of its cache. */
static __attribute__((noinline)) void cache_start(cmd_cache *cc)
{
	pthread_once(&cache_once, cache_key_make);
	cc->state = cache_key_ok && pthread_setspecific(cache_key, cc) == 0 ? 1 : 2;
	for (int k = 0; k < CACHE_CLASSES; k++)   /* 0 unless live (cmd.h) */
		cc->cap[k] = cc->state == 1 ? CACHE_KEEP : 0;
}

/* This thread's cache, NULL when it cannot keep blocks (no key, or the
 * thread is ending). */
static inline cmd_cache *cache_get(void)
{
	cmd_cache *cc = &kb__cmd_cache;

	if (__builtin_expect(cc->state == 0, 0))
		cache_start(cc);
	return cc->state == 1 ? cc : NULL;
}

/* Bytes of the digest of n_ops ops (none without ops). */
static size_t dig_size(uint32_t n_ops)
{
	return n_ops ? sizeof(kb_cmd_dig) + (size_t)n_ops * sizeof(kb_opdig) : 0;
}

size_t kb__cmd_dig_size(uint32_t n_ops)
{
	return dig_size(n_ops);
}

kb_cmd *kb__cmd_alloc_slow(uint32_t n_ops, uint32_t cap_ids)
{
	/* One block instead of five, each grown id by id, was 8% of a decode
	 * run (malloc, realloc, calloc). */
	size_t size = kb__cmd_block_size(n_ops, cap_ids);
	int k = kb__cmd_size_class(size);
	cmd_cache *cc = k >= 0 ? cache_get() : NULL;
	kb_cmd *c;

	if (cc && cc->head[k]) {
		c = cc->head[k];
		cc->head[k] = (kb_cmd *)(void *)c->ops;
		cc->n[k]--;
	} else {
		/* A cache line's alignment: a command's header is two lines,
		 * and what it writes a run of lines from there (kb__cmd_init). */
		c = k >= 0 ? aligned_alloc(64, (size_t)CACHE_MIN << k) : malloc(size);
		/* one more in flight than the cache had: room to keep it (cmd.h) */
		if (c && cc && cc->cap[k] < CACHE_BYTES / (CACHE_MIN << k))
			cc->cap[k]++;
	}
	if (!c)
		return NULL;
	return kb__cmd_init(c, k, n_ops, cap_ids);
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

static int64_t extra_of(const kb_opspec *op, const char *name)
{
	for (int i = 0; i < op->n_extras; i++)
		if (kb__same_name(op->extras[i].name, name))
			return (int64_t)op->extras[i].value;
	return 1;
}

int kb__cmd_digest(kb_cmd *c)
{
	kb_cmd_dig *d = kb__cmd_dig_room(c);
	const kb_opspec *run = c->n_ops ? &c->ops[0] : NULL;   /* latest op with an output */

	/* the room is up to the ids (kb__cmd_init) */
	if (!c->n_ops || !c->ops || (size_t)((char *)c->deps - (char *)d) < dig_size(c->n_ops))
		return -1;
	d->key = 0;
	d->gemm = -1;
	d->n_ops = c->n_ops;
	for (uint32_t i = 0; i < c->n_ops; i++)
		if (c->ops[i].kind == KB_OP_GEMM && d->gemm < 0)
			d->gemm = (int32_t)i;
	d->M = d->K = d->N = 1;
	if (d->gemm >= 0) {
		const kb_opspec *g = &c->ops[d->gemm];

		d->M = extra_of(g, "m");
		d->K = extra_of(g, "k");
		d->N = extra_of(g, "n");
		run = g;   /* every op without an output continues on the GEMM's */
	}
	for (uint32_t i = 0; i < c->n_ops; i++) {
		const kb_opspec *op = &c->ops[i];
		kb_opdig *o = &d->op[i];

		if (d->gemm < 0 && op->has_out)
			run = op;
		o->kind = op->kind;
		o->scope = op->scope;
		o->n_operands = op->n_operands;
		o->has_out = op->has_out;
		o->hbm = op->out.space == KB_SPACE_HBM ? KB_OPDIG_OUT_HBM : 0;
		for (int k = 0; k < op->n_operands; k++)
			if (op->operands[k].t.space == KB_SPACE_HBM)
				o->hbm |= (uint8_t)(1u << k);
		o->es_a = op->n_operands ? (uint8_t)kb__dtype_size((kb_dtype)op->operands[0].t.dtype) : 0;
		o->es_out = (uint8_t)kb__dtype_size((kb_dtype)op->out.dtype);
		/* DDD §5.3: the largest of its operands and its output, or of the
		 * running value it continues on when it has no output of its own. */
		o->n = 0;
		if (op->kind != KB_OP_GEMM) {
			o->n = kb__tview_elems(op->has_out ? &op->out : &run->out);
			for (int k = 0; k < op->n_operands; k++)
				o->n = max64(o->n, kb__tview_elems(&op->operands[k].t));
		}
	}
	c->dig = d;
	return 0;
}

int kb__cmd_set_digest(kb_cmd *c, const kb_cmd_dig *d)
{
	kb_cmd_dig *to = kb__cmd_dig_room(c);

	if (!d->n_ops || d->n_ops != c->n_ops || !c->ops ||
	    (size_t)((char *)c->deps - (char *)to) < dig_size(d->n_ops))
		return -1;
	memcpy(to, d, dig_size(d->n_ops));
	c->dig = to;
	return 0;
}

void kb__cmd_free_slow(kb_cmd *cmd)
{
	cmd_cache *cc;
	int k;

	if (!cmd)
		return;
	if (cmd->error)   /* no call per command for the rare error */
		free(cmd->error);
	k = (int)cmd->block - 1;
	if (k >= 0 && k < CACHE_CLASSES && (cc = cache_get()) && cc->n[k] < cc->cap[k]) {
		cmd->ops = (kb_opspec *)(void *)cc->head[k];
		cc->head[k] = cmd;
		cc->n[k]++;
		return;
	}
	free(cmd);
}
