/*
 * The TCM allocator (policy in tcm.h): a treap of free blocks by address,
 * each node carrying the largest usable size of its subtree. Recursion
 * depth is the treap's depth, O(log n) expected.
 */
#include "tl/tcm.h"

#include <stdlib.h>

#define NIL KB_TCM_NIL

static uint64_t align_up(uint64_t x)
{
	return (x + KB_TCM_ALIGN - 1) / KB_TCM_ALIGN * KB_TCM_ALIGN;
}

static uint64_t end_of(const kb_tcm_node *n)
{
	return n->off + n->size;
}

static uint64_t best_of(const kb_tcm *t, uint32_t x)
{
	return x == NIL ? 0 : t->pool[x].best;
}

static void pull(kb_tcm *t, uint32_t x)
{
	kb_tcm_node *n = &t->pool[x];
	uint64_t b = n->usable, l = best_of(t, n->left), r = best_of(t, n->right);

	n->best = b > l ? (b > r ? b : r) : (l > r ? l : r);
}

/* pull, saying whether the subtree's maximum changed: when it did not,
 * nothing above needs recomputing. */
static int pull_changed(kb_tcm *t, uint32_t x)
{
	uint64_t old = t->pool[x].best;

	pull(t, x);
	return t->pool[x].best != old;
}

static void set_block(kb_tcm_node *n, uint64_t off, uint64_t size)
{
	uint64_t a = align_up(off);

	n->off = off;
	n->size = size;
	n->usable = off + size > a ? off + size - a : 0;
}

/* Splits subtree x into blocks below `key` (*l) and the rest (*r). */
static void split(kb_tcm *t, uint32_t x, uint64_t key, uint32_t *l, uint32_t *r)
{
	if (x == NIL) {
		*l = *r = NIL;
		return;
	}
	if (t->pool[x].off < key) {
		split(t, t->pool[x].right, key, &t->pool[x].right, r);
		*l = x;
	} else {
		split(t, t->pool[x].left, key, l, &t->pool[x].left);
		*r = x;
	}
	pull(t, x);
}

/* Every block of a lies below every block of b. */
static uint32_t merge(kb_tcm *t, uint32_t a, uint32_t b)
{
	if (a == NIL)
		return b;
	if (b == NIL)
		return a;
	if (t->pool[a].prio > t->pool[b].prio) {
		t->pool[a].right = merge(t, t->pool[a].right, b);
		pull(t, a);
		return a;
	}
	t->pool[b].left = merge(t, a, t->pool[b].left);
	pull(t, b);
	return b;
}

/* Recomputes the subtree maxima on the path to the block at `key`, from
 * that block up, as far as they change; returns whether x's did. */
static int refresh_at(kb_tcm *t, uint32_t x, uint64_t key)
{
	int changed;

	if (x == NIL)
		return 0;
	if (key < t->pool[x].off)
		changed = refresh_at(t, t->pool[x].left, key);
	else if (key > t->pool[x].off)
		changed = refresh_at(t, t->pool[x].right, key);
	else
		changed = 1;
	return changed && pull_changed(t, x);
}

static void refresh(kb_tcm *t, uint32_t x, uint64_t key)
{
	refresh_at(t, x, key);
}

static uint32_t next_prio(kb_tcm *t)
{
	/* xorshift64*: a fixed sequence, so the tree is the same every run. */
	t->rng ^= t->rng >> 12;
	t->rng ^= t->rng << 25;
	t->rng ^= t->rng >> 27;
	return (uint32_t)((t->rng * UINT64_C(2685821657736338717)) >> 32);
}

/* Puts node nx into the subtree at *x: down the search path while the
 * priorities allow (raising the maxima on the way: the subtree gains nx),
 * then nx takes the place of the subtree, split around it. The split
 * touches only the two spines below that place, O(1) expected, where a
 * split of the whole tree and two merges cost the depth three times
 * (profile of decode opt2: the treap was 15% of a run). */
static void insert_node(kb_tcm *t, uint32_t *x, uint32_t nx)
{
	kb_tcm_node *n = &t->pool[nx];

	while (*x != NIL && t->pool[*x].prio >= n->prio) {
		kb_tcm_node *c = &t->pool[*x];

		if (n->usable > c->best)
			c->best = n->usable;
		x = n->off < c->off ? &c->left : &c->right;
	}
	split(t, *x, n->off, &n->left, &n->right);
	pull(t, nx);
	*x = nx;
}

