/* Plan generation and stage costs (see plan.h). */
#include "pe/plan.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/zero.h"

static kb_stage_ref stage(kb_stage_kind k, int eng, int op, int operand)
{
	return (kb_stage_ref){ (uint8_t)k, (uint8_t)eng, (int8_t)op, (int8_t)operand };
}

/* Appends a stage. The first one over the limit names in over_op the op
 * that did not fit: its own for a MATH stage or a DMA_READ of the op's
 * operand, else (STORE, DMA_WRITE of an earlier op) the latest MATH op. */
static int push(kb_plan *p, kb_stage_ref *v, uint16_t *n, uint32_t max, kb_stage_ref s)
{
	if (*n >= max) {
		if (p->over_op < 0) {
			p->over_op = s.kind == KB_ST_MATH || s.kind == KB_ST_DMA_READ || p->last_op < 0
					     ? s.op : p->last_op;
			p->over_max = max;
		}
		return -1;
	}
	if (s.kind == KB_ST_MATH)
		p->last_op = s.op; /* NOLINT(bugprone-signed-char-misuse): an op index, sign kept */
	v[(*n)++] = s;
	return 0;
}

/*
 * Tile sizes of a GEMM. An output tile never exceeds the GEMM (tm = min(M,
 * tile_m), tn = min(N, tile_n)). When the GEMM streams an operand from HBM,
 * every k-step pays a DMA setup (pe.dma.setup_cycles, 64 by default) for
 * that operand's tile, so the k-step grows as far as the staging slot's a
 * and b areas (tile_m x tile_k and tile_k x tile_n elements) allow, up to
 * K: an operand tile that fits its staging area is read in one DMA. Decode
 * opt2's Q.K^T (M = G = 8, N = TILE = 64, K = d = 128) so reads each K tile
 * in one DMA instead of two k-steps of tile_k = 64 (issue 15). A GEMM on
 * TCM operands pays no setup per k-step and keeps k-steps of tile_k, whose
 * FETCH of step k+1 overlaps the GEMM of step k; so does a GEMM whose
 * output tiles are full (the staging areas leave no room to grow).
 */
static void fit_tiles(kb_plan *p, const kb_topo_params *tp, const kb_opdig *gm)
{
	int64_t tm = (int64_t)tp->gemm.tile_m, tk = (int64_t)tp->gemm.tile_k;
	int64_t tn = (int64_t)tp->gemm.tile_n, ka, kb;

	p->tm = p->M < tm ? p->M : tm;
	p->tn = p->N < tn ? p->N : tn;
	p->tk = tk;
	if (!(gm->hbm & 3u))
		return;
	ka = tm * tk / p->tm;
	kb = tk * tn / p->tn;
	p->tk = ka < kb ? ka : kb;
	if (p->tk > p->K)
		p->tk = p->K > tk ? p->K : tk;
}

/* The stage templates of a composite whose GEMM is ops[g] (no tile sizes:
 * emit checks these against the limits without a machine). */
static int plan_gemm_stages(kb_plan *p, const kb_cmd_dig *d, int g)
{
	const kb_opdig *ops = d->op, *gm = &ops[g];
	uint32_t n_ops = d->n_ops;
	int rc = 0;

	for (int i = 0; i < g; i++)
		rc |= push(p, p->own->pre, &p->n_pre, KB_PLAN_MAX_STEPS, stage(KB_ST_MATH, KB_ENG_MATH, i, -1));
	for (uint32_t i = (uint32_t)g + 1; i < n_ops; i++)
		if (ops[i].scope == KB_SCOPE_KERNEL)
			rc |= push(p, p->own->post, &p->n_post, KB_PLAN_MAX_STEPS,
				   stage(KB_ST_MATH, KB_ENG_MATH, (int)i, -1));
	/* Where a handle lives decides DMA: HBM streams in, TCM is used in place. */
	for (int o = 0; o < 2; o++)
		if (gm->hbm & (1u << o))
			rc |= push(p, p->own->mid, &p->n_mid, KB_PLAN_MAX_STAGES, stage(KB_ST_DMA_READ, KB_ENG_DMA, g, o));
	rc |= push(p, p->own->mid, &p->n_mid, KB_PLAN_MAX_STAGES, stage(KB_ST_FETCH, KB_ENG_TCM, g, -1));
	rc |= push(p, p->own->mid, &p->n_mid, KB_PLAN_MAX_STAGES, stage(KB_ST_GEMM, KB_ENG_GEMM, g, -1));
	for (uint32_t i = (uint32_t)g + 1; i < n_ops; i++)
		if (ops[i].scope == KB_SCOPE_K_TILE)
			rc |= push(p, p->own->mid, &p->n_mid, KB_PLAN_MAX_STAGES, stage(KB_ST_MATH, KB_ENG_MATH, (int)i, -1));
	memcpy(p->own->last, p->own->mid, p->n_mid * sizeof(*p->own->mid));
	p->n_last = p->n_mid;
	for (uint32_t i = (uint32_t)g + 1; i < n_ops; i++)
		if (ops[i].scope == KB_SCOPE_OUTPUT_TILE)
			rc |= push(p, p->own->last, &p->n_last, KB_PLAN_MAX_STAGES, stage(KB_ST_MATH, KB_ENG_MATH, (int)i, -1));
	rc |= push(p, p->own->last, &p->n_last, KB_PLAN_MAX_STAGES, stage(KB_ST_STORE, KB_ENG_TCM, g, -1));
	if (gm->hbm & KB_OPDIG_OUT_HBM)
		rc |= push(p, p->own->last, &p->n_last, KB_PLAN_MAX_STAGES, stage(KB_ST_DMA_WRITE, KB_ENG_DMA, g, -1));
	return rc;
}

