/*
 * Helpers of the data-mode suite (check_data*.c): a simulation with tensors
 * uploaded from and downloaded to fp32, whole bench runs with a dump, .npy
 * files read back as double, the error measure the suite compares with.
 */
#ifndef KB_TESTS_DATAUTIL_H
#define KB_TESTS_DATAUTIL_H

#include <stddef.h>
#include <stdint.h>

#include <kernbench.h>

#include "bench/rng.h"

/* A simulation of pes PEs, sequential, data mode or not; asserts success. */
kb_simulation *kbt_data_sim(int data, uint32_t pes);
/* Allocates a tensor of dtype dt and shape (rank dims) and uploads v (fp32,
 * converted to dt) unless v is NULL; returns its address. */
uint64_t kbt_data_put(kb_simulation *sim, kb_dtype dt, int rank, const int64_t *shape,
		      const float *v);
/* Downloads n elements of dtype dt at addr into out as fp32. */
void kbt_data_get(kb_simulation *sim, kb_dtype dt, uint64_t addr, size_t n, float *out);
/* Launches fn(args) on PE 0 and runs the simulation; asserts success. */
void kbt_data_run(kb_simulation *sim, kb_kernel_fn fn, void *args);
/* Uniform values in [lo, hi), rounded to fp32. */
void kbt_fill_uniform(kb_rng *r, float *v, size_t n, double lo, double hi);
/* max |got - want| / max |want|, NaN-propagating; *abs_out (if not NULL)
 * receives max |got - want|. */
double kbt_normwise_rel(const double *got, const double *want, size_t n, double *abs_out);

/* Runs a bench ("K=V" params, NULL-terminated) in data mode (or not) with an
 * optional dump directory; res is cleared first. Returns kb_bench_run's status. */
int kbt_data_bench(const char *name, const char *const *params, int data, int threads,
		   const char *dump, kb_result *res, kb_error *err);
/* Reads DIR/NAME.npy as double; asserts its dtype, rank and shape. */
double *kbt_npy_read(const char *dir, const char *name, kb_dtype want_dt, int want_rank,
		     const int64_t *want_shape);
/* Removes the .npy files a bench dumps from dir, then dir; frees dir. */
void kbt_rm_dump(char *dir);

#endif
