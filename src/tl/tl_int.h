/* Private state of the tl context, shared by the files of src/tl. */
#ifndef KB_TL_TL_INT_H
#define KB_TL_TL_INT_H

#include "base/dtype.h"
#include "base/time.h"
#include "pe/hazard.h"
#include "tl/tcm.h"
#include "tl/tl_impl.h"

#define KB_TL_MAX_SCOPES 64

typedef struct kb_hslot {
	uint32_t gen;
	uint8_t owns_alloc;
	uint8_t scope;           /* scope depth it was created in (< KB_TL_MAX_SCOPES) */
	/* replay.c's snapshot match: the match that met this handle last
	 * (its positions' handles distinct without comparing each with
	 * every other); on the line of gen and the view */
	uint16_t mark;
	/* Its live handle's value above the slot bits (tag and generation),
	 * KB_TL_DEAD when it has none: a look-up compares one word, not
	 * the tag, a live flag and the generation (issue 13). */
	uint64_t key;
	kb_tview view;
	int64_t writer;          /* id of the last command writing it; -1: none */
	uint64_t fence;          /* commands touching it wait for ids < fence */
	uint64_t alloc_size;
	uint32_t scope_pos;      /* its index in that scope's slots (kb_tl_release) */
	uint32_t slot;           /* its own index, set once (kb__tl_slot_new) */
	/* The next free slot while this one is free (kb_tl.free_slot): a new
	 * handle takes a free slot by pointer, not its index through
	 * KB_SLOT's chunk arithmetic (~7 instructions a new handle, issue 13). */
	struct kb_hslot *next_free;
	/* to 128 bytes: KB_SLOT's offset in a chunk is a shift, not a
	 * multiply by 112 (three instructions a look-up, ~50 a decode tile) */
	uint8_t pad[8];
} kb_hslot;

_Static_assert(sizeof(kb_hslot) == 128, "kb_hslot is 128 bytes (KB_SLOT)");

/* kb_hslot.key of a slot with no live handle: a handle value's upper 40
 * bits are never all ones in 64. */
#define KB_TL_DEAD UINT64_MAX

/* The slots a scope releases at its end, in creation order (it releases
 * them last first: the order decides how freed TCM blocks merge, so it is
 * kept). A handle released early leaves KB_TL_NO_SLOT in its place until
 * the trailing ones are cut or the array is compacted (scope.c). */
typedef struct kb_scope {
	uint32_t *slots;
	size_t n, cap;
	size_t dead;             /* KB_TL_NO_SLOT entries among the n */
} kb_scope;

#define KB_TL_NO_SLOT UINT32_MAX

/* A scope's entry for TCM memory with no handle (kb__tl_new_tcm_temp):
 * two words, its offset and its size in KB_TCM_ALIGN units, each with
 * this bit set (a slot index is below 2^24, and neither word is ever
 * KB_TL_NO_SLOT). The scope frees it where a handle's would be. */
#define KB_TL_RAW UINT32_C(0x80000000)

