/*
 * The TCM allocator (policy and structure in tcm.h): free blocks in sorted
 * leaves, a binary search over the leaves' last ends, and a max-tree over
 * the leaves' usable-size bounds for the searches that skip blocks.
 *
 * It replaced a treap (c8a1a11): on decode at S_kv = 262144 a run makes
 * 24,580 allocations and as many frees over ~10,000 free blocks, and every
 * one of them walked ~25 levels of scattered nodes two or three times. Here
 * the common case is two binary searches over contiguous arrays and a short
 * memmove inside one leaf.
 *
 * Decode's own case takes neither: its allocations come from the block at
 * the cursor and its frees go in just below it, at places the hints name,
 * and one leaf (the open one) keeps a gap there, so that a block that goes
 * or comes moves no others (a few cross the gap when it follows the
 * cursor). Without the gap, a decode run at S_kv = 262144 moved ~30 blocks
 * per allocation and per free once its cursor had wrapped into the blocks
 * its tiles had freed, where every allocation fits a block exactly.
 */
#include "tl/tcm.h"

#include <stdlib.h>
#include <string.h>

#define L KB_TCM_LEAF
#define NONE UINT32_MAX
#define NIL (&kb__tcm_nil)

kb_tcm_blk kb__tcm_nil = { UINT32_MAX, 0, 0 };
/* A block's end (its last byte is kept: an end of 2^32 fits 32 bits). */
#define END(b) ((uint64_t)(b).last + 1)
/* The steps of an allocation or a free, inlined into kb__tcm_alloc and
 * kb__tcm_free: as calls they were a third of the allocator's
 * instructions (prologues, and arguments through memory). */
#define HOT static inline __attribute__((always_inline))

/* A block's place: leaf k, index i in it (i == n only past the last block). */
typedef struct pos {
	uint32_t k, i;
} pos;

static uint64_t align_up(uint64_t x)
{
	return (x + KB_TCM_ALIGN - 1) / KB_TCM_ALIGN * KB_TCM_ALIGN;
}

/* What fits in [off, end): from the aligned start to the end. */
static uint64_t usable(uint64_t off, uint64_t end)
{
	uint64_t a = align_up(off);

	return end > a ? end - a : 0;
}

static uint64_t leaf_max(const kb_tcm_leaf *f)
{
	uint64_t m = 0;

	for (uint32_t i = 0; i < f->n; i++) {
		uint64_t u = usable(f->b[i].off, END(f->b[i]));

		if (u > m)
			m = u;
	}
	return m;
}

static void fix_hi(kb_tcm *t, uint32_t k)
{
	const kb_tcm_leaf *f = t->leaf[k];

	t->hi[k] = f->n ? END(f->b[f->n - 1]) : 0;
}

/* The max-tree above leaves k0..k1-1 (they moved: leaves came or went),
 * k0 < k1 <= cap. Past them the tree must be right already. */
static void seg_build_range(kb_tcm *t, uint32_t k0, uint32_t k1)
{
	uint32_t lo = t->cap + k0, hi = t->cap + k1 - 1;

	for (uint32_t k = k0; k < k1; k++)
		t->seg[t->cap + k] = k < t->m ? t->leaf[k]->bound : 0;
	for (lo >>= 1, hi >>= 1; lo; lo >>= 1, hi >>= 1)
		for (uint32_t i = lo; i <= hi; i++)
			t->seg[i] = t->seg[2 * i] > t->seg[2 * i + 1] ? t->seg[2 * i] : t->seg[2 * i + 1];
}

/* The whole tree above leaves k0.. */
static void seg_build(kb_tcm *t, uint32_t k0)
{
	seg_build_range(t, k0, t->cap);
}

/* After one leaf came in or went out at or after k0: leaves k0..m-1 moved,
 * and leaf m is empty if one went; those past it were empty and stay so. */
static void seg_shift(kb_tcm *t, uint32_t k0)
{
	seg_build_range(t, k0, t->m < t->cap ? t->m + 1 : t->cap);
}

/* A block of leaf k may now offer `u` bytes (its size will do: bounds
 * may be high). */
static inline void raise_bound(kb_tcm *t, uint32_t k, uint64_t u)
{
	if (u <= t->leaf[k]->bound)
		return;
	t->leaf[k]->bound = u;
	for (uint32_t i = t->cap + k; i && t->seg[i] < u; i >>= 1)
		t->seg[i] = u;
}

/* Leaf k's bound was found too high: make it exact, and the tree above. */
static void exact_bound(kb_tcm *t, uint32_t k)
{
	uint32_t i = t->cap + k;

	t->seg[i] = t->leaf[k]->bound = leaf_max(t->leaf[k]);
	for (i >>= 1; i; i >>= 1)
		t->seg[i] = t->seg[2 * i] > t->seg[2 * i + 1] ? t->seg[2 * i] : t->seg[2 * i + 1];
}