static int insert(kb_tcm *t, uint64_t off, uint64_t size, uint64_t fence)
{
	uint32_t x;

	if (t->free_node == NIL) {
		uint32_t cap = t->cap ? 2 * t->cap : 64;
		kb_tcm_node *p;

		if (cap <= t->cap || cap == NIL)
			return -1;
		p = realloc(t->pool, (size_t)cap * sizeof(*p));
		if (!p)
			return -1;
		for (uint32_t i = t->cap; i < cap; i++)
			p[i].left = i + 1 < cap ? i + 1 : NIL;
		t->pool = p;
		t->free_node = t->cap;
		t->cap = cap;
	}
	x = t->free_node;
	t->free_node = t->pool[x].left;
	set_block(&t->pool[x], off, size);
	t->pool[x].fence = fence;
	t->pool[x].left = t->pool[x].right = NIL;
	t->pool[x].prio = next_prio(t);
	pull(t, x);
	insert_node(t, &t->root, x);
	t->n++;
	return 0;
}

/* Takes the block at `key` out of the subtree at *x: its children merge
 * in its place (O(1) expected), and the maxima above are recomputed as far
 * as they change. Returns whether the subtree's maximum changed. */
static int erase(kb_tcm *t, uint32_t *x, uint64_t key)
{
	uint32_t y = *x;
	int changed;

	if (y == NIL)
		return 0;
	if (key == t->pool[y].off) {
		*x = merge(t, t->pool[y].left, t->pool[y].right);
		t->pool[y].left = t->free_node;
		t->free_node = y;
		t->n--;
		return 1;
	}
	changed = erase(t, key < t->pool[y].off ? &t->pool[y].left : &t->pool[y].right, key);
	return changed && pull_changed(t, y);
}

static void remove_at(kb_tcm *t, uint64_t off)
{
	erase(t, &t->root, off);
}

/* First block whose end lies above addr. */
static uint32_t first_ending_above(const kb_tcm *t, uint64_t addr)
{
	uint32_t x = t->root, c = NIL;

	while (x != NIL) {
		if (end_of(&t->pool[x]) > addr) {
			c = x;
			x = t->pool[x].left;
		} else {
			x = t->pool[x].right;
		}
	}
	return c;
}

/* First block after (by address) `key`; NIL: none. */
static uint32_t successor(const kb_tcm *t, uint64_t key)
{
	uint32_t x = t->root, c = NIL;

	while (x != NIL) {
		if (t->pool[x].off > key) {
			c = x;
			x = t->pool[x].left;
		} else {
			x = t->pool[x].right;
		}
	}
	return c;
}

static uint32_t leftmost(const kb_tcm *t)
{
	uint32_t x = t->root;

	while (x != NIL && t->pool[x].left != NIL)
		x = t->pool[x].left;
	return x;
}

/* First block of subtree x, by address, where `need` bytes fit. */
static uint32_t first_fit(const kb_tcm *t, uint32_t x, uint64_t need)
{
	while (x != NIL && t->pool[x].best >= need) {
		const kb_tcm_node *n = &t->pool[x];

		if (best_of(t, n->left) >= need)
			x = n->left;
		else if (n->usable >= need)
			return x;
		else
			x = n->right;
	}
	return NIL;
}

/* First block above address `key` where `need` bytes fit. */
static uint32_t fit_after(const kb_tcm *t, uint32_t x, uint64_t key, uint64_t need)
{
	uint32_t r;

	if (x == NIL || t->pool[x].best < need)
		return NIL;
	if (t->pool[x].off <= key)
		return fit_after(t, t->pool[x].right, key, need);
	r = fit_after(t, t->pool[x].left, key, need);
	if (r != NIL)
		return r;
	if (t->pool[x].usable >= need)
		return x;
	return first_fit(t, t->pool[x].right, need);
}

/* Takes [base, base + size) out of block x. */
static int take(kb_tcm *t, uint32_t x, uint64_t base, uint64_t size, uint64_t *off,
		uint64_t *fence)
{
	kb_tcm_node *s = &t->pool[x];
	uint64_t f = s->fence, s_off = s->off, s_end = end_of(s);

	*off = base;
	*fence = f;
	if (base > s_off) {
		/* Split: the part before stays free. */
		set_block(s, s_off, base - s_off);
		refresh(t, t->root, s_off);
		if (s_end > base + size && insert(t, base + size, s_end - base - size, f))
			return -1;
	} else if (size == s->size) {
		remove_at(t, s_off);
	} else {
		set_block(s, s_off + size, s->size - size);
		refresh(t, t->root, s_off + size);
	}
	t->cursor = base + size;
	t->used += size;
	return 0;
}