struct kb_tl {
	kb_tl_config cfg;
	/* cfg.tag as a handle value has it (KB_TL_TAG_BITS), and there:
	 * each handle made or looked up masked and shifted it (issue 13) */
	uint32_t tag;
	uint64_t tag_bits;
	kb_clock clock;          /* cfg.cost.clock_ghz: dispatch_ps without a division */
	/* Dispatch ps of a command by its logical bytes (all but CPU
	 * overhead): a kernel emits a few sizes over and over (kb__tl_emit
	 * says which entry). */
	uint64_t disp_lbytes[8], disp_ps[8];
	/* A load's and a store's logical bytes and dispatch ps (0: not yet
	 * worked out), one kind each: kb__tl_emit's look-up by logical bytes
	 * was ~25 instructions a decode load (issue 13). */
	uint64_t move_lbytes[2], move_ps[2];
	/* kb_tl_ref's last shape that passed its checks (rank 0: none yet),
	 * as a view proto (KB_SPACE_HBM), and its bytes: a ref of the same
	 * dtype and shape (a decode kernel's K and V tiles, two a tile)
	 * takes them without the checks and the view built anew (~25 of its
	 * ~145 instructions, issue 13). */
	kb_tview ref_proto;
	uint64_t ref_bytes;
	int failed, cancelled;
	kb_error error;
	/* The ERROR command kb__tl_fail pushes and its error, allocated with
	 * the context: a failure for want of host memory must still reach
	 * PE_CPU, which would otherwise find the kernel's commands ending
	 * with neither END nor ERROR. NULL once pushed. */
	kb_cmd *fail_cmd;
	kb_error *fail_err;
	/* the operation in progress, for error messages */
	uint64_t op_count;
	const char *op_name, *op_file;
	int op_line;
	uint64_t next_cmd;
	/* kb_tl_tile_loop_begin/end: the declared tile loops' dispatch and tiles */
	uint64_t loop0_ps, loop_ps;
	/* Of the commands emitted so far. Not next to next_cmd, which every
	 * emit adds to with it: GCC's SLP vectorizer made the two adds one
	 * SSE add (two moves to XMM, an unpack, a load, the add, a store:
	 * seven instructions for two) in the replays' emits (issue 13). */
	uint64_t dispatch_ps;
	uint64_t tiles;
	uint64_t next_id;
	kb_hslot **chunks;       /* slots in fixed chunks: pointers stay valid */
	size_t n_slots, cap_slots;
	kb_hslot *free_slot;     /* the last freed slot (NULL: none), linked by next_free */
	uint16_t mark;           /* the last kb_hslot.mark handed out */
	kb_scope scopes[KB_TL_MAX_SCOPES];
	int depth;
	/* &scopes[depth], kept with depth: each new handle goes into it, and
	 * the index was three instructions of each (issue 13) */
	kb_scope *scope;
	kb_tcm tcm;
	void *lowering;          /* composite.c's scratch, reused by every composite */
	/* its consumer's commands (kb__tl_ring; room 0 unless it sets it),
	 * last: the slots are 2 KB */
	kb_cmd_ring ring;
	int replay_off;          /* tests: every composite lowered in full */
	uint64_t replays;        /* composites lowered by replay (replay.h) */
};

/* slots a chunk (64 KB: below malloc's mmap threshold) */
#define KB_TL_CHUNK 512
#define KB_SLOT_IN(chunks, i) (&(chunks)[(i) / KB_TL_CHUNK][(i) % KB_TL_CHUNK])
#define KB_SLOT(tl, i) KB_SLOT_IN((tl)->chunks, i)

int kb__tl_fail(kb_tl *tl, int detail, const char *fmt, ...) KB_PRINTF(3, 4);
/* The kernel fails for want of host memory (for what: "a command",
 * "handles"): KB_ENOMEM and "out of memory for WHAT" at the call site, no
 * validation detail, for it is not the kernel's mistake. Returns
 * KB_EVALIDATE, as kb__tl_fail (what the public operations say). */
__attribute__((cold, noinline)) int kb__tl_fail_oom(kb_tl *tl, const char *what);
/* A fault of the lowering itself, not of the kernel (a command's id sets
 * over the room its operands sized them for): KB_EINTERNAL and "internal
 * error: WHAT" at the call site, no validation detail. Returns
 * KB_EVALIDATE, as kb__tl_fail. */
__attribute__((cold, noinline)) int kb__tl_fail_internal(kb_tl *tl, const char *what);
/* WHAT for kb__tl_fail_internal when kb__cmd_read, _write or _sets fail */
#define KB_TL_SETS_FULL "a command's hazard sets are over their room"
int kb__tl_begin(kb_tl *tl, const char *name, const char *file, int line);
kb_hslot *kb__tl_slot(kb_tl *tl, const kb_tl_tensor *t, const char *what);

