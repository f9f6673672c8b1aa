#include "base/sha256.h"

void kb__sha256_init(kb_sha256 *s)
{
	sha256_init(&s->ctx);
}

void kb__sha256_update(kb_sha256 *s, const void *data, size_t len)
{
	sha256_update(&s->ctx, len, (const uint8_t *)data);
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
