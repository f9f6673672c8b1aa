/*
 * SHA-256 (FIPS 180-4): whole 64-byte blocks go through a loop of the x86
 * SHA extensions when the CPU has them, else through the plain C rounds
 * below; padding and the tail are here too.
 *
 * Why the SHA-NI loop: the op_log's hash is the largest single cost of a
 * --threads 1 run (8.8 MB for gqa_decode_opt2 at S_kv=262144; issue 13).
 * Debian 12's nettle (3.8) uses SHA-NI but calls its compress function
 * once per block, reloading and shuffling the state each time: 6.9 ms
 * for those bytes, 1.28 GB/s. OpenSSL's libcrypto does 1.43 GB/s
 * (6.1 ms), but loading it costs a process ~1.1 ms at start, more than
 * it saves. This loop keeps the state in registers across blocks:
 * 6.15 ms, 1.43 GB/s.
 *
 * Why not nettle for the rest (it did the tail, padding and the machines
 * without SHA-NI until issue 13's start-up work): loading libnettle cost
 * every process ~355,000 instructions of symbol relocations (465 of a
 * run's 783 bindings, nettle's own tables) and ~7 page faults, about a
 * sixth of a small run's instructions, for ~60 lines of C. The tests
 * still compare both paths with nettle over many lengths and splits.
 */
#include "base/sha256.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define KB_SHA_NI 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32_t round_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) ((x) >> (n) | (x) << (32 - (n)))
#define BSIG0(x) (ROR(x, 2) ^ ROR(x, 13) ^ ROR(x, 22))
#define BSIG1(x) (ROR(x, 6) ^ ROR(x, 11) ^ ROR(x, 25))
#define SSIG0(x) (ROR(x, 7) ^ ROR(x, 18) ^ (x) >> 3)
#define SSIG1(x) (ROR(x, 17) ^ ROR(x, 19) ^ (x) >> 10)
/* Message word i (0-63) of the block: the schedule kept in 16 words. */
#define WORD(i)                                                                  \
	((i) < 16 ? w[(i) & 15] : (w[(i) & 15] += SSIG1(w[((i) - 2) & 15]) + w[((i) - 7) & 15] + \
					   SSIG0(w[((i) - 15) & 15])))
/* Round i, the eight variables named in their rotated order: no moves. */
#define ROUND(a, b, c, d, e, f, g, h, i)                                                \
	do {                                                                            \
		uint32_t t1 = h + BSIG1(e) + (g ^ (e & (f ^ g))) + round_k[i] + WORD(i); \
		d += t1;                                                                \
		h = t1 + BSIG0(a) + ((a & b) | (c & (a | b)));                          \
	} while (0)

/* Rounds i..i+7 (i a constant), so that every index folds. */
#define ROUNDS8(i)                                     \
	do {                                           \
		ROUND(a, b, c, d, e, f, g, h, (i));     \
		ROUND(h, a, b, c, d, e, f, g, (i) + 1); \
		ROUND(g, h, a, b, c, d, e, f, (i) + 2); \
		ROUND(f, g, h, a, b, c, d, e, (i) + 3); \
		ROUND(e, f, g, h, a, b, c, d, (i) + 4); \
		ROUND(d, e, f, g, h, a, b, c, (i) + 5); \
		ROUND(c, d, e, f, g, h, a, b, (i) + 6); \
		ROUND(b, c, d, e, f, g, h, a, (i) + 7); \
	} while (0)

/* Compresses n whole blocks into state: the plain rounds of FIPS 180-4,
 * for a CPU without SHA extensions (about nettle's x86-64 speed). */
static void c_blocks(uint32_t state[8], const uint8_t *p, size_t n)
{
	for (; n > 0; n--, p += 64) {
		uint32_t w[16], a, b, c, d, e, f, g, h;

		for (int i = 0; i < 16; i++)
			w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
			       (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
		a = state[0], b = state[1], c = state[2], d = state[3];
		e = state[4], f = state[5], g = state[6], h = state[7];
		ROUNDS8(0);
		ROUNDS8(8);
		ROUNDS8(16);
		ROUNDS8(24);
		ROUNDS8(32);
		ROUNDS8(40);
		ROUNDS8(48);
		ROUNDS8(56);
		state[0] += a, state[1] += b, state[2] += c, state[3] += d;
		state[4] += e, state[5] += f, state[6] += g, state[7] += h;
	}
}

#ifdef KB_SHA_NI

/* Rounds 4i to 4i+3 (i a constant 0-15): cur holds message words 4i..4i+3;
 * next and prev, the schedule's registers after and before it, are
 * extended (msg2, msg1) while their words are still ahead. */
#define QROUND(i, cur, next, prev)                                                          \
	do {                                                                                \
		__m128i msg = _mm_add_epi32(cur, _mm_loadu_si128((const __m128i *)&round_k[4 * (i)])); \
		s1 = _mm_sha256rnds2_epu32(s1, s0, msg);                                    \
		if ((i) >= 3 && (i) <= 14)                                                  \
			next = _mm_sha256msg2_epu32(                                        \
				_mm_add_epi32(next, _mm_alignr_epi8(cur, prev, 4)), cur);  \
		s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(msg, 0x0e));           \
		if ((i) >= 1 && (i) <= 12)                                                  \
			prev = _mm_sha256msg1_epu32(prev, cur);                             \
	} while (0)

