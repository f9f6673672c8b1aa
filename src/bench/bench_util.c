/* Helpers shared by the benches: seeded inputs, downloads, .npy dumps. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/fp16.h"
#include "bench/bench_util.h"
#include "bench/reference.h"
#include "num/npy.h"

enum {
	INPUT_CHUNK = 1 << 16, /* elements generated and uploaded at a time */
	NORMALS = 1024,        /* deviates drawn at a time (kb__rng_normal_n) */
};

/*
 * The values are drawn, rounded and uploaded a chunk at a time, so that an
 * input costs no host memory beyond its bytes in the memory store (and the
 * host copy when one is asked for); the generator is drawn in the same
 * order as in one piece.
 */
int kb__bench_input(kb_simulation *sim, kb_rng *rng, kb_dtype dt, int rank, const int64_t *shape,
		    double std, uint64_t *addr, double **host, kb_error *err)
{
	size_t n = 1, es = kb_dtype_size(dt), c;
	float *f = NULL;
	void *raw = NULL;
	double z[NORMALS];
	int rc;

	for (int i = 0; i < rank; i++)
		n *= (size_t)shape[i];
	if (host)
		*host = NULL;
	rc = kb_simulation_alloc(sim, dt, rank, shape, 0, addr, err);
	if (rc)
		return rc;
	c = n < INPUT_CHUNK ? n : INPUT_CHUNK;
	f = malloc((c ? c : 1) * sizeof(*f));
	raw = malloc((c ? c : 1) * es);
	if (host)
		*host = malloc((n ? n : 1) * sizeof(**host));
	if (!f || !raw || (host && !*host)) {
		rc = kb__err(err, KB_ENOMEM, "out of memory for a %zu-element input", n);
		goto done;
	}
	for (size_t off = 0; !rc && off < n; off += c) {
		c = n - off < INPUT_CHUNK ? n - off : INPUT_CHUNK;
		for (size_t i0 = 0; i0 < c; i0 += NORMALS) {
			size_t m = c - i0 < NORMALS ? c - i0 : NORMALS;

			kb__rng_normal_n(rng, z, m);
			for (size_t i = 0; i < m; i++)
				f[i0 + i] = (float)(z[i] * std);
		}
		kb__store_f32(raw, dt, f, c);
		if (host) {
			/* The reference sees exactly the stored (rounded) values. */
			kb__load_f32(f, raw, dt, c);
			for (size_t i = 0; i < c; i++)
				(*host)[off + i] = f[i];
		}
		rc = kb_simulation_upload(sim, *addr + off * es, raw, c * es, err);
	}
done:
	if (rc && host) {
		free(*host);
		*host = NULL;
	}
	free(f);
	free(raw);
	return rc;
}

int kb__bench_output(kb_simulation *sim, kb_dtype dt, uint64_t addr, size_t n, float *out,
		     kb_error *err)
{
	void *raw = malloc(n * kb_dtype_size(dt));
	int rc;

	if (!raw)
		return kb__err(err, KB_ENOMEM, "out of memory downloading %zu elements", n);
	rc = kb_simulation_download(sim, addr, raw, n * kb_dtype_size(dt), err);
	if (!rc)
		kb__load_f32(out, raw, dt, n);
	free(raw);
	return rc;
}

int kb__bench_dump(kb_simulation *sim, const char *dir, const char *name, kb_dtype dt, int rank,
		   const int64_t *shape, uint64_t addr, kb_error *err)
{
	size_t n = 1;
	char path[4096];
	void *raw;
	int rc;

	if (!dir)
		return KB_OK;
	if (mkdir(dir, 0777) && errno != EEXIST)
		return kb__err(err, KB_EIO, "cannot create dump directory '%s': %s", dir, strerror(errno));
	for (int i = 0; i < rank; i++)
		n *= (size_t)shape[i];
	raw = malloc(n * kb_dtype_size(dt));
	if (!raw)
		return kb__err(err, KB_ENOMEM, "out of memory dumping %s", name);
	snprintf(path, sizeof(path), "%s/%s.npy", dir, name);
	rc = kb_simulation_download(sim, addr, raw, n * kb_dtype_size(dt), err);
	if (!rc)
		rc = kb__npy_write(path, dt, rank, shape, raw, err);
	free(raw);
	return rc;
}

void kb__bench_errors(const float *got, const double *want, size_t n, kb_result *res)
{
	kb__err_stats(got, want, n, &res->max_abs_err, &res->max_rel_err);
}