/* First leaf at or after k0 whose bound reaches `need`; NONE: none. */
static uint32_t seg_first(const kb_tcm *t, uint32_t k0, uint64_t need)
{
	uint32_t i = t->cap + k0;

	if (k0 >= t->m)
		return NONE;
	while (t->seg[i] < need) {
		while (i & 1)   /* a right child: its parent's range is done */
			i >>= 1;
		if (i == 0)
			return NONE;
		i++;            /* the subtree just to the right */
	}
	while (i < t->cap)
		i = t->seg[2 * i] >= need ? 2 * i : 2 * i + 1;
	return i - t->cap < t->m ? i - t->cap : NONE;
}

/* First index of a sorted a[0..n) holding more than x; n: none. No
 * branches to mispredict: the searches run on every allocation and free. */
static uint32_t first_above(const uint64_t *a, uint32_t n, uint64_t x)
{
	const uint64_t *b = a;

	if (n == 0)
		return 0;
	while (n > 1) {
		uint32_t half = n / 2;

		b += (size_t)(b[half - 1] <= x) * half;
		n -= half;
	}
	return (uint32_t)(b - a) + (*b <= x);
}

/* The same over the ends of a leaf's blocks a[0..n) (end <= x: last < x). */
static uint32_t first_end_above(const kb_tcm_blk *a, uint32_t n, uint64_t x)
{
	const kb_tcm_blk *b = a;

	if (n == 0)
		return 0;
	while (n > 1) {
		uint32_t half = n / 2;

		b += (size_t)(b[half - 1].last < x) * half;
		n -= half;
	}
	return (uint32_t)(b - a) + (b->last < x);
}

/* First block whose end lies above addr; past the last block when none. */
static pos find(const kb_tcm *t, uint64_t addr)
{
	uint32_t k = first_above(t->hi, t->m, addr);

	if (k == t->m)
		return (pos){ k - 1, t->leaf[k - 1]->n };
	return (pos){ k, first_end_above(t->leaf[k]->b, t->leaf[k]->n, addr) };
}

enum { AT_CURSOR, AT_FREE };

/* Whether block h is find's answer for addr: it ends above addr and the
 * block before it does not. */
HOT int answers(const kb_tcm *t, uint32_t k, uint32_t i, uint64_t addr)
{
	const kb_tcm_leaf *f;

	if (k >= t->m)
		return 0;
	f = t->leaf[k];
	return i < f->n && f->b[i].last >= addr &&
	       (i ? f->b[i - 1].last < addr : k == 0 || t->hi[k - 1] <= addr);
}

/* find, trying first the blocks the hints name, hint w first. */
HOT pos find_near(const kb_tcm *t, uint64_t addr, int w)
{
	if (answers(t, t->hint[w][0], t->hint[w][1], addr))
		return (pos){ t->hint[w][0], t->hint[w][1] };
	if (answers(t, t->hint[!w][0], t->hint[!w][1], addr))
		return (pos){ t->hint[!w][0], t->hint[!w][1] };
	return find(t, addr);
}

static void set_hint(kb_tcm *t, int w, pos p)
{
	t->hint[w][0] = p.k;
	t->hint[w][1] = p.i;
}

/* Keeps the hints on their blocks when a block comes (d = 1) or goes
 * (d = -1) at p. */
static void shift_hints(kb_tcm *t, pos p, int d)
{
	for (int w = 0; w < 2; w++)
		if (t->hint[w][0] == p.k && (d > 0 ? t->hint[w][1] >= p.i : t->hint[w][1] > p.i))
			t->hint[w][1] += (uint32_t)d;
}

static int before(pos a, pos b)
{
	return a.k < b.k || (a.k == b.k && a.i < b.i);
}

/* Room for one more leaf in the index. */
static int grow_index(kb_tcm *t)
{
	uint32_t cap = t->cap ? 2 * t->cap : 4;
	kb_tcm_leaf **leaf;
	uint64_t *hi, *seg;

	if (t->m < t->cap)
		return 0;
	if (cap <= t->cap)
		return -1;
	leaf = realloc(t->leaf, (size_t)cap * sizeof(*leaf));
	if (!leaf)
		return -1;
	t->leaf = leaf;
	hi = realloc(t->hi, (size_t)cap * sizeof(*hi));
	if (!hi)
		return -1;
	t->hi = hi;
	seg = malloc(2 * (size_t)cap * sizeof(*seg));
	if (!seg)
		return -1;
	free(t->seg);
	t->seg = seg;
	t->cap = cap;
	seg_build(t, 0);
	return 0;
}

/* Moves n blocks from src to dst (they may overlap). Decode moves none
 * or a few: a loop for those, not a memmove call. */
