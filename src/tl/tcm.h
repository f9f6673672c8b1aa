/*
 * The TCM allocator of one tl context: next-fit over the free blocks of a
 * PE's TCM, in O(log n) per allocation and per free (n: free blocks).
 *
 * Policy (it decides every TCM address, so the op_log depends on it):
 * - Sizes round up to KB_TCM_ALIGN bytes; a zero-byte request takes one unit.
 * - Next fit: the search starts at the cursor (the end of the previous
 *   allocation) and goes up through the free blocks in address order, then
 *   wraps to address 0 and goes up to the block holding the cursor. The part
 *   of that block below the cursor is not looked at again, so memory freed
 *   by one scope is reused as late as possible.
 * - A free block remembers the fence of its previous life (the command id
 *   every command before it must have finished); the new owner carries it.
 * - A freed block merges only with the block just below it, and only when
 *   both carry the same fence: merging would lend a fence to memory that
 *   does not need it. When no block fits, every run of adjacent free blocks
 *   is merged (taking the latest fence) and the search is retried: that
 *   slow path walks the whole list, O(n), and happens only when TCM
 *   is too fragmented for the request.
 *
 * The free blocks live in address order in leaves of up to KB_TCM_LEAF
 * blocks (sorted arrays), found by a binary search over the leaves' last
 * ends and then within the leaf. Each leaf keeps an upper bound of the
 * largest usable size in it, and a max-tree over those bounds answers
 * "first leaf at or after k where `need` may fit" in O(log n). Bounds rise
 * when a block grows and are made exact only when a search finds one stale,
 * so the common case (carve the block at the cursor, free next to it)
 * touches one leaf and no tree. Where the block at the cursor lies is
 * kept (cb) while nothing moves it, so that an allocation it holds reads
 * it straight away. A leaf that fills up first lends blocks to
 * a neighbour with room, and splits (at the insert's place) only when both
 * are full; an empty leaf goes away. Splits and drops move the leaf index
 * (n / KB_TCM_LEAF entries). Decode at S_kv = 262144 (~10,000 free blocks,
 * 24,580 allocations and as many frees) fills its 39 leaves to ~253 of
 * 256 blocks. Until its cursor wraps, its frees pile up below the cursor
 * in the last leaf, which splits each time it is full: with leaves of 64
 * blocks that was every ~11 tiles, each split and the frees around it
 * ~800 instructions (a leaf's malloc, the index, the tree), ~0.5% of a
 * run at S_kv = 65536; decode's own paths move a few blocks at most
 * whatever a leaf holds (the open gap follows its cursor), so larger
 * leaves cost it nothing measurable. No decision
 * depends on how the blocks are cut into leaves, only on the ordered
 * set of blocks.
 */
#ifndef KB_TL_TCM_H
#define KB_TL_TCM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KB_TCM_ALIGN 64u
#define KB_TCM_LEAF 256u

/* A free block [off, end) and its fence. One struct per block, not an
 * array per field: an insert or removal moves the blocks after it with
 * one move, not three memmove calls (~55 instructions a free). */
typedef struct kb_tcm_blk {
	uint32_t off, last;      /* [off, last] */
	uint64_t fence;
} kb_tcm_blk;

typedef struct kb_tcm_leaf {
	uint32_t n;
	uint32_t g;              /* the open leaf's gap: blocks g.. sit at the end of b[]; L: closed */
	uint64_t bound;          /* at least the largest usable size here */
	kb_tcm_blk b[KB_TCM_LEAF];
} kb_tcm_leaf;

typedef struct kb_tcm {
	uint64_t bytes;          /* capacity */
	uint64_t used;           /* allocated bytes (rounded sizes) */
	uint64_t leaked;         /* freed while out of host memory: lost, still correct */
	uint64_t cursor;
	kb_tcm_leaf **leaf;      /* m leaves in address order; only a lone leaf is empty */
	uint64_t *hi;            /* hi[k]: end of leaf k's last block (0: empty) */
	uint64_t *seg;           /* max-tree of the bounds: seg[1] root, seg[cap + k] leaf k */
	uint32_t m, cap;         /* leaves, and room for them (a power of two) */
	size_t n;                /* free blocks */
	/* Guesses (leaf, index) of the next search's answer, checked before
	 * use: [0] the block at the cursor, [1] the block above the last free
	 * (scopes free their blocks top down, next to each other). */
	uint32_t hint[2][2];
	/* Where the block hint[0] names lies, or &kb__tcm_nil: not known
	 * (blocks moved, or the hint changed). kb__tcm_alloc_inline's first
	 * test reads the block through it: no leaf, gap or bounds looked at
	 * for a request the cursor block holds (issue 13). */
	kb_tcm_blk *cb;
	/* The open leaf gk (UINT32_MAX: none) keeps a gap at the place of
	 * the last fast allocation or free: its first g blocks sit at the
	 * start of b[], the rest at its end. Decode allocates from the block
	 * at the cursor and frees just below it, so its inserts and removals
	 * all fall at the gap and move no blocks. Every other leaf, and this
	 * one for everything but the fast paths, keeps its blocks at the
	 * start (the gap closed first). */
	uint32_t gk;
} kb_tcm;

