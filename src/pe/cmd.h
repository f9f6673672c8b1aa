/*
 * PE commands: what the tl context emits, PE_CPU dispatches and
 * PE_SCHEDULER turns into stages. Plain values only: a command knows
 * tensors by address, shape and identity, never by tl handle, and nothing
 * here knows that recipes exist (ADR-0065 D7).
 */
#ifndef KB_PE_CMD_H
#define KB_PE_CMD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/dtype.h"
#include "base/zero.h"
#include "kernbench/common.h"
#include "num/math_op.h"

typedef enum kb_space { KB_SPACE_HBM = 0, KB_SPACE_TCM = 1 } kb_space;

/* A tensor as a command sees it: 2-D in effect (rows = product of the
 * leading dims, cols = last dim), rows `ld` elements apart. */
typedef struct kb_tview {
	uint64_t id;             /* handle identity (hazard tracking); 0 = none */
	uint64_t addr;           /* byte address in its space */
	int64_t shape[4];
	int64_t ld;              /* row stride in elements */
	uint8_t rank;
	uint8_t space;           /* kb_space */
	uint8_t dtype;           /* kb_dtype */
} kb_tview;

/* Inline: planning, costing and lowering ask these several times per
 * command and stage (0.5-1% of a decode run as calls). */
static inline int64_t kb__tview_rows(const kb_tview *t)
{
	int64_t r = 1;

	for (int i = 0; i + 1 < t->rank; i++)
		r *= t->shape[i];
	return r;
}

static inline int64_t kb__tview_cols(const kb_tview *t)
{
	return t->rank ? t->shape[t->rank - 1] : 1;
}

static inline int64_t kb__tview_elems(const kb_tview *t)
{
	return kb__tview_rows(t) * kb__tview_cols(t);
}

static inline uint64_t kb__tview_bytes(const kb_tview *t)
{
	return (uint64_t)kb__tview_elems(t) * kb__dtype_size((kb_dtype)t->dtype);
}

typedef enum kb_scope_kind { KB_SCOPE_KERNEL = 0, KB_SCOPE_K_TILE, KB_SCOPE_OUTPUT_TILE } kb_scope_kind;

/* Op kinds: GEMM or one of the MATH kinds (kb_math_kind), opaque to engines. */
#define KB_OP_GEMM 0xffffu

#define KB_OP_MAX_OPERANDS 4
#define KB_OP_MAX_EXTRAS 4

typedef struct kb_operand {
	const char *name;        /* static string: "a", "b", "src", "other", ... */
	kb_tview t;
} kb_operand;

typedef struct kb_scalar {
	const char *name;        /* static string */
	double value;
} kb_scalar;

/* One op of a composite (ADR-0065 D2). The output right after the
 * header and the operands after it: an op of a decode kernel uses the
 * header, its output and one or two operands, three or four cache lines
 * in a row, where the output at the end (after the operands and extras
 * it leaves unused) was a line or two more per op (issue 13). */
typedef struct kb_opspec {
	uint16_t kind;           /* KB_OP_GEMM or a kb_math_kind */
	uint8_t scope;           /* kb_scope_kind */
	uint8_t n_operands;
	uint8_t n_extras;
	uint8_t has_out;
	uint8_t trans_b;         /* GEMM: b is (N, K); also an extra "trans_b" */
	kb_tview out;
	kb_operand operands[KB_OP_MAX_OPERANDS];
	kb_scalar extras[KB_OP_MAX_EXTRAS];
} kb_opspec;

/*
 * What planning reads of a composite's ops (DDD §7): written once when the
 * command is lowered, while its ops are in cache, so that admission and
 * each stage's cost read a few contiguous bytes right after the header
 * instead of ops of ~420 bytes each, cold by then (issue 13).
 */
