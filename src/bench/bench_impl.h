/* What a built-in bench is: its description and a function that runs it. */
#ifndef KB_BENCH_BENCH_IMPL_H
#define KB_BENCH_BENCH_IMPL_H

#include "kernbench/bench.h"
#include "kernbench/simulation.h"

typedef struct kb_bench_ctx {
	const kb_bench_info *info;
	const kb_params *params;      /* validated against info */
	kb_topology *topo;            /* the run's own copy; a bench may grow it */
	const kb_run_options *opt;
	const char *meta_json;        /* provenance, for the trace's metadata */
} kb_bench_ctx;

typedef struct kb_bench_def {
	kb_bench_info info;
	int (*run)(kb_bench_ctx *ctx, kb_result *res, kb_error *err);
} kb_bench_def;

/* Parameter values (the default when not given); validated before run. */
int64_t kb__bench_int(const kb_bench_ctx *ctx, const char *name);
double kb__bench_real(const kb_bench_ctx *ctx, const char *name);
const char *kb__bench_str(const kb_bench_ctx *ctx, const char *name);

/* Simulation options of a run, from the run options. */
kb_sim_options kb__bench_sim_options(const kb_bench_ctx *ctx, uint32_t pes);
/* KB_ENOTFOUND "unknown bench" with a "did you mean" or the known names. */
int kb__bench_unknown(kb_error *err, const char *bench);

extern const kb_bench_def kb__bench_synthetic;
extern const kb_bench_def kb__bench_gemm;
extern const kb_bench_def kb__bench_decode_opt2;
extern const kb_bench_def kb__bench_decode_opt3;

#endif
