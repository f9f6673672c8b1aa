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
#include <stdio.h>

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

/*
 * One finished point. Pointers are valid during the callback only.
 *
 * size makes the struct extensible: in the rows the library delivers it is
 * the library's sizeof(kb_sweep_row), and a field added later lies beyond
 * the size of an older library (read a newer field only when size covers
 * it). A row given back to the library (kb_sweep_format_row,
 * kb_sweep_writer_row, kb_sweep_row_figures, kb_sweep_row_to_json) is one
 * it delivered or one the caller built from KB_SWEEP_ROW_INIT; a size
 * under KB_SWEEP_ROW_SIZE_V1 (an uninitialised row) is KB_EINVAL, and so
 * is a result whose size is under KB_RESULT_SIZE_V1.
 */
typedef struct kb_sweep_row {
	size_t size;                  /* sizeof(kb_sweep_row); must be the first member */
	size_t index;                 /* position in the fixed order, 0-based */
	size_t total;                 /* number of points */
	const char *bench;
	size_t n_keys;                /* swept keys of this sweep (same for every row) */
	const char *const *keys;      /* "S_kv", "pe_cost_model.r_cycles_per_byte", ... */
	const char *const *values;    /* this point's value of each key */
	int status;                   /* 0 or a kb_status */
	const char *error;            /* message when status != 0, else "" */
	const kb_result *result;      /* NULL when status != 0 */
	/* Later fields go here, and KB_SWEEP_ROW_SIZE_V1 stays the end of result. */
} kb_sweep_row;
/* The size of the first layout with a size field: the least size accepted. */
#define KB_SWEEP_ROW_SIZE_V1 (offsetof(kb_sweep_row, result) + sizeof(const kb_result *))
#define KB_SWEEP_ROW_INIT { sizeof(kb_sweep_row), 0, 0, NULL, 0, NULL, NULL, 0, NULL, NULL }

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


/* ---- rows as text -------------------------------------------------------
 *
 * One encoding of a row (bench, typed key values, status, error, result),
 * built with jansson, gives every text the library writes and reads back:
 * CSV (RFC 4180, "\n" line ends, a header line) and JSON Lines (one object
 * per line, key values and figures as JSON numbers). The columns: bench,
 * each swept key, the figures below (the data-mode error figures only in a
 * data-mode sweep), oplog_sha256, status ("ok" or "error"), error. */

typedef enum kb_sweep_format { KB_SWEEP_CSV = 0, KB_SWEEP_JSONL = 1 } kb_sweep_format;

/* The numeric figures of a row, in column order. */
typedef enum kb_sweep_fig {
	KB_SWEEP_FIG_SIM_NS = 0,            /* sim_time_ns: ps / 1000 with 3 decimals */
	KB_SWEEP_FIG_DISPATCH_PER_TILE_NS,  /* dispatch_per_tile_ns (3 decimals; absent without tiles) */
	KB_SWEEP_FIG_COMMANDS,              /* commands */
	KB_SWEEP_FIG_EVENTS,                /* events */
	KB_SWEEP_FIG_WALL_S,                /* wall_s (6 decimals) */
	KB_SWEEP_FIG_MAX_ABS_ERR,           /* data mode: max_abs_err (9 digits) */
	KB_SWEEP_FIG_MAX_REL_ERR,           /* data mode: max_rel_err (9 digits) */
	KB_SWEEP_N_FIGS
} kb_sweep_fig;

/* Column name of a figure ("sim_time_ns", ...); NULL outside the enum. */
KB_API const char *kb_sweep_fig_name(int fig);
/* Figure columns of a sweep with or without data mode. */
KB_API size_t kb_sweep_n_figs(int data);

/* The figures of one point as its row gives them. The caller sets size
 * (KB_SWEEP_FIGURES_INIT); the library fills no more than size bytes, so a
 * figure added later does not break a program built earlier. */
typedef struct kb_sweep_figures {
	size_t size;                  /* sizeof(kb_sweep_figures) */
	int present;                  /* the point has a row */
	int ok;                       /* its status is "ok" */
	double fig[KB_SWEEP_N_FIGS];  /* NaN where the row has no such figure */
} kb_sweep_figures;
#define KB_SWEEP_FIGURES_INIT { sizeof(kb_sweep_figures), 0, 0, { 0 } }

