/*
 * SHA-256 by nettle, except that runs of whole 64-byte blocks go through a
 * loop of the x86 SHA extensions here when the CPU has them.
 *
 * Why: the op_log's hash is the largest single cost of a --threads 1 run
 * (8.8 MB for gqa_decode_opt2 at S_kv=262144; issue 13). Debian 12's
 * nettle (3.8) uses SHA-NI but calls its compress function once per
 * block, reloading and shuffling the state each time: 6.9 ms for those
 * bytes, 1.28 GB/s. OpenSSL's libcrypto does 1.43 GB/s (6.1 ms), but
 * loading it costs a process ~1.1 ms at start, more than it saves. This
 * loop keeps the state in registers across blocks: 6.15 ms, 1.43 GB/s.
 * Same bytes in, same digest out (nettle pads and finishes); the tests
 * compare both paths with nettle over many lengths and splits.
 */
#include "base/sha256.h"

#include <stdatomic.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define KB_SHA_NI 1
#include <cpuid.h>
#include <immintrin.h>
#endif

#ifdef KB_SHA_NI
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

/* Compresses n whole blocks into state (nettle's layout: a..h). */
__attribute__((target("sha,sse4.1,ssse3"))) static void ni_blocks(uint32_t state[8],
								 const uint8_t *p, size_t n)
{
	const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
	__m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[0]), 0xb1);
	__m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[4]), 0x1b);
	__m128i s0 = _mm_alignr_epi8(t, s1, 8);  /* abef */

	s1 = _mm_blend_epi16(s1, t, 0xf0);       /* cdgh */
	for (; n > 0; n--, p += 64) {
		__m128i abef = s0, cdgh = s1;
		__m128i m0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 0)), bswap);
		__m128i m1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16)), bswap);
		__m128i m2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 32)), bswap);
		__m128i m3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 48)), bswap);

		QROUND(0, m0, m1, m3);
		QROUND(1, m1, m2, m0);
		QROUND(2, m2, m3, m1);
		QROUND(3, m3, m0, m2);
		QROUND(4, m0, m1, m3);
		QROUND(5, m1, m2, m0);
		QROUND(6, m2, m3, m1);
		QROUND(7, m3, m0, m2);
		QROUND(8, m0, m1, m3);
		QROUND(9, m1, m2, m0);
		QROUND(10, m2, m3, m1);
		QROUND(11, m3, m0, m2);
		QROUND(12, m0, m1, m3);
		QROUND(13, m1, m2, m0);
		QROUND(14, m2, m3, m1);
		QROUND(15, m3, m0, m2);
		s0 = _mm_add_epi32(s0, abef);
		s1 = _mm_add_epi32(s1, cdgh);
	}
	t = _mm_shuffle_epi32(s0, 0x1b);         /* feba */
	s1 = _mm_shuffle_epi32(s1, 0xb1);        /* dchg */
	_mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(t, s1, 0xf0));
	_mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(s1, t, 8));
}

/* CPUID leaf 7 EBX bit 29 (SHA), leaf 1 ECX bits 9 (SSSE3) and 19
 * (SSE4.1); asked once per process (0: not yet, 1: no, 2: yes). */
static atomic_int ni_state;

int kb__sha256_ni_available(void)
{
	int st = atomic_load_explicit(&ni_state, memory_order_relaxed);

	if (!st) {
		unsigned a, b, c, d, ok;

		ok = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 9)) && (c & (1u << 19));
		ok = ok && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
		st = ok ? 2 : 1;
		atomic_store_explicit(&ni_state, st, memory_order_relaxed);
	}
	return st == 2;
}
#else
int kb__sha256_ni_available(void)
{
	return 0;
}
#endif

void kb__sha256_init(kb_sha256 *s)
{
	sha256_init(&s->ctx);
	s->ni = kb__sha256_ni_available();
}

void kb__sha256_set_ni(kb_sha256 *s, int on)
{
	s->ni = on && kb__sha256_ni_available();
}

void kb__sha256_update(kb_sha256 *s, const void *data, size_t len)
{
	const uint8_t *p = data;

#ifdef KB_SHA_NI
	/* nettle completes a partly filled block first (after which its
	 * index is 0), the loop takes the whole blocks and counts them as
	 * nettle does (ctx.count: blocks done), nettle keeps the tail. */
	if (s->ni && len >= 64 + (s->ctx.index ? 64 - s->ctx.index : 0)) {
		size_t n;

		if (s->ctx.index) {
			n = 64 - s->ctx.index;
			sha256_update(&s->ctx, n, p);
			p += n;
			len -= n;
		}
		n = len / 64;
		ni_blocks(s->ctx.state, p, n);
		s->ctx.count += n;
		p += 64 * n;
		len -= 64 * n;
	}
#endif
	sha256_update(&s->ctx, len, p);
}

size_t kb__sha256_step(kb_sha256 *s, const void *data, size_t len)
{
	size_t n = len < 64 ? len : 64;

	if (s->ctx.index) {
		n = 64 - s->ctx.index;
		if (n > len)
			n = len;
	}
#ifdef KB_SHA_NI
	else if (s->ni && len >= 64) {
		ni_blocks(s->ctx.state, data, 1);
		s->ctx.count++;
		return 64;
	}
#endif
	sha256_update(&s->ctx, n, data);
	return n;
}

void kb__sha256_hex(kb_sha256 *s, char hex[65])
{
	static const char digits[] = "0123456789abcdef";
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_digest(&s->ctx, sizeof(d), d);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[64] = '\0';
}
