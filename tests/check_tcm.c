/*
 * The TCM allocator (src/tl/tcm.c): next fit with wrap-around, fences,
 * fragmentation and exhaustion, and long random runs checked block by
 * block against a plain sorted-array model of the same policy (the
 * allocator before the treap and the leaves), so every address decision
 * is the same.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "tl/tcm.h"

#define A KB_TCM_ALIGN
/* The random runs span as many leaves whatever their size (they were
 * made for leaves of 64 blocks): TCMs, runs and large requests F times
 * as large. */
#define F ((int)(KB_TCM_LEAF / 64))

/* ---- the reference model: a sorted array, linear scans ---- */

typedef struct ref_seg {
	uint64_t off, size, fence;
} ref_seg;

typedef struct ref_tcm {
	ref_seg s[4096];
	size_t n;
	uint64_t cursor;
} ref_tcm;

static void ref_insert(ref_tcm *r, size_t at, uint64_t off, uint64_t size, uint64_t fence)
{
	ck_assert_uint_lt(r->n, 4096);
	memmove(&r->s[at + 1], &r->s[at], (r->n - at) * sizeof(r->s[0]));
	r->s[at] = (ref_seg){ off, size, fence };
	r->n++;
}

static void ref_remove(ref_tcm *r, size_t at)
{
	memmove(&r->s[at], &r->s[at + 1], (r->n - at - 1) * sizeof(r->s[0]));
	r->n--;
}

static uint64_t ref_round(uint64_t b)
{
	uint64_t s = (b + A - 1) / A * A;

	return s ? s : A;
}

static int ref_try(ref_tcm *r, uint64_t size, uint64_t *off, uint64_t *fence)
{
	size_t start = 0;

	while (start < r->n && r->s[start].off + r->s[start].size <= r->cursor)
		start++;
	for (size_t k = 0; k < r->n; k++) {
		size_t i = (start + k) % r->n;
		ref_seg *s = &r->s[i];
		uint64_t base = (i == start && s->off < r->cursor) ? r->cursor : s->off;

		base = (base + A - 1) / A * A;
		if (base + size > s->off + s->size)
			continue;
		*off = base;
		*fence = s->fence;
		if (base > s->off) {
			uint64_t tail_off = base + size, tail = s->off + s->size - tail_off, f = s->fence;

			s->size = base - s->off;
			if (tail)
				ref_insert(r, i + 1, tail_off, tail, f);
		} else if (size == s->size) {
			ref_remove(r, i);
		} else {
			s->off += size;
			s->size -= size;
		}
		r->cursor = base + size;
		return 0;
	}
	return -1;
}

static int ref_alloc(ref_tcm *r, uint64_t bytes, uint64_t *off, uint64_t *fence)
{
	uint64_t size = ref_round(bytes);

	if (!ref_try(r, size, off, fence))
		return 0;
	for (size_t i = 0; i + 1 < r->n;) {
		ref_seg *a = &r->s[i], *b = &r->s[i + 1];

		if (a->off + a->size != b->off) {
			i++;
			continue;
		}
		a->size += b->size;
		if (b->fence > a->fence)
			a->fence = b->fence;
		ref_remove(r, i + 1);
	}
	return ref_try(r, size, off, fence);
}

static void ref_free(ref_tcm *r, uint64_t off, uint64_t bytes, uint64_t fence)
{
	uint64_t size = ref_round(bytes);
	size_t i = 0;

	while (i < r->n && r->s[i].off + r->s[i].size <= off)
		i++;
	if (i > 0 && r->s[i - 1].off + r->s[i - 1].size == off && r->s[i - 1].fence == fence) {
		r->s[i - 1].size += size;
		return;
	}
	ref_insert(r, i, off, size, fence);
}

/* ---- helpers ---- */

/* A block a test holds: where kb__tcm_alloc put it, what it asked for. */
struct held {
	uint64_t off, bytes;
};

static uint64_t must_alloc(kb_tcm *t, uint64_t bytes, uint64_t *fence)
{
	uint64_t off = UINT64_MAX, f = UINT64_MAX;

	ck_assert_int_eq(kb__tcm_alloc(t, bytes, &off, &f), 0);
	if (fence)
		*fence = f;
	return off;
}