/* Rounds 32h to 32h+31 of a block (h 0 or 1: the spread below runs the
 * two halves apart). */
#define HALF_ROUNDS(h, m0, m1, m2, m3)             \
	do {                                       \
		QROUND(8 * (h) + 0, m0, m1, m3);   \
		QROUND(8 * (h) + 1, m1, m2, m0);   \
		QROUND(8 * (h) + 2, m2, m3, m1);   \
		QROUND(8 * (h) + 3, m3, m0, m2);   \
		QROUND(8 * (h) + 4, m0, m1, m3);   \
		QROUND(8 * (h) + 5, m1, m2, m0);   \
		QROUND(8 * (h) + 6, m2, m3, m1);   \
		QROUND(8 * (h) + 7, m3, m0, m2);   \
	} while (0)

#define NI_TARGET __attribute__((target("sha,sse4.1,ssse3")))
/* Message words 4i..4i+3 of the block at p, big-endian (bswap in scope). */
#define NI_WORDS(p, i) _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 16 * (i))), bswap)
#define NI_BSWAP _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL)

/* The state (a..h) into the SHA-NI registers (abef, cdgh), and back. */
static inline NI_TARGET void ni_load(const uint32_t state[8], __m128i *s0, __m128i *s1)
{
	__m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[0]), 0xb1);
	__m128i u = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[4]), 0x1b);

	*s0 = _mm_alignr_epi8(t, u, 8);          /* abef */
	*s1 = _mm_blend_epi16(u, t, 0xf0);       /* cdgh */
}

static inline NI_TARGET void ni_store(uint32_t state[8], __m128i s0, __m128i s1)
{
	__m128i t = _mm_shuffle_epi32(s0, 0x1b); /* feba */

	s1 = _mm_shuffle_epi32(s1, 0xb1);        /* dchg */
	_mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(t, s1, 0xf0));
	_mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(s1, t, 8));
}

/* Compresses n whole blocks into state (a..h). */
NI_TARGET static void ni_blocks(uint32_t state[8], const uint8_t *p, size_t n)
{
	const __m128i bswap = NI_BSWAP;
	__m128i s0, s1;

	ni_load(state, &s0, &s1);
	for (; n > 0; n--, p += 64) {
		__m128i abef = s0, cdgh = s1;
		__m128i m0 = NI_WORDS(p, 0), m1 = NI_WORDS(p, 1), m2 = NI_WORDS(p, 2), m3 = NI_WORDS(p, 3);

		HALF_ROUNDS(0, m0, m1, m2, m3);
		HALF_ROUNDS(1, m0, m1, m2, m3);
		s0 = _mm_add_epi32(s0, abef);
		s1 = _mm_add_epi32(s1, cdgh);
	}
	ni_store(state, s0, s1);
}

/* A spread's registers between pieces: the state at the block's start
 * (the running state between blocks), the state after its first half,
 * and the message schedule (kb_sha256_spread.v). The first half leaves
 * the start where it is, so no piece copies it. */
enum { V_S0, V_S1, V_H0, V_H1, V_M0, V_M1, V_M2, V_M3 };
#define V_LOAD(r, i) _mm_load_si128((const __m128i *)(r)->v[i])
#define V_STORE(r, i, x) _mm_store_si128((__m128i *)(r)->v[i], x)

/* Rounds 0-31 of r's block (left even), reading the block, or rounds
 * 32-63 (left odd), adding the block's start and moving on. Each half
 * stores its own results (no join of the two, whose register copies
 * cost instructions). Inlined into each piece function, so that it
 * takes that one's encoding. */