/* kb_tcm.cb's "not known": a block no cursor starts and nothing fits in
 * (never written). */
extern kb_tcm_blk kb__tcm_nil;

/* Starts with one free block [0, bytes) (none when bytes is 0). -1: out of
 * host memory, or bytes over 2^32 (memory.tcm_bytes' limit). */
int kb__tcm_init(kb_tcm *t, uint64_t bytes);
void kb__tcm_fini(kb_tcm *t);
/* Allocates `bytes` (rounded up); *off is its address, *fence the fence it
 * inherits. -1: no room (or no host memory for the bookkeeping). */
int kb__tcm_alloc(kb_tcm *t, uint64_t bytes, uint64_t *off, uint64_t *fence);
/* What kb__tcm_alloc takes for `bytes`: a multiple of KB_TCM_ALIGN, at
 * least one. */
static inline uint64_t kb__tcm_round(uint64_t bytes)
{
	uint64_t size = (bytes + KB_TCM_ALIGN - 1) / KB_TCM_ALIGN * KB_TCM_ALIGN;

	return size ? size : KB_TCM_ALIGN;
}
/* kb__tcm_alloc of `size` (rounded) past kb__tcm_alloc_inline's cases. */
int kb__tcm_alloc_rest(kb_tcm *t, uint64_t size, uint64_t *off, uint64_t *fence);

/* kb__tcm_alloc_inline's block b (block i of leaf k, f), the first past
 * the open gap, goes whole: the gap grows over it, and the block after it
 * (block i now) is the cursor's block; when b was the leaf's last, the
 * leaf's bound is the block before it, and the cursor's block unknown. */
static inline __attribute__((always_inline)) void
kb__tcm_gap_takes(kb_tcm *t, kb_tcm_leaf *f, uint32_t k, uint32_t i, kb_tcm_blk *b)
{
	f->n--;
	t->n--;
	if (i == f->n) {   /* it was the last: the one before is */
		t->hi[k] = (uint64_t)f->b[i - 1].last + 1;
		t->cb = &kb__tcm_nil;
	} else {
		t->cb = b + 1;
	}
}

/* kb__tcm_alloc_inline's answer: [o, e) of block b. */
static inline __attribute__((always_inline)) int
kb__tcm_given(kb_tcm *t, const kb_tcm_blk *b, uint64_t o, uint64_t e, uint64_t size,
	      uint64_t *off, uint64_t *fence)
{
	*off = o;
	*fence = b->fence;
	t->cursor = e;
	t->used += size;
	return 0;
}

/*
 * kb__tcm_alloc of `size`, kb__tcm_round's (a replay keeps its
 * allocations' rounded: ~6 instructions each), its common cases inline for the tl's TCM tensors (a
 * call, its arguments and results through memory and the callee's
 * registers were ~25 of its ~45 instructions; decode makes 6 a tile):
 * the block at the cursor (hint[0] names it) starts at the cursor and
 * holds the request, which it gives from its start: the block shrinks,
 * or goes when it fits exactly and the open leaf's gap is at it (once
 * decode's cursor has wrapped into the blocks its tiles freed, every
 * allocation but a tile's first). A block that starts at the cursor is
 * the search's answer for it (blocks are sorted, disjoint and not empty).
 * The next free is most likely of this block, the newest one in scope:
 * the search's answer for it is the block at the cursor, hint[1] too.
 */
