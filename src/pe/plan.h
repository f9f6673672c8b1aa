/*
 * PE_SCHEDULER's pipeline plan of one command (DDD §7).
 *
 * A composite's flat op list is scanned for its GEMM (at most one). KERNEL
 * ops before it are the prologue: each a single-stage step, run in order.
 * The GEMM drives an M/N/K tile loop: each k-step streams its HBM operands
 * in (DMA_READ; TCM operands are used in place), FETCHes them, runs the
 * GEMM and the K_TILE ops; the last k-step of an output tile also runs the
 * OUTPUT_TILE ops, STOREs the tile and, for an HBM output, DMA_WRITEs it.
 * KERNEL ops after the GEMM run once after the loop. A GEMM-less composite
 * is one step running its ops in order. Other commands are one step of one
 * stage. Nothing here knows what a recipe is.
 *
 * Plans are computed on demand from (step, stage): no list of tiles is ever
 * materialised, so a huge GEMM costs no memory.
 */
#ifndef KB_PE_PLAN_H
#define KB_PE_PLAN_H

#include "pe/hazard.h"
#include "pe/pe.h"

typedef enum kb_stage_kind {
	KB_ST_DMA_READ = 0, KB_ST_DMA_WRITE, KB_ST_FETCH, KB_ST_STORE, KB_ST_GEMM,
	KB_ST_MATH, KB_ST_FILL, KB_ST_SEND, KB_ST_RECV
} kb_stage_kind;

typedef enum kb_phase { KB_PH_PRE = 0, KB_PH_LOOP, KB_PH_POST, KB_PH_DONE } kb_phase;

/* One stage of a step's template. */
typedef struct kb_stage_ref {
	uint8_t kind;            /* kb_stage_kind */
	uint8_t eng;             /* kb_eng */
	int8_t op;               /* op index (MATH/GEMM), -1 otherwise */
	int8_t operand;          /* DMA_READ: operand index of `op`; -1: the output */
} kb_stage_ref;

#define KB_PLAN_MAX_STAGES 40   /* stages of one step (per tile) */
#define KB_PLAN_MAX_STEPS 48    /* KERNEL-scope ops before / after the GEMM */

/* A plan's link in its scheduler's list of plans in flight (sched.c),
 * which is circular through a link in the scheduler's own state: a plan
 * joins and leaves it with no test for the list's ends. */
typedef struct kb_plan_link {
	struct kb_plan_link *prev, *next;
} kb_plan_link;