/* Tiles of `tile` covering total; a decode GEMM is mostly one
 * tile a dimension, known without a 64-bit division. */
static uint32_t tiles_of(int64_t total, int64_t tile)
{
	return total > 0 && total <= tile ? 1 : (uint32_t)((total + tile - 1) / tile);
}

/* The tile loop of a composite whose GEMM is ops[g]. */
static int plan_gemm(kb_plan *p, const kb_cmd_dig *d, int g)
{
	p->M = d->M;
	p->K = d->K;
	p->N = d->N;
	fit_tiles(p, p->m->tp, &d->op[g]);
	p->mt = tiles_of(p->M, p->tm);
	p->kt = tiles_of(p->K, p->tk);
	p->nt = tiles_of(p->N, p->tn);
	p->n_steps = (uint64_t)p->mt * p->nt * p->kt;
	return plan_gemm_stages(p, d, g);
}

/* A GEMM-less composite: one step, its ops in order (ADR-0065 D3). Where a
 * handle lives decides DMA for every op alike, so a head op after a recipe
 * prologue streams like any head: each HBM operand is read just before its
 * op, and an HBM output is written once its value is final, i.e. after the
 * ops that continue on it (those without an output of their own). Emit
 * keeps recipe and epilogue operands in TCM, so in practice only the head
 * streams. */
static int plan_math(kb_plan *p, const kb_cmd_dig *d)
{
	const kb_opdig *ops = d->op;
	uint32_t n_ops = d->n_ops;
	int rc = 0, cur = -1;

	p->n_steps = 1;
	for (uint32_t i = 0; i < n_ops; i++) {
		const kb_opdig *op = &ops[i];

		for (int o = 0; o < op->n_operands; o++)
			if (op->hbm & (1u << o))
				rc |= push(p, p->own->last, &p->n_last, KB_PLAN_MAX_STAGES, stage(KB_ST_DMA_READ, KB_ENG_DMA, (int)i, o));
		rc |= push(p, p->own->last, &p->n_last, KB_PLAN_MAX_STAGES, stage(KB_ST_MATH, KB_ENG_MATH, (int)i, -1));
		if (op->has_out)
			cur = (int)i;
		if (cur >= 0 && (i + 1 == n_ops || ops[i + 1].has_out) &&
		    (ops[cur].hbm & KB_OPDIG_OUT_HBM))
			rc |= push(p, p->own->last, &p->n_last, KB_PLAN_MAX_STAGES, stage(KB_ST_DMA_WRITE, KB_ENG_DMA, cur, -1));
	}
	return rc;
}

static int plan_simple(kb_plan *p, const kb_cmd *c)
{
	static const struct { kb_stage_kind st; int eng; } map[] = {
		[KB_CMD_LOAD] = { KB_ST_DMA_READ, KB_ENG_DMA },
		[KB_CMD_STORE] = { KB_ST_DMA_WRITE, KB_ENG_DMA },
		[KB_CMD_FILL] = { KB_ST_FILL, KB_ENG_MATH },
		[KB_CMD_SEND] = { KB_ST_SEND, KB_ENG_IPCQ },
		[KB_CMD_RECV] = { KB_ST_RECV, KB_ENG_IPCQ },
	};

	p->n_steps = 1;
	return push(p, p->own->last, &p->n_last, KB_PLAN_MAX_STAGES, stage(map[c->kind].st, map[c->kind].eng, -1, 0));
}

static int alloc_data(kb_plan *p)
{
	size_t tile = (size_t)(p->tm * p->tk + p->tk * p->tn + p->tm * p->tn) * 4;

	if (p->gemm >= 0) {
		p->stage_stride = tile;
		p->stage_buf = malloc(tile * p->slots);
		p->acc = malloc((size_t)(p->tm * p->tn) * p->slots * sizeof(float));
		return p->stage_buf && p->acc ? 0 : -1;
	}
	if (p->cmd->kind == KB_CMD_COMPOSITE) {
		int64_t n = 1;

		/* The running value holds the output of the latest op that has one. */
		for (uint32_t i = 0; i < p->cmd->n_ops; i++)
			if (p->cmd->ops[i].has_out && kb__tview_elems(&p->cmd->ops[i].out) > n)
				n = kb__tview_elems(&p->cmd->ops[i].out);
		p->run = malloc((size_t)n * sizeof(float));
		return p->run ? 0 : -1;
	}
	return 0;
}

