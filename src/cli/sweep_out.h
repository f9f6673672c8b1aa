/*
 * Rows of `kernbench sweep`: CSV and JSON Lines formatting, and reading an
 * existing output file back for --resume.
 */
#ifndef KB_CLI_SWEEP_OUT_H
#define KB_CLI_SWEEP_OUT_H

#include <stddef.h>

#include "kernbench/sweep.h"

typedef enum out_format { OUT_CSV, OUT_JSONL } out_format;

/* The numeric figures of a row, in column order. The error figures of data
 * mode (as `run --json` gives them) come last and are columns only of a
 * data-mode sweep (--data): out_n_figs. */
enum {
	FIG_SIM_NS, FIG_DPT_NS, FIG_COMMANDS, FIG_EVENTS, FIG_WALL_S,
	FIG_MAX_ABS_ERR, FIG_MAX_REL_ERR, N_FIG
};
extern const char *const out_fig_names[N_FIG];
/* Number of figure columns of a sweep with or without --data. */
size_t out_n_figs(int data);

/* What the command keeps of each point (for --plot, the headline, resume). */
typedef struct kept_row {
	int present;         /* the row exists (this run or the old file) */
	int ok;              /* status "ok" */
	double fig[N_FIG];   /* NaN where a figure does not exist */
	char *text;          /* exact row text with its newline (resume only) */
} kept_row;

/* The CSV header line with its newline; NULL when memory runs out. */
char *out_csv_header(size_t n_keys, const char *const *keys, int data);
/* One row as text with its newline (CSV or JSONL); NULL when memory runs out. */
char *out_format_row(out_format fmt, const kb_sweep *s, const kb_sweep_row *row, int data);
/*
 * The "keys" object of a JSONL row, typed as kb_sweep_row_to_json types it
 * (numbers as numbers, string-valued keys as strings); NULL when memory runs
 * out. --resume compares this text, so old and new rows match exactly.
 */
char *out_typed_keys(const kb_sweep *s, const kb_sweep_row *row);
/* The figures of a finished row. */
void out_row_figures(const kb_sweep_row *row, kept_row *k);

/*
 * Reads an existing output file for --resume: every complete row that is a
 * point of s goes into rows[index] (text and figures); a truncated last row
 * is ignored. *keep_len is the length of the file's valid part (header and
 * complete rows), where appending may start; 0 means the header must be
 * written again. A missing file is *exists = 0 and no error. Errors (a
 * header or keys that do not match, a malformed row, a row that is no
 * point of this sweep, I/O) print their message and return 1.
 */
int out_read_resume(const char *path, out_format fmt, const kb_sweep *s, size_t n_keys,
		    const char *const *keys, int data_mode, kept_row *rows, size_t *keep_len,
		    int *exists);

#endif
