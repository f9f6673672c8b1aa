/*
 * Sweeps: many independent bench runs over the Cartesian product of
 * parameter and topology-key lists, on a pool of threads, with rows
 * delivered in a fixed order whatever the pool size.
 *
 * Point order: benches in the order added; within a bench, the odometer
 * over the swept keys in the order added (--param keys first, then --set
 * keys), the first key varying slowest and the last fastest.
 *
 * Thread rules: a kb_sweep is used from one thread at a time; kb_sweep_run
 * starts its own worker threads and calls on_row on the calling thread.
 * kb_sweep_cancel may be called from any thread (e.g. a signal handler's
 * helper thread).
 */
#ifndef KERNBENCH_SWEEP_H
#define KERNBENCH_SWEEP_H

#include <stddef.h>

#include "kernbench/bench.h"
#include "kernbench/common.h"
#include "kernbench/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kb_sweep kb_sweep;

typedef struct kb_sweep_options {
	unsigned jobs;        /* points run at once; 0: the number of online cores */
	int threads;          /* --threads of each point (default 1: sequential) */
	int data;             /* data mode for every point */
	/* The benches a sweep may name (kernbench/registry.h); NULL: the
	 * built-in benches. Used, not copied: it must outlive the sweep and
	 * not change while the sweep exists. */
	const struct kb_registry *registry;
} kb_sweep_options;
#define KB_SWEEP_OPTIONS_INIT { 0, 1, 0, NULL }

/* One finished point. Pointers are valid during the callback only. */
typedef struct kb_sweep_row {
	size_t index;                 /* position in the fixed order, 0-based */
	size_t total;                 /* number of points */
	const char *bench;
	size_t n_keys;                /* swept keys of this sweep (same for every row) */
	const char *const *keys;      /* "S_kv", "pe_cost_model.r_cycles_per_byte", ... */
	const char *const *values;    /* this point's value of each key */
	int status;                   /* 0 or a kb_status */
	const char *error;            /* message when status != 0, else "" */
	const kb_result *result;      /* NULL when status != 0 */
} kb_sweep_row;

/* Receives rows in index order; return nonzero to stop the sweep. */
typedef int (*kb_sweep_cb)(const kb_sweep_row *row, void *payload);

KB_API int kb_sweep_create(kb_sweep **out, const kb_sweep_options *opt, kb_error *err);
KB_API void kb_sweep_destroy(kb_sweep *s);  /* accepts NULL */
/* Adds a bench of the sweep's registry (KB_ENOTFOUND when unknown). */
KB_API int kb_sweep_add_bench(kb_sweep *s, const char *bench, kb_error *err);
/* Adds a bench parameter with a comma-separated list of values ("64,128"). */
KB_API int kb_sweep_add_param(kb_sweep *s, const char *name, const char *values, kb_error *err);
/* Adds a topology key with a comma-separated list of values. */
KB_API int kb_sweep_add_set(kb_sweep *s, const char *key, const char *values, kb_error *err);
/* Base topology for every point (copied); default: the embedded one. */
KB_API int kb_sweep_set_topology(kb_sweep *s, const kb_topology *topo, kb_error *err);
/* Number of points. */
KB_API size_t kb_sweep_points(const kb_sweep *s);
/* Marks point `index` as already done (resume): it is neither run nor reported. */
KB_API int kb_sweep_skip(kb_sweep *s, size_t index, kb_error *err);
/* Describes point `index` without running it (keys/values as in rows). */
KB_API int kb_sweep_point(const kb_sweep *s, size_t index, const char **bench,
			  const char *const **values, kb_error *err);
/* Runs every point not skipped; returns 0 when every point ran (even if
 * some points failed: see row.status), KB_ESTATE when the sweep was
 * stopped (kb_sweep_cancel, or on_row returned nonzero; the rows delivered
 * are a prefix of the order), another error when it could not run. */
KB_API int kb_sweep_run(kb_sweep *s, kb_sweep_cb on_row, void *payload, kb_error *err);
/* Asks a running sweep to stop after the points in progress (any thread). */
KB_API void kb_sweep_cancel(kb_sweep *s);

#ifdef __cplusplus
}
#endif
#endif
