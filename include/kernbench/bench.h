/*
 * Built-in benches: list them, read their parameters, run one by name.
 *
 * Thread rules: every function may be called from any thread; runs of
 * different benches (or the same bench) on different threads at the same
 * time are independent. A kb_result is owned by the caller.
 */
#ifndef KERNBENCH_BENCH_H
#define KERNBENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/common.h"
#include "kernbench/oplog.h"
#include "kernbench/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kb_param_type { KB_PARAM_INT = 0, KB_PARAM_REAL, KB_PARAM_STRING } kb_param_type;

/* One parameter of a bench, with its default as text. */
typedef struct kb_param_info {
	const char *name;
	kb_param_type type;
	const char *default_value;
	const char *help;
	const char *choices;     /* for strings: "a|b|c"; NULL when free-form */
	double min, max;         /* numeric range (inclusive) */
} kb_param_info;

typedef struct kb_bench_info {
	const char *name;
	const char *help;
	const kb_param_info *params;
	size_t n_params;
} kb_bench_info;

/* Number of built-in benches, and the i-th one (NULL past the end). */
KB_API size_t kb_bench_count(void);
KB_API const kb_bench_info *kb_bench_get(size_t i);
/* Looks a bench up by name; NULL when unknown. */
KB_API const kb_bench_info *kb_bench_find(const char *name);

/* Busy time of one engine of one PE. */
typedef struct kb_engine_busy {
	uint32_t pe;
	const char *eng;
	uint64_t busy_ps;
} kb_engine_busy;

/* Where a threaded run's wall time went, in nanoseconds summed over its
 * threads (all 0 for a sequential run). */
typedef struct kb_exec_figures {
	unsigned threads;        /* busy threads at most (never more than cores) */
	uint64_t window_ps;      /* shortest window: the shortest link between workers */
	uint64_t ns_events;      /* running events */
	uint64_t ns_barrier;     /* waiting at barriers for the other threads */
	uint64_t ns_next;        /* finding the next window (minima, horizons, density) */
	uint64_t ns_drain;       /* moving delivered messages into heaps */
	uint64_t ns_oplog;       /* merging and writing the op_log (all threads) */
	uint64_t ns_wall;        /* the executor's wall time */
	uint64_t ns_oplog_serial; /* of ns_oplog, the sinks that run in order on one
				   * thread: hashing and writing (any executor) */
	int gathered;            /* windows too small to pay for threads (auto and
				  * --threads 0 only): 1 PEs regrouped whole on
				  * workers, 2 the rest ran sequentially */
} kb_exec_figures;

/*
 * What a run reports (the figures of `kernbench run --json`).
 *
 * size makes the struct extensible without breaking programs built
 * earlier. The caller sets it (KB_RESULT_INIT, or sizeof(kb_result))
 * before passing the struct to kb_bench_run, kb_registry_run or
 * kb_simulation_run; the library writes no more than size bytes, frees
 * what it would have handed over beyond them, and sets size to the bytes
 * it filled. Fields are only ever added at the end: a program built
 * against this header keeps working with a later library, and one built
 * against a later header learns from size which fields this library
 * filled. A size under KB_RESULT_SIZE_V1 (a struct left uninitialised or
 * zeroed) is KB_EINVAL, naming res->size. kb_exec_figures and
 * kb_engine_busy keep their layout: a new figure is a new field at the end
 * of kb_result.
 */