typedef struct kb_opdig {
	int64_t n;               /* elements a MATH op touches (DDD §5.3); GEMM: 0 */
	uint16_t kind;           /* as kb_opspec */
	uint8_t scope;
	uint8_t n_operands;
	uint8_t hbm;             /* bit i: operand i in HBM; KB_OPDIG_OUT_HBM: the output */
	uint8_t has_out;
	uint8_t es_a;            /* element size of operand 0 (GEMM: a's and b's dtype) */
	uint8_t es_out;          /* element size of the output */
} kb_opdig;

#define KB_OPDIG_OUT_HBM 0x80u

typedef struct kb_cmd_dig {
	/* 0, or an id every command with this very digest shares (the tl
	 * context's replays of one template): PE_SCHEDULER plans such a
	 * command once and copies that plan for the others. */
	uint64_t key;
	int32_t gemm;            /* index of the first GEMM, -1 when none */
	uint32_t n_ops;
	int64_t M, K, N;         /* the GEMM's extras m, k, n (1 when absent) */
	kb_opdig op[];
} kb_cmd_dig;

typedef enum kb_cmd_kind {
	KB_CMD_COMPOSITE = 0,
	KB_CMD_LOAD,             /* HBM -> TCM */
	KB_CMD_STORE,            /* TCM -> HBM */
	KB_CMD_FILL,             /* TCM tensor := value (MATH) */
	KB_CMD_SEND,             /* TCM -> another PE's queue (IPCQ) */
	KB_CMD_RECV,             /* another PE's queue -> TCM (IPCQ) */
	KB_CMD_CPU,              /* explicit PE_CPU overhead; not sent on */
	/* Kernel-side markers PE_CPU consumes without dispatching: */
	KB_CMD_WAIT,
	KB_CMD_END,
	KB_CMD_ERROR,
	KB_CMD_KIND_COUNT
} kb_cmd_kind;

const char *kb__cmd_kind_name(int kind);

typedef struct kb_cmd {
	/* What every command has, in two cache lines (KB_CMD_HEAD); a
	 * composite's block has its digest right after them (see
	 * kb__cmd_init). The first line holds all that PE_CPU reads (kind,
	 * deps, fence, dispatch time; id and lbytes for its record) and that
	 * PE_SCHEDULER's admission reads (has_sig, kind, dig, n_ops, pe): the
	 * tl context writes a command ~16 ahead of PE_CPU, so each line is a
	 * cold miss to the first that reads it, and the second line was one
	 * for PE_CPU (the dispatch time, on its critical path), then for the
	 * scheduler (n_ops) when only part of this moved (issue 13). kind is
	 * 16 bits for the room. */
	uint16_t kind;           /* kb_cmd_kind */
	/* 1: disp_ps is the command's dispatch time in ps, which the tl
	 * context worked out as it emitted it (kb__tl_emit), with the cost
	 * model and clock of its kb_tl_config, which are the machine's (the
	 * runtime's attach_kernels): PE_CPU takes it instead of working it
	 * out again. 0: PE_CPU works it out. */
	uint8_t has_disp_ps;
	/* 1: the block keeps the command's hazard signature (kb__cmd_sig),
	 * which the tl context worked out as it wrote the sets; 0:
	 * PE_SCHEDULER works it out from them. */
	uint8_t has_sig;
	uint32_t n_deps;
	uint64_t id;             /* per PE, in emit order, from 0 */
	uint64_t lbytes;         /* logical bytes (DDD §4 and doc/commands.md) */
	/* Implicit wait before dispatch: these producers, and every command
	 * with id < fence (scratch memory reuse), must have completed. */
	uint64_t *deps;
	uint64_t fence;
	uint64_t disp_ps;
	/* COMPOSITE */
	kb_cmd_dig *dig;         /* kb__cmd_digest's, in the command's block; NULL until then */
	uint32_t n_ops;
	uint32_t pe;
	/* Hazard sets for the scheduler's strict-FIFO tracker (handle ids). */
	uint64_t *reads, *writes;
	uint32_t n_reads, n_writes;
	/* deps, reads, writes and ops live in the command's own allocation
	 * (one malloc per command), each id array with room for cap_ids. */
	uint32_t cap_ids;
	int line;                /* kernel call site (with file) */
	/* COMPOSITE */
	kb_opspec *ops;
	uint32_t n_rw;           /* rw_handles (count only; ids are in writes) */
	uint16_t block;          /* kb__cmd_alloc's size class + 1; 0: plain malloc */
	/* ERROR: the validation error the kernel hit at this point */
	kb_error *error;
	const char *file;        /* kernel call site (a __FILE__ string) */
	/* The other commands' fields: a command with ops (a composite) has
	 * none, its digest is where they would be (kb__cmd_init). */
	double cpu_cycles;       /* KB_CMD_CPU: the explicit cost */
	/* LOAD / STORE / FILL / SEND / RECV */
	kb_tview src, dst;
	double fill_value;
	uint32_t peer_pe;        /* SEND: destination; RECV: source */
	uint32_t tag;
} kb_cmd;