/* A plan's memory, 64-byte aligned: what the scheduler and plan_copy
 * touch of it is then four whole cache lines (kb_plan). */
static kb_plan *plan_new(void)
{
	return aligned_alloc(64, (sizeof(kb_plan) + 63) & ~(size_t)63);
}

/* plan_zero and plan_copy work on these ranges. */
_Static_assert(offsetof(kb_plan, gemm) < offsetof(kb_plan, last_op) &&
		       offsetof(kb_plan, last_op) < offsetof(kb_plan, cost_blk) &&
		       offsetof(kb_plan, cost_blk) + sizeof(void *) <= 128 &&
		       offsetof(kb_plan, cost_blk) < offsetof(kb_plan, dig) &&
		       offsetof(kb_plan, dig) < offsetof(kb_plan, key) &&
		       offsetof(kb_plan, memo_i) < offsetof(kb_plan, next) &&
		       offsetof(kb_plan, next) < offsetof(kb_plan, stage_buf) &&
		       offsetof(kb_plan, stage_buf) < offsetof(kb_plan, own),
	       "kb_plan: gemm..last_op, cost_blk in the first two lines, dig..next, "
	       "stage_buf..own in this order");

/* Zeroes what the scheduler reads of a plan before writing it (not the
 * stage arrays, read only below their counts: zeroing the whole ~1.4 KB
 * per command was 4% of decode opt2 at admission), and, for a machine
 * with memory, the data-mode buffers. */
static void plan_zero(kb_plan *p, int mem)
{
	kb__zero(&p->dig, offsetof(kb_plan, next) - offsetof(kb_plan, dig));
	p->cost_blk = NULL;   /* plan_copy's or cost_all's */
	p->own = NULL;        /* plan_fresh's */
	if (mem)
		kb__zero(&p->stage_buf, offsetof(kb_plan, own) - offsetof(kb_plan, stage_buf));
}

/* Gives p's own stage lists (none: nothing) to pool's spare (NULL: back
 * to malloc): its lists are now elsewhere, or it ends. */
static void lists_put(kb_plan *p, kb_plan_pool *pool)
{
	if (pool && !pool->spare_lists)
		pool->spare_lists = p->own;
	else
		free(p->own);
	p->own = NULL;
}

/* A plan about to be laid out here (no memo): no stages, its own lists
 * (pool's spare, or new). -1: no memory for them. */
static int plan_fresh(kb_plan *p, kb_plan_pool *pool)
{
	if (pool && pool->spare_lists) {
		p->own = pool->spare_lists;
		pool->spare_lists = NULL;
	} else if (!(p->own = malloc(sizeof(*p->own)))) {
		return -1;
	}
	kb__zero(&p->gemm, offsetof(kb_plan, last_op) - offsetof(kb_plan, gemm));
	p->gemm = -1;
	p->last_op = -1;
	p->pre = p->own->pre;
	p->post = p->own->post;
	p->mid = p->own->mid;
	p->last = p->own->last;
	return 0;
}

int kb__plan_create(kb_plan **out, kb_cmd *cmd, const kb_machine *m, kb_error *err)
{
	return kb__plan_create_from(out, NULL, cmd, m, err);
}

/*
 * The memo of digest keys (kb_plan_memo, plan.h): plan_gemm_stages,
 * plan_math and a cost per stage were ~4% of decode opt2. The costs are
 * one block the key's plans share, counted: an entry may be replaced
 * while its plans are in flight. Copied, they were a ~5 KB buffer a plan,
 * each cold where a stage read it (issue 13).
 */

/* (kb_cost_block and kb_plan_memo: plan.h, for kb__plan_recycle's inline
 * path.) */

/* Where a key's costs lie in its cost block, in entries: the loop's
 * n_steps * n_last from 0, then pre's and post's, each from a multiple of
 * 8 where it has any (its first cost on a line of its own, 8 costs being
 * 5 lines); the entries in all. */
static uint32_t cost_layout(const kb_plan *p, uint32_t *pre_at, uint32_t *post_at)
{
	uint32_t loop = (uint32_t)p->n_steps * p->n_last;   /* costs_fit: at most 40 */

	*pre_at = p->n_pre ? (loop + 7) & ~7u : loop;
	*post_at = p->n_post ? (*pre_at + p->n_pre + 7) & ~7u : *pre_at + p->n_pre;
	return *post_at + p->n_post;
}

/* The costs of block b. */
static kb_stage_cost *cost_of(kb_cost_block *b)
{
	return (kb_stage_cost *)(void *)((char *)b + b->c_off);
}

/* A new cost block with room for n entries (st and costs), 64-byte
 * aligned and a multiple of 64 bytes (aligned_alloc's rule). */