typedef struct kb_plan {
	/* What planning derives from the digest, gemm to cost_blk, first: a
	 * plan of a digest key met before copies it whole from the memo's
	 * (plan.c), two cache lines of a 64-byte aligned plan; and what the
	 * scheduler reads and writes of every plan right after, in two more
	 * (spread over five, they were a line or two more per command and
	 * the copy's source three, issue 13). */
	int gemm;                /* op index of the GEMM, -1 when none */
	uint16_t n_pre, n_post;  /* single-stage steps before / after the loop, in order */
	uint16_t n_mid, n_last;
	/* the loop (or the single step of everything else) */
	uint32_t mt, kt, nt;
	int64_t M, K, N, tm, tk, tn;
	uint64_t n_steps;
	/* The stage lists: the plan's own arrays (a_*), or those of the
	 * cost block of its digest key, shared read-only with its other
	 * plans (no ~700 bytes copied per command); mid is then last's first
	 * n_mid entries, which plan_gemm_stages makes them anyway. */
	const kb_stage_ref *pre, *post, *mid, *last;
	int last_op;             /* op of the latest MATH stage pushed */
	/* With few steps: every stage's cost, each loop step's n_last
	 * entries apart, then pre's and post's (kb_cost_block), worked out
	 * once for a digest key and shared by its plans (cost_blk, counted;
	 * cost is its costs); cost_ok says they are. */
	struct kb_cost_block *cost_blk;
	uint32_t pe;
	kb_cmd *cmd;
	const kb_machine *m;
	/* The command's digest (composites; NULL otherwise): what stages
	 * cost is read there, not from the ops (cold when a stage runs). */
	const kb_cmd_dig *dig;
	const struct kb_stage_cost *cost;
	int cost_ok;
	int over_op;             /* op of the first stage over a limit, -1: none */
	uint32_t over_max;       /* that limit */
	/* scheduler-owned progress */
	kb_phase phase;
	uint64_t fed, retired;
	uint64_t slot_free, acc_free;   /* bitmaps of free staging / accumulator slots */
	uint32_t slots;
	uint32_t cur_acc;               /* accumulator slot of the tile being fed */
	/* The digest key whose memo entry (memo_i) the plan's geometry and
	 * cost block came from, in a timing run (0: none): recycled, the
	 * plan waits on that entry's list for the key's next command. */
	uint64_t key;
	uint32_t memo_i;
	/* The engine of the first stage its start sends (start_ev's; a
	 * stage's engine is never KB_ENG_CPU), 0: no start kept. */
	uint32_t start_eng;
	/* In flight: its command's hazard signature, and its link in the
	 * scheduler's list of plans in flight (fl; kept: a pool's list of
	 * spare plans, next, in fl's place) */
	kb_hazard_sig sig;
	union {
		kb_plan_link fl;
		struct {
			void *next_pad;  /* fl.prev's place */
			struct kb_plan *next;
		};
	};
	/* A keyed plan's start (the scheduler's start_plan), kept from its
	 * first: the plan is the same at every start (kb__plan_take), so are
	 * the STAGE message its start sends, which the next starts send as
	 * it is (planning its step and stage again was ~45 instructions a
	 * command, issue 13), and the free slots it leaves. Valid while
	 * start_eng is set. The message's words the core reads on one line. */
	uint64_t start_slot_free, start_acc_free;
	kb_event start_ev;
	/* A kept start of two loop steps (start_eng2 set, the second's
	 * engine; decode opt3's P.V, whose two k-steps go at once, was ~280
	 * instructions a command through feed_all): the second message's
	 * w[1..4] and aux, its type and w[0] the first's. In the plan's last
	 * line (a whole message there would take one more). */
	uint64_t start_w2[4];
	uint32_t start_aux2, start_eng2;
	/* data-mode buffers, one stage at a time touches each (zeroed only
	 * for a machine with memory: nothing reads them without) */
	uint8_t *stage_buf;      /* slots x (a tile + b tile + out tile), storage dtype */
	float *acc;              /* slots x tm x tn fp32 accumulators */
	float *run;              /* GEMM-less composite: the running value */
	float *opnd[KB_OP_MAX_OPERANDS];  /* GEMM-less composite: operands of the op being streamed */
	float *scratch[2];       /* fp32 scratch of the GEMM (0) and MATH (1) engine, grown on use */
	size_t scratch_n[2];     /* their sizes in floats */
	uint64_t stage_stride;   /* bytes per staging slot */
	/* The plan's own stage lists while pre..last are them (planned
	 * anew, its costs in no cost block), NULL: none (plan.c). */
	struct kb_plan_lists *own;
} kb_plan;

/* A plan's own stage lists (read only below their counts): where a plan
 * is laid out anew. Apart from kb_plan, and only while used: a plan of a
 * digest key shares its key's cost block's lists, and these ~700 bytes in
 * each of a scheduler's plans were a tenth of a multi-PE run's page
 * faults (issue 13). */
typedef struct kb_plan_lists {
	kb_stage_ref pre[KB_PLAN_MAX_STEPS], post[KB_PLAN_MAX_STEPS];
	kb_stage_ref mid[KB_PLAN_MAX_STAGES], last[KB_PLAN_MAX_STAGES];
} kb_plan_lists;

/* Builds the plan of a command (the scheduler calls it on admission). */
int kb__plan_create(kb_plan **out, kb_cmd *cmd, const kb_machine *m, kb_error *err);
void kb__plan_free(kb_plan *p);

typedef struct kb_plan_memo kb_plan_memo;

/* What a plan of a digest key copies from the memo: its gemm..cost_blk,
 * two lines (kb_plan). */
#define KB_PLAN_GEO_BYTES (offsetof(kb_plan, cost_blk) + sizeof(void *) - offsetof(kb_plan, gemm))

typedef struct kb_plan_geo {
	_Alignas(64) unsigned char b[KB_PLAN_GEO_BYTES];
} kb_plan_geo;

#define KB_PLAN_MEMO_KEYS 16     /* digest keys */
#define KB_PLAN_MEMO_SIMPLE 4    /* loads and stores, by kind and bytes */
#define KB_PLAN_MEMO_N (KB_PLAN_MEMO_KEYS + KB_PLAN_MEMO_SIMPLE)

