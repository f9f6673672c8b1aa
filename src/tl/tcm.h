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
 *   slow path walks the whole list, O(n log n), and happens only when TCM
 *   is too fragmented for the request.
 *
 * The free blocks live in a treap ordered by address whose nodes carry the
 * largest usable size of their subtree, so "first block at or after the
 * cursor that fits" is one descent. Nodes come from a pool; the treap's
 * priorities come from a fixed-seed generator, and no decision depends on
 * the tree's shape, only on the ordered set of blocks.
 */
#ifndef KB_TL_TCM_H
#define KB_TL_TCM_H

#include <stddef.h>
#include <stdint.h>

#define KB_TCM_ALIGN 64u
#define KB_TCM_NIL UINT32_MAX

typedef struct kb_tcm_node {
	uint64_t off, size, fence;
	uint64_t usable;         /* end minus the aligned start: what fits here */
	uint64_t best;           /* largest usable in this subtree */
	uint32_t left, right;    /* pool indices; KB_TCM_NIL: none */
	uint32_t prio;
} kb_tcm_node;

typedef struct kb_tcm {
	uint64_t bytes;          /* capacity */
	uint64_t used;           /* allocated bytes (rounded sizes) */
	uint64_t leaked;         /* freed while out of host memory: lost, still correct */
	uint64_t cursor;
	kb_tcm_node *pool;
	uint32_t cap, free_node, root;
	size_t n;                /* free blocks */
	uint64_t rng;
} kb_tcm;

/* Starts with one free block [0, bytes) (none when bytes is 0). -1: out of
 * host memory. */
int kb__tcm_init(kb_tcm *t, uint64_t bytes);
void kb__tcm_fini(kb_tcm *t);
/* Allocates `bytes` (rounded up); *off is its address, *fence the fence it
 * inherits. -1: no room (or no host memory for the bookkeeping). */
int kb__tcm_alloc(kb_tcm *t, uint64_t bytes, uint64_t *off, uint64_t *fence);
/* Gives back what kb__tcm_alloc(bytes) returned at `off`, reusable by
 * commands that wait for `fence`. */
void kb__tcm_free(kb_tcm *t, uint64_t off, uint64_t bytes, uint64_t fence);
uint64_t kb__tcm_largest_free(const kb_tcm *t);
/* The i-th free block in address order (tests, diagnostics; O(n)). */
int kb__tcm_block(const kb_tcm *t, size_t i, uint64_t *off, uint64_t *size, uint64_t *fence);

#endif
