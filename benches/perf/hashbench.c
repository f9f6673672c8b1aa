/*
 * The op_log's SHA-256 alone (issue 13): what our hash costs per byte
 * against the floor, on a real op_log (`kernbench run ... --op-log F`).
 *
 *   hashbench FILE [REPS [CHUNK]]   (best of REPS, default 20; the
 *                                    spreads CHUNK bytes, default 65536)
 *
 * Modes, each on the file's bytes in memory, best CPU time of REPS:
 *   oneshot  kb__sha256_update on all of it, then the digest;
 *   pieces   as a serial run hashes it: kb__sha256_spread of CHUNK bytes
 *            at a time, then kb__sha256_piece (half a block) until done,
 *            with nothing between the pieces: pieces-avx and pieces-sse
 *            for each encoding this machine runs (a run uses the first);
 *   plain-c  oneshot without SHA-NI (the fallback);
 *   openssl  libcrypto's SHA256() and nettle's sha256, where the
 *            libraries load (dlopen: the bench links neither), as the
 *            reference rates.
 * Every mode's digest must equal the oneshot's (it says so if not). Run
 * it side by side with `openssl speed -evp sha256`, interleaved.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/sha256.h"

static double cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct job {
	const unsigned char *p;
	size_t n, chunk;
	int level;               /* kb_sha256.ni for the pieces */
	char hex[65];
} job;

static void to_hex(const unsigned char d[32], char hex[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static void run_oneshot(job *j)
{
	kb_sha256 s;

	kb__sha256_init(&s);
	kb__sha256_update(&s, j->p, j->n);
	kb__sha256_hex(&s, j->hex);
}

static void run_plain(job *j)
{
	kb_sha256 s;

	kb__sha256_init(&s);
	kb__sha256_set_ni(&s, 0);
	kb__sha256_update(&s, j->p, j->n);
	kb__sha256_hex(&s, j->hex);
}

static void run_pieces(job *j)
{
	kb_sha256 s;
	kb_sha256_spread r = { .left = 0 };

	kb__sha256_init(&s);
	kb__sha256_set_ni(&s, j->level);
	for (size_t off = 0; off < j->n; off += j->chunk) {
		size_t len = j->n - off < j->chunk ? j->n - off : j->chunk;

		kb__sha256_spread(&s, &r, j->p + off, len);
		while (r.left)
			kb__sha256_piece(&r);
	}
	kb__sha256_hex(&s, j->hex);
}

static unsigned char *(*ossl_sha256)(const unsigned char *, size_t, unsigned char *);

static void run_openssl(job *j)
{
	unsigned char d[32];

	ossl_sha256(j->p, j->n, d);
	to_hex(d, j->hex);
}

/* nettle's struct sha256_ctx is laid out as kb_sha256_ctx. */
static void (*nettle_init)(void *);
static void (*nettle_update)(void *, size_t, const unsigned char *);
static void (*nettle_digest)(void *, size_t, unsigned char *);

static void run_nettle(job *j)
{
	kb_sha256_ctx c;
	unsigned char d[32];

	nettle_init(&c);
	nettle_update(&c, j->n, j->p);
	nettle_digest(&c, 32, d);
	to_hex(d, j->hex);
}

static void bench(const char *name, void (*fn)(job *), job *j, int reps, const char *want)
{
	double best = 1e30;

	for (int i = 0; i < reps; i++) {
		double t0 = cpu_s(), t;

		fn(j);
		t = cpu_s() - t0;
		if (t < best)
			best = t;
	}
	printf("%-10s %8.3f ms  %6.3f GB/s  %.2f ns/block%s\n", name, best * 1e3,
	       (double)j->n / best * 1e-9, best * 1e9 / ((double)j->n / 64),
	       want && strcmp(want, j->hex) ? "  DIGEST DIFFERS" : "");
}

static unsigned char *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *p = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (p = malloc((size_t)len + 1)) && fread(p, 1, (size_t)len, f) != (size_t)len) {
		free(p);
		p = NULL;
	}
	*n = p ? (size_t)len : 0;
	fclose(f);
	return p;
}

int main(int argc, char **argv)
{
	job j = { .chunk = 65536 };
	int reps = argc > 2 ? atoi(argv[2]) : 20;
	char want[65];
	void *lib;

	if (argc < 2 || reps < 1) {
		fprintf(stderr, "usage: hashbench OPLOG_FILE [REPS [CHUNK]]\n");
		return 2;
	}
	if (argc > 3 && (j.chunk = strtoul(argv[3], NULL, 10)) == 0)
		j.chunk = 65536;
	if (!(j.p = read_file(argv[1], &j.n))) {
		fprintf(stderr, "hashbench: cannot read %s\n", argv[1]);
		return 1;
	}
	printf("%s: %zu bytes, SHA-NI %s, best of %d\n", argv[1], j.n,
	       (const char *[]){ "no", "yes (SSE)", "yes (AVX)" }[kb__sha256_ni_available()], reps);
	run_oneshot(&j);
	memcpy(want, j.hex, sizeof(want));
	printf("sha256     %s\n", want);
	bench("oneshot", run_oneshot, &j, reps, want);
	for (j.level = kb__sha256_ni_available(); j.level >= 1; j.level--)
		bench(j.level == 2 ? "pieces-avx" : "pieces-sse", run_pieces, &j, reps, want);
	bench("plain-c", run_plain, &j, reps > 3 ? 3 : reps, want);
	if ((lib = dlopen("libcrypto.so.3", RTLD_NOW)) &&
	    (*(void **)&ossl_sha256 = dlsym(lib, "SHA256")))
		bench("openssl", run_openssl, &j, reps, want);
	else
		printf("openssl    (libcrypto.so.3 not loaded: skipped)\n");
	if ((lib = dlopen("libnettle.so.8", RTLD_NOW)) &&
	    (*(void **)&nettle_init = dlsym(lib, "nettle_sha256_init")) &&
	    (*(void **)&nettle_update = dlsym(lib, "nettle_sha256_update")) &&
	    (*(void **)&nettle_digest = dlsym(lib, "nettle_sha256_digest")))
		bench("nettle", run_nettle, &j, reps, want);
	else
		printf("nettle     (libnettle.so.8 not loaded: skipped)\n");
	free((void *)j.p);
	return 0;
}