/* 64-bit handle value: tag (24 bits) | generation (16) | slot (24). Slot
 * 0 is never a handle's (kb__tl_slot_new keeps it dead): the NULL handle
 * names it and fails the key compare, so a look-up takes the slot as the
 * value's low bits, with no "slot + 1" to undo (two instructions a
 * look-up, ~27,000 a decode opt3 run at 65,536 tokens; issue 13). The
 * values are those of the slot + 1 layout this replaced. */
#define KB_TL_SLOT_BITS 24
#define KB_TL_GEN_BITS 16
#define KB_TL_TAG_BITS 24
/* The largest slot a handle takes: as many handles as the slot + 1
 * layout had (2^24 - 512, slots 0 to 2^24 - 513 then). */
#define KB_TL_MAX_SLOT ((UINT32_C(1) << KB_TL_SLOT_BITS) - KB_TL_CHUNK)

/* The slot a handle value names (not checked: kb__tl_slot does that). */
static inline uint32_t kb__tl_slot_index(const kb_tl_tensor *t)
{
	return (uint32_t)((uint64_t)(uintptr_t)t & ((1u << KB_TL_SLOT_BITS) - 1));
}

/* The same check without recording an error: NULL when t is not a live
 * handle of this context (then kb__tl_slot says why). Inline: a
 * composite looks up each handle it names. */
static inline kb_hslot *kb__tl_slot_find(kb_tl *tl, const kb_tl_tensor *t)
{
	/* the slot (NULL: 0, dead) as wide as n_slots: as 32 bits, it was
	 * widened again for the compare */
	size_t slot = (uintptr_t)t & ((1u << KB_TL_SLOT_BITS) - 1);
	kb_hslot *h;

	if (slot >= tl->n_slots)
		return NULL;
	h = KB_SLOT(tl, slot);
	/* the tag, liveness and the generation at once */
	return h->key == (uint64_t)(uintptr_t)t >> KB_TL_SLOT_BITS ? h : NULL;
}
typedef enum kb_tl_shape_err {
	KB_TL_SHAPE_OK, KB_TL_SHAPE_RANK, KB_TL_SHAPE_DTYPE, KB_TL_SHAPE_DIMS
} kb_tl_shape_err;
/* Records kb__tl_check_shape's failure e. */
__attribute__((cold)) void kb__tl_shape_fail(kb_tl *tl, kb_tl_shape_err e, int rank, kb_dtype dt);
/* A new tensor's rank, dtype and dims, and its bytes. Inline, its
 * messages out of line: each tl.ref of a decode tile comes here (a call
 * was ~12 of its ~45 instructions). */
static inline int kb__tl_check_shape(kb_tl *tl, int rank, const int64_t *shape, kb_dtype dt,
				     uint64_t *bytes)
{
	kb_tl_shape_err e = KB_TL_SHAPE_OK;
	int64_t n = 1;

	if (rank < 1 || rank > KB_TL_MAX_RANK || !shape)
		e = KB_TL_SHAPE_RANK;
	else if (!kb__dtype_size(dt))
		e = KB_TL_SHAPE_DTYPE;
	else
		/* an overflow check without a 64-bit division per dimension */
		for (int i = 0; i < rank && !e; i++)
			if (shape[i] <= 0 || __builtin_mul_overflow(n, shape[i], &n))
				e = KB_TL_SHAPE_DIMS;
	if (!e && (uint64_t)n > (UINT64_C(1) << 50))
		e = KB_TL_SHAPE_DIMS;
	if (__builtin_expect(e != KB_TL_SHAPE_OK, 0)) {
		kb__tl_shape_fail(tl, e, rank, dt);
		return KB_EVALIDATE;
	}
	*bytes = (uint64_t)n * kb__dtype_size(dt);
	return KB_OK;
}
kb_hslot *kb__tl_new_handle(kb_tl *tl, kb_space space, uint64_t addr, kb_dtype dt, int rank,
			    const int64_t *shape, kb_tl_tensor **out);
/* A new handle's view before its id and address (zeroed beyond rank, ld
 * the last dim): kb__tl_new_tcm_view copies it whole, so a caller
 * that makes many handles of one shape (a replay's output) builds it
 * once (issue 13). */