static inline __attribute__((always_inline)) int
kb__tcm_alloc_size(kb_tcm *t, uint64_t size, uint64_t *off, uint64_t *fence)
{
	uint32_t k, i;
	kb_tcm_leaf *f;
	kb_tcm_blk *b = t->cb;
	uint64_t o = b->off, e = o + size;

	if (o == t->cursor && e <= b->last) {   /* the block shrinks */
		memcpy(t->hint[1], t->hint[0], sizeof(t->hint[0]));
		b->off = (uint32_t)e;
		return kb__tcm_given(t, b, o, e, size, off, fence);
	}
	if (o == t->cursor) {
		k = t->hint[0][0];
		i = t->hint[0][1];
		if (e - 1 == b->last && (f = t->leaf[k])->n > 1 && t->gk == k && f->g == i) {
			/* it goes, at the gap (as below); a known block (not
			 * kb__tcm_nil: no request ends at its last byte), so
			 * the hint names it */
			kb__tcm_gap_takes(t, f, k, i, b);
		} else {
			return kb__tcm_alloc_rest(t, size, off, fence);
		}
		t->hint[1][0] = k;
		t->hint[1][1] = i;
		return kb__tcm_given(t, b, o, e, size, off, fence);
	}
	k = t->hint[0][0];
	i = t->hint[0][1];
	if (k < t->m && i < (f = t->leaf[k])->n) {
		b = &f->b[i + (i >= f->g ? KB_TCM_LEAF - f->n : 0)];
		o = b->off;
		e = o + size;
		if (o == t->cursor) {
			t->hint[1][0] = k;
			t->hint[1][1] = i;
			if (e <= b->last) {
				b->off = (uint32_t)e;
				t->cb = b;
			} else if (e - 1 == b->last && f->n > 1 && t->gk == k && f->g == i) {
				/* block i is the first past the gap */
				kb__tcm_gap_takes(t, f, k, i, b);
			} else {
				return kb__tcm_alloc_rest(t, size, off, fence);
			}
			return kb__tcm_given(t, b, o, e, size, off, fence);
		}
	}
	return kb__tcm_alloc_rest(t, size, off, fence);
}

/*
 * kb__tcm_alloc_size of several sizes in turn, `total` their sum, where
 * the block at the cursor holds them all and shrinks: each is given at
 * the cursor as it moves up, with the block's fence, so all of them lie
 * at *off on from the first, in the order of the sizes. -1: not this
 * case, nothing done (allocate them one by one). A replay's recipe
 * scratch, five tensors a decode opt2 tile (issue 13).
 */
static inline int kb__tcm_alloc_all(kb_tcm *t, uint64_t total, uint64_t *off, uint64_t *fence)
{
	kb_tcm_blk *b = t->cb;
	uint64_t o = b->off, e = o + total;

	if (o != t->cursor || e > b->last)
		return -1;
	memcpy(t->hint[1], t->hint[0], sizeof(t->hint[0]));
	b->off = (uint32_t)e;
	return kb__tcm_given(t, b, o, e, total, off, fence);
}

/* kb__tcm_alloc_size of `bytes` rounded (kb__tcm_round). */
static inline __attribute__((always_inline)) int
kb__tcm_alloc_inline(kb_tcm *t, uint64_t bytes, uint64_t *off, uint64_t *fence)
{
	return kb__tcm_alloc_size(t, kb__tcm_round(bytes), off, fence);
}
/* Gives back what kb__tcm_alloc(bytes) returned at `off`, reusable by
 * commands that wait for `fence`. */
void kb__tcm_free(kb_tcm *t, uint64_t off, uint64_t bytes, uint64_t fence);
/* What kb__tcm_free takes of one block. */
typedef struct kb_tcm_span {
	uint64_t off, bytes;
} kb_tcm_span;

/* kb__tcm_free of s[0], s[1], ... s[n - 1] in that order, with one
 * fence (a scope's end gives back its blocks so: one call, not one a
 * block, each saving and restoring the registers the fast path needs). */
void kb__tcm_free_n(kb_tcm *t, const kb_tcm_span *s, size_t n, uint64_t fence);
uint64_t kb__tcm_largest_free(const kb_tcm *t);
/* 0 when the structure holds together (tests; O(n)): blocks in order, not
 * empty and counted; each leaf's last end in hi, its bound and the tree
 * above it at least its largest usable size; a gap in the open leaf only. */
int kb__tcm_check(const kb_tcm *t);
/* The i-th free block in address order (tests, diagnostics; O(n)). */
int kb__tcm_block(const kb_tcm *t, size_t i, uint64_t *off, uint64_t *size, uint64_t *fence);

#endif