static void assert_blocks(const kb_tcm *t, size_t n, const uint64_t (*want)[3])
{
	uint64_t off, size, fence;

	ck_assert_uint_eq(t->n, n);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(kb__tcm_block(t, i, &off, &size, &fence), 0);
		ck_assert_uint_eq(off, want[i][0]);
		ck_assert_uint_eq(size, want[i][1]);
		ck_assert_uint_eq(fence, want[i][2]);
	}
	ck_assert_int_eq(kb__tcm_block(t, n, &off, &size, &fence), -1);
}

/* kb__tcm_free_n of held[n - 1], ..., held[0] (a scope's blocks, newest
 * first), in calls of 4 to 7 blocks (by the fence): one call or a few. */
static void free_top_down(kb_tcm *t, const struct held *held, size_t n, uint64_t fence)
{
	kb_tcm_span s[64];
	size_t most = 4 + fence % 4;

	ck_assert_uint_le(n, 64);
	for (size_t j = 0; j < n; j++)
		s[j] = (kb_tcm_span){ held[n - 1 - j].off, held[n - 1 - j].bytes };
	for (size_t j = 0; j < n; j += most)
		kb__tcm_free_n(t, s + j, n - j < most ? n - j : most, fence);
}

/* ---- tests ---- */

START_TEST(test_tcm_next_fit_wrap)
{
	kb_tcm t;
	uint64_t f;

	ck_assert_int_eq(kb__tcm_init(&t, 4 * 1024), 0);
	ck_assert_uint_eq(must_alloc(&t, 1000, NULL), 0);   /* rounds to 1024 */
	ck_assert_uint_eq(t.used, 1024);
	kb__tcm_free(&t, 0, 1000, 3);
	/* next fit: the freed block is not reused while memory lies above */
	ck_assert_uint_eq(must_alloc(&t, 1024, &f), 1024);
	ck_assert_uint_eq(f, 0);
	ck_assert_uint_eq(must_alloc(&t, 1024, NULL), 2048);
	ck_assert_uint_eq(must_alloc(&t, 1024, NULL), 3072);
	/* the cursor is past every free block: wrap to address 0 */
	ck_assert_uint_eq(must_alloc(&t, 1024, &f), 0);
	ck_assert_uint_eq(f, 3);
	ck_assert_uint_eq(t.n, 0);
	kb__tcm_fini(&t);
}
END_TEST

START_TEST(test_tcm_cursor_block_lower_part)
{
	/* The block holding the cursor is searched from the cursor up; its
	 * part below the cursor is not looked at again, even on wrap. */
	kb_tcm t;
	uint64_t off;
	uint64_t f;

	ck_assert_int_eq(kb__tcm_init(&t, 8 * A), 0);
	ck_assert_uint_eq(must_alloc(&t, 2 * A, NULL), 0);
	ck_assert_uint_eq(must_alloc(&t, 2 * A, NULL), 2 * A);
	kb__tcm_free(&t, 0, 2 * A, 1);
	kb__tcm_free(&t, 2 * A, 2 * A, 1);  /* same fence: merges below */
	{
		static const uint64_t want[][3] = { { 0, 4 * A, 1 }, { 4 * A, 4 * A, 0 } };

		assert_blocks(&t, 2, want);
	}
	/* cursor at 4A inside [4A, 8A): 4A fits there */
	ck_assert_uint_eq(must_alloc(&t, 3 * A, &f), 4 * A);
	ck_assert_uint_eq(f, 0);
	/* cursor 7A, block [7A,8A) too small; wrap finds [0,4A) */
	ck_assert_uint_eq(must_alloc(&t, 3 * A, &f), 0);
	ck_assert_uint_eq(f, 1);
	/* cursor 3A lies in [3A,4A); nothing else fits 2A: exhausted even
	 * after merging ([3A,4A) and [7A,8A) are not adjacent) */
	ck_assert_int_eq(kb__tcm_alloc(&t, 2 * A, &off, &f), -1);
	ck_assert_uint_eq(t.used, 6 * A);
	kb__tcm_fini(&t);
}
END_TEST