/*
 * A ring of commands from a producer (a kernel's tl context) to PE_CPU,
 * oldest at head. The producer stores into it itself while fewer than
 * room are queued, and PE_CPU takes from it itself while more than low
 * are: a store and a load a command, not a call through each side's
 * callback (issue 13). The callbacks do the rest: a full ring (the
 * producer yields), one at low (the producer may have to run first), a
 * consumer gone (room 0).
 */
#define KB_CMD_RING 256
typedef struct kb_cmd_ring {
	uint32_t head, count;
	uint32_t room, low;
	struct kb_cmd *slot[KB_CMD_RING];
} kb_cmd_ring;

/* The bytes of a command every kind has (a composite's whole header). */
#define KB_CMD_HEAD offsetof(kb_cmd, cpu_cycles)
_Static_assert(offsetof(kb_cmd, reads) == 64, "kb_cmd: PE_CPU's fields fill the first cache line");
_Static_assert(offsetof(kb_cmd, cpu_cycles) == 128, "kb_cmd: a composite's header is two cache lines");

/* ---- cost model (ADR-0064 Rev2 as the seeds quote it) ---- */

/* OpSpec = 2 + (1 + 8*operands) + (8 if out) + (1 + 4*extras). */
uint64_t kb__opspec_lbytes(const kb_opspec *op);
/* CompositeCmd = 4 + (1 + sum ops) + (1 + 8*rw_handles). */
uint64_t kb__composite_lbytes(const kb_opspec *ops, uint32_t n_ops, uint32_t n_rw);
/* The other commands: doc/commands.md. */
uint64_t kb__cmd_lbytes(const kb_cmd *cmd);

typedef struct kb_cost_model {
	double fixed_cycles;
	double r_cycles_per_byte;
	uint64_t max_composite_logical_bytes;
	double clock_ghz;
} kb_cost_model;

/* Dispatch time in ps: FIXED + R * lbytes cycles, or the explicit CPU cost. */
/* FIXED + R * logical bytes, or an explicit CPU-overhead command's cycles. */
double kb__dispatch_cycles(const kb_cost_model *m, const kb_cmd *cmd);
uint64_t kb__dispatch_ps(const kb_cost_model *m, const kb_cmd *cmd);

/* kb__cmd_alloc's path when this thread's cache has no block for it. */
kb_cmd *kb__cmd_alloc_slow(uint32_t n_ops, uint32_t cap_ids);
/* Fills c->dig from c's n_ops ops (c from kb__cmd_alloc, which left room
 * for it). -1 when c has no room for that many. */
int kb__cmd_digest(kb_cmd *c);
/* Copies d, the digest of ops equal to c's but for ids and addresses,
 * into c's room for it. -1 when c has no room for it. */
int kb__cmd_set_digest(kb_cmd *c, const kb_cmd_dig *d);
/* Bytes of the digest of n_ops ops. */
size_t kb__cmd_dig_size(uint32_t n_ops);
/* kb__cmd_set_digest of a digest of n_ops ops into c, which has room for
 * them (kb__cmd_alloc's for at least n_ops ops), without the checks; a
 * constant n_ops makes it a copy of constant size, inline (a replay's). */