static kb_cost_block *cost_alloc(uint32_t n)
{
	size_t c_off = (offsetof(kb_cost_block, st) + n * sizeof(kb_stage_ref) + 63) & ~(size_t)63;
	size_t size = (c_off + n * sizeof(kb_stage_cost) + 63) & ~(size_t)63;
	kb_cost_block *b = aligned_alloc(64, size);
	size_t st_room = (c_off - offsetof(kb_cost_block, st)) / sizeof(kb_stage_ref);
	size_t c_room = (size - c_off) / sizeof(kb_stage_cost);

	if (b) {
		b->c_off = (uint16_t)c_off;
		b->cap = (uint16_t)(st_room < c_room ? st_room : c_room);
	}
	return b;
}

/* A cost block of n entries for pool's next key: the first spare one
 * with room, or a new one. A spare too small goes back to malloc then,
 * so that a pool keeps no more blocks than it had in use at once. */
static kb_cost_block *cost_new(kb_plan_pool *pool, uint32_t n)
{
	kb_cost_block **at, *b;

	for (at = &pool->spare_cost; (b = *at); at = &b->next)
		if (b->cap >= n) {
			*at = b->next;
			return b;
		}
	if ((b = pool->spare_cost)) {
		pool->spare_cost = b->next;
		free(b);
	}
	return cost_alloc(n);
}

/* Gives b, no longer used, to pool's spares (NULL: back to malloc). A
 * pool keeps at most as many as it had in use at once. */
static void cost_put(kb_plan_pool *pool, kb_cost_block *b)
{
	if (!pool) {
		free(b);
		return;
	}
	b->next = pool->spare_cost;
	pool->spare_cost = b;
}

/* Drops p's use of its cost block (the last one gives it to pool): it is
 * no longer a plan of its key. */
static void cost_release(kb_plan *p, kb_plan_pool *pool)
{
	if (p->cost_blk && --p->cost_blk->refs == 0)
		cost_put(pool, p->cost_blk);
	p->cost_blk = NULL;
	p->cost = NULL;
	p->cost_ok = 0;
	p->key = 0;
}

/* Whether a plan's stage costs fit its cost buffer: those of every step
 * of the loop too, n_last a step (decode opt3's GEMMs on a loaded K or V
 * tile are two steps). */
static int costs_fit(const kb_plan *p)
{
	return p->n_steps <= KB_PLAN_MAX_STAGES && p->n_steps * p->n_last <= KB_PLAN_MAX_STAGES;
}

static void cost_compute(const kb_plan *p, kb_phase ph, uint64_t step, const kb_stage_ref *st,
			 kb_stage_cost *c);

/* Works out every stage's cost of a plan whose costs fit (costs_fit)
 * into p->cost. */
static int cost_all(kb_plan *p, kb_plan_pool *pool)
{
	uint32_t pre_at, post_at;
	kb_cost_block *b = cost_new(pool, cost_layout(p, &pre_at, &post_at));
	kb_stage_cost *c;

	if (!b)
		return -1;
	b->refs = 1;
	c = cost_of(b);
	for (uint32_t i = 0; i < p->n_pre; i++)
		cost_compute(p, KB_PH_PRE, i, &p->pre[i], &c[pre_at + i]);
	for (uint32_t i = 0; i < p->n_post; i++)
		cost_compute(p, KB_PH_POST, i, &p->post[i], &c[post_at + i]);
	/* each step's as if it were a last k-step (see kb__plan_cost_index) */
	for (uint64_t s = 0; s < p->n_steps; s++)
		for (uint32_t i = 0; i < p->n_last; i++)
			cost_compute(p, KB_PH_LOOP, s, &p->last[i], &c[s * p->n_last + i]);
	/* the stage lists move to the block, shared with the key's plans */
	memcpy(b->st, p->last, p->n_last * sizeof(*p->last));
	memcpy(b->st + pre_at, p->pre, p->n_pre * sizeof(*p->pre));
	memcpy(b->st + post_at, p->post, p->n_post * sizeof(*p->post));
	p->pre = b->st + pre_at;
	p->post = b->st + post_at;
	p->mid = p->last = b->st;
	lists_put(p, pool);
	p->cost_blk = b;
	p->cost = c;
	p->cost_ok = 1;
	return 0;
}

/* Copies from entry i of mo, p's key's, what planning derives from the
 * digest: loop geometry and its stage lists, which are the entry's cost
 * block's; and shares that block. */
static void plan_copy(kb_plan *p, const kb_plan_memo *mo, uint32_t i)
{
	memcpy(&p->gemm, mo->geo[i].b, KB_PLAN_GEO_BYTES);
	p->cost_blk->refs++;
	p->cost = cost_of(p->cost_blk);
	p->cost_ok = 1;
}

/* p, a plan of key from entry i of the memo, goes back to that entry's
 * list when it ends (a timing run's: a data-mode plan's buffers are its
 * command's). */