/*
 * Plans of digest keys (kb_cmd_dig.key), plan.c's: every command the tl
 * context replays from one template has the same stages and stage costs,
 * so the first such command's plan, its costs worked out at once, is kept
 * here and the others copy it. Direct-mapped by key: the tl context
 * numbers its templates in turn, so a kernel's composites (opt3: ten a
 * tile) take consecutive entries, and a look-up is one comparison, cheap
 * enough for a plan of one stage. An entry is the bytes a plan copies,
 * in place: no pointer to a plan of its own to load first, and a kernel's
 * keys, met in turn, read consecutive lines (issue 13).
 *
 * And each entry's spare plans: a finished plan of its key keeps its
 * geometry and its use of the cost block, so that the key's next command
 * takes it as it is, setting only its own fields (a copy of the entry was
 * ~45 instructions a command, and its release at the end ~10).
 */
struct kb_plan_memo {
	/* the machine of the pool's plans and its free staging slots'
	 * bitmap, worked out once (plan_init's was ~9 instructions a
	 * command) */
	const kb_machine *m;
	uint64_t slot_free;
	uint64_t key[KB_PLAN_MEMO_N];      /* 0: unused */
	kb_plan *spare[KB_PLAN_MEMO_N];    /* finished plans of key[i] */
	kb_plan_geo geo[KB_PLAN_MEMO_N];   /* its cost block counted (memo_keep) */
};

/* A scheduler's plans (its owner's thread only): spare ones (linked by
 * next), which kb__plan_recycle fills, since a decode run admits a plan
 * per command and a kb_plan is too big for malloc's fast path; and the
 * plans of the last digest keys met (plan.c's), copied for the next
 * command with that key. Zeroed: empty. */
typedef struct kb_plan_pool {
	kb_plan *spare;
	struct kb_plan_memo *memo;
	/* Cost blocks whose last use ended, for the next key's (plan.c):
	 * with more keys than the memo has entries (a multi-PE run's kernels
	 * on one PE), a block a command was ~930 instructions of
	 * aligned_alloc and free. */
	struct kb_cost_block *spare_cost;
	/* Stage lists a plan laid out anew gave back (one is enough: they
	 * are given back as soon as that plan's costs are worked out). */
	kb_plan_lists *spare_lists;
} kb_plan_pool;

/* kb__plan_create from a pool. */
int kb__plan_create_from(kb_plan **out, kb_plan_pool *pool, kb_cmd *cmd, const kb_machine *m,
			 kb_error *err);

/* Where key is kept: a digest key among the first KB_PLAN_MEMO_KEYS
 * entries, a load's or store's (kb__plan_simple_key) among the rest. */
static inline uint32_t kb__plan_memo_index(uint64_t key)
{
	return key >> 63 ? KB_PLAN_MEMO_KEYS + (uint32_t)((key >> 56 ^ key >> 6) % KB_PLAN_MEMO_SIMPLE)
			 : (uint32_t)(key % KB_PLAN_MEMO_KEYS);
}

/*
 * The memo key of a load's or store's plan: its stage and that stage's
 * cost follow from its kind and the bytes it moves (decode opt3 loads
 * two tiles of one size per KV tile, each planned and costed anew
 * before). Top bit set: never a digest key, which counts from 1. 0: not
 * kept (another kind, or bytes too many for the key).
 */
static inline uint64_t kb__plan_simple_key(const kb_cmd *c)
{
	uint64_t bytes = kb__tview_bytes(&c->src);

	if ((c->kind != KB_CMD_LOAD && c->kind != KB_CMD_STORE) || bytes >> 48)
		return 0;
	return UINT64_C(1) << 63 | (uint64_t)c->kind << 56 | bytes;
}

/* The memo key of cmd, 0: none (a composite's digest key, or the simple
 * key of a load or store); *d its digest (NULL: not a composite). */
static inline uint64_t kb__plan_key(const kb_cmd *cmd, const kb_cmd_dig **d)
{
	*d = NULL;
	if (cmd->kind != KB_CMD_COMPOSITE)
		return kb__plan_simple_key(cmd);
	*d = cmd->dig;
	return *d && (*d)->n_ops == cmd->n_ops ? (*d)->key : 0;
}

/*
 * kb__plan_create_from's commonest case, inline in the scheduler's
 * admission (most commands of a decode run): a plan of cmd's key that its
 * memo entry kept (none in a data-mode run), which needs only the
 * command's own fields; the rest is the key's. NULL: there is none.
 */