HOT void move_blocks(kb_tcm_blk *dst, const kb_tcm_blk *src, size_t n)
{
	if (n > 4) {
		memmove(dst, src, n * sizeof(*dst));
	} else if (dst > src) {
		while (n--)
			dst[n] = src[n];
	} else {
		for (size_t i = 0; i < n; i++)
			dst[i] = src[i];
	}
}

/* Closes the open leaf's gap: its blocks back at the start of b[]. */
static void close_gap(kb_tcm *t)
{
	kb_tcm_leaf *f;
	uint32_t s;

	if (t->gk == NONE)
		return;
	f = t->leaf[t->gk];
	s = f->n - f->g;
	move_blocks(&f->b[f->g], &f->b[L - s], s);
	t->cb = NIL;
	f->g = L;
	t->gk = NONE;
}

/* Makes leaf k the open leaf, its gap at its end. */
static __attribute__((noinline)) void open_leaf(kb_tcm *t, uint32_t k)
{
	close_gap(t);
	t->gk = k;
	t->leaf[k]->g = t->leaf[k]->n;
}

/* Opens leaf k's gap at block i (a fast path's insert or removal there):
 * the blocks between the old gap and i cross it. */
HOT kb_tcm_leaf *gap_at(kb_tcm *t, uint32_t k, uint32_t i)
{
	kb_tcm_leaf *f = t->leaf[k];
	uint32_t g, w = L - f->n;

	if (t->gk != k)
		open_leaf(t, k);
	g = f->g;
	if (i != g) {
		uint32_t h = t->hint[AT_CURSOR][1];

		if (i < g)
			move_blocks(&f->b[i + w], &f->b[i], g - i);
		else
			move_blocks(&f->b[g], &f->b[g + w], i - g);
		f->g = i;
		/* the cursor block may have crossed the gap */
		if (t->hint[AT_CURSOR][0] == k)
			t->cb = h < f->n ? &f->b[h + (h >= i ? w : 0)] : NIL;
	}
	return f;
}

/* Block i of leaf f where it lies, past the gap if the leaf is open. */
HOT kb_tcm_blk *blk(kb_tcm_leaf *f, uint32_t i)
{
	return &f->b[i + (i >= f->g ? L - f->n : 0)];
}

/* Puts leaf f at index k of the index (room already made). */
static void index_insert(kb_tcm *t, uint32_t k, kb_tcm_leaf *f)
{
	memmove(&t->leaf[k + 1], &t->leaf[k], (t->m - k) * sizeof(*t->leaf));
	memmove(&t->hi[k + 1], &t->hi[k], (t->m - k) * sizeof(*t->hi));
	t->leaf[k] = f;
	t->m++;
	fix_hi(t, k);
}

/* The largest usable size of blocks a[0..n). */
static uint64_t blocks_max(const kb_tcm_blk *a, uint32_t n)
{
	uint64_t m = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t u = usable(a[i].off, END(a[i]));

		if (u > m)
			m = u;
	}
	return m;
}

/* Moves the first s blocks of leaf k (0 < k, s <= room in leaf k - 1) to
 * the end of leaf k - 1; the hints follow their blocks. */
static void spill_left(kb_tcm *t, uint32_t k, uint32_t s)
{
	kb_tcm_leaf *e = t->leaf[k - 1], *f = t->leaf[k];
	uint32_t n0 = e->n;

	memcpy(&e->b[n0], f->b, s * sizeof(f->b[0]));
	memmove(f->b, &f->b[s], (f->n - s) * sizeof(f->b[0]));
	e->n += s;
	f->n -= s;
	fix_hi(t, k - 1);
	raise_bound(t, k - 1, blocks_max(&e->b[n0], s));
	for (int w = 0; w < 2; w++)
		if (t->hint[w][0] == k && t->hint[w][1] < s) {
			t->hint[w][0] = k - 1;
			t->hint[w][1] += n0;
		} else if (t->hint[w][0] == k) {
			t->hint[w][1] -= s;
		}
}

/* Moves the last s blocks of leaf k (k + 1 < m, s <= room in leaf k + 1)
 * to the start of leaf k + 1; the hints follow their blocks. */
static void spill_right(kb_tcm *t, uint32_t k, uint32_t s)
{
	kb_tcm_leaf *f = t->leaf[k], *r = t->leaf[k + 1];
	uint32_t from = f->n - s;

	memmove(&r->b[s], r->b, r->n * sizeof(r->b[0]));
	memcpy(r->b, &f->b[from], s * sizeof(f->b[0]));
	r->n += s;
	f->n = from;
	fix_hi(t, k);
	raise_bound(t, k + 1, blocks_max(r->b, s));
	for (int w = 0; w < 2; w++)
		if (t->hint[w][0] == k + 1) {
			t->hint[w][1] += s;
		} else if (t->hint[w][0] == k && t->hint[w][1] >= from) {
			t->hint[w][0] = k + 1;
			t->hint[w][1] -= from;
		}
}