static void plan_keyed(kb_plan *p, uint64_t key, uint32_t i)
{
	if (p->m->mem)
		return;
	p->key = key;
	p->memo_i = i;
}

/* Whether mo (NULL: none yet) has key for machine m. A memo serves the
 * machine of its first plan (a scheduler's pool serves one): the same test
 * as kb__plan_take's, so both paths agree on what a hit is. */
static int memo_has(const kb_plan_memo *mo, uint64_t key, const kb_machine *m)
{
	return mo && mo->m == m && mo->key[kb__plan_memo_index(key)] == key;
}

/* plan_copy of key's entry, which mo has, for a plan that goes back to it. */
static void plan_copy_keyed(kb_plan *p, const kb_plan_memo *mo, uint64_t key)
{
	uint32_t i = kb__plan_memo_index(key);

	plan_copy(p, mo, i);
	plan_keyed(p, key, i);
}

/* Drops memo entry i's use of its cost block (none: unused), and its
 * spare plans' with it: they go to the pool's spares, for any key. */
static void entry_release(kb_plan_pool *pool, kb_plan_memo *mo, uint32_t i)
{
	kb_plan_geo *g = &mo->geo[i];
	kb_cost_block *b;

	while (mo->spare[i]) {
		kb_plan *p = mo->spare[i];

		mo->spare[i] = p->next;
		kb__plan_recycle_slow(p, pool);
	}
	memcpy(&b, g->b + offsetof(kb_plan, cost_blk) - offsetof(kb_plan, gemm), sizeof(b));
	if (b && --b->refs == 0)
		cost_put(pool, b);
	memset(g->b, 0, KB_PLAN_GEO_BYTES);
}

/* Keeps a copy of p (costs worked out) as the plan of key. */
static void memo_keep(kb_plan_pool *pool, uint64_t key, kb_plan *p)
{
	kb_plan_memo *mo = pool->memo;
	uint32_t i;

	if (!mo) {
		if (!(mo = pool->memo = aligned_alloc(64, sizeof(*mo))))   /* a multiple of 64 */
			return;
		memset(mo, 0, sizeof(*mo));
		mo->m = p->m;
		mo->slot_free = p->slot_free;
	}
	if (mo->m != p->m)
		return;   /* another machine's plan: memo_has would never find it */
	i = kb__plan_memo_index(key);
	entry_release(pool, mo, i);
	memcpy(mo->geo[i].b, &p->gemm, KB_PLAN_GEO_BYTES);
	p->cost_blk->refs++;
	mo->key[i] = key;
	plan_keyed(p, key, i);
}

/* What every plan of cmd starts with (plan_zero before). */
static inline void plan_init(kb_plan *p, kb_cmd *cmd, const kb_machine *m)
{
	p->cmd = cmd;
	p->pe = cmd->pe;
	p->m = m;
	p->over_op = -1;
	p->slots = m->staging_slots;
	p->slot_free = p->slots >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << p->slots) - 1;
	p->acc_free = p->slot_free;
}

/* kb__plan_create_from but for its inline case, a plan a memo entry kept
 * (kb__plan_take): a spare plan of any key or a new one, from the memo or
 * planned anew, and data mode. */
static __attribute__((noinline)) int create_slow(kb_plan **out, kb_plan_pool *pool, kb_cmd *cmd,
						 const kb_machine *m, kb_error *err)
{
	kb_plan *p = pool && pool->spare ? pool->spare : plan_new();
	uint64_t key = 0;
	int rc = 0;

	*out = NULL;
	if (!p)
		return kb__err(err, KB_ENOMEM, "out of memory planning command %llu",
			       (unsigned long long)cmd->id);
	if (pool && pool->spare == p)
		pool->spare = p->next;   /* its costs released when recycled */
	plan_zero(p, m->mem != NULL);
	plan_init(p, cmd, m);
	if (cmd->kind == KB_CMD_COMPOSITE) {
		/* The digest the tl context wrote: the ops themselves are cold. */
		const kb_cmd_dig *d = cmd->dig;

		if (!d || d->n_ops != cmd->n_ops) {
			kb__plan_free(p);
			return kb__err(err, KB_EINTERNAL, "command %llu has no digest of its ops",
				       (unsigned long long)cmd->id);
		}
		p->dig = d;
		key = pool ? d->key : 0;
		if (key && memo_has(pool->memo, key, m))
			plan_copy_keyed(p, pool->memo, key);
		else if (plan_fresh(p, pool)) {
			rc = -2;
		} else {
			p->gemm = d->gemm;
			rc = p->gemm >= 0 ? plan_gemm(p, d, p->gemm) : plan_math(p, d);
			/* a key's first plan: its costs now, for the others */
			if (!rc && key && costs_fit(p) && !cost_all(p, pool))
				memo_keep(pool, key, p);
		}
	} else if ((key = pool ? kb__plan_simple_key(cmd) : 0) && memo_has(pool->memo, key, m)) {
		plan_copy_keyed(p, pool->memo, key);
	} else if (plan_fresh(p, pool)) {
		rc = -2;
	} else {
		rc = plan_simple(p, cmd);
		if (!rc && key && !cost_all(p, pool))
			memo_keep(pool, key, p);
	}
	if (!rc && m->mem && alloc_data(p))
		rc = -2;
	if (rc) {
		kb__plan_free(p);
		return rc == -2 ? kb__err(err, KB_ENOMEM, "out of memory planning command %llu",
					  (unsigned long long)cmd->id)
				: kb__err(err, KB_EINTERNAL, "command %llu has too many stages per tile",
					  (unsigned long long)cmd->id);
	}
	p->phase = p->n_pre ? KB_PH_PRE : KB_PH_LOOP;
	*out = p;
	return KB_OK;
}

