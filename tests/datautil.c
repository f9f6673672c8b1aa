/* Helpers of the data-mode suite (datautil.h says what each does). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "datautil.h"
#include "base/fp16.h"
#include "num/npy.h"

kb_simulation *kbt_data_sim(int data, uint32_t pes)
{
	kb_sim_options o = KB_SIM_OPTIONS_INIT;
	kb_simulation *sim = NULL;
	kb_error err;
	int rc;

	o.data = data;
	o.threads = 1;
	o.pes = pes;
	rc = kb_simulation_create(&sim, NULL, &o, &err);
	ck_assert_msg(rc == 0, "kb_simulation_create: %s", err.message);
	return sim;
}

uint64_t kbt_data_put(kb_simulation *sim, kb_dtype dt, int rank, const int64_t *shape,
		      const float *v)
{
	kb_error err;
	uint64_t addr = 0;
	size_t n = 1;
	void *raw;
	int rc = kb_simulation_alloc(sim, dt, rank, shape, 0, &addr, &err);

	ck_assert_msg(rc == 0, "kb_simulation_alloc: %s", err.message);
	if (!v)
		return addr;
	for (int i = 0; i < rank; i++)
		n *= (size_t)shape[i];
	raw = malloc(n * kb_dtype_size(dt));
	ck_assert_ptr_nonnull(raw);
	kb__store_f32(raw, dt, v, n);
	rc = kb_simulation_upload(sim, addr, raw, n * kb_dtype_size(dt), &err);
	ck_assert_msg(rc == 0, "kb_simulation_upload: %s", err.message);
	free(raw);
	return addr;
}

void kbt_data_get(kb_simulation *sim, kb_dtype dt, uint64_t addr, size_t n, float *out)
{
	kb_error err;
	void *raw = malloc(n * kb_dtype_size(dt));
	int rc;

	ck_assert_ptr_nonnull(raw);
	rc = kb_simulation_download(sim, addr, raw, n * kb_dtype_size(dt), &err);
	ck_assert_msg(rc == 0, "kb_simulation_download: %s", err.message);
	kb__load_f32(out, raw, dt, n);
	free(raw);
}

void kbt_data_run(kb_simulation *sim, kb_kernel_fn fn, void *args)
{
	kb_error err;
	int rc = kb_simulation_launch(sim, fn, args, 0, 1, &err);

	ck_assert_msg(rc == 0, "kb_simulation_launch: %s", err.message);
	rc = kb_simulation_run(sim, NULL, &err);
	ck_assert_msg(rc == 0, "kb_simulation_run: %s (%d)", err.message, rc);
}

/* Uniform values in [lo, hi), rounded to fp32. */
void kbt_fill_uniform(kb_rng *r, float *v, size_t n, double lo, double hi)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (float)(lo + (hi - lo) * kb__rng_uniform(r));
}

static double max_abs_of(const double *v, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		if (fabs(v[i]) > m)
			m = fabs(v[i]);
	return m;
}

/* max |got - want| / max |want|, NaN-propagating. */
double kbt_normwise_rel(const double *got, const double *want, size_t n, double *abs_out)
{
	double e = 0, m = max_abs_of(want, n);

	for (size_t i = 0; i < n; i++) {
		double d = fabs(got[i] - want[i]);

		if (d > e || isnan(d))
			e = isnan(d) ? NAN : d;
	}
	if (abs_out)
		*abs_out = e;
	return m > 0 ? e / m : e;
}

/* ------------------------------------------------------------------ */
/* benches: runs, dumps, references                                    */
/* ------------------------------------------------------------------ */

/* Runs a bench in data mode (or not) with an optional dump directory. */
int kbt_data_bench(const char *name, const char *const *params, int data, int threads,
		   const char *dump, kb_result *res, kb_error *err)
{
	kb_params *p = NULL;
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	int rc = kb_params_create(&p, err);

	for (size_t i = 0; !rc && params && params[i]; i++)
		rc = kb_params_set_assignment(p, params[i], err);
	o.data = data;
	o.threads = threads;
	o.dump_dir = dump;
	*res = (kb_result)KB_RESULT_INIT;
	if (!rc)
		rc = kb_bench_run(name, p, NULL, &o, res, err);
	kb_params_destroy(p);
	return rc;
}

/* Reads DIR/NAME.npy as double; checks rank and dtype when given. */
double *kbt_npy_read(const char *dir, const char *name, kb_dtype want_dt, int want_rank,
		     const int64_t *want_shape)
{
	char path[4096];
	kb_dtype dt;
	int rank, rc;
	int64_t shape[KB_NPY_MAX_RANK];
	void *raw = NULL;
	size_t n = 1;
	float *f;
	double *d;
	kb_error err;

	snprintf(path, sizeof(path), "%s/%s.npy", dir, name);
	rc = kb__npy_read(path, &dt, &rank, shape, &raw, &err);
	ck_assert_msg(rc == 0, "reading %s: %s", path, err.message);
	ck_assert_msg(dt == want_dt, "%s: dtype %s, want %s", path, kb_dtype_name(dt),
		      kb_dtype_name(want_dt));
	ck_assert_msg(rank == want_rank, "%s: rank %d, want %d", path, rank, want_rank);
	for (int i = 0; i < rank; i++) {
		ck_assert_msg(shape[i] == want_shape[i], "%s: dim %d = %lld, want %lld", path, i,
			      (long long)shape[i], (long long)want_shape[i]);
		n *= (size_t)shape[i];
	}
	f = malloc(n * sizeof(float));
	d = malloc(n * sizeof(double));
	ck_assert(f && d);
	kb__load_f32(f, raw, dt, n);
	for (size_t i = 0; i < n; i++)
		d[i] = f[i];
	free(f);
	free(raw);
	return d;
}

void kbt_rm_dump(char *dir)
{
	static const char *const names[] = { "q", "k", "v", "o", "m", "l", "a", "b", "c", "d", "bias" };
	char path[4096];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s.npy", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
	free(dir);
}