static inline kb_cmd_dig *kb__cmd_dig_room(kb_cmd *c);
static inline void kb__cmd_put_digest(kb_cmd *c, const kb_cmd_dig *d, uint32_t n_ops)
{
	kb_cmd_dig *to = kb__cmd_dig_room(c);

	memcpy(to, d, sizeof(kb_cmd_dig) + (size_t)n_ops * sizeof(kb_opdig));
	c->dig = to;
}
/* kb__cmd_free's path for what the inline one does not keep. */
void kb__cmd_free_slow(kb_cmd *cmd);

/*
 * Freed command blocks kept for the next command, per thread and per size
 * class (512 B << k): a decode run builds and frees one 1-5 KB command per
 * composite, too big for malloc's per-thread cache, and malloc plus free
 * were ~3% of it (issue 13). Each thread keeps what it frees, up to cap[k]
 * blocks a class, and gives them back to malloc when it ends; a command
 * freed on another thread than the one that built it (a kernel on its own
 * thread) only feeds that thread's cache. Nothing is shared between
 * threads. A hit and a keep are inline (the call around them was ~40
 * instructions a command); cost.c has the rest.
 *
 * cap[k] starts at KB_CMD_CACHE_KEEP and grows by one for each block of
 * class k this thread takes from malloc (KB_CMD_CACHE_BYTES of a class at
 * most): a thread with many commands in flight at once (a multi-PE run's
 * 32 kernels on one thread) keeps as many as it had built, instead of
 * freeing what overflows 64 and allocating it again, aligned (that was
 * ~15.8 k aligned_alloc calls at opt3 H_kv=8 P=4 C=4 S_kv=16384). A thread
 * that only frees keeps 64 a class. On one thread, what its cache holds
 * and what is live together never exceed the most that was live at once:
 * a block is taken from malloc only when the cache has none.
 */
#define KB_CMD_CACHE_CLASSES 6
#define KB_CMD_CACHE_MIN 512u
#define KB_CMD_CACHE_KEEP 64u
#define KB_CMD_CACHE_BYTES (4u << 20)

typedef struct kb_cmd_cache {
	kb_cmd *head[KB_CMD_CACHE_CLASSES];   /* linked through ->ops */
	uint32_t n[KB_CMD_CACHE_CLASSES];
	uint32_t cap[KB_CMD_CACHE_CLASSES];   /* blocks kept at most; 0 unless live */
	int state;                            /* 0: unused, 1: live, 2: thread ending */
} kb_cmd_cache;

/* initial-exec: one %fs-relative access instead of a TLS descriptor
 * call per use (two a command, ~1% of decode opt3); the block is small
 * enough for the static TLS room glibc keeps for a library loaded late. */
extern _Thread_local kb_cmd_cache kb__cmd_cache __attribute__((tls_model("initial-exec")));

/* kb__cmd_alloc's n_ops for a composite whose ops and digest live
 * elsewhere (a replay's in a run without data memory points them at its
 * template's, replay.c): its block is its header and ids only, and its
 * header is not zeroed but for error: that replay writes each of its
 * other fields (zeroing it first was ~8 of a decode command's stores,
 * most of them overwritten at once; issue 13). A field added to kb_cmd's
 * header is one for replay.c to write too (check_tl's
 * test_replay_timing_only reuses blocks filled with garbage). */
#define KB_CMD_OPS_ELSEWHERE UINT32_MAX

/* Words a command block keeps before its ids: the hazard signature
 * (kb__cmd_sig). */
#define KB_CMD_SIG_WORDS 2

/* Bytes of a command block with room for n_ops ops (and their digest)
 * and cap_ids ids in each of deps, reads and writes: a composite's (n_ops
 * > 0) is its header, the digest, the signature and ids and the ops; any
 * other's the whole kb_cmd, the signature and the ids. */
