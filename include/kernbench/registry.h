/*
 * Benches as registered definitions, registries of them, and plugins.
 *
 * A bench is a kb_bench_def: a name, a one-line help, typed parameters
 * (defaults, ranges, choices), a run function that builds the machine,
 * allocates and fills tensors and launches kernels through kb_simulation,
 * optionally a data-mode reference check that fills max_abs_err, and,
 * declared while it runs, the tensors that --dump writes. Definitions live
 * in a kb_registry object that the caller passes to runs and sweeps; the
 * built-in benches are registered through the same call
 * (kb_registry_create with builtins set), and a plugin (a shared object
 * exporting kb_plugin_init) adds its own with kb_registry_load_plugin.
 *
 * Writing a bench:
 *
 *   static int run(kb_bench_ctx *ctx, kb_result *res, kb_error *err)
 *   {
 *       int64_t n = kb_bench_param_int(ctx, "n");
 *       kb_simulation *sim;
 *       uint64_t x;
 *       ...
 *       rc = kb_bench_simulation(ctx, 1, &sim, err);   // the run's options
 *       rc = kb_bench_input(ctx, sim, KB_FP16, 1, &n, 1.0, &x, &host, err);
 *       rc = kb_bench_tensor(ctx, "x", KB_FP16, 1, &n, x, err); // for --dump
 *       rc = kb_simulation_launch(sim, kernel, &args, 0, 1, err);
 *       rc = kb_bench_simulate(ctx, sim, &state, res, err); // run, check, dump
 *       kb_simulation_destroy(sim);
 *   }
 *   static const kb_param_info params[] = {
 *       { "n", KB_PARAM_INT, "256", "elements", NULL, 1, 1 << 20 },
 *   };
 *   static const kb_bench_def def = {
 *       KB_BENCH_ABI, { "mybench", "what it measures", params, 1 }, run, check, NULL
 *   };
 *   kb_registry_add(reg, &def, &err);
 *
 * A plugin exports, with C linkage and default visibility:
 *
 *   KB_PLUGIN_EXPORT int kb_plugin_init(kb_registry *reg, unsigned abi, kb_error *err)
 *   {
 *       return kb_registry_add(reg, &def, err);
 *   }
 *
 * Thread rules: a registry is changed (kb_registry_add, kb_registry_load_*)
 * from one thread at a time, with no run or sweep using it; once filled,
 * any number of threads may look benches up and run them at once. A
 * bench's run and check functions are called on the thread that runs the
 * bench, several at once for a sweep with more than one job: they must not
 * share mutable state without a lock. kb_bench_ctx functions are called
 * from the run and check functions only (the thread of that run).
 */
#ifndef KERNBENCH_REGISTRY_H
#define KERNBENCH_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/bench.h"
#include "kernbench/common.h"
#include "kernbench/simulation.h"
#include "kernbench/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of the bench interface: the layout of kb_bench_def,
 * kb_bench_info, kb_param_info and of the kb_result a run function fills,
 * and the meaning of the kb_bench_ctx calls. (2: kb_result gained its size
 * field.) A definition records the version it was compiled against in its
 * first member; kb_registry_add refuses one whose version this library does
 * not implement, so a plugin built against an incompatible library is
 * refused with a message instead of being misread. Raised whenever one of
 * those structs changes.
 */
#define KB_BENCH_ABI 2u

typedef struct kb_registry kb_registry;
/* One run of a bench, as its run and check functions see it (opaque). */
typedef struct kb_bench_ctx kb_bench_ctx;

/* Runs the bench: builds the machine (kb_bench_simulation), allocates and
 * fills the tensors (kb_bench_input), launches the kernels and runs them
 * (kb_bench_simulate), and fills res (the library's, of its full size). On failure it returns the kb_status
 * with err filled, and leaves nothing allocated (the library clears res). */
typedef int (*kb_bench_run_fn)(kb_bench_ctx *ctx, kb_result *res, kb_error *err);
/* Data mode only, called by kb_bench_simulate after a successful run with
 * the run function's state: compares the simulated outputs with an
 * independent reference and fills res->max_abs_err and res->max_rel_err
 * (kb_bench_compare does both). */
typedef int (*kb_bench_check_fn)(kb_bench_ctx *ctx, kb_simulation *sim, void *state,
				 kb_result *res, kb_error *err);