static inline void kb__tl_view_proto(kb_tview *v, kb_space space, kb_dtype dt, int rank,
				     const int64_t *shape)
{
	memset(v, 0, sizeof(*v));
	v->space = (uint8_t)space;
	v->dtype = (uint8_t)dt;
	v->rank = (uint8_t)rank;
	for (int i = 0; i < rank; i++)
		v->shape[i] = shape[i];
	v->ld = shape[rank - 1];
}
kb_hslot *kb__tl_new_tcm(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
			 kb_tl_tensor **out);
/* The same for a shape kb__tl_check_shape passed before with these
 * bytes (the check was ~40 instructions). */
kb_hslot *kb__tl_new_tcm_sized(kb_tl *tl, kb_dtype dt, int rank, const int64_t *shape,
			       uint64_t bytes, kb_tl_tensor **out);
/* The same from a kb__tl_view_proto of a TCM tensor and the TCM it takes,
 * size, its bytes' kb__tcm_round (a replay's allocations and outputs:
 * both made once when their template is; the rounding was ~6
 * instructions an allocation, issue 13). */
kb_hslot *kb__tl_new_tcm_view(kb_tl *tl, const kb_tview *proto, uint64_t size, kb_tl_tensor **out);
/*
 * The same for memory no kernel can name (a replayed composite's recipe
 * scratch): the id, address and fence a handle would have had, in *tmp
 * (writer -1), and the memory in the current scope, which frees it when
 * it ends, as it would the handle's: no slot taken and given back, no
 * view copied, no handle value (~80 instructions a scratch tensor, five
 * a decode opt2 tile). proto is read only for the bytes a failure's
 * message names (the memory has no view). NULL: failed (TCM exhausted or
 * out of host memory), as kb__tl_new_tcm_view fails.
 */
kb_hslot *kb__tl_new_tcm_temp(kb_tl *tl, const kb_tview *proto, uint64_t size, kb_hslot *tmp);
/* A scope's entry for memory without a handle holds its offset and its
 * units below KB_TL_RAW - 1: a TCM has at most 2^32 bytes (kb__tcm_init)
 * and its blocks start aligned, so neither needs checking. */
_Static_assert(((uint64_t)UINT32_MAX + 1) / KB_TCM_ALIGN < KB_TL_RAW - 1,
	       "a TCM offset or size in KB_TCM_ALIGN units fits a scope's raw entry");
/* kb__tl_new_tcm_temp's work once its memory [off, off + size) is
 * allocated, with fence: its entry in the current scope, s (room for
 * it made), and *tmp. */
static inline kb_hslot *kb__tl_temp_at(kb_tl *tl, kb_scope *s, uint64_t off, uint64_t size,
				       uint64_t fence, kb_hslot *tmp)
{
	uint32_t raw[2];

	/* kb__tcm_free rounds as kb__tcm_alloc does: the units give it
	 * back. Both words in one store. */
	raw[0] = KB_TL_RAW | (uint32_t)(off / KB_TCM_ALIGN);
	raw[1] = KB_TL_RAW | (uint32_t)(size / KB_TCM_ALIGN);
	memcpy(&s->slots[s->n], raw, sizeof(raw));
	s->n += 2;
	/* what a handle's slot would hold that the replay reads: its id
	 * (counted as a handle's, so later ids stay as they were) */
	tmp->view.id = ++tl->next_id;
	tmp->view.addr = off;
	tmp->fence = fence;
	tmp->writer = -1;
	return tmp;
}
int kb__scope_grow(kb_scope *s);
/* Records slot, just made, in the current scope (inline: each new
 * handle comes here; growing the array is the rare case). */
static inline int kb__scope_track(kb_tl *tl, kb_hslot *h)
{
	kb_scope *s = tl->scope;

	if (s->n == s->cap && kb__scope_grow(s))
		return -1;
	h->scope_pos = (uint32_t)s->n;
	s->slots[s->n++] = h->slot;
	return 0;
}
/* A new handle's slot when none is free to reuse (its chunk made when
 * the last is full); NULL: out of host memory. */
