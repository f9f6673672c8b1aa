/*
 * JSON in, JSON out: the library through strings, for bindings (Python's
 * ctypes, ...) that should not copy struct layouts, and for provenance.
 *
 * Inputs are NUL-terminated JSON texts; NULL means "none" (defaults).
 * Outputs are allocated by the library and freed with kb_free. Values are
 * typed: integers are JSON integers, reals JSON reals (null when not
 * finite), strings strings. Errors are returned as everywhere else (a
 * kb_status and the kb_error), never inside the JSON.
 *
 * Thread rules: every function may be called from any thread; calls are
 * independent. Callbacks run on the calling thread.
 */
#ifndef KERNBENCH_JSON_H
#define KERNBENCH_JSON_H

#include "kernbench/common.h"
#include "kernbench/registry.h"
#include "kernbench/simulation.h"
#include "kernbench/sweep.h"
#include "kernbench/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A topology from JSON: NULL or "{}" is the embedded default; an object
 * with "schema" is a topology document (kb_topology_load_string); any other
 * object maps keys to numbers, dotted ({"pe.dma.setup_cycles": 8}) or
 * nested ({"pe": {"dma": {"setup_cycles": 8}}}), applied to the default in
 * order. Errors name the key as kb_topology_set does.
 */
KB_API int kb_topology_from_json(kb_topology **out, const char *topology_json, kb_error *err);

/*
 * Runs a bench. params_json: {"S_kv": 4096, "epilogue": "relu"} (numbers or
 * strings; NULL: defaults). topology_json: as kb_topology_from_json.
 * options_json: {"threads": 1, "data": false, "op_log": PATH,
 * "trace": PATH, "dump": DIR, "argv": ["prog", ...]} (every key optional;
 * "threads" is a number or "auto", the default; an unknown key is KB_EKEY). *result_json receives the object of
 * kb_result_to_json, with "meta" (provenance). Free it with kb_free.
 */
KB_API int kb_bench_run_json(const char *bench, const char *params_json,
			     const char *topology_json, const char *options_json,
			     char **result_json, kb_error *err);
/* kb_bench_run_json on a bench of reg (kernbench/registry.h): a plugin's
 * as well as a built-in; reg NULL: the built-in benches. The registry is
 * only read (any number of threads may run from it at once). */
KB_API int kb_registry_run_json(const kb_registry *reg, const char *bench,
				const char *params_json, const char *topology_json,
				const char *options_json, char **result_json, kb_error *err);

/* Receives one JSON object; return nonzero to stop. */
typedef int (*kb_json_cb)(const char *json, void *payload);

/*
 * A sweep described in JSON: {"benches": ["gemm", ...], "params": {"M":
 * [64, 128]}, "set": {"pe_cost_model.r_cycles_per_byte": [0.0625, 0.25]},
 * "topology": {...base, as kb_topology_from_json...}, "jobs": 0,
 * "threads": 1, "data": false, "argv": [...]}. A scalar stands for a list
 * of one. Rows reach on_row in the fixed order (kb_sweep.h), each as the
 * object of kb_sweep_row_to_json. Returns as kb_sweep_run.
 */
KB_API int kb_sweep_run_json(const char *sweep_json, kb_json_cb on_row, void *payload,
			     kb_error *err);
/* kb_sweep_run_json over the benches of reg (kernbench/registry.h);
 * reg NULL: the built-in benches. reg must not change during the sweep. */
KB_API int kb_registry_sweep_json(const kb_registry *reg, const char *sweep_json,
				  kb_json_cb on_row, void *payload, kb_error *err);

/*
 * One sweep row as a JSON object: {"index", "total", "bench", "keys":
 * {swept key: typed value, ...}, "status" (0 or a kb_status), "error"
 * (message or ""), "result" (the kb_result_to_json object, or null)}.
 * A key that is a parameter of the row's bench has the parameter's type;
 * another key is an integer when every value of it in the sweep is one, a
 * number when every value is, else a string. s is the sweep that produced
 * the row. NULL when out of memory or when row->size (or its result's
 * size) is too small (kb_sweep.h). Free with kb_free.
 */
KB_API char *kb_sweep_row_to_json(const kb_sweep *s, const kb_sweep_row *row);

/*
 * What can be run and written: {"benches": [{"name", "help", "params":
 * [{"name", "type", "default" (typed), "help", "choices" (list or null),
 * "min", "max"}]}], "recipes": [{"name", "operands": [{"name", "access"}],
 * "primary_out"}], "ops": [{"name", "operands"}]} (op kinds of composites:
 * "gemm" with operands a and b, then each MATH kind with its arity).
 */
KB_API int kb_catalog_json(char **out, kb_error *err);
/* kb_catalog_json with the benches of reg, in its order (the built-ins
 * first, then the plugins'); reg NULL: the built-ins. */
KB_API int kb_registry_catalog_json(char **out, const kb_registry *reg, kb_error *err);

/*
 * Options of a provenance record. Use KB_PROVENANCE_OPTIONS_INIT.
 */
typedef struct kb_provenance_options {
	const kb_topology *topology;  /* effective topology; NULL: the default */
	const char *params_json;      /* a JSON value recorded as "params"; NULL: {} */
	int threads;                  /* the run's --threads */
	int argc;                     /* the command line; 0: none (null) */
	const char *const *argv;
} kb_provenance_options;
#define KB_PROVENANCE_OPTIONS_INIT { NULL, NULL, 1, 0, NULL }

/*
 * Where a result came from, as one JSON object: {"kernbench_version",
 * "git_revision" (null when unknown), "topology_sha256" (as `kernbench
 * topology --hash`), "params", "command_line" (list or null), "threads",
 * "host", "date_utc" ("2026-01-31T12:00:00Z")}. Free with kb_free.
 */
KB_API int kb_provenance_json(char **out, const kb_provenance_options *opt, kb_error *err);

/*
 * kb_simulation_create with JSON: topology_json as kb_topology_from_json,
 * options_json {"threads", "data", "op_log", "trace", "pes"} (all optional).
 */
KB_API int kb_simulation_create_json(kb_simulation **out, const char *topology_json,
				     const char *options_json, kb_error *err);
/* kb_simulation_run; *result_json receives the result object (kb_free). */
KB_API int kb_simulation_run_json(kb_simulation *sim, char **result_json, kb_error *err);

#ifdef __cplusplus
}
#endif
#endif
