/* SHA-256 of a byte stream, as lowercase hex. */
#ifndef KB_BASE_SHA256_H
#define KB_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* The running hash, laid out as nettle's struct sha256_ctx. */
typedef struct kb_sha256_ctx {
	uint32_t state[8];       /* a..h */
	uint64_t count;          /* whole blocks compressed */
	unsigned index;          /* bytes waiting in block */
	uint8_t block[64];
} kb_sha256_ctx;

typedef struct kb_sha256 {
	kb_sha256_ctx ctx;
	/* Whole blocks by: 0 the plain C rounds, 1 the SHA-NI loop, 2 that
	 * loop in AVX encoding (sha256.c) */
	int ni;
} kb_sha256;

void kb__sha256_init(kb_sha256 *s);
void kb__sha256_update(kb_sha256 *s, const void *data, size_t len);
/*
 * A long update hashed a piece at a time between other work (the op_log
 * of a serial run, issue 13). The hash is one chain of dependent SHA-NI
 * rounds: hashed in a run of blocks it overlaps nothing, and a whole
 * block between two pieces of other work still held them up (its ~190
 * instructions crowd the core's out-of-order window). Half a block (32
 * rounds) per piece, called where independent work follows, runs beside
 * that work; quarters cost more in loads, stores and calls than they hid
 * (issue 13's measurements in the commit). Between pieces the mid-block
 * state waits here, in the SHA-NI layout: while left is nonzero, the
 * kb_sha256 is used only through kb__sha256_piece and
 * kb__sha256_spread_end.
 */
typedef struct kb_sha256_spread {
	uint32_t v[8][4] __attribute__((aligned(16))); /* state, schedule, block start */
	/* One piece, for this kb_sha256's path (void *: the event loop's
	 * kb_sim_config.on_step calls it as it is). */
	void (*piece)(void *r);
	kb_sha256 *s;
	const uint8_t *p;        /* the block begun or next */
	size_t left;             /* pieces left (0: nothing pending); odd: a block's second half next */
	size_t tail;             /* bytes after the last whole block */
} kb_sha256_spread;

/* Hashes data[0..len) into s: at once what completes a partly filled
 * block, and all of it without the SHA-NI path or a whole block; the
 * rest a piece per kb__sha256_piece. r must be done (left 0). */
void kb__sha256_spread(kb_sha256 *s, kb_sha256_spread *r, const void *data, size_t len);
/* One piece of r (left > 0); the last one also takes the tail. */
static inline void kb__sha256_piece(kb_sha256_spread *r)
{
	r->piece(r);
}
/* r->piece for s's path, before any spread (the event loop's hook). */
void (*kb__sha256_piece_fn(const kb_sha256 *s))(void *);
/* All that r has left, now. */
void kb__sha256_spread_end(kb_sha256_spread *r);
/* Writes 64 hex digits and a NUL into hex[65]. */
void kb__sha256_hex(kb_sha256 *s, char hex[65]);
/* Tests: the best path this machine has (kb_sha256.ni), and a lower one
 * for one hash (after init, before any update), so every path runs. */
int kb__sha256_ni_available(void);
void kb__sha256_set_ni(kb_sha256 *s, int level);

#endif