static inline __attribute__((always_inline)) NI_TARGET void ni_piece(kb_sha256_spread *r)
{
	__m128i s0, s1, m0, m1, m2, m3;

	if (!(r->left & 1)) {
		const __m128i bswap = NI_BSWAP;
		const uint8_t *p = r->p;

		s0 = V_LOAD(r, V_S0);
		s1 = V_LOAD(r, V_S1);
		m0 = NI_WORDS(p, 0);
		m1 = NI_WORDS(p, 1);
		m2 = NI_WORDS(p, 2);
		m3 = NI_WORDS(p, 3);
		HALF_ROUNDS(0, m0, m1, m2, m3);
		V_STORE(r, V_M0, m0);
		V_STORE(r, V_M1, m1);
		V_STORE(r, V_M2, m2);
		V_STORE(r, V_M3, m3);
		V_STORE(r, V_H0, s0);
		V_STORE(r, V_H1, s1);
	} else {
		s0 = V_LOAD(r, V_H0);
		s1 = V_LOAD(r, V_H1);
		m0 = V_LOAD(r, V_M0);
		m1 = V_LOAD(r, V_M1);
		m2 = V_LOAD(r, V_M2);
		m3 = V_LOAD(r, V_M3);
		HALF_ROUNDS(1, m0, m1, m2, m3);
		r->p += 64;
		/* The start read here, as an operand of the add: loaded at the
		 * entry (GCC shares the first half's loads of it), it would
		 * be held across the rounds and copied around them. */
		__asm__("" : "+r"(r));
		V_STORE(r, V_S0, _mm_add_epi32(s0, V_LOAD(r, V_S0)));
		V_STORE(r, V_S1, _mm_add_epi32(s1, V_LOAD(r, V_S1)));
	}
}

NI_TARGET static void ni_spread_load(kb_sha256_spread *r)
{
	__m128i s0, s1;

	ni_load(r->s->ctx.state, &s0, &s1);
	V_STORE(r, V_S0, s0);
	V_STORE(r, V_S1, s1);
}

NI_TARGET static void ni_spread_store(kb_sha256_spread *r)
{
	ni_store(r->s->ctx.state, V_LOAD(r, V_S0), V_LOAD(r, V_S1));
}

static void ctx_update(kb_sha256 *s, const uint8_t *p, size_t len);

/* After the last piece: the state back, and the tail kept. */
__attribute__((noinline, cold)) static void ni_spread_done(kb_sha256_spread *r)
{
	ni_spread_store(r);
	ctx_update(r->s, r->p, r->tail);
}

/* The pieces: one in each encoding. A piece is the cost left of the hash
 * in a serial run, and there it costs its instructions, not its latency
 * (issue 13: the same pieces with a 1-cycle add for sha256rnds2 ran
 * as slowly): AVX's three operands save the register copies, ~35 of
 * ~200 instructions a block. Machines with SHA-NI but no AVX (Goldmont)
 * take the SSE one. */
NI_TARGET static void ni_piece_sse(void *vr)
{
	kb_sha256_spread *r = vr;

	ni_piece(r);
	if (--r->left == 0)
		ni_spread_done(r);
}

__attribute__((target("sha,avx,sse4.1,ssse3"))) static void ni_piece_avx(void *vr)
{
	kb_sha256_spread *r = vr;

	ni_piece(r);
	if (--r->left == 0)
		ni_spread_done(r);
}

/* CPUID leaf 7 EBX bit 29 (SHA), leaf 1 ECX bits 9 (SSSE3), 19 (SSE4.1),
 * 27 (OSXSAVE) and 28 (AVX) with XCR0's SSE and AVX state on; asked once
 * per process (-1: not yet, else the level, kb_sha256.ni). */
static atomic_int ni_state = -1;

int kb__sha256_ni_available(void)
{
	int st = atomic_load_explicit(&ni_state, memory_order_relaxed);

	if (st < 0) {
		int ok, avx;

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
		/* The target_clones resolvers have asked already
		 * (base/cpu_model.c): their answer costs no CPUID here (in a
		 * VM each one exits to the hypervisor: ~6 us a run for four,
		 * issue 13). Its "avx" includes the OS's XCR0 check. */
		__builtin_cpu_init();
		ok = __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1") &&
		     __builtin_cpu_supports("ssse3");
		avx = __builtin_cpu_supports("avx");
#else
		unsigned a, b, c, d, xlo, xhi;

		ok = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 9)) && (c & (1u << 19));
		avx = ok && (c & (1u << 27)) && (c & (1u << 28));
		if (avx) {
			__asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
			avx = (xlo & 6) == 6;
		}
		ok = ok && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
#endif
		st = ok ? 1 + !!avx : 0;
		atomic_store_explicit(&ni_state, st, memory_order_relaxed);
	}
	return st;
}

#else
int kb__sha256_ni_available(void)
{
	return 0;
}
#endif

/* Without SHA-NI a spread hashes everything at once: no piece is ever
 * due. */
static void piece_none(void *r)
{
	(void)r;
}

void (*kb__sha256_piece_fn(const kb_sha256 *s))(void *)
{
#ifdef KB_SHA_NI
	if (s->ni)
		return s->ni == 2 ? ni_piece_avx : ni_piece_sse;
#endif
	(void)s;
	return piece_none;
}