/* The plan of a key's memo entry kept inline (kb__plan_take), the rest
 * (a memo hit on a spare plan of any key or a new one, planning anew,
 * data mode) in create_slow, whose registers and stack frame the common
 * case then does without (issue 13). */
int kb__plan_create_from(kb_plan **out, kb_plan_pool *pool, kb_cmd *cmd, const kb_machine *m,
			 kb_error *err)
{
	if (pool && (*out = kb__plan_take(pool, cmd, m)))
		return KB_OK;
	return create_slow(out, pool, cmd, m, err);
}

/* Whether ops cannot need more stages than a plan holds, whatever their
 * spaces and scopes. With a GEMM at g: at most g steps before it and
 * n_ops - g - 1 after, and a last k-step of at most two DMA_READs, FETCH,
 * GEMM, an op per op after it, STORE and a DMA_WRITE. Without: a step of
 * at most a DMA_READ per operand, the MATH and a DMA_WRITE per op. */
static int within_limits(const kb_opdig *ops, uint32_t n_ops, int g)
{
	uint32_t n = 0;

	if (g >= 0)
		return n_ops + 5 <= KB_PLAN_MAX_STAGES && n_ops <= KB_PLAN_MAX_STEPS;
	for (uint32_t i = 0; i < n_ops && n <= KB_PLAN_MAX_STAGES; i++)
		n += ops[i].n_operands + 2u;
	return n <= KB_PLAN_MAX_STAGES;
}

int kb__plan_check_ops(const kb_cmd_dig *d, int *op, uint32_t *max)
{
	kb_plan p;
	kb_plan_lists own;
	int g = d->gemm, rc;

	/* Every composite emitted is checked: one this small passes without
	 * laying its stages out (plan_gemm_stages at emit was ~1% of decode
	 * opt2's instructions, issue 13); admission lays them out anyway. */
	if (within_limits(d->op, d->n_ops, g)) {
		*op = -1;
		*max = 0;
		return 0;
	}
	/* The stage planners read only these: the rest of a ~1.4 KB plan
	 * need not be cleared for every composite emitted. */
	p.own = &own;
	p.n_pre = p.n_post = p.n_mid = p.n_last = p.over_max = 0;
	p.over_op = p.last_op = -1;
	rc = g >= 0 ? plan_gemm_stages(&p, d, g) : plan_math(&p, d);
	*op = p.over_op;
	*max = p.over_max;
	return rc ? -1 : 0;
}

static void free_data(kb_plan *p)
{
	/* A timing run allocates none of these: no nine free(NULL) calls
	 * per command then. */
	if (!p->m->mem)
		return;
	free(p->stage_buf);
	free(p->acc);
	free(p->run);
	free(p->scratch[0]);
	free(p->scratch[1]);
	for (int i = 0; i < KB_OP_MAX_OPERANDS; i++)
		free(p->opnd[i]);
}

void kb__plan_free(kb_plan *p)
{
	if (!p)
		return;
	free_data(p);
	cost_release(p, NULL);
	lists_put(p, NULL);
	free(p);
}

void kb__plan_recycle_slow(kb_plan *p, kb_plan_pool *pool)
{
	if (!p)
		return;
	free_data(p);
	cost_release(p, pool);
	lists_put(p, pool);
	p->next = pool->spare;
	pool->spare = p;
}

void kb__plan_free_pool(kb_plan_pool *pool)
{
	/* the entries' spare plans first: they join the pool's */
	if (pool->memo) {
		for (uint32_t i = 0; i < KB_PLAN_MEMO_N; i++)
			entry_release(pool, pool->memo, i);
		free(pool->memo);
		pool->memo = NULL;
	}
	while (pool->spare) {
		kb_plan *p = pool->spare;

		pool->spare = p->next;
		free(p);
	}
	free(pool->spare_lists);
	pool->spare_lists = NULL;
	while (pool->spare_cost) {
		kb_cost_block *b = pool->spare_cost;

		pool->spare_cost = b->next;
		free(b);
	}
}