/* Room for an insert at *p in the full leaf p->k; *p follows its place.
 * A neighbour with room takes blocks first (B+-tree style): decode frees
 * in ascending order a few blocks below a full leaf's end, and after its
 * cursor wraps, at the start of full leaves, so that halving leaves left
 * them half full for good (~310 leaves of 1.5 KB at S_kv = 262144, a page
 * fault each 2.6). Only when both neighbours are full does the leaf split,
 * at the insert's place: the part below it is not touched again by
 * ascending inserts. Out of line: rare, and inlined it made every insert
 * pay for its registers. */
static __attribute__((noinline)) int make_room(kb_tcm *t, pos *p)
{
	uint32_t k = p->k, h, room;
	kb_tcm_leaf *f = t->leaf[k], *r;

	close_gap(t);
	if (k > 0 && (room = L - t->leaf[k - 1]->n) > 0) {
		if (p->i == 0) {
			*p = (pos){ k - 1, t->leaf[k - 1]->n };
			return 0;
		}
		spill_left(t, k, room < p->i ? room : p->i);
		p->i -= room < p->i ? room : p->i;
		return 0;
	}
	if (k + 1 < t->m && (room = L - t->leaf[k + 1]->n) > 0) {
		if (p->i == L) {
			*p = (pos){ k + 1, 0 };
			return 0;
		}
		spill_right(t, k, room < L - p->i ? room : L - p->i);
		return 0;
	}
	h = p->i < 1 ? 1 : p->i > L - 1 ? L - 1 : p->i;
	if (grow_index(t) || !(r = malloc(sizeof(*r))))
		return -1;
	r->g = L;
	r->n = f->n - h;
	memcpy(r->b, f->b + h, r->n * sizeof(r->b[0]));
	f->n = h;
	/* Both halves keep the full leaf's bound: high is allowed (a search
	 * that finds nothing makes it exact), and most leaves are never
	 * searched again before their blocks change. */
	r->bound = f->bound;
	fix_hi(t, k);
	index_insert(t, k + 1, r);
	seg_shift(t, k);
	/* The hints follow their blocks: decode's next allocation and free
	 * are at the block at the cursor, often in the leaf's upper half. */
	for (int w = 0; w < 2; w++)
		if (t->hint[w][0] > k) {
			t->hint[w][0]++;
		} else if (t->hint[w][0] == k && t->hint[w][1] >= h) {
			t->hint[w][0]++;
			t->hint[w][1] -= h;
		}
	if (p->i >= h) {
		p->k++;
		p->i -= h;
	}
	return 0;
}

/* Inserts a block at *p; *p: where it ended up. */
HOT int insert_at(kb_tcm *t, pos *pp, uint64_t off, uint64_t end, uint64_t fence)
{
	kb_tcm_leaf *f;
	size_t tail;
	pos p;

	/* Room for one more block in its leaf (blocks move, also when
	 * that fails). */
	if (t->leaf[pp->k]->n == L && make_room(t, pp)) {
		t->cb = NIL;
		return -1;
	}
	p = *pp;
	shift_hints(t, p, 1);
	f = t->leaf[p.k];
	tail = f->n - p.i;
	move_blocks(&f->b[p.i + 1], &f->b[p.i], tail);
	f->b[p.i] = (kb_tcm_blk){ (uint32_t)off, (uint32_t)(end - 1), fence };
	f->n++;
	t->n++;
	if (p.i + 1 == f->n)
		t->hi[p.k] = end;
	raise_bound(t, p.k, usable(off, end));
	t->cb = NIL;
	return 0;
}

static void remove_at(kb_tcm *t, pos p)
{
	kb_tcm_leaf *f = t->leaf[p.k];
	size_t tail = f->n - p.i - 1;

	move_blocks(&f->b[p.i], &f->b[p.i + 1], tail);
	f->n--;
	t->n--;
	shift_hints(t, p, -1);
	t->cb = NIL;
	if (f->n || t->m == 1) {
		fix_hi(t, p.k);
		return;
	}
	/* An empty leaf goes (a lone one stays, so find always has a leaf). */
	free(f);
	t->m--;
	memmove(&t->leaf[p.k], &t->leaf[p.k + 1], (t->m - p.k) * sizeof(*t->leaf));
	memmove(&t->hi[p.k], &t->hi[p.k + 1], (t->m - p.k) * sizeof(*t->hi));
	seg_shift(t, p.k);
}

/* The block after p (p inside a leaf); p.i == n of the last leaf: none. */
static pos next_pos(const kb_tcm *t, pos p)
{
	if (++p.i == t->leaf[p.k]->n && p.k + 1 < t->m)
		return (pos){ p.k + 1, 0 };
	return p;
}