/* The CSV header line with its newline ("" for JSON Lines); free with kb_free.
 * A fixed column whose name a swept key takes is result.NAME (doc/sweep.md). */
KB_API int kb_sweep_header(char **out, const kb_sweep *s, kb_sweep_format fmt, int data,
			   kb_error *err);
/* One row as a line of text with its newline; free with kb_free. KB_EINVAL
 * for a row of another sweep or of a bad size. */
KB_API int kb_sweep_format_row(char **out, const kb_sweep *s, const kb_sweep_row *row,
			       kb_sweep_format fmt, int data, kb_error *err);
/* The figures of a row, read from its text form (so a row read back from a
 * file and a fresh one give the same numbers). */
KB_API int kb_sweep_row_figures(const kb_sweep_row *row, kb_sweep_figures *out, kb_error *err);

/* ---- writing a sweep's output file -------------------------------------
 *
 * A writer puts the rows of a sweep into FILE (or a stream), one line per
 * row, flushed row by row, so an interrupted sweep keeps every finished
 * point. With a path:
 *   - the file is locked (flock) while the writer is open: a second writer
 *     on it fails at once with KB_ESTATE ("another sweep is writing");
 *   - FILE.meta.json records the sweep's provenance and definition (the
 *     benches, the swept keys and their lists, data mode, the base
 *     topology's SHA-256, the version);
 *   - resume: the finished rows of an existing FILE are read strictly and
 *     verified (header, every cell, one row per point, every row a point of
 *     this sweep); a row that fails is an error naming FILE and its line,
 *     never dropped or recomputed silently. Only a last line cut by a kill
 *     (no newline) is left out. Their points are skipped (kb_sweep_skip),
 *     new rows are appended after the last complete row, and
 *     kb_sweep_writer_finish rewrites the file in point order through
 *     FILE.tmp renamed over FILE (a kill leaves FILE as it was). A record in
 *     FILE.meta.json of another bench list, other keys, data mode, topology
 *     or version is refused (KB_ESTATE) unless force.
 * Open the writer before kb_sweep_run (it skips the resumed points) and
 * call kb_sweep_writer_row from the row callback. One thread at a time.
 */
typedef struct kb_sweep_writer kb_sweep_writer;

typedef struct kb_sweep_writer_options {
	unsigned version;          /* KB_SWEEP_WRITER_VERSION */
	kb_sweep_format format;
	int data;                  /* the data-mode error figures are columns */
	int resume;                /* keep the finished rows of an existing file */
	int force;                 /* resume a file recorded for another definition (warning) */
	int keep_figures;          /* keep every point's figures (kb_sweep_writer_figures) */
	int argc;                  /* the command line recorded in FILE.meta.json; 0: none */
	const char *const *argv;
	FILE *stream;              /* path NULL: rows go here (NULL: standard output) */
} kb_sweep_writer_options;
#define KB_SWEEP_WRITER_VERSION 1u
#define KB_SWEEP_WRITER_OPTIONS_INIT \
	{ KB_SWEEP_WRITER_VERSION, KB_SWEEP_CSV, 0, 0, 0, 0, 0, NULL, NULL }

/* Opens (or, with resume, reads and reopens) path; path NULL: opt->stream.
 * On error nothing of an existing file has been changed. */
KB_API int kb_sweep_writer_open(kb_sweep_writer **out, kb_sweep *s, const char *path,
				const kb_sweep_writer_options *opt, kb_error *err);
/* Writes and flushes one row (KB_EIO with the reason when it cannot). */
KB_API int kb_sweep_writer_row(kb_sweep_writer *w, const kb_sweep_row *row, kb_error *err);
/* Completes the file: closes it, after the in-order rewrite when rows were
 * resumed. Call it once every point has a row. */
KB_API int kb_sweep_writer_finish(kb_sweep_writer *w, kb_error *err);
/* Rows kept from the old file, and how many of them failed. */
KB_API size_t kb_sweep_writer_resumed(const kb_sweep_writer *w, size_t *failed);
/* The figures of point index (resumed or written; with keep_figures or resume). */
KB_API int kb_sweep_writer_figures(const kb_sweep_writer *w, size_t index,
				   kb_sweep_figures *out, kb_error *err);
/* A warning of the open (resume with force of another definition), or NULL. */
KB_API const char *kb_sweep_writer_warning(const kb_sweep_writer *w);
/* Closes without the rewrite and releases the lock; accepts NULL. */
KB_API void kb_sweep_writer_destroy(kb_sweep_writer *w);