static inline size_t kb__cmd_block_size(uint32_t n_ops, uint32_t cap_ids)
{
	size_t ids = (KB_CMD_SIG_WORDS + 3 * (size_t)cap_ids) * sizeof(uint64_t);

	if (!n_ops)
		return sizeof(kb_cmd) + ids;
	if (n_ops == KB_CMD_OPS_ELSEWHERE)
		return KB_CMD_HEAD + ids;
	return KB_CMD_HEAD + sizeof(kb_cmd_dig) + (size_t)n_ops * sizeof(kb_opdig) + ids +
	       (size_t)n_ops * sizeof(kb_opspec);
}

/* Where a composite's block keeps its digest (kb__cmd_alloc left room for
 * it): right after the header, where the other kinds' fields would be. */
static inline kb_cmd_dig *kb__cmd_dig_room(kb_cmd *c)
{
	return (kb_cmd_dig *)(void *)((char *)c + KB_CMD_HEAD);
}

/* The cache's class of a block of size bytes, -1 when none. */
static inline int kb__cmd_size_class(size_t size)
{
	for (int k = 0; k < KB_CMD_CACHE_CLASSES; k++)
		if (size <= (size_t)KB_CMD_CACHE_MIN << k)
			return k;
	return -1;
}

/* kb__cmd_init's last step: c's block class k and its signature and id
 * arrays from ids on. */
static inline kb_cmd *kb__cmd_lay(kb_cmd *c, int k, uint64_t *ids, uint32_t cap_ids)
{
	c->block = (uint16_t)(k + 1);
	c->cap_ids = cap_ids;
	ids += KB_CMD_SIG_WORDS;
	c->deps = ids;
	c->reads = ids + cap_ids;
	c->writes = ids + 2 * (size_t)cap_ids;
	return c;
}

/*
 * Lays out c, a block of class k (-1: plain malloc), for n_ops ops and
 * cap_ids ids: zeroed but for the arrays. A composite's block is its
 * header, the digest (admission reads the two together), the ids and the
 * ops, in that order and nothing between: what a decode kernel's command
 * writes, and its scheduler reads, is a run of lines from the block's
 * start (its blocks 64-byte aligned, cost.c), not the header's unused
 * plain fields (two lines), the ids past the unused ops' room and each
 * op's output after its unused operands (issue 13). kb_opspec's
 * alignment is 8, as are the digest's and the ids'.
 */
static inline kb_cmd *kb__cmd_init(kb_cmd *c, int k, uint32_t n_ops, uint32_t cap_ids)
{
	uint64_t *ids;

	if (n_ops == KB_CMD_OPS_ELSEWHERE) {
		c->error = NULL;   /* the rest is the caller's to write */
		ids = (uint64_t *)(void *)((char *)c + KB_CMD_HEAD);
	} else if (n_ops) {
		kb__zero(c, KB_CMD_HEAD);
		ids = (uint64_t *)(void *)((char *)c + KB_CMD_HEAD + sizeof(kb_cmd_dig) +
					   (size_t)n_ops * sizeof(kb_opdig));
		c->ops = (kb_opspec *)(void *)(ids + KB_CMD_SIG_WORDS + 3 * (size_t)cap_ids);
	} else {
		kb__zero(c, sizeof(*c));
		ids = (uint64_t *)(void *)(c + 1);
	}
	return kb__cmd_lay(c, k, ids, cap_ids);
}

/*
 * A block's hazard signature (pe/hazard.h): the bits of its reads, then of
 * its writes, just before deps, valid when has_sig. The tl context works
 * it out as it writes a command's sets, a bit an id already in a
 * register, where PE_SCHEDULER's admission read the id arrays back in
 * two loops (~30 instructions a decode command, issue 13).
 */
static inline uint64_t *kb__cmd_sig(kb_cmd *c)
{
	return c->deps - KB_CMD_SIG_WORDS;
}