void kb__plan_step_tile(const kb_plan *p, uint64_t step, uint32_t *mi, uint32_t *ni, uint32_t *ki)
{
	uint64_t t;

	/* Decode's GEMMs are a tile or two: no 64-bit division for a single
	 * k-step or output column (each stage's cost asks). */
	if (p->kt <= 1) {
		*ki = 0;
		t = p->kt ? step : 0;
	} else {
		t = step / p->kt;
		*ki = (uint32_t)(step % p->kt);
	}
	if (p->nt <= 1) {
		*mi = p->nt ? (uint32_t)t : 0;
		*ni = 0;
	} else {
		*mi = (uint32_t)(t / p->nt);
		*ni = (uint32_t)(t % p->nt);
	}
}

static int64_t dim_eff(int64_t total, int64_t tile, uint32_t idx)
{
	int64_t rest = total - (int64_t)idx * tile;

	return rest < tile ? rest : tile;
}

/* The tensor an op without an output of its own works on: the GEMM's
 * output after a GEMM, else the output of the latest op that has one. */
const kb_tview *kb__plan_running_out(const kb_cmd *c, int gemm, int idx)
{
	if (gemm >= 0)
		return &c->ops[gemm].out;
	for (int i = idx; i >= 0; i--)
		if (c->ops[i].has_out)
			return &c->ops[i].out;
	return &c->ops[0].out;
}

/*
 * ceil(a / b) in double, for a count a. Dividing was 55% of kb__plan_cost
 * (a divsd and the emulated ceil after it, on every stage of a run). When
 * b is a power of two 2^e, 0 <= e < 63 (every rate of the default
 * topology), and 0 <= a < 2^53, a / b is exact and its ceiling is the
 * integer (a + 2^e - 1) >> e, which converts back exactly: the same double
 * without a division. Any other b or a takes the division.
 */
/* The division, out of line: no rate of the default topology takes it. */
static __attribute__((noinline)) double cycles_ceil_div(int64_t a, double b)
{
	return ceil((double)a / b);
}

/* Inline in this file's stage costs: the call was 0.8% of decode opt2. */
static inline __attribute__((always_inline)) double cycles_ceil(int64_t a, double b)
{
	uint64_t u;

	memcpy(&u, &b, sizeof(u));
	if ((u & ((UINT64_C(1) << 52) - 1)) == 0 && a >= 0 && a < (INT64_C(1) << 53)) {
		int e = (int)(u >> 52) - 1023;     /* a negative b lands above 62 */

		/* below 2^53 after the shift: a signed conversion, one
		 * instruction, where an unsigned one branches */
		if (e >= 0 && e < 63)
			return (double)(int64_t)(((uint64_t)a + ((UINT64_C(1) << e) - 1)) >> e);
	}
	return cycles_ceil_div(a, b);
}

double kb__cycles_ceil(int64_t a, double b)
{
	return cycles_ceil(a, b);
}

static void cost_loop(const kb_plan *p, uint64_t step, const kb_stage_ref *st, kb_stage_cost *c)
{
	const kb_topo_params *tp = p->m->tp;
	const kb_opdig *g = &p->dig->op[p->gemm];
	uint32_t mi, ni, ki;
	int64_t me, ke, ne, ab = 0, bb = 0, ob = 0;

	kb__plan_step_tile(p, step, &mi, &ni, &ki);
	me = dim_eff(p->M, p->tm, mi);
	ke = dim_eff(p->K, p->tk, ki);
	ne = dim_eff(p->N, p->tn, ni);
	/* Only the sizes the stage moves (every stage of a run is costed). */
	if (st->kind == KB_ST_DMA_READ || st->kind == KB_ST_FETCH) {
		int64_t es = g->es_a;

		ab = me * ke * es;
		bb = ke * ne * es;
	} else if (st->kind == KB_ST_STORE || st->kind == KB_ST_DMA_WRITE) {
		ob = me * ne * (int64_t)g->es_out;
	}
	switch (st->kind) {
	case KB_ST_DMA_READ:
		c->bytes = st->operand == 0 ? ab : bb;
		c->cycles = (double)tp->dma.setup_cycles + cycles_ceil(c->bytes, tp->dma.bytes_per_cycle);
		c->op = "dma_read";
		break;
	case KB_ST_FETCH:
		c->bytes = ab + bb;
		c->cycles = (double)tp->tcm.latency_cycles + cycles_ceil(c->bytes, tp->tcm.bytes_per_cycle);
		c->op = "fetch";
		break;
	case KB_ST_GEMM:
		c->n = me * ke * ne;
		c->cycles = (double)tp->gemm.fill_cycles + cycles_ceil(c->n, (double)tp->gemm.macs_per_cycle);
		c->op = "gemm";
		break;
	case KB_ST_MATH:
		c->n = me * ne;
		c->cycles = cycles_ceil(c->n, (double)tp->math.vector_width);
		c->op = kb__math_kind_name((kb_math_kind)p->dig->op[st->op].kind);
		break;
	case KB_ST_STORE:
		c->bytes = ob;
		c->cycles = (double)tp->tcm.latency_cycles + cycles_ceil(ob, tp->tcm.bytes_per_cycle);
		c->op = "store";
		break;
	case KB_ST_DMA_WRITE:
		c->bytes = ob;
		c->cycles = (double)tp->dma.setup_cycles + cycles_ceil(ob, tp->dma.bytes_per_cycle);
		c->op = "dma_write";
		break;
	default:
		break;
	}
}