/* Compresses n whole blocks into state, by SHA-NI where s may. */
static void compress(const kb_sha256 *s, uint32_t state[8], const uint8_t *p, size_t n)
{
#ifdef KB_SHA_NI
	if (s->ni) {
		ni_blocks(state, p, n);
		return;
	}
#else
	(void)s;
#endif
	c_blocks(state, p, n);
}

static void ctx_init(kb_sha256_ctx *c)
{
	static const uint32_t h0[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(c->state, h0, sizeof(h0));
	c->count = 0;
	c->index = 0;
}

/* Completes a partly filled block first, then whole blocks in one run,
 * and keeps the tail (as nettle's sha256_update). */
static void ctx_update(kb_sha256 *s, const uint8_t *p, size_t len)
{
	kb_sha256_ctx *c = &s->ctx;
	size_t n;

	if (c->index) {
		n = 64 - c->index;
		if (len < n) {
			memcpy(c->block + c->index, p, len);
			c->index += (unsigned)len;
			return;
		}
		memcpy(c->block + c->index, p, n);
		compress(s, c->state, c->block, 1);
		c->count++;
		c->index = 0;
		p += n;
		len -= n;
	}
	n = len / 64;
	if (n) {
		compress(s, c->state, p, n);
		c->count += n;
		p += 64 * n;
		len -= 64 * n;
	}
	memcpy(c->block, p, len);
	c->index = (unsigned)len;
}

/* Pads (0x80, zeros, the length in bits, big-endian), finishes, writes
 * the digest and starts s over (as nettle's sha256_digest). */
static void ctx_digest(kb_sha256 *s, uint8_t d[32])
{
	kb_sha256_ctx *c = &s->ctx;
	uint64_t bits = (c->count * 64 + c->index) * 8;

	c->block[c->index++] = 0x80;
	if (c->index > 56) {
		memset(c->block + c->index, 0, 64 - c->index);
		compress(s, c->state, c->block, 1);
		c->index = 0;
	}
	memset(c->block + c->index, 0, 56 - c->index);
	for (int i = 0; i < 8; i++)
		c->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
	compress(s, c->state, c->block, 1);
	for (int i = 0; i < 8; i++) {
		d[4 * i] = (uint8_t)(c->state[i] >> 24);
		d[4 * i + 1] = (uint8_t)(c->state[i] >> 16);
		d[4 * i + 2] = (uint8_t)(c->state[i] >> 8);
		d[4 * i + 3] = (uint8_t)c->state[i];
	}
	ctx_init(c);
}

void kb__sha256_init(kb_sha256 *s)
{
	ctx_init(&s->ctx);
	s->ni = kb__sha256_ni_available();
}

void kb__sha256_set_ni(kb_sha256 *s, int level)
{
	int best = kb__sha256_ni_available();

	s->ni = level < best ? (level > 0 ? level : 0) : best;
}

void kb__sha256_update(kb_sha256 *s, const void *data, size_t len)
{
	ctx_update(s, data, len);
}

void kb__sha256_spread(kb_sha256 *s, kb_sha256_spread *r, const void *data, size_t len)
{
	const uint8_t *p = data;

	r->s = s;
	r->left = 0;
	r->piece = kb__sha256_piece_fn(s);
#ifdef KB_SHA_NI
	if (s->ni && len >= 64 + (s->ctx.index ? 64 - s->ctx.index : 0)) {
		if (s->ctx.index) {
			size_t n = 64 - s->ctx.index;

			ctx_update(s, p, n);
			p += n;
			len -= n;
		}
		/* The blocks are counted now: nothing reads the count before
		 * the pieces are done. */
		s->ctx.count += len / 64;
		r->p = p;
		r->left = len / 64 * 2;
		r->tail = len % 64;
		ni_spread_load(r);
		return;
	}
#endif
	ctx_update(s, p, len);
}

void kb__sha256_spread_end(kb_sha256_spread *r)
{
#ifdef KB_SHA_NI
	/* The block begun, by its last piece; the others in one run. */
	if (r->left & 1)
		r->piece(r);
	if (r->left) {
		ni_spread_store(r);
		ni_blocks(r->s->ctx.state, r->p, r->left / 2);
		ctx_update(r->s, r->p + 32 * r->left, r->tail);
		r->left = 0;
	}
#else
	(void)r;
#endif
}

void kb__sha256_hex(kb_sha256 *s, char hex[65])
{
	static const char digits[] = "0123456789abcdef";
	uint8_t d[32];

	ctx_digest(s, d);
	for (int i = 0; i < 32; i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[64] = '\0';
}