/* A block of class k (-1: none) from this thread's cache, NULL: none. */
static inline kb_cmd *kb__cmd_take(int k)
{
	kb_cmd_cache *cc = &kb__cmd_cache;
	kb_cmd *c;

	/* a class holds blocks only while the cache is live (state 1) */
	if (__builtin_expect(k < 0 || !(c = cc->head[k]), 0))
		return NULL;
	cc->head[k] = (kb_cmd *)(void *)c->ops;
	cc->n[k]--;
	return c;
}

/* A command with room for n_ops ops (and their digest) and cap_ids ids in
 * each of deps, reads and writes, in one allocation; zeroed but for the
 * arrays (a composite has no src, dst and the like). NULL: out of
 * memory. The block may be one kb__cmd_free kept on this thread. */
static inline __attribute__((always_inline)) kb_cmd *kb__cmd_alloc(uint32_t n_ops, uint32_t cap_ids)
{
	int k = kb__cmd_size_class(kb__cmd_block_size(n_ops, cap_ids));
	kb_cmd *c = kb__cmd_take(k);

	if (__builtin_expect(!c, 0))
		return kb__cmd_alloc_slow(n_ops, cap_ids);
	return kb__cmd_init(c, k, n_ops, cap_ids);
}

_Static_assert(offsetof(kb_cmd, dst) == offsetof(kb_cmd, src) + sizeof(kb_tview) &&
		       offsetof(kb_cmd, fill_value) == offsetof(kb_cmd, dst) + sizeof(kb_tview),
	       "kb_cmd: src and dst in one run of bytes, fill_value after them");

/* kb__cmd_alloc of a plain command (no ops) whose src and dst its caller
 * writes whole, a load or store: not zeroed there first (two views, ~20
 * of a decode load's ~190 instructions, issue 13). */
static inline kb_cmd *kb__cmd_alloc_views(uint32_t cap_ids)
{
	int k = kb__cmd_size_class(kb__cmd_block_size(0, cap_ids));
	kb_cmd *c = kb__cmd_take(k);

	if (__builtin_expect(!c, 0))
		return kb__cmd_alloc_slow(0, cap_ids);   /* zeroed whole */
	kb__zero(c, offsetof(kb_cmd, src));
	kb__zero(&c->fill_value, sizeof(*c) - offsetof(kb_cmd, fill_value));
	return kb__cmd_lay(c, k, (uint64_t *)(void *)(c + 1), cap_ids);
}

/* kb__cmd_free's inline case: cmd (not NULL) kept in this thread's
 * cache. 0: it is not one to keep there (kb__cmd_free_slow frees it),
 * and nothing was done. */
static inline int kb__cmd_keep(kb_cmd *cmd)
{
	kb_cmd_cache *cc = &kb__cmd_cache;
	uint32_t k = cmd->block - 1u;

	/* An ERROR command (its error to free) is a calloc'd one, block 0;
	 * a cache not live (state 0 or 2) has every cap 0. */
	if (k >= KB_CMD_CACHE_CLASSES || cc->n[k] >= cc->cap[k])
		return 0;
	cmd->ops = (kb_opspec *)(void *)cc->head[k];
	cc->head[k] = cmd;
	cc->n[k]++;
	return 1;
}

/* Frees a command and what it owns. Accepts NULL. */
static inline void kb__cmd_free(kb_cmd *cmd)
{
	if (__builtin_expect(!cmd || !kb__cmd_keep(cmd), 0))
		kb__cmd_free_slow(cmd);
}

/* The producer's store: 0 when c went in, -1 when the ring has no room
 * for it. */
static inline int kb__cmd_ring_put(kb_cmd_ring *r, kb_cmd *c)
{
	if (__builtin_expect(r->count >= r->room, 0))
		return -1;
	r->slot[(r->head + r->count) % KB_CMD_RING] = c;
	r->count++;
	return 0;
}

/* The consumer's take of the oldest (count > 0). */
static inline kb_cmd *kb__cmd_ring_take(kb_cmd_ring *r)
{
	kb_cmd *c = r->slot[r->head];

	r->head = (r->head + 1) % KB_CMD_RING;
	r->count--;
	return c;
}

#endif