/*
 * A bench definition. kb_registry_add copies it, its strings and its
 * parameter table, so they need not outlive the call; the functions and
 * the payload must stay valid as long as the registry (a plugin stays
 * loaded until its registry is destroyed).
 *
 * info.name: letters, digits, '_', '-' and '.', at most 63 characters,
 * unique in the registry. info.help: one line. info.params: the typed
 * parameters; a parameter's name is unique within the bench; its
 * default_value must pass its own type, range (KB_PARAM_INT and
 * KB_PARAM_REAL: min <= default <= max) and choices (KB_PARAM_STRING with
 * choices "a|b|c"). kb_registry_add checks all of it and names the bench
 * and the parameter on error.
 */
typedef struct kb_bench_def {
	unsigned abi;                 /* KB_BENCH_ABI; must be the first member */
	kb_bench_info info;           /* name, help, params, n_params */
	kb_bench_run_fn run;          /* required */
	kb_bench_check_fn check;      /* NULL: no data-mode check (max_abs_err stays NaN) */
	void *payload;                /* returned by kb_bench_payload(ctx) */
} kb_bench_def;
#define KB_BENCH_DEF_INIT { KB_BENCH_ABI, { NULL, NULL, NULL, 0 }, NULL, NULL, NULL }

/* ---- registries ------------------------------------------------------- */

typedef struct kb_registry_options {
	int builtins;                 /* nonzero (default): start with the built-in benches */
} kb_registry_options;
#define KB_REGISTRY_OPTIONS_INIT { 1 }

/* Creates a registry (opt NULL: KB_REGISTRY_OPTIONS_INIT). */
KB_API int kb_registry_create(kb_registry **out, const kb_registry_options *opt, kb_error *err);
/* Destroys a registry and unloads its plugins. No run or sweep may be
 * using it. Accepts NULL. */
KB_API void kb_registry_destroy(kb_registry *reg);

/* Adds a bench. KB_EINVAL for an invalid definition (names the bench and
 * the parameter), KB_ESTATE when the name is taken, KB_ERANGE when
 * def->abi is not KB_BENCH_ABI of this library. */
KB_API int kb_registry_add(kb_registry *reg, const kb_bench_def *def, kb_error *err);

/* Iteration: the number of benches, and the i-th in the order added (the
 * built-ins first); NULL past the end. */
KB_API size_t kb_registry_count(const kb_registry *reg);
KB_API const kb_bench_def *kb_registry_at(const kb_registry *reg, size_t i);
/* Looks a bench up by name. KB_ENOTFOUND, with a "did you mean" or the
 * known names in the message, when there is none. */
KB_API int kb_registry_lookup(const kb_registry *reg, const char *name, const kb_bench_def **out,
			      kb_error *err);

/*
 * Runs a bench of the registry: kb_bench_run with an explicit registry
 * (kb_bench_run itself uses the built-in benches only). Parameters are
 * checked against the definition first (unknown: KB_ENOTFOUND, bad type:
 * KB_EPARSE, out of range or not a choice: KB_ERANGE, naming it).
 */
KB_API int kb_registry_run(const kb_registry *reg, const char *bench, const kb_params *params,
			   const kb_topology *topo, const kb_run_options *opt, kb_result *res,
			   kb_error *err);

/* ---- plugins ---------------------------------------------------------- */

/* The entry point a plugin exports, by the name "kb_plugin_init". abi is
 * the library's KB_BENCH_ABI; a plugin may refuse an older library by
 * returning KB_ERANGE. It registers its benches with kb_registry_add and
 * returns 0, or a kb_status with err filled. */
typedef int (*kb_plugin_init_fn)(kb_registry *reg, unsigned abi, kb_error *err);
#define KB_PLUGIN_ENTRY "kb_plugin_init"
#if defined(__GNUC__)
#define KB_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define KB_PLUGIN_EXPORT
#endif
/* Declared here so that a plugin's definition is checked against it; the
 * library itself defines no such function. */
KB_PLUGIN_EXPORT int kb_plugin_init(kb_registry *reg, unsigned abi, kb_error *err);

/*
 * Loads a plugin (a shared object, dlopen'ed with RTLD_NOW | RTLD_LOCAL)
 * and calls its kb_plugin_init. A file already loaded into this registry
 * (the same real path) is not loaded twice. Errors name the file: KB_EIO
 * when it cannot be loaded, KB_ENOTFOUND when it exports no
 * kb_plugin_init, and the entry point's own error (a duplicate bench is
 * KB_ESTATE, an invalid one KB_EINVAL, an incompatible ABI KB_ERANGE); the
 * benches a failing plugin added before its error stay registered.
 */