static inline kb_plan *kb__plan_take(kb_plan_pool *pool, kb_cmd *cmd, const kb_machine *m)
{
	kb_plan_memo *mo = pool->memo;
	const kb_cmd_dig *d;
	uint64_t key;
	uint32_t i;
	kb_plan *p;

	if (!mo || mo->m != m || !(key = kb__plan_key(cmd, &d)))
		return NULL;
	i = kb__plan_memo_index(key);
	if (mo->key[i] != key || !(p = mo->spare[i]))
		return NULL;
	mo->spare[i] = p->next;
	p->cmd = cmd;
	p->pe = cmd->pe;
	p->dig = d;
	p->fed = p->retired = 0;
	p->slot_free = p->acc_free = mo->slot_free;
	p->phase = p->n_pre ? KB_PH_PRE : KB_PH_LOOP;
	return p;
}
void kb__plan_free_pool(kb_plan_pool *pool);

/* Emit's check of a composite's ops, by their digest (kb__cmd_digest),
 * against the plan's limits (DDD §6.9): 0 when it fits; else -1, with *op
 * the op whose stage (or step) is the first over the limit and *max that
 * limit. */
int kb__plan_check_ops(const kb_cmd_dig *d, int *op, uint32_t *max);

/* The stage list of a step. Inline: the engines ask for it three times a
 * stage (1% of a decode run as a call with a 64-bit division). */
static inline const kb_stage_ref *kb__plan_stages(const kb_plan *p, kb_phase ph, uint64_t step,
						  uint32_t *n)
{
	if (ph == KB_PH_PRE) {
		*n = 1;
		return &p->pre[step];
	}
	if (ph == KB_PH_POST) {
		*n = 1;
		return &p->post[step];
	}
	if (p->gemm >= 0 && p->kt > 1 && step % p->kt != p->kt - 1) {
		*n = p->n_mid;
		return p->mid;
	}
	*n = p->n_last;
	return p->last;
}

/* The channel of the engine that runs a stage: PE_DMA writes on channel
 * 1, everything else runs on channel 0. A STAGE message carries it in aux,
 * put there by its sender, so the engine need not look the stage up. */
static inline uint32_t kb__stage_chan(const kb_stage_ref *st)
{
	return st->kind == KB_ST_DMA_WRITE;
}

/* A STAGE message's aux for stage st with `after` stages after it in its
 * step: the engine needs no look-up of the step's list to start it or to
 * pass the step on. */
static inline uint32_t kb__stage_aux(const kb_stage_ref *st, uint32_t after)
{
	return kb__stage_chan(st) | after << 1;
}

/* What a stage costs and how it is logged. */
typedef struct kb_stage_cost {
	double cycles;
	kb_time ps;              /* cycles at the machine's clock (kb__pe_ps) */
	int64_t bytes;           /* -1 when it moves no data */
	const char *op;          /* op_log "op" */
	int64_t n;               /* MATH elements / GEMM MACs, for the log */
} kb_stage_cost;

/* A digest key's stage lists and their costs, which the memo's entry and
 * the plans of that key share (plan.c's memo). Sized to the key (plan.c's
 * cost_layout): most keys of a decode run have one stage, and a block
 * with room for any plan's (136 entries, ~6 KB) was a third of a
 * multi-PE run's page faults (issue 13). */
typedef struct kb_cost_block {
	uint32_t refs;           /* the memo's entry and the plans using it */
	uint16_t cap;            /* entries st and the costs have room for */
	uint16_t c_off;          /* where the costs start, a multiple of 64 */
	struct kb_cost_block *next;   /* a pool's spare blocks (kb_plan_pool) */
	/* The key's stage lists, last (and mid, its first n_mid) at 0, pre
	 * and post after the loop's costs: a stage's place here is its
	 * cost's among the costs, a loop step's n_last further a step. last
	 * first: the count a plan takes and the stages every plan reads
	 * share a line. The costs (kb_stage_cost) follow on a line of their
	 * own (the block is 64-byte aligned): a one-stage step's cost is
	 * then one line, not two. */
	kb_stage_ref st[];
} kb_cost_block;

/* kb__plan_recycle's path for a plan with data buffers or the last use of
 * its cost block. */
void kb__plan_recycle_slow(kb_plan *p, kb_plan_pool *pool);