/* ---- the sweep's definition ---------------------------------------------
 *
 * What defines the points and their rows: {"kernbench_version", "benches",
 * "keys": [{"name", "kind": "param"|"set", "values": [...]}], "threads",
 * "data", "topology_sha256"}. Two processes that build sweeps with the same
 * definition (for example MPI ranks) run the same points with the same
 * results. */
KB_API int kb_sweep_definition_json(char **out, const kb_sweep *s, kb_error *err);
/* SHA-256 of kb_sweep_definition_json's text, as 64 hex digits and a NUL. */
KB_API int kb_sweep_definition_sha256(const kb_sweep *s, char hex[65], kb_error *err);
/* Compares two definitions (JSON texts); 0 when equal, else KB_EINVAL with
 * the first difference in err ("topology_sha256: 12ab... here, 34cd... there"). */
KB_API int kb_sweep_definition_compare(const char *mine, const char *theirs, kb_error *err);

/* ---- running points elsewhere (transports) -------------------------------
 *
 * kb_sweep_run_point runs one point, exactly as kb_sweep_run does, and gives
 * its row in the library's row encoding (kb_sweep_row_to_json's object,
 * with every real to 17 digits, so nothing is lost on the way). A transport
 * that runs points in other processes (the MPI sweep) sends the index
 * there, runs it with this call on a sweep built the same way (same
 * kb_sweep_definition_sha256), and brings the text back. */
KB_API int kb_sweep_run_point(char **row_json, const kb_sweep *s, size_t index, kb_error *err);
/* Decodes the row encoding of point index (from kb_sweep_run_point) and
 * passes the row to on_row exactly as kb_sweep_run would have: 0, KB_ESTATE
 * when on_row returned nonzero, KB_EPARSE when the text is not that row. */
KB_API int kb_sweep_deliver_json(const kb_sweep *s, size_t index, const char *row_json,
				 kb_sweep_cb on_row, void *payload, kb_error *err);

/*
 * A transport: runs points in other processes. kb_sweep_run_transport
 * claims points for it in the same order and within the same reorder
 * window as its own pool's, and every row, local or remote, goes to on_row
 * in point order. Every callback is called on the calling thread.
 */
typedef struct kb_sweep_transport {
	unsigned version;     /* KB_SWEEP_TRANSPORT_VERSION */
	/* Points the transport can take now (0: none). */
	size_t (*room)(void *payload);
	/* Sends point index away to be run: 0, or a kb_status with err set. */
	int (*send)(void *payload, size_t index, kb_error *err);
	/* Waits at most wait_ns for a finished row: 1 with *index and *row_json
	 * (malloc'd; the library frees it), 0 when none came, or a kb_status
	 * with err set: the sweep then stops as after kb_sweep_cancel, the
	 * points sent away are given up, and kb_sweep_run_transport returns
	 * that error. */
	int (*receive)(void *payload, long wait_ns, size_t *index, char **row_json,
		       kb_error *err);
	void *payload;
	unsigned remote_jobs; /* points it runs at once (sizes the reorder buffer) */
} kb_sweep_transport;
#define KB_SWEEP_TRANSPORT_VERSION 1u

KB_API int kb_sweep_run_transport(kb_sweep *s, const kb_sweep_transport *t, kb_sweep_cb on_row,
				  void *payload, kb_error *err);

/*
 * The serving side: runs the points next() gives with a pool of the sweep's
 * jobs threads (the pool of kb_sweep_run) and gives each row in the row
 * encoding to done(), which owns the text. next() returns 1 with *index, 0
 * when there is none now (it may wait up to wait_ns), -1 when there are no
 * more: the queued points are dropped, the running ones finish (next() is
 * still called meanwhile, and may wait) and kb_sweep_serve returns 0.
 * Nonzero from done() stops with KB_ESTATE. Both are called on the calling
 * thread.
 */
typedef struct kb_sweep_source {
	unsigned version;     /* KB_SWEEP_TRANSPORT_VERSION */
	int (*next)(void *payload, long wait_ns, size_t *index);
	int (*done)(void *payload, size_t index, char *row_json);
	void *payload;
} kb_sweep_source;

KB_API int kb_sweep_serve(const kb_sweep *s, const kb_sweep_source *src, kb_error *err);


#ifdef __cplusplus
}
#endif
#endif