typedef struct kb_result {
	size_t size;             /* sizeof(kb_result) (KB_RESULT_INIT); must be the first member */
	char bench[64];
	int threads;             /* as requested: KB_THREADS_AUTO, 0 one per engine, 1 sequential, N */
	unsigned workers;        /* worker threads actually used */
	int data;                /* data mode */
	uint64_t sim_time_ps;
	uint64_t events;
	uint64_t windows;        /* synchronization windows (threaded executors; 0 sequential) */
	uint64_t parallel_windows; /* windows run by more than one thread */
	uint64_t records;        /* op_log records */
	uint64_t commands;       /* dispatched commands (all PEs) */
	uint64_t dispatch_ps;    /* PE_CPU time spent dispatching (all PEs) */
	uint64_t tiles;          /* KV tiles (decode) or output tiles (gemm); 0 if none */
	/* The per-tile metric: PE_CPU dispatch of the commands
	 * of the tile loop (decode: the KV-tile loop) / tiles, in ns; NaN
	 * without tiles. */
	double dispatch_per_tile_ns;
	/* All of the kernel's dispatch (decode: with the Q load, the fills,
	 * the split-KV merge and the final division) / tiles, in ns. */
	double dispatch_kernel_per_tile_ns;
	double wall_s;
	double events_per_s;
	char oplog_sha256[65];
	double max_abs_err;      /* data mode; NaN otherwise */
	double max_rel_err;      /* data mode; NaN otherwise */
	uint32_t pes;            /* PEs used */
	kb_engine_busy *busy;    /* per PE per engine; n_busy entries */
	size_t n_busy;
	char *params_json;       /* the effective parameters as a JSON object */
	char *meta_json;         /* provenance (kb_provenance_json) of kb_bench_run; NULL otherwise */
	kb_exec_figures exec;    /* the executor's breakdown */
	/* Later fields go here, and KB_RESULT_SIZE_V1 stays the end of exec. */
	/* Of events, those a threaded run ran on one thread with every LP
	 * on it: auto's stretches where that measured faster than windows,
	 * and the rest of a run whose windows were too small (gathered 2). */
	uint64_t alone_events;
	uint64_t exec_switches;  /* auto's changes between windows and one thread */
} kb_result;
/* The size of the first layout with a size field: the least size accepted. */
#define KB_RESULT_SIZE_V1 (offsetof(kb_result, exec) + sizeof(kb_exec_figures))
#define KB_RESULT_INIT \
	{ sizeof(kb_result), { 0 }, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, { 0 }, \
	  0.0, 0.0, 0, NULL, 0, NULL, NULL, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 0, 0 }

/* Frees what a kb_result owns (not the struct; the fields within its size).
 * Accepts NULL. */
KB_API void kb_result_clear(kb_result *res);
/* The result as one JSON object (the `run --json` line); free with kb_free.
 * NULL when out of memory or when res->size is under KB_RESULT_SIZE_V1. */
KB_API char *kb_result_to_json(const kb_result *res);

/* Options of one run. Use KB_RUN_OPTIONS_INIT. */
typedef struct kb_run_options {
	int threads;             /* KB_THREADS_AUTO (default), 0: one thread per engine, 1: sequential, N */
	int data;                /* nonzero: data mode */
	const char *oplog_path;  /* NULL: no file (the hash is computed anyway) */
	const char *trace_path;  /* Chrome/Perfetto trace, NULL: none */
	const char *dump_dir;    /* data mode: write .npy tensors here, NULL: none */
	kb_oplog_cb on_record;   /* NULL: none */
	void *payload;
	int argc;                /* the command line, recorded in the provenance; 0: none */
	const char *const *argv;
} kb_run_options;
#define KB_RUN_OPTIONS_INIT { KB_THREADS_AUTO, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL }

/* A list of "name=value" parameter assignments. kb_params_create makes an
 * empty one into *out; errors: KB_EINVAL (out NULL), KB_ENOMEM. */
typedef struct kb_params kb_params;
KB_API int kb_params_create(kb_params **out, kb_error *err);
/* Adds or replaces "name=value"; KB_EINVAL on a malformed assignment. */
KB_API int kb_params_set(kb_params *p, const char *name, const char *value, kb_error *err);
KB_API int kb_params_set_assignment(kb_params *p, const char *name_eq_value, kb_error *err);
KB_API void kb_params_destroy(kb_params *p);

/*
 * Runs a bench. params may be NULL (all defaults); topo may be NULL (the
 * embedded default). Unknown or out-of-range parameters are KB_ENOTFOUND /
 * KB_ERANGE / KB_EPARSE naming the parameter; simulation and validation
 * errors are returned with their message. res->size must be set
 * (KB_RESULT_INIT); res is filled on success and must be cleared with
 * kb_result_clear. res->meta_json records where the
 * result came from (kb_provenance_json: version, topology SHA-256, params,
 * opt->argv, threads, host, date); with opt->dump_dir, the same object is
 * written there as meta.json.
 */
KB_API int kb_bench_run(const char *bench, const kb_params *params, const kb_topology *topo,
			const kb_run_options *opt, kb_result *res, kb_error *err);

#ifdef __cplusplus
}
#endif
#endif