/* First block at or after p where `need` bytes fit. */
static int fit_from(kb_tcm *t, pos p, uint64_t need, pos *out)
{
	for (;;) {
		const kb_tcm_leaf *f = t->leaf[p.k];

		if (p.i < f->n && f->bound >= need) {
			for (uint32_t i = p.i; i < f->n; i++)
				if (usable(f->b[i].off, END(f->b[i])) >= need) {
					*out = (pos){ p.k, i };
					return 0;
				}
			exact_bound(t, p.k);
		}
		p.k = seg_first(t, p.k + 1, need);
		if (p.k == NONE)
			return -1;
		p.i = 0;
	}
}

/* Takes [base, base + size) out of block p. */
HOT int take(kb_tcm *t, pos p, uint64_t base, uint64_t size, uint64_t *off, uint64_t *fence)
{
	kb_tcm_leaf *f = t->leaf[p.k];
	uint64_t s_off = f->b[p.i].off, s_end = END(f->b[p.i]), fc = f->b[p.i].fence;

	if (base > s_off) {
		/* Split: the part before stays free, the part after (if any) is a
		 * new block. Its bound stays: bounds may be high. */
		f->b[p.i].last = (uint32_t)(base - 1);
		if (p.i + 1 == f->n)
			t->hi[p.k] = base;
		p.i++;
		if (s_end > base + size && insert_at(t, &p, base + size, s_end, fc)) {
			f->b[p.i - 1].last = (uint32_t)(s_end - 1);
			fix_hi(t, p.k);
			return -1;
		}
	} else if (base + size == s_end) {
		remove_at(t, p);
	} else {
		f->b[p.i].off = (uint32_t)(base + size);
	}
	set_hint(t, AT_CURSOR, p);
	t->cb = NIL;
	*off = base;
	*fence = fc;
	t->cursor = base + size;
	t->used += size;
	return 0;
}

HOT int try_alloc(kb_tcm *t, uint64_t size, uint64_t *off, uint64_t *fence)
{
	pos s = find_near(t, t->cursor, AT_CURSOR), x;
	const kb_tcm_leaf *f = t->leaf[s.k];

	if (s.i < f->n) {
		uint64_t o = f->b[s.i].off, base = align_up(o < t->cursor ? t->cursor : o);

		if (base + size <= END(f->b[s.i]))
			return take(t, s, base, size, off, fence);
		/* Up from the cursor's block, then wrap to below it. */
		if (fit_from(t, next_pos(t, s), size, &x) &&
		    (fit_from(t, (pos){ 0, 0 }, size, &x) || !before(x, s)))
			return -1;
	} else if (fit_from(t, (pos){ 0, 0 }, size, &x)) {
		return -1;
	}
	f = t->leaf[x.k];
	return take(t, x, align_up(f->b[x.i].off), size, off, fence);
}

/* Merges every run of adjacent free blocks (fence: the latest of them), in
 * place: the blocks written never pass the ones still to read. */
static void coalesce(kb_tcm *t)
{
	pos w = { 0, 0 };
	int have = 0;

	for (uint32_t k = 0; k < t->m; k++) {
		kb_tcm_leaf *f = t->leaf[k];

		for (uint32_t i = 0; i < f->n; i++) {
			kb_tcm_leaf *o = t->leaf[w.k];
			uint64_t b_off = f->b[i].off, b_end = END(f->b[i]), b_fence = f->b[i].fence;

			if (have && END(o->b[w.i]) == b_off) {
				o->b[w.i].last = (uint32_t)(b_end - 1);
				if (b_fence > o->b[w.i].fence)
					o->b[w.i].fence = b_fence;
				t->n--;
				continue;
			}
			if (have && ++w.i == o->n) {
				w.k++;
				w.i = 0;
				o = t->leaf[w.k];
			}
			o->b[w.i].off = (uint32_t)b_off;
			o->b[w.i].last = (uint32_t)(b_end - 1);
			o->b[w.i].fence = b_fence;
			have = 1;
		}
	}
	t->cb = NIL;
	if (!have)
		return;
	t->leaf[w.k]->n = w.i + 1;
	for (uint32_t k = w.k + 1; k < t->m; k++)
		free(t->leaf[k]);
	t->m = w.k + 1;
	for (uint32_t k = 0; k < t->m; k++) {
		t->leaf[k]->bound = leaf_max(t->leaf[k]);
		fix_hi(t, k);
	}
	seg_build(t, 0);
}

static uint64_t round_size(uint64_t bytes)
{
	return kb__tcm_round(bytes);
}

