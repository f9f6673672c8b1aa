#ifndef KB_BENCH_BENCH_UTIL_H
#define KB_BENCH_BENCH_UTIL_H

#include "bench/bench_impl.h"
#include "bench/rng.h"
#include "runtime/simulation_impl.h"

/* Allocates an HBM tensor filled with N(0, std) values rounded to dt;
 * unless host is NULL, *host receives the stored values in double (caller
 * frees). */
int kb__bench_input(kb_simulation *sim, kb_rng *rng, kb_dtype dt, int rank, const int64_t *shape,
		    double std, uint64_t *addr, double **host, kb_error *err);
/* Downloads n elements of dt at addr as fp32. */
int kb__bench_output(kb_simulation *sim, kb_dtype dt, uint64_t addr, size_t n, float *out,
		     kb_error *err);
/* Writes DIR/NAME.npy from HBM (no-op when dir is NULL). */
int kb__bench_dump(kb_simulation *sim, const char *dir, const char *name, kb_dtype dt, int rank,
		   const int64_t *shape, uint64_t addr, kb_error *err);
void kb__bench_errors(const float *got, const double *want, size_t n, kb_result *res);

#endif