/* IPCQ transfer: setup, then the bytes over the PE-to-PE link. */
static double ipcq_cycles(const kb_plan *p, uint64_t bytes)
{
	const kb_topo_params *tp = p->m->tp;
	const kb_pe_state *me = p->m->pes[p->pe], *peer = p->m->pes[p->cmd->peer_pe];
	double bw = me->cluster == peer->cluster ? tp->link.intra_cluster_bytes_per_cycle
						 : tp->link.inter_cluster_bytes_per_cycle;

	return (double)tp->ipcq.setup_cycles + cycles_ceil((int64_t)bytes, bw);
}

const char *kb__stage_keys(int kind)
{
	switch (kind) {
	case KB_ST_DMA_READ:
	case KB_ST_DMA_WRITE:
		return "pe.dma.setup_cycles, pe.dma.bytes_per_cycle";
	case KB_ST_FETCH:
	case KB_ST_STORE:
	case KB_ST_RECV:
		return "pe.tcm.latency_cycles, pe.tcm.bytes_per_cycle";
	case KB_ST_GEMM:
		return "pe.gemm.fill_cycles, pe.gemm.macs_per_cycle";
	case KB_ST_SEND:
		return "pe.ipcq.setup_cycles, links.intra_cluster_bytes_per_cycle, "
		       "links.inter_cluster_bytes_per_cycle";
	default:
		return "pe.math.vector_width";
	}
}

void kb__plan_cost_compute(const kb_plan *p, kb_phase ph, uint64_t step, const kb_stage_ref *st,
			   kb_stage_cost *c)
{
	cost_compute(p, ph, step, st, c);
}

static void cost_cycles(const kb_plan *p, kb_phase ph, uint64_t step, const kb_stage_ref *st,
			kb_stage_cost *c);

/* The cost and its time at the machine's clock: worked out here, the
 * conversion is done once per memoised plan, not at every stage. */
static void cost_compute(const kb_plan *p, kb_phase ph, uint64_t step, const kb_stage_ref *st,
			 kb_stage_cost *c)
{
	cost_cycles(p, ph, step, st, c);
	c->ps = kb__pe_ps(p->m, c->cycles);
}

static void cost_cycles(const kb_plan *p, kb_phase ph, uint64_t step, const kb_stage_ref *st,
			kb_stage_cost *c)
{
	const kb_topo_params *tp = p->m->tp;
	const kb_cmd *cmd = p->cmd;

	memset(c, 0, sizeof(*c));
	c->bytes = -1;
	c->n = -1;
	if (ph == KB_PH_LOOP && p->gemm >= 0) {
		cost_loop(p, step, st, c);
		return;
	}
	switch (st->kind) {
	case KB_ST_MATH:
		c->n = p->dig->op[st->op].n;
		c->cycles = cycles_ceil(c->n, (double)tp->math.vector_width);
		c->op = kb__math_kind_name((kb_math_kind)p->dig->op[st->op].kind);
		break;
	case KB_ST_FILL:
		c->n = kb__tview_elems(&cmd->dst);
		c->cycles = cycles_ceil(c->n, (double)tp->math.vector_width);
		c->op = "fill";
		break;
	case KB_ST_DMA_READ:
		c->bytes = (int64_t)(st->op >= 0 ? kb__tview_bytes(&cmd->ops[st->op].operands[st->operand].t)
						 : kb__tview_bytes(&cmd->src));
		c->cycles = (double)tp->dma.setup_cycles + cycles_ceil(c->bytes, tp->dma.bytes_per_cycle);
		c->op = "dma_read";
		break;
	case KB_ST_DMA_WRITE:
		c->bytes = (int64_t)(st->op >= 0 ? kb__tview_bytes(&cmd->ops[st->op].out) : kb__tview_bytes(&cmd->src));
		c->cycles = (double)tp->dma.setup_cycles + cycles_ceil(c->bytes, tp->dma.bytes_per_cycle);
		c->op = "dma_write";
		break;
	case KB_ST_SEND:
		c->bytes = (int64_t)kb__tview_bytes(&cmd->src);
		c->cycles = ipcq_cycles(p, (uint64_t)c->bytes);
		c->op = "send";
		break;
	case KB_ST_RECV:
		c->bytes = (int64_t)kb__tview_bytes(&cmd->dst);
		c->cycles = (double)tp->tcm.latency_cycles + cycles_ceil(c->bytes, tp->tcm.bytes_per_cycle);
		c->op = "recv";
		break;
	default:
		c->op = "?";
		break;
	}
}
