/*
 * What a run of a bench is inside the library: the kb_bench_ctx behind the
 * public kb_bench_* calls, the registry's internals, and the built-in
 * definitions (registered through the public kb_registry_add like any
 * plugin's).
 */
#ifndef KB_BENCH_BENCH_IMPL_H
#define KB_BENCH_BENCH_IMPL_H

#include "bench/rng.h"
#include "kernbench/bench.h"
#include "kernbench/registry.h"
#include "kernbench/simulation.h"

/* A tensor declared for --dump (kb_bench_tensor). */
typedef struct kb__dump_tensor {
	char name[64];
	kb_dtype dt;
	int rank;
	int64_t shape[KB_TL_MAX_RANK];
	uint64_t addr;
} kb__dump_tensor;

struct kb_bench_ctx {
	const kb_bench_def *def;
	const kb_bench_info *info;    /* &def->info */
	const kb_params *params;      /* validated against info */
	kb_topology *topo;            /* the run's own copy; a bench may grow it */
	const kb_run_options *opt;
	const char *meta_json;        /* provenance, for the trace's metadata */
	kb_rng rng;                   /* kb_bench_input's generator */
	kb__dump_tensor *dump;        /* kb_bench_tensor's declarations */
	size_t n_dump, cap_dump;
};

/* Parameter values (the default when not given); validated before run. */
int64_t kb__bench_int(const kb_bench_ctx *ctx, const char *name);
double kb__bench_real(const kb_bench_ctx *ctx, const char *name);
const char *kb__bench_str(const kb_bench_ctx *ctx, const char *name);

/* Simulation options of a run, from the run options. */
kb_sim_options kb__bench_sim_options(const kb_bench_ctx *ctx, uint32_t pes);
/* KB_ENOTFOUND "unknown bench" with a "did you mean" or the known names
 * of the built-in benches. */
int kb__bench_unknown(kb_error *err, const char *bench);
/* The same over the benches of reg. */
int kb__registry_unknown(const kb_registry *reg, kb_error *err, const char *bench);

/* " (did you mean 'x'?)" when one of the count names is close to name,
 * else " (known: a, b, ...)", into buf. */
void kb__names_hint(char *buf, size_t n, const char *name, size_t count,
		    const char *(*name_at)(const void *set, size_t i), const void *set);

/* One value of a parameter against its type, range and choices; errors
 * name bench and parameter (err->source: the parameter). */
int kb__param_check(const char *bench, const kb_param_info *pi, const char *value, kb_error *err);

/* The registry of the built-in benches alone, constant data (kb_bench_count,
 * kb_bench_run, the JSON API, sweeps without a registry). */
const kb_registry *kb__builtin_registry(void);
/* Adds the built-in benches to reg. */
int kb__registry_add_builtins(kb_registry *reg, kb_error *err);

struct json_t;
/* kb_result_to_json's object (a new reference); NULL when out of memory. */
struct json_t *kb__result_json(const kb_result *r);
/* A run's parameters (every one, with its value or default, in b's
 * order) as a compact JSON object's text, written directly: NULL where
 * only jansson writes it (or out of memory); kb__params_dump is
 * jansson's. */
char *kb__params_text(const kb_bench_info *b, const kb_params *p);
char *kb__params_dump(const kb_bench_info *b, const kb_params *p);
/* kb_result_to_json's text as jansson writes kb__result_json's object:
 * kb_result_to_json writes the same text itself (result_json.c) and
 * falls back to this where it cannot. */
char *kb__result_to_json_jansson(const kb_result *r);
/* The text written directly; NULL where only jansson's path reproduces it
 * (or out of memory). */
char *kb__result_text(const kb_result *r);
/* The reverse, for results that travel as JSON (sweep transports): fills
 * res (cleared first) from kb__result_json's object; KB_EPARSE naming the
 * member that does not fit. */
int kb__result_from_json(const struct json_t *o, kb_result *res, kb_error *err);

extern const kb_bench_def kb__bench_synthetic;
extern const kb_bench_def kb__bench_gemm;
extern const kb_bench_def kb__bench_decode_opt2;
extern const kb_bench_def kb__bench_decode_opt3;

/* A bench, parameter or tensor name: 1 to max characters of [A-Za-z0-9_.-],
 * so that it stands unquoted in a CSV header, a --param key and a file
 * name. */
int kb__bench_name_ok(const char *s, size_t max);

#endif