kb_hslot *kb__tl_slot_new(kb_tl *tl);
/* A new handle's failure: its slot h (NULL: none) back, the error
 * recorded. NULL. */
__attribute__((cold)) kb_hslot *kb__tl_handle_oom(kb_tl *tl, kb_hslot *h);
/* The TCM has no block for bytes: the error, with what it holds. */
__attribute__((cold)) void kb__tl_tcm_exhausted(kb_tl *tl, uint64_t bytes);
/* The same for a kb__tl_new_tcm_view's proto. */
__attribute__((cold)) void kb__tl_tcm_exhausted_for(kb_tl *tl, const kb_tview *proto);

/* kb__tl_new_handle (proto NULL: the view from space..shape) and a TCM
 * tensor's handle from a proto (the view copied). Inline for a replay's
 * outputs (six a decode opt3 tile, ~20 instructions of call each). */
static inline __attribute__((always_inline)) kb_hslot *
kb__tl_handle(kb_tl *tl, uint64_t addr, const kb_tview *proto, kb_space space, kb_dtype dt,
	      int rank, const int64_t *shape, kb_tl_tensor **out)
{
	kb_hslot *h = tl->free_slot;
	uint64_t v;

	if (__builtin_expect(h != NULL, 1))
		tl->free_slot = h->next_free;
	else if (!(h = kb__tl_slot_new(tl)))
		return kb__tl_handle_oom(tl, NULL);
	h->gen++;
	/* tag | generation | slot (the layout above) */
	v = tl->tag_bits | (uint64_t)(h->gen & ((1u << KB_TL_GEN_BITS) - 1)) << KB_TL_SLOT_BITS | h->slot;
	h->key = v >> KB_TL_SLOT_BITS;
	h->scope = (uint8_t)tl->depth;
	h->writer = -1;
	h->fence = 0;
	h->owns_alloc = 0;
	/* next_free is read only while the slot is free: not set here */
	/* Only id and addr come before shape: a field added there would
	 * not be copied from proto. */
	_Static_assert(offsetof(kb_tview, addr) == sizeof(uint64_t) &&
			       offsetof(kb_tview, shape) == 2 * sizeof(uint64_t),
		       "a new handle's view copies all but id and addr from its proto");
	if (proto)   /* but id and addr, set below: a 48-byte copy, not 64 */
		memcpy(h->view.shape, proto->shape, sizeof(kb_tview) - offsetof(kb_tview, shape));
	else
		kb__tl_view_proto(&h->view, space, dt, rank, shape);
	h->view.id = ++tl->next_id;
	h->view.addr = addr;
	if (kb__scope_track(tl, h))
		return kb__tl_handle_oom(tl, h);
	*out = (kb_tl_tensor *)(uintptr_t)v;
	return h;
}

/* A handle h made for TCM block [off, off + bytes) owns that block; no
 * handle (out of host memory): the block goes back and NULL. */
static inline __attribute__((always_inline)) kb_hslot *
kb__tl_owning(kb_tl *tl, kb_hslot *h, uint64_t off, uint64_t bytes, uint64_t fence)
{
	if (!h) {
		kb__tcm_free(&tl->tcm, off, bytes, tl->next_cmd);
		return NULL;
	}
	h->owns_alloc = 1;
	h->alloc_size = bytes;
	h->fence = fence;
	return h;
}

/* kb__tl_new_tcm_view, inline (see kb__tl_handle): the callers where
 * inlining pays call this, the others the one out-of-line copy. */
static inline __attribute__((always_inline)) kb_hslot *
kb__tl_new_tcm_at(kb_tl *tl, const kb_tview *proto, uint64_t size, kb_tl_tensor **out)
{
	uint64_t off, fence;

	if (kb__tcm_alloc_size(&tl->tcm, size, &off, &fence)) {
		kb__tl_tcm_exhausted_for(tl, proto);
		return NULL;
	}
	return kb__tl_owning(tl, kb__tl_handle(tl, off, proto, KB_SPACE_TCM, KB_FP32, 0, NULL, out),
			     off, size, fence);
}
kb_cmd *kb__tl_cmd_new(kb_tl *tl, kb_cmd_kind kind);
/* c, a command block just allocated (NULL: none, the error recorded),
 * made a command of this kind at the current call site. */
