/* SHA-256 of a byte stream (nettle), as lowercase hex. */
#ifndef KB_BASE_SHA256_H
#define KB_BASE_SHA256_H

#include <nettle/sha2.h>
#include <stddef.h>

typedef struct kb_sha256 {
	struct sha256_ctx ctx;
	int ni;                  /* whole blocks by the SHA-NI loop (sha256.c) */
} kb_sha256;

void kb__sha256_init(kb_sha256 *s);
void kb__sha256_update(kb_sha256 *s, const void *data, size_t len);
/* Hashes the first bytes of data[0..len), at most one block: what
 * completes a partly filled block, else one whole block (by the SHA-NI
 * loop where there is one), else all len < 64 bytes; returns how many.
 * For a caller that spreads a long update over other work (oplog.c). */
size_t kb__sha256_step(kb_sha256 *s, const void *data, size_t len);
/* Writes 64 hex digits and a NUL into hex[65]. */
void kb__sha256_hex(kb_sha256 *s, char hex[65]);
/* Tests: whether this machine has the SHA-NI path, and turning it off
 * for one hash (after init, before any update), so both paths run. */
int kb__sha256_ni_available(void);
void kb__sha256_set_ni(kb_sha256 *s, int on);

#endif
