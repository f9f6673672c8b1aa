/*
 * Internal layout of a kb_sweep, shared by the files of src/sweep: the
 * builder (sweep.c), the pool and reorder buffer (pool.c), the row encoding
 * and its texts (row.c), resume (resume.c), the writer (writer.c) and the
 * definition (definition.c).
 */
#ifndef KB_BENCH_SWEEP_IMPL_H
#define KB_BENCH_SWEEP_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>

#include "kernbench/registry.h"
#include "kernbench/sweep.h"

struct json_t;

typedef struct sweep_key {
	char *name;
	int is_set;          /* topology key (--set) rather than a bench parameter */
	char **values;
	size_t n_values;
} sweep_key;

struct kb_sweep {
	kb_sweep_options opt;
	char **benches;
	size_t n_benches;
	sweep_key *keys;
	size_t n_keys;
	const char **key_names;  /* keys[i].name, as rows expose them */
	const char **scratch;    /* kb_sweep_point's answer (n_keys entries) */
	kb_topology *topo;       /* base topology; NULL: the embedded default */
	unsigned char *skip;     /* one byte per point once kb_sweep_skip was called */
	atomic_int cancel;
	int running;             /* kb_sweep_run in progress (same thread only) */
};

/*
 * Decodes a point index into its bench and one value per key (values has
 * n_keys entries): the odometer with the last key varying fastest.
 */
const char *kb__sweep_decode(const kb_sweep *s, size_t index, const char **values);
/* The registry of the sweep's benches: its option, else the built-ins. */
const kb_registry *kb__sweep_registry(const kb_sweep *s);


/* ---- the row encoding (row.c) ---- */

/* 0 when a caller's row has a size the library accepts (and so has its
 * result), else KB_EINVAL naming fn (kb_sweep.h). */
int kb__sweep_row_check(const kb_sweep_row *row, const char *fn, kb_error *err);
/* The typed "keys" object of a point (new reference; NULL: out of memory). */
struct json_t *kb__sweep_keys_json(const kb_sweep *s, const char *bench,
				   const char *const *values);
/* The row encoding (kb_sweep_row_to_json's object). */
struct json_t *kb__sweep_row_json(const kb_sweep *s, const kb_sweep_row *row);
/* Its lossless text. */
char *kb__sweep_json_text(const struct json_t *o);
/* Reads the encoding of point index back: *status, and *error (status != 0)
 * or *res (malloc'd, kb_result_clear and free it). */
int kb__sweep_row_decode(const char *text, size_t index, int *status, char **error,
			 kb_result **res, kb_error *err);
/* Figure texts of a row in column order ("" where absent). */
void kb__sweep_figure_texts(const kb_sweep_row *row, char txt[KB_SWEEP_N_FIGS][40]);
void kb__sweep_figures_from_texts(char txt[KB_SWEEP_N_FIGS][40], int ok,
				  kb_sweep_figures *out);
/* A CSV cell, quoted when it must be. */
void kb__sweep_csv_cell(FILE *f, const char *s);
/* The "keys" object as JSON Lines rows write it. */
void kb__sweep_keys_text(FILE *f, const struct json_t *keys);

/* ---- resume (resume.c) ---- */

/* What a writer keeps of a point. */
typedef struct sweep_kept {
	unsigned char present, ok;
	double fig[KB_SWEEP_N_FIGS];   /* NaN where absent */
	char *text;                    /* the row's exact text (resume only) */
} sweep_kept;

/*
 * Reads the rows of an earlier output, data[0..len) (name: for messages):
 * verifies the header and every complete row strictly, puts each into
 * rows[index of its point] (rows: kb_sweep_points entries, zeroed), and
 * sets *keep_len to the end of the last complete row (0: the header must be
 * written again). Only a last line without its newline (a kill mid-write)
 * is left out. Errors name the file and the line.
 */
int kb__sweep_resume_parse(const kb_sweep *s, const char *name, const char *data, size_t len,
			   kb_sweep_format fmt, int data_mode, sweep_kept *rows,
			   size_t *keep_len, kb_error *err);

/* ---- FILE.meta.json (definition.c) ---- */

/* "FILE.meta.json" (malloc'd; NULL when out of memory). */
char *kb__sweep_meta_path(const char *out);
/* Writes the record of sweep s beside out. */
int kb__sweep_meta_write(const kb_sweep *s, const char *out, int argc, const char *const *argv,
			 kb_error *err);
/* Before a resume touches out: 0 when no record exists or it records the
 * same version, topology, benches, keys and data mode; else KB_ESTATE
 * naming the difference, or with force 0 and *warning (malloc'd). */
int kb__sweep_meta_check(const kb_sweep *s, const char *out, int force, char **warning,
			 kb_error *err);

/* ---- runs (pool.c) ---- */

/* Runs point index; fills *status and *error or *res (as kb__sweep_row_decode). */
void kb__sweep_run_one(const kb_sweep *s, const kb_topology *base, size_t index,
		       const char **values, int *status, char **error, kb_result **res);

#endif