int kb__tcm_init(kb_tcm *t, uint64_t bytes)
{
	kb_tcm_leaf *f;

	*t = (kb_tcm){ .bytes = bytes, .gk = NONE, .cb = NIL };
	if (bytes > (uint64_t)UINT32_MAX + 1)
		return -1;   /* blocks keep 32-bit offsets */
	if (grow_index(t) || !(f = calloc(1, sizeof(*f)))) {
		kb__tcm_fini(t);
		return -1;
	}
	f->g = L;
	index_insert(t, 0, f);
	if (bytes && insert_at(t, &(pos){ 0, 0 }, 0, bytes, 0)) {
		kb__tcm_fini(t);
		return -1;
	}
	return 0;
}

void kb__tcm_fini(kb_tcm *t)
{
	for (uint32_t k = 0; k < t->m; k++)
		free(t->leaf[k]);
	free(t->leaf);
	free(t->hi);
	free(t->seg);
	t->leaf = NULL;
	t->hi = t->seg = NULL;
	t->m = t->cap = 0;
	t->n = 0;
	t->cb = NIL;
}

/* Fragmented: merge neighbours (taking the later fence) and retry. Out
 * of line, so that the first try inlines into kb__tcm_alloc alone. */
static __attribute__((noinline)) int alloc_retry(kb_tcm *t, uint64_t size, uint64_t *off,
						 uint64_t *fence)
{
	coalesce(t);
	return try_alloc(t, size, off, fence);
}

/* kb__tcm_alloc past its fast path. */
static __attribute__((noinline)) int alloc_slow(kb_tcm *t, uint64_t size, uint64_t *off,
						uint64_t *fence)
{
	close_gap(t);
	if (!try_alloc(t, size, off, fence))
		return 0;
	return alloc_retry(t, size, off, fence);
}

/* take's removal of the block at (k, i), which fits the request exactly,
 * in a leaf that keeps a block: at the open gap, which grows. Removals
 * keep the bound (bounds may be high). The hints name (k, i) already.
 * kb__tcm_alloc_inline does it where the gap is there already. */
static int take_whole(kb_tcm *t, uint32_t k, uint32_t i, uint64_t *off, uint64_t *fence)
{
	kb_tcm_leaf *f = gap_at(t, k, i);
	const kb_tcm_blk *b = &f->b[i + L - f->n];

	*off = b->off;
	*fence = b->fence;
	t->cursor = END(*b);
	t->used += END(*b) - b->off;
	f->n--;
	t->n--;
	t->cb = NIL;
	if (i == f->n)   /* the last block went: the one before is the last */
		t->hi[k] = END(f->b[i - 1]);
	return 0;
}

int kb__tcm_alloc_rest(kb_tcm *t, uint64_t size, uint64_t *off, uint64_t *fence)
{
	uint32_t k = t->hint[AT_CURSOR][0], i = t->hint[AT_CURSOR][1];
	kb_tcm_leaf *f;

	/* kb__tcm_alloc_inline's cases, and the exact fit with the gap
	 * elsewhere: decode's first allocation of a tile once it wraps */
	if (k < t->m && i < (f = t->leaf[k])->n) {
		kb_tcm_blk *b = blk(f, i);
		uint64_t o = b->off, e = o + size;

		if (o == t->cursor) {
			t->hint[AT_FREE][0] = k;
			t->hint[AT_FREE][1] = i;
			if (e <= b->last) {
				*off = o;
				*fence = b->fence;
				b->off = (uint32_t)e;
				t->cb = b;
				t->cursor = e;
				t->used += size;
				return 0;
			}
			if (e - 1 == b->last && f->n > 1)
				return take_whole(t, k, i, off, fence);
		}
	}
	return alloc_slow(t, size, off, fence);
}

int kb__tcm_alloc(kb_tcm *t, uint64_t bytes, uint64_t *off, uint64_t *fence)
{
	return kb__tcm_alloc_inline(t, bytes, off, fence);
}

/* Freed blocks are not merged with their upper neighbours here: merging
 * would give never-used memory the fence of the freed block and make its
 * next users wait for no reason. */
static __attribute__((noinline)) void free_slow(kb_tcm *t, uint64_t off, uint64_t size,
						uint64_t fence)
{
	pos p, q;   /* q: the last block below off, if any */
	kb_tcm_leaf *f;

	close_gap(t);
	p = q = find_near(t, off, AT_FREE);
	if (q.i > 0)
		q.i--;
	else if (q.k > 0)
		q = (pos){ q.k - 1, t->leaf[q.k - 1]->n - 1 };
	else
		q.k = NONE;
	if (q.k != NONE) {
		f = t->leaf[q.k];
		if (END(f->b[q.i]) == off && f->b[q.i].fence == fence) {
			f->b[q.i].last += (uint32_t)size;
			if (q.i + 1 == f->n)
				t->hi[q.k] = END(f->b[q.i]);
			raise_bound(t, q.k, usable(f->b[q.i].off, END(f->b[q.i])));
			set_hint(t, AT_FREE, q);
			return;
		}
	}
	if (insert_at(t, &p, off, off + size, fence))
		t->leaked += size;   /* out of host memory: lose the block, stay correct */
	else
		set_hint(t, AT_FREE, p);
}