/* Gives p (NULL: nothing) back to pool for the next kb__plan_create_from.
 * Inline: a timing run's plan of a key the memo still has goes as it is
 * on that key's list (kb_plan_memo): kb__plan_keep, which does only that
 * (0: p is not one to keep so, and nothing was done). A key the memo no
 * longer has (its entry taken by another) may come back to it: its plans
 * in flight then go on its list with the cost block they have, the same
 * costs. */
static inline int kb__plan_keep(kb_plan *p, kb_plan_pool *pool)
{
	kb_plan_memo *mo;

	if (!p->key || (mo = pool->memo)->key[p->memo_i] != p->key)
		return 0;
	p->next = mo->spare[p->memo_i];
	mo->spare[p->memo_i] = p;
	return 1;
}

static inline void kb__plan_recycle(kb_plan *p, kb_plan_pool *pool)
{
	if (__builtin_expect(!p || !kb__plan_keep(p, pool), 0))
		kb__plan_recycle_slow(p, pool);
}

/* The topology keys a stage kind's cycles come from (error messages).
 * const: a call the engines make only on failure can sink into that path. */
const char *kb__stage_keys(int kind) __attribute__((const));

/*
 * Where stage st of phase ph (loop step `step`) keeps its cost in p->cost,
 * whose plan's stage lists are its cost block's (cost_ok): by st's place
 * there, last (and mid, last's first n_mid) at 0, pre and post where the
 * block puts them; a loop step keeps n_last entries, so no step % kt
 * tells a k-step's list apart. -1: st is not one of the plan's stages.
 */
static inline int kb__plan_cost_index(const kb_plan *p, kb_phase ph, uint64_t step,
				      const kb_stage_ref *st)
{
	/* by address, unsigned: below the list wraps to a huge index */
	uintptr_t i = ((uintptr_t)st - (uintptr_t)p->last) / sizeof(*st);

	if (ph == KB_PH_LOOP)
		return step < p->n_steps && i < p->n_last ? (int)i + (int)step * (int)p->n_last : -1;
	if (ph == KB_PH_PRE)
		return ((uintptr_t)st - (uintptr_t)p->pre) / sizeof(*st) < p->n_pre ? (int)i : -1;
	return ((uintptr_t)st - (uintptr_t)p->post) / sizeof(*st) < p->n_post ? (int)i : -1;
}

/* The memoised cost of st, the first stage of step `step` of phase ph
 * (kb__plan_stages'), NULL: none: kb__plan_cost_index's place, without
 * its tests, which a step's first stage passes (the scheduler asks it
 * once a step). */
static inline const kb_stage_cost *kb__plan_first_cost(const kb_plan *p, kb_phase ph, uint64_t step,
							const kb_stage_ref *st)
{
	if (!p->cost_ok)
		return NULL;
	return p->cost + (st - p->last) + (ph == KB_PH_LOOP ? step * p->n_last : 0);
}

/* A stage's cost worked out (kb__plan_cost without the memo). */
void kb__plan_cost_compute(const kb_plan *p, kb_phase ph, uint64_t step, const kb_stage_ref *st,
			   kb_stage_cost *c);

/* A stage's cost: its plan's memoised one where it has them. Inline: the
 * engines ask at every stage, and the call was most of a look-up. */
static inline void kb__plan_cost(const kb_plan *p, kb_phase ph, uint64_t step,
				 const kb_stage_ref *st, kb_stage_cost *c)
{
	int i;

	if (p->cost_ok && (i = kb__plan_cost_index(p, ph, step, st)) >= 0)
		*c = p->cost[i];
	else
		kb__plan_cost_compute(p, ph, step, st, c);
}

/* ceil((double)a / b), bit for bit, without a division when b is a power
 * of two and 0 <= a < 2^53 (a stage's cycles from a count and a rate). */
double kb__cycles_ceil(int64_t a, double b);

/* Data mode: performs the stage on the memory store. */
int kb__plan_exec(kb_plan *p, kb_phase ph, uint64_t step, const kb_stage_ref *st,
		  uint32_t slot, uint32_t acc, kb_error *err);

/* The tensor op idx continues on when it has no output of its own. */
const kb_tview *kb__plan_running_out(const kb_cmd *c, int gemm, int idx);

/* Output-tile geometry of a loop step. */
void kb__plan_step_tile(const kb_plan *p, uint64_t step, uint32_t *mi, uint32_t *ni, uint32_t *ki);

#endif