static inline kb_cmd *kb__tl_cmd_here(kb_tl *tl, kb_cmd *c, kb_cmd_kind kind)
{
	if (!c) {
		kb__tl_fail_oom(tl, "a command");
		return NULL;
	}
	c->kind = kind;
	c->pe = tl->cfg.pe;
	c->id = tl->next_cmd;
	c->file = tl->op_file;
	c->line = tl->op_line;
	return c;
}
/* A command with room for n_ops ops and cap_ids handle ids per set. */
static inline __attribute__((always_inline)) kb_cmd *kb__tl_cmd_new_n(kb_tl *tl, kb_cmd_kind kind, uint32_t n_ops,
								 uint32_t cap_ids)
{
	/* inline: a replay's command is a few stores around kb__cmd_alloc */
	return kb__tl_cmd_here(tl, kb__cmd_alloc(n_ops, cap_ids), kind);
}
/* Keeps in c its hazard signature (kb__cmd_sig): r the bits of its
 * reads' ids, w of its writes' (kb__hazard_set), which a writer of its
 * sets works out as it writes them. */
static inline void kb__tl_sig(kb_cmd *c, uint64_t r, uint64_t w)
{
	uint64_t *sig = kb__cmd_sig(c);

	sig[0] = r;
	sig[1] = w;
	c->has_sig = 1;
}
int kb__cmd_read(kb_cmd *c, const kb_hslot *h, int implicit_wait);
int kb__cmd_write(kb_cmd *c, const kb_hslot *h);
/* A composite's hazard sets: reads (with an implicit wait for their
 * producers), read-write handles and writes, in that order; then c is the
 * last writer of what it writes. -1: c has no room for the ids. */
int kb__cmd_sets(kb_cmd *c, kb_hslot *const *reads, uint32_t n_reads, kb_hslot *const *rw,
		 uint32_t n_rw, kb_hslot *const *writes, uint32_t n_writes);
int kb__tl_emit(kb_tl *tl, kb_cmd *c);
/* The dispatch ps kb__tl_emit gives c (neither CPU overhead nor a marker
 * command; its lbytes set), worked out. */
uint64_t kb__tl_disp_ps(const kb_tl *tl, const kb_cmd *c);
/* Hands c to the consumer: into the ring while it has room, else
 * through emit. Nonzero: nobody will consume commands any more. */
static inline int kb__tl_push(kb_tl *tl, kb_cmd *c)
{
	if (__builtin_expect(!kb__cmd_ring_put(&tl->ring, c), 1))
		return 0;
	return tl->cfg.emit(tl->cfg.emit_ctx, c);
}
/* kb__tl_push; where nobody will consume commands any more, the tl is
 * cancelled: KB_ESTATE. Inline, it is the code its callers had each
 * written out (a replay's and emit's hot path among them). */
static inline int kb__tl_push_or_cancel(kb_tl *tl, kb_cmd *c)
{
	if (kb__tl_push(tl, c)) {
		tl->cancelled = 1;
		return KB_ESTATE;
	}
	return KB_OK;
}
/* kb__tl_emit of such a command whose dispatch ps the caller knows (a
 * replay keeps its template's: the same logical bytes), without its
 * look-up by logical bytes. */
static inline int kb__tl_emit_ps(kb_tl *tl, kb_cmd *c, uint64_t disp_ps)
{
	c->disp_ps = disp_ps;
	c->has_disp_ps = 1;
	tl->dispatch_ps += disp_ps;
	tl->next_cmd++;
	return kb__tl_push_or_cancel(tl, c);
}
/* Frees composite.c's scratch (tl->lowering). Accepts NULL. */
void kb__tl_lowering_free(void *lowering);

#endif