/* The fast free's insert of [off, off + size) as block i of leaf k, at
 * the open gap: the block goes in the gap's last slot, so that the next
 * free, just below, goes in at i again. */
HOT void put_block(kb_tcm *t, uint32_t k, uint32_t i, uint64_t off, uint64_t size, uint64_t fence)
{
	kb_tcm_leaf *f = gap_at(t, k, i);

	f->b[i + L - f->n - 1] = (kb_tcm_blk){ (uint32_t)off, (uint32_t)(off + size - 1), fence };
	f->n++;
	t->n++;
	if (t->hint[AT_CURSOR][0] == k && t->hint[AT_CURSOR][1] >= i)
		t->hint[AT_CURSOR][1]++;
	t->hint[AT_FREE][1] = i;
	raise_bound(t, k, size);
}

/* kb__tcm_free's fast path when the hint names the first block of leaf k
 * (0 < k < m), as it does for the frees of a tile whose blocks lay at the
 * start of a leaf: the block below off is the last of leaf k - 1. The new
 * block goes in at the start of leaf k, through its gap (at the end of
 * leaf k - 1 instead, the leaves drained and filled up: a split and a
 * leaf dropped every ~60 frees, twice the instructions). -1: not this
 * case. */
static __attribute__((noinline)) int free_first(kb_tcm *t, uint32_t k, uint64_t off, uint64_t size,
						uint64_t fence)
{
	kb_tcm_leaf *f = t->leaf[k], *e = t->leaf[k - 1];
	kb_tcm_blk *q = blk(e, e->n - 1);

	if (!f->n || blk(f, 0)->last < off || q->last >= off)
		return -1;
	if ((uint64_t)q->last + 1 == off && q->fence == fence) {
		q->last += (uint32_t)size;
		t->hi[k - 1] = END(*q);
		raise_bound(t, k - 1, END(*q) - q->off);
		t->hint[AT_FREE][0] = k - 1;
		t->hint[AT_FREE][1] = e->n - 1;
		return 0;
	}
	if (f->n == L)
		return -1;
	put_block(t, k, 0, off, size, fence);
	return 0;
}

HOT void free_one(kb_tcm *t, uint64_t off, uint64_t bytes, uint64_t fence)
{
	uint64_t size = round_size(bytes);
	uint32_t k = t->hint[AT_FREE][0], i = t->hint[AT_FREE][1];

	t->used -= size;
	/* Decode's case, free_slow's in short: scopes free top down, so the
	 * block above the last one freed (the hint) is find's answer; the
	 * block below off is in the same leaf, and that leaf has room. */
	if (i > 0 && k < t->m && i < t->leaf[k]->n && t->leaf[k]->n < L) {
		kb_tcm_blk *q = blk(t->leaf[k], i - 1);

		if (blk(t->leaf[k], i)->last >= off && q->last < off) {
			if ((uint64_t)q->last + 1 == off && q->fence == fence) {
				q->last += (uint32_t)size;
				raise_bound(t, k, END(*q) - q->off);
				t->hint[AT_FREE][1] = i - 1;
			} else {
				put_block(t, k, i, off, size, fence);
			}
			return;
		}
	}
	if (i == 0 && k - 1 < t->m - 1 && !free_first(t, k, off, size, fence))
		return;
	free_slow(t, off, size, fence);
}

void kb__tcm_free(kb_tcm *t, uint64_t off, uint64_t bytes, uint64_t fence)
{
	free_one(t, off, bytes, fence);
}

/* Whether a free at off goes in between block i - 1 (its last byte low,
 * its fence low_fence) and block i, last the last byte below which it
 * must lie, without merging into block i - 1 (free_run). */
HOT int run_fits(uint64_t off, uint64_t low, uint64_t low_fence, uint64_t last, uint64_t fence)
{
	return off > low && off <= last && !(off == low + 1 && low_fence == fence);
}

/*
 * The frees of s[0..n) that go in at the place the hint names, as
 * free_one's fast path puts them (block i of leaf k above them, block
 * i - 1 below, none merging), with what they share (leaf, gap, hints,
 * bound, counts) updated once for the run: ~20 instructions a block,
 * not ~90 (issue 13). They go in below block i at the gap's low side,
 * in address order, so that the gap ends up under block i, the cursor's
 * block in decode: the next scope's frees and, once the cursor has
 * wrapped, its allocations come there, where the gap already is. Put
 * at the gap's high side, as put_block does a single free, a decode
 * tile moved the gap across its last scope's blocks at its first free
 * (a memmove a tile). Returns how many it freed; free_one takes the next
 * (a merge, a full leaf, another place).
 */
