/*
 * Rows of `kernbench sweep`: CSV and JSON Lines formatting, and reading an
 * existing output file back for --resume.
 */
#ifndef KB_CLI_SWEEP_OUT_H
#define KB_CLI_SWEEP_OUT_H

#include <stddef.h>

#include "kernbench/sweep.h"

typedef enum cli_out_format { CLI_OUT_CSV, CLI_OUT_JSONL } cli_out_format;

/* The numeric figures of a row, in column order. The error figures of data
 * mode (as `run --json` gives them) come last and are columns only of a
 * data-mode sweep (--data): cli_out_n_figs. */
enum {
	CLI_FIG_SIM_NS,
	CLI_FIG_DPT_NS,
	CLI_FIG_COMMANDS,
	CLI_FIG_EVENTS,
	CLI_FIG_WALL_S,
	CLI_FIG_MAX_ABS_ERR,
	CLI_FIG_MAX_REL_ERR,
	CLI_N_FIG
};
extern const char *const cli_out_fig_names[CLI_N_FIG];
/* Number of figure columns of a sweep with or without --data. */
size_t cli_out_n_figs(int data);

/* What the command keeps of each point (for --plot, the headline, resume). */
typedef struct cli_kept_row {
	int present;           /* the row exists (this run or the old file) */
	int ok;                /* status "ok" */
	double fig[CLI_N_FIG]; /* NaN where a figure does not exist */
	char *text;            /* exact row text with its newline (resume only) */
} cli_kept_row;

/* The CSV header line with its newline; NULL when memory runs out. */
char *cli_out_csv_header(size_t n_keys, const char *const *keys, int data);
/* One row as text with its newline (CSV or JSONL); NULL when memory runs out. */
char *cli_out_format_row(cli_out_format fmt, const kb_sweep *s, const kb_sweep_row *row, int data);
/*
 * The "keys" object of a JSONL row, typed as kb_sweep_row_to_json types it
 * (numbers as numbers, string-valued keys as strings); NULL when memory runs
 * out. --resume compares this text, so old and new rows match exactly.
 */
char *cli_out_typed_keys(const kb_sweep *s, const kb_sweep_row *row);
/* The figures of a finished row. */
void cli_out_row_figures(const kb_sweep_row *row, cli_kept_row *k);

/*
 * Reads an existing output file for --resume: every complete row that is a
 * point of s goes into rows[index] (text and figures); a truncated last row
 * is ignored. *keep_len is the length of the file's valid part (header and
 * complete rows), where appending may start; 0 means the header must be
 * written again. A missing file is *exists = 0 and no error. Errors (a
 * header or keys that do not match, a malformed row, a row that is no
 * point of this sweep, I/O) print their message and return 1.
 */
int cli_out_read_resume(const char *path, cli_out_format fmt, const kb_sweep *s, size_t n_keys,
			const char *const *keys, int data_mode, cli_kept_row *rows,
			size_t *keep_len, int *exists);

#endif