KB_API int kb_registry_load_plugin(kb_registry *reg, const char *path, kb_error *err);
/*
 * Loads every plugin of a colon-separated list, in order, as
 * KERNBENCH_PLUGIN_PATH is read: an entry naming a directory loads its
 * "*.so" files in name order; any other entry is a plugin file; empty
 * entries are skipped. Stops at the first error. path NULL: nothing.
 */
KB_API int kb_registry_load_path(kb_registry *reg, const char *path, kb_error *err);

/* ---- inside a bench: kb_bench_ctx ------------------------------------- */

/* The bench's definition, and its payload. */
KB_API const kb_bench_def *kb_bench_def_of(const kb_bench_ctx *ctx);
KB_API void *kb_bench_payload(const kb_bench_ctx *ctx);
/* The run's options (threads, data mode, output paths, dump directory). */
KB_API const kb_run_options *kb_bench_options(const kb_bench_ctx *ctx);
/* A parameter's value (its default when the run did not set it), already
 * checked against its type, range and choices. An unknown name gives 0,
 * 0.0 or "". */
KB_API int64_t kb_bench_param_int(const kb_bench_ctx *ctx, const char *name);
KB_API double kb_bench_param_real(const kb_bench_ctx *ctx, const char *name);
KB_API const char *kb_bench_param_str(const kb_bench_ctx *ctx, const char *name);
/* The run's own copy of the topology: a bench may change it (for example
 * grow the machine to the PEs it needs) before kb_bench_simulation. */
KB_API kb_topology *kb_bench_topology(kb_bench_ctx *ctx);

/* Creates a simulation of the run's topology with the run's options
 * (threads, data mode, op_log, trace and its provenance, callback) and
 * pes PEs (0: all). The caller destroys it. */
KB_API int kb_bench_simulation(kb_bench_ctx *ctx, uint32_t pes, kb_simulation **out,
			       kb_error *err);
/* Sets the seed of the run's generator of inputs (before any kb_bench_input; the
 * seed is 1 otherwise). The same seed gives the same inputs everywhere. */
KB_API void kb_bench_seed(kb_bench_ctx *ctx, uint64_t seed);
/*
 * Allocates an HBM tensor. In data mode it is filled with values drawn
 * from N(0, std) by the run's generator and rounded to dt, and, unless
 * host is NULL, *host receives those stored values in double for the
 * reference (free() it). In timing mode the tensor is only allocated and
 * *host is NULL.
 */
KB_API int kb_bench_input(kb_bench_ctx *ctx, kb_simulation *sim, kb_dtype dt, int rank,
			  const int64_t *shape, double std, uint64_t *addr, double **host,
			  kb_error *err);
/* Declares a tensor that --dump writes as NAME.npy after the run (data
 * mode; nothing otherwise). name: letters, digits, '_', '-', '.'. */
KB_API int kb_bench_tensor(kb_bench_ctx *ctx, const char *name, kb_dtype dt, int rank,
			   const int64_t *shape, uint64_t addr, kb_error *err);
/*
 * Runs the simulation (kb_simulation_run into res), then, in data mode,
 * the definition's check with state, then writes the declared tensors
 * when the run dumps. res is filled as by kb_simulation_run; the bench may
 * add its own figures (tiles, dispatch_per_tile_ns) afterwards.
 */
KB_API int kb_bench_simulate(kb_bench_ctx *ctx, kb_simulation *sim, void *state, kb_result *res,
			     kb_error *err);
/* Fills err (may be NULL) with code, a printf-style message and, for a
 * rule between parameters or a bad value, the parameter's name in
 * err->source (param NULL: none); returns code. For run and check
 * functions, whose errors then read like the library's own. */
KB_API int kb_bench_error(kb_error *err, int code, const char *param, const char *fmt, ...)
	KB_PRINTF(4, 5);
/* For a check: downloads n elements of dt at addr and sets
 * res->max_abs_err and res->max_rel_err against want (max_rel: max_abs over
 * max |want|). */
KB_API int kb_bench_compare(kb_simulation *sim, kb_dtype dt, uint64_t addr, const double *want,
			    size_t n, kb_result *res, kb_error *err);

#ifdef __cplusplus
}
#endif
#endif