static size_t free_run(kb_tcm *t, const kb_tcm_span *s, size_t n, uint64_t fence)
{
	uint32_t k = t->hint[AT_FREE][0], i = t->hint[AT_FREE][1];
	kb_tcm_leaf *f;
	kb_tcm_blk *top;
	uint64_t low, low_fence, last, freed = 0, most = 0;
	size_t j, m;

	if (i == 0 || k >= t->m || i >= (f = t->leaf[k])->n)
		return 0;
	low = blk(f, i - 1)->last;    /* blocks go in above it... */
	low_fence = blk(f, i - 1)->fence;
	last = blk(f, i)->last;       /* ...and below block i, the last one in */
	m = n < L - f->n ? n : L - f->n;
	if (!m || !run_fits(s[0].off, low, low_fence, last, fence))
		return 0;
	/* At most m go, the gap's low side from block i up: written from
	 * the top of those m down, in the one pass that checks them, and
	 * moved down to block i in the rare case fewer go. */
	f = gap_at(t, k, i);
	top = &f->b[i + m];
	for (j = 0; j < m && run_fits(s[j].off, low, low_fence, last, fence); j++) {
		uint64_t size = round_size(s[j].bytes);

		last = s[j].off + size - 1;
		*--top = (kb_tcm_blk){ (uint32_t)s[j].off, (uint32_t)last, fence };
		freed += size;
		most = size > most ? size : most;
	}
	if (j < m)
		move_blocks(&f->b[i], top, j);
	f->g = i + (uint32_t)j;
	f->n += (uint32_t)j;
	t->n += j;
	t->used -= freed;
	if (t->hint[AT_CURSOR][0] == k && t->hint[AT_CURSOR][1] >= i)
		t->hint[AT_CURSOR][1] += (uint32_t)j;
	raise_bound(t, k, most);
	return j;
}

void kb__tcm_free_n(kb_tcm *t, const kb_tcm_span *s, size_t n, uint64_t fence)
{
	for (size_t j = 0; j < n;) {
		size_t r = free_run(t, s + j, n - j, fence);

		if (!r) {
			free_one(t, s[j].off, s[j].bytes, fence);
			r = 1;
		}
		j += r;
	}
}

uint64_t kb__tcm_largest_free(const kb_tcm *t)
{
	uint64_t m = 0;

	for (uint32_t k = 0; k < t->m; k++)
		for (uint32_t i = 0; i < t->leaf[k]->n; i++) {
			const kb_tcm_blk *b = blk(t->leaf[k], i);

			if (END(*b) - b->off > m)
				m = END(*b) - b->off;
		}
	return m;
}

int kb__tcm_check(const kb_tcm *t)
{
	uint64_t last = 0;
	size_t n = 0;

	if (!t->m || t->m > t->cap || (t->gk != NONE && t->gk >= t->m))
		return -1;
	for (uint32_t k = 0; k < t->m; k++) {
		kb_tcm_leaf *f = t->leaf[k];
		uint64_t most = 0;

		if (f->n > L || (!f->n && t->m > 1) || (k == t->gk ? f->g > f->n : f->g != L))
			return -1;
		for (uint32_t i = 0; i < f->n; i++) {
			const kb_tcm_blk *b = blk(f, i);

			if (b->off >= END(*b) || (n && b->off < last))
				return -1;
			last = END(*b);
			n++;
			if (usable(b->off, END(*b)) > most)
				most = usable(b->off, END(*b));
		}
		if (t->hi[k] != (f->n ? last : 0) || f->bound < most || t->seg[t->cap + k] < most)
			return -1;
	}
	for (uint32_t i = 1; i < t->cap; i++)
		if (t->seg[i] < t->seg[2 * i] || t->seg[i] < t->seg[2 * i + 1])
			return -1;
	/* the cursor block's place, where it is known */
	if (t->cb != NIL && (t->hint[AT_CURSOR][0] >= t->m ||
			     t->hint[AT_CURSOR][1] >= t->leaf[t->hint[AT_CURSOR][0]]->n ||
			     t->cb != blk(t->leaf[t->hint[AT_CURSOR][0]], t->hint[AT_CURSOR][1])))
		return -1;
	return n == t->n ? 0 : -1;
}

int kb__tcm_block(const kb_tcm *t, size_t i, uint64_t *off, uint64_t *size, uint64_t *fence)
{
	for (uint32_t k = 0; k < t->m; k++) {
		const kb_tcm_leaf *f = t->leaf[k];

		if (i >= f->n) {
			i -= f->n;
			continue;
		}
		const kb_tcm_blk *b = blk(t->leaf[k], (uint32_t)i);

		*off = b->off;
		*size = END(*b) - b->off;
		*fence = b->fence;
		return 0;
	}
	return -1;
}