START_TEST(test_tcm_fences)
{
	kb_tcm t;
	uint64_t f;

	ck_assert_int_eq(kb__tcm_init(&t, 16 * A), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(must_alloc(&t, A, NULL), (uint64_t)i * A);
	/* freed in order with one fence: one block */
	kb__tcm_free(&t, 0, A, 5);
	kb__tcm_free(&t, A, A, 5);
	/* a different fence starts a new block; never-used memory keeps fence 0 */
	kb__tcm_free(&t, 2 * A, A, 7);
	{
		static const uint64_t want[][3] = {
			{ 0, 2 * A, 5 }, { 2 * A, A, 7 }, { 4 * A, 12 * A, 0 } };

		assert_blocks(&t, 3, want);
	}
	/* freeing below a block never merges upwards */
	kb__tcm_free(&t, 3 * A, A, 7);
	{
		static const uint64_t want[][3] = {
			{ 0, 2 * A, 5 }, { 2 * A, 2 * A, 7 }, { 4 * A, 12 * A, 0 } };

		assert_blocks(&t, 3, want);
	}
	/* fill the top; then a request of 4A only fits after merging: the
	 * merged block takes the latest fence */
	ck_assert_uint_eq(must_alloc(&t, 12 * A, &f), 4 * A);
	ck_assert_uint_eq(f, 0);
	ck_assert_uint_eq(must_alloc(&t, 4 * A, &f), 0);
	ck_assert_uint_eq(f, 7);
	ck_assert_uint_eq(t.n, 0);
	kb__tcm_fini(&t);
}
END_TEST

START_TEST(test_tcm_fragmentation_exhaustion)
{
	kb_tcm t;
	uint64_t off, f;

	ck_assert_int_eq(kb__tcm_init(&t, 64 * A), 0);
	for (int i = 0; i < 64; i++)
		ck_assert_uint_eq(must_alloc(&t, A, NULL), (uint64_t)i * A);
	ck_assert_int_eq(kb__tcm_alloc(&t, 1, &off, &f), -1);
	/* every other unit free: 32 units free, none two long */
	for (int i = 0; i < 64; i += 2)
		kb__tcm_free(&t, (uint64_t)i * A, A, (uint64_t)i);
	ck_assert_uint_eq(t.n, 32);
	ck_assert_uint_eq(t.used, 32 * A);
	ck_assert_uint_eq(kb__tcm_largest_free(&t), A);
	ck_assert_int_eq(kb__tcm_alloc(&t, 2 * A, &off, &f), -1);
	ck_assert_uint_eq(t.n, 32);
	/* one unit still fits, at the next free unit after the cursor (wrap) */
	ck_assert_uint_eq(must_alloc(&t, A, &f), 0);
	ck_assert_uint_eq(f, 0);
	ck_assert_uint_eq(must_alloc(&t, A, &f), 2 * A);
	ck_assert_uint_eq(f, 2);
	/* free two neighbours: the request fits after merging them */
	kb__tcm_free(&t, 9 * A, A, 100);
	ck_assert_uint_eq(must_alloc(&t, 2 * A, &f), 8 * A);
	ck_assert_uint_eq(f, 100);
	/* empty TCM: nothing fits */
	kb__tcm_fini(&t);
	ck_assert_int_eq(kb__tcm_init(&t, 0), 0);
	ck_assert_int_eq(kb__tcm_alloc(&t, 1, &off, &f), -1);
	kb__tcm_fini(&t);
}
END_TEST

START_TEST(test_tcm_unaligned_end)
{
	/* A capacity that is not a multiple of the unit: the last block is
	 * shorter, and a request fits only if it fits whole. */
	kb_tcm t;
	uint64_t off, f;

	ck_assert_int_eq(kb__tcm_init(&t, 3 * A + 10), 0);
	ck_assert_uint_eq(must_alloc(&t, 3 * A, NULL), 0);
	ck_assert_uint_eq(kb__tcm_largest_free(&t), 10);
	ck_assert_int_eq(kb__tcm_alloc(&t, 1, &off, &f), -1);
	kb__tcm_fini(&t);
}
END_TEST

/* Blocks keep 32-bit offsets and their last byte: a TCM of 2^32 bytes
 * (memory.tcm_bytes' limit) works up to its top; a larger one is refused. */
START_TEST(test_tcm_4g)
{
	const uint64_t G4 = (uint64_t)1 << 32;
	kb_tcm t;
	uint64_t off, size, f;

	ck_assert_int_eq(kb__tcm_init(&t, G4 + 1), -1);
	ck_assert_int_eq(kb__tcm_init(&t, G4), 0);
	ck_assert_uint_eq(kb__tcm_largest_free(&t), G4);
	ck_assert_uint_eq(must_alloc(&t, G4 - 2 * A, NULL), 0);
	ck_assert_uint_eq(must_alloc(&t, A, NULL), G4 - 2 * A);
	ck_assert_uint_eq(kb__tcm_largest_free(&t), A);
	ck_assert_uint_eq(must_alloc(&t, A, NULL), G4 - A);
	ck_assert_int_eq(kb__tcm_alloc(&t, 1, &off, &f), -1);
	kb__tcm_free(&t, G4 - A, A, 7);
	kb__tcm_free(&t, G4 - 2 * A, A, 7);   /* a free merges only downwards: two blocks */
	ck_assert_int_eq(kb__tcm_check(&t), 0);
	ck_assert_int_eq(kb__tcm_block(&t, 0, &off, &size, &f), 0);
	ck_assert_uint_eq(off, G4 - 2 * A);
	ck_assert_uint_eq(size, A);
	ck_assert_int_eq(kb__tcm_block(&t, 1, &off, &size, &f), 0);
	ck_assert_uint_eq(off, G4 - A);
	ck_assert_uint_eq(size, A);
	ck_assert_uint_eq(f, 7);
	kb__tcm_free(&t, 0, G4 - 2 * A, 7);
	ck_assert_int_eq(kb__tcm_check(&t), 0);
	/* the cursor is at the top: the search wraps to 0 */
	ck_assert_uint_eq(must_alloc(&t, G4 - 2 * A, NULL), 0);
	ck_assert_uint_eq(must_alloc(&t, A, NULL), G4 - 2 * A);
	ck_assert_uint_eq(must_alloc(&t, A, NULL), G4 - A);
	kb__tcm_fini(&t);
}
END_TEST

/* A long random run, every decision compared with the reference model. */
START_TEST(test_tcm_matches_reference)
{
	static ref_tcm r;
	kb_tcm t;
	struct {
		uint64_t off, bytes;
	} live[512];
	size_t n_live = 0;
	uint64_t rng = 12345 + (uint64_t)_i, fence = 0, cap = 256 * A + (uint64_t)_i * 8;
	int fails = 0, ok = 0;

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(kb__tcm_init(&t, cap), 0);
	ref_insert(&r, 0, 0, cap, 0);
	for (int step = 0; step < 10000; step++) {
		rng = rng * 6364136223846793005u + 1442695040888963407u;
		if ((rng >> 33) % 100 < 55 && n_live < 512) {
			uint64_t bytes = (rng >> 40) % (12 * A), o1 = 0, f1 = 0, o2 = 0, f2 = 0;
			int a = kb__tcm_alloc(&t, bytes, &o1, &f1), b = ref_alloc(&r, bytes, &o2, &f2);

			ck_assert_int_eq(a, b);
			if (a) {
				fails++;
				continue;
			}
			ok++;
			ck_assert_uint_eq(o1, o2);
			ck_assert_uint_eq(f1, f2);
			live[n_live].off = o1;
			live[n_live++].bytes = bytes;
		} else if (n_live) {
			size_t k = (size_t)(rng >> 20) % n_live;

			if ((rng >> 50) % 4 == 0)
				fence++;
			kb__tcm_free(&t, live[k].off, live[k].bytes, fence);
			ref_free(&r, live[k].off, live[k].bytes, fence);
			live[k] = live[--n_live];
		}
		ck_assert_uint_eq(t.n, r.n);
		ck_assert_uint_eq(t.cursor, r.cursor);
		ck_assert_int_eq(kb__tcm_check(&t), 0);
	}
	for (size_t i = 0; i < r.n; i++) {
		uint64_t off, size, f;

		ck_assert_int_eq(kb__tcm_block(&t, i, &off, &size, &f), 0);
		ck_assert_uint_eq(off, r.s[i].off);
		ck_assert_uint_eq(size, r.s[i].size);
		ck_assert_uint_eq(f, r.s[i].fence);
	}
	/* the run exercised both outcomes */
	ck_assert_int_gt(ok, 1000);
	ck_assert_int_gt(fails, 5);
	kb__tcm_fini(&t);
}
END_TEST

static void same_blocks(const kb_tcm *t, const ref_tcm *r)
{
	for (size_t i = 0; i < r->n; i++) {
		uint64_t off, size, f;

		ck_assert_int_eq(kb__tcm_block(t, i, &off, &size, &f), 0);
		ck_assert_uint_eq(off, r->s[i].off);
		ck_assert_uint_eq(size, r->s[i].size);
		ck_assert_uint_eq(f, r->s[i].fence);
	}
}

/* Scope-shaped use, as kernels do (decode holds ~10,000 free blocks): a
 * scope takes a few blocks and frees them top down with one fence, so
 * nothing merges; free blocks pile up over dozens of leaves, the cursor
 * wraps into them, some blocks outlive their scope, and now and then a
 * large request has to search past the cursor, wrap, or merge. Every
 * decision is compared with the reference model. */
START_TEST(test_tcm_scopes_match_reference)
{
	static ref_tcm r;
	kb_tcm t;
	struct held held[64], kept[16];
	size_t n_kept = 0, most = 0;
	uint64_t rng = 777 + (uint64_t)_i, fence = 0, cap = 3000 * F * A + (uint64_t)_i * 24;
	uint64_t last = 0;
	int wraps = 0, big_ok = 0, fails = 0;

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(kb__tcm_init(&t, cap), 0);
	ref_insert(&r, 0, 0, cap, 0);
	for (int scope = 0; scope < 4000 * F; scope++) {
		size_t n = 0, want;

		rng = rng * 6364136223846793005u + 1442695040888963407u;
		want = 1 + (size_t)(rng >> 60) % 6;
		fence++;
		for (size_t j = 0; j < want; j++) {
			uint64_t bytes, o1 = 0, f1 = 0, o2 = 0, f2 = 0;
			int a, b, big;

			rng = rng * 6364136223846793005u + 1442695040888963407u;
			big = (rng >> 33) % 50 == 0;
			bytes = big ? (rng >> 40) % (300 * A) : (rng >> 40) % (3 * A) + 1;
			if ((rng >> 33) % (150 * F) == 1)   /* huge: fits only in a quiet TCM */
				bytes = 1000 * F * A + (rng >> 40) % (2000 * F * A);
			a = kb__tcm_alloc(&t, bytes, &o1, &f1);
			b = ref_alloc(&r, bytes, &o2, &f2);
			ck_assert_int_eq(a, b);
			if (a) {
				fails++;
				continue;
			}
			ck_assert_uint_eq(o1, o2);
			ck_assert_uint_eq(f1, f2);
			wraps += o1 < last;
			big_ok += big;
			last = o1;
			held[n].off = o1;
			held[n++].bytes = bytes;
		}
		/* one block in twenty outlives its scope, freed much later */
		if (n && (rng >> 20) % 20 == 0 && n_kept < 16)
			kept[n_kept++] = held[--n];
		/* every other scope gives its blocks back in one call, as a
		 * scope's end does */
		if (scope & 1)
			free_top_down(&t, held, n, fence);
		while (n--) {
			if (!(scope & 1))
				kb__tcm_free(&t, held[n].off, held[n].bytes, fence);
			ref_free(&r, held[n].off, held[n].bytes, fence);
		}
		if (n_kept == 16 || (n_kept && (rng >> 25) % 30 == 0)) {
			size_t k = (size_t)(rng >> 12) % n_kept;

			kb__tcm_free(&t, kept[k].off, kept[k].bytes, fence);
			ref_free(&r, kept[k].off, kept[k].bytes, fence);
			kept[k] = kept[--n_kept];
		}
		ck_assert_uint_eq(t.n, r.n);
		ck_assert_uint_eq(t.cursor, r.cursor);
		ck_assert_int_eq(kb__tcm_check(&t), 0);
		if (t.n > most)
			most = t.n;
	}
	same_blocks(&t, &r);
	/* the run went where it was meant to: many leaves, wraps, big
	 * requests served and refused */
	ck_assert_uint_gt(most, 8 * KB_TCM_LEAF);
	ck_assert_int_gt(wraps, 3);
	ck_assert_int_gt(big_ok, 20);
	ck_assert_int_gt(fails, 0);
	kb__tcm_fini(&t);
}
END_TEST

/* Decode's own pattern, which the fast paths and the open leaf's gap
 * serve (tcm.h): a few long-lived blocks, then per tile the same six
 * requests freed top down with the tile's fence, so that nothing merges
 * and, once the cursor has wrapped, every request fits a freed block
 * exactly (or, when two tiles share a fence, merges into the block
 * below). Now and then something else happens between tiles while a
 * leaf is open: a block kept for a while, a large request that has to
 * search or merge, a free far from the cursor. Every decision, the block
 * list and the largest block are compared with the reference model. */
START_TEST(test_tcm_decode_ring_matches_reference)
{
	static const uint64_t tile[] = { 16 * A, 1, 32, 33, 16 * A - 5, A };
	static ref_tcm r;
	kb_tcm t;
	struct held held[8], kept[8];
	size_t n_kept = 0, most = 0;
	uint64_t rng = 99 + (uint64_t)_i, cap = 3000 * F * A + (uint64_t)_i * 40, last = 0;
	uint64_t o1, f1, o2, f2, fence = 0;
	int wraps = 0, open = 0;

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(kb__tcm_init(&t, cap), 0);
	ref_insert(&r, 0, 0, cap, 0);
	for (int j = 0; j < 3; j++) {
		ck_assert_int_eq(kb__tcm_alloc(&t, 40 * A, &o1, &f1), 0);
		ck_assert_int_eq(ref_alloc(&r, 40 * A, &o2, &f2), 0);
		ck_assert_uint_eq(o1, o2);
	}
	for (int k = 0; k < 3000 * F; k++) {
		size_t n = 0;

		rng = rng * 6364136223846793005u + 1442695040888963407u;
		/* one tile in three shares its fence with the tile before: its
		 * lowest block merges into that tile's top one, at the start of
		 * a leaf too now and then */
		fence += (rng >> 52) % 3 != 0;
		for (size_t j = 0; j < sizeof(tile) / sizeof(tile[0]); j++) {
			int a = kb__tcm_alloc(&t, tile[j], &o1, &f1), b = ref_alloc(&r, tile[j], &o2, &f2);

			/* a tile always fits: little else is held */
			ck_assert_int_eq(a, 0);
			ck_assert_int_eq(b, 0);
			ck_assert_uint_eq(o1, o2);
			ck_assert_uint_eq(f1, f2);
			wraps += o1 < last;
			last = o1;
			held[n].off = o1;
			held[n++].bytes = tile[j];
			open += t.gk != UINT32_MAX;
			ck_assert_int_eq(kb__tcm_check(&t), 0);
		}
		/* one tile in 25 keeps a block for later */
		if (n && (rng >> 20) % 25 == 0 && n_kept < 8)
			kept[n_kept++] = held[--n];
		/* every other tile gives its blocks back in one call, as a
		 * scope's end does (its runs at the open gap, tcm.c) */
		if (k & 1) {
			free_top_down(&t, held, n, fence);
			open += t.gk != UINT32_MAX;
			ck_assert_int_eq(kb__tcm_check(&t), 0);
		}
		while (n--) {
			ref_free(&r, held[n].off, held[n].bytes, fence);
			if (k & 1)
				continue;
			kb__tcm_free(&t, held[n].off, held[n].bytes, fence);
			open += t.gk != UINT32_MAX;
			ck_assert_int_eq(kb__tcm_check(&t), 0);
		}
		if (n_kept == 8 || (n_kept && (rng >> 30) % 15 == 0)) {
			size_t j = (size_t)(rng >> 12) % n_kept;

			kb__tcm_free(&t, kept[j].off, kept[j].bytes, fence);
			ref_free(&r, kept[j].off, kept[j].bytes, fence);
			kept[j] = kept[--n_kept];
		}
		/* now and then a large request, served or refused, that leaves
		 * the fast paths: it searches past the cursor, wraps or merges */
		if ((rng >> 40) % 40 == 0) {
			uint64_t bytes = 50 * A + (rng >> 44) % (1500 * A);
			int a = kb__tcm_alloc(&t, bytes, &o1, &f1), b = ref_alloc(&r, bytes, &o2, &f2);

			ck_assert_int_eq(a, b);
			if (!a) {
				ck_assert_uint_eq(o1, o2);
				ck_assert_uint_eq(f1, f2);
				kb__tcm_free(&t, o1, bytes, fence);
				ref_free(&r, o2, bytes, fence);
			}
		}
		ck_assert_uint_eq(t.n, r.n);
		ck_assert_uint_eq(t.cursor, r.cursor);
		if (t.n > most)
			most = t.n;
		if (k % 97 == 0) {
			uint64_t big = 0;

			same_blocks(&t, &r);
			for (size_t j = 0; j < r.n; j++)
				if (r.s[j].size > big)
					big = r.s[j].size;
			ck_assert_uint_eq(kb__tcm_largest_free(&t), big);
		}
	}
	same_blocks(&t, &r);
	/* the run went where it was meant to: over many leaves, round the
	 * ring several times, mostly with a leaf open */
	ck_assert_uint_gt(most, 4 * KB_TCM_LEAF);
	ck_assert_int_gt(wraps, 5);
	ck_assert_int_gt(open, 3000 * F * 8);
	kb__tcm_fini(&t);
}
END_TEST

/* Frees that land between free blocks, in ascending (decode's first pass),
 * descending and shuffled order: a full leaf lends blocks to a neighbour
 * with room before it splits, in every direction, and the blocks stay the
 * model's. Ascending and descending inserts fill their leaves (halving
 * full leaves left them half full: twice the leaves, a page fault each few
 * leaves on decode). */
START_TEST(test_tcm_leaves_fill)
{
	enum { N = 4096 };
	static ref_tcm r;
	static uint32_t order[N / 2];
	kb_tcm t;
	uint64_t rng = 777, off, f;

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(kb__tcm_init(&t, N * A), 0);
	ref_insert(&r, 0, 0, N * A, 0);
	for (uint32_t i = 0; i < N; i++) {
		ck_assert_uint_eq(must_alloc(&t, A, NULL), (uint64_t)i * A);
		ck_assert_int_eq(ref_alloc(&r, A, &off, &f), 0);
	}
	for (uint32_t j = 0; j < N / 2; j++)
		order[j] = _i == 1 ? N / 2 - 1 - j : j;
	for (uint32_t j = N / 2 - 1; _i == 2 && j > 0; j--) {
		uint32_t x, y;

		rng = rng * 6364136223846793005u + 1442695040888963407u;
		x = (uint32_t)((rng >> 33) % (j + 1));
		y = order[j];
		order[j] = order[x];
		order[x] = y;
	}
	for (uint32_t j = 0; j < N / 2; j++) {
		uint64_t o = (uint64_t)order[j] * 2 * A;

		/* distinct fences: nothing merges */
		kb__tcm_free(&t, o, A, j + 1);
		ref_free(&r, o, A, j + 1);
		ck_assert_uint_eq(t.n, r.n);
		ck_assert_int_eq(kb__tcm_check(&t), 0);
	}
	same_blocks(&t, &r);
	if (_i < 2)
		ck_assert_uint_le(t.m, N / 2 / KB_TCM_LEAF + 2);
	else
		ck_assert_uint_le(t.m, 2 * (N / 2 / KB_TCM_LEAF) + 2);
	kb__tcm_fini(&t);
}
END_TEST

Suite *tcm_suite(void)
{
	Suite *s = suite_create("tcm");
	TCase *tc = tcase_create("tcm");

	/* the reference model is linear per step: slow under ASan on a busy machine */
	tcase_set_timeout(tc, 60);

	tcase_add_test(tc, test_tcm_next_fit_wrap);
	tcase_add_test(tc, test_tcm_cursor_block_lower_part);
	tcase_add_test(tc, test_tcm_fences);
	tcase_add_test(tc, test_tcm_fragmentation_exhaustion);
	tcase_add_test(tc, test_tcm_unaligned_end);
	tcase_add_test(tc, test_tcm_4g);
	tcase_add_loop_test(tc, test_tcm_matches_reference, 0, 4);
	tcase_add_loop_test(tc, test_tcm_scopes_match_reference, 0, 3);
	tcase_add_loop_test(tc, test_tcm_decode_ring_matches_reference, 0, 3);
	tcase_add_loop_test(tc, test_tcm_leaves_fill, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}