static int try_alloc(kb_tcm *t, uint64_t size, uint64_t *off, uint64_t *fence)
{
	uint32_t s = first_ending_above(t, t->cursor), x;

	if (s != NIL) {
		const kb_tcm_node *n = &t->pool[s];
		uint64_t base = align_up(n->off < t->cursor ? t->cursor : n->off);

		if (base + size <= end_of(n))
			return take(t, s, base, size, off, fence);
		/* Up from the cursor's block, then wrap to below it. */
		x = fit_after(t, t->root, n->off, size);
		if (x == NIL) {
			x = first_fit(t, t->root, size);
			if (x != NIL && t->pool[x].off >= n->off)
				x = NIL;
		}
	} else {
		x = first_fit(t, t->root, size);
	}
	if (x == NIL)
		return -1;
	return take(t, x, align_up(t->pool[x].off), size, off, fence);
}

/* Merges every run of adjacent free blocks (fence: the latest of them). */
static void coalesce(kb_tcm *t)
{
	uint32_t x = leftmost(t), nx;

	while (x != NIL && (nx = successor(t, t->pool[x].off)) != NIL) {
		kb_tcm_node *a = &t->pool[x];
		uint64_t size, fence;

		if (end_of(a) != t->pool[nx].off) {
			x = nx;
			continue;
		}
		size = a->size + t->pool[nx].size;
		fence = t->pool[nx].fence > a->fence ? t->pool[nx].fence : a->fence;
		remove_at(t, t->pool[nx].off);
		a = &t->pool[x];
		set_block(a, a->off, size);
		a->fence = fence;
		refresh(t, t->root, a->off);
	}
}

static uint64_t round_size(uint64_t bytes)
{
	uint64_t size = align_up(bytes);

	return size ? size : KB_TCM_ALIGN;
}

int kb__tcm_init(kb_tcm *t, uint64_t bytes)
{
	*t = (kb_tcm){ .bytes = bytes, .free_node = NIL, .root = NIL,
		       .rng = UINT64_C(0x9E3779B97F4A7C15) };
	if (bytes && insert(t, 0, bytes, 0)) {
		kb__tcm_fini(t);
		return -1;
	}
	return 0;
}

void kb__tcm_fini(kb_tcm *t)
{
	free(t->pool);
	t->pool = NULL;
	t->cap = 0;
	t->root = t->free_node = NIL;
	t->n = 0;
}

int kb__tcm_alloc(kb_tcm *t, uint64_t bytes, uint64_t *off, uint64_t *fence)
{
	uint64_t size = round_size(bytes);

	if (!try_alloc(t, size, off, fence))
		return 0;
	/* Fragmented: merge neighbours (taking the later fence) and retry. */
	coalesce(t);
	return try_alloc(t, size, off, fence);
}

/* Freed blocks are not merged with their upper neighbours here: merging
 * would give never-used memory the fence of the freed block and make its
 * next users wait for no reason. */
void kb__tcm_free(kb_tcm *t, uint64_t off, uint64_t bytes, uint64_t fence)
{
	uint64_t size = round_size(bytes);
	uint32_t x = t->root, p = NIL;

	t->used -= size;
	while (x != NIL) {   /* p: the last block below off */
		if (t->pool[x].off < off) {
			p = x;
			x = t->pool[x].right;
		} else {
			x = t->pool[x].left;
		}
	}
	if (p != NIL && end_of(&t->pool[p]) == off && t->pool[p].fence == fence) {
		set_block(&t->pool[p], t->pool[p].off, t->pool[p].size + size);
		refresh(t, t->root, t->pool[p].off);
		return;
	}
	if (insert(t, off, size, fence))
		t->leaked += size;   /* out of host memory: lose the block, stay correct */
}

uint64_t kb__tcm_largest_free(const kb_tcm *t)
{
	uint64_t m = 0;

	for (uint32_t x = leftmost(t); x != NIL; x = successor(t, t->pool[x].off))
		if (t->pool[x].size > m)
			m = t->pool[x].size;
	return m;
}

int kb__tcm_block(const kb_tcm *t, size_t i, uint64_t *off, uint64_t *size, uint64_t *fence)
{
	uint32_t x = leftmost(t);

	for (; x != NIL && i > 0; i--)
		x = successor(t, t->pool[x].off);
	if (x == NIL)
		return -1;
	*off = t->pool[x].off;
	*size = t->pool[x].size;
	*fence = t->pool[x].fence;
	return 0;
}
