/*
 * The kernbench command: shared helpers of the subcommands.
 *
 * The command links only the public API (the kernbench/ headers). Every subcommand
 * returns the process exit status: 0 success, 1 an error of the simulation,
 * the topology, a file (message "kernbench: error: ..."), 2 a usage error
 * ("kernbench: usage: ..." and a hint to --help).
 */
#ifndef KB_CLI_H
#define KB_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "kernbench/common.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* ---- messages (args.c) ------------------------------------------------ */

/* Prints "kernbench: usage: ..." and the --help hint for cmd (NULL: top level); returns 2. */
int cli_usage(const char *cmd, const char *fmt, ...) KB_PRINTF(2, 3);
/* Prints "kernbench: error: ..."; returns 1. */
int cli_error(const char *fmt, ...) KB_PRINTF(1, 2);
/* Prints "kernbench: warning: ...". */
void cli_warn(const char *fmt, ...) KB_PRINTF(1, 2);
/* Prints the message of a library error; returns 1. */
int cli_kb_error(const kb_error *err, int code);

/* " (did you mean 'x'?)" into buf when kb_suggest finds one of the n
 * candidates close to name, else ""; returns buf. */
const char *cli_hint(const char *name, const char *const *cands, size_t n, char *buf, size_t len);
/* The same over the built-in benches' names, and over one bench's parameters. */
const char *cli_hint_bench(const char *name, char *buf, size_t len);
struct kb_bench_info;
const char *cli_hint_param(const struct kb_bench_info *b, const char *name, char *buf, size_t len);

/* ---- argument parsing (args.c) ---------------------------------------- */

typedef enum cli_opt_kind {
	CLI_FLAG,   /* no value; may be repeated */
	CLI_VALUE,  /* one value; given twice is a usage error */
	CLI_LIST    /* repeatable value, kept in order */
} cli_opt_kind;

typedef struct cli_opt {
	const char *name;   /* long name without "--" */
	char short_name;    /* 0: none */
	cli_opt_kind kind;
} cli_opt;

typedef struct cli_optval {
	int seen;            /* times given */
	const char *value;   /* CLI_VALUE */
	const char **list;   /* CLI_LIST, n_list entries */
	size_t n_list;
} cli_optval;

typedef struct cli_args {
	cli_optval *vals;    /* one per option of the table */
	const char **pos;    /* positional arguments */
	size_t n_pos;
} cli_args;

/*
 * Parses argv[0..argc) (after the command name) against opts. "--name=value",
 * "--name value", "-x value", "-xvalue" and "--" are understood. Returns 0,
 * or prints a usage error and returns 2. Free with cli_args_free.
 */
int cli_parse(const char *cmd, const cli_opt *opts, size_t n_opts, int argc, char **argv,
	      cli_args *out);
void cli_args_free(cli_args *a);
/*
 * Takes kernbench's own option --plugin FILE (or --plugin=FILE) out of
 * argv[0..argc), wherever it stands: before the command, after it, among
 * its options and arguments, up to a "--" that ends the options. The other
 * arguments keep their order in rest (room for argc + 1, NULL-terminated),
 * the files theirs in plugins (room for argc). Returns 0, or prints a
 * usage error and returns 2 for a --plugin without a file.
 */
int cli_take_plugins(int argc, char **argv, char **rest, int *n_rest, const char **plugins,
		     size_t *n_plugins);

/* Parses a whole decimal integer in [min, max]; 0 on success, -1 otherwise. */
int cli_parse_long(const char *s, long min, long max, long *out);
/* Splits "KEY=VALUE" at the first '='; both parts must be non-empty.
 * 0 on success, -1 when s is not KEY=VALUE, CLI_FAIL (reported) when
 * there is no memory for the key. */
int cli_split_assignment(const char *s, char **key, const char **value);
/* Nonzero when name ends with suffix. */
int cli_ends_with(const char *name, const char *suffix);

/* ---- text (args.c) ---------------------------------------------------- */

/* Writes s as a JSON string (with the quotes). */
void cli_json_string(FILE *f, const char *s);
/* Monotonic seconds. */
double cli_now(void);

/* ---- the command's own files (beside.c) ---------------------------------- */

/* Writes to out the path of name in the running command's folder; 1 when
 * that file exists, else 0. */
int cli_beside_exe(const char *name, char *out, size_t len);
/* Before plugins load: makes libkernbench.so, which they link, loadable in
 * a command that has the library linked in (a no-op otherwise). */
void cli_host_plugins(void);

/*
 * A progress line on standard error, only when it is a terminal (never in
 * pipes or files): shown again at most four times a second, erased ("\r",
 * erase to end of line) before anything else goes to the terminal.
 */
typedef struct cli_progress {
	int on;        /* wanted and standard error is a terminal */
	int shown;     /* a line is on the terminal, not erased */
	double t0;     /* cli_now() at the start */
	double last;   /* cli_now() of the last update */
} cli_progress;
void cli_progress_start(cli_progress *p, int wanted);
/* Nonzero when the line is on and due for an update (then counted as done). */
int cli_progress_due(cli_progress *p);
/* Replaces the line with the formatted text (no newline). */
void cli_progress_show(cli_progress *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Erases the line if one is shown. */
void cli_progress_clear(cli_progress *p);

/* ---- death by a fault (fault.c) ---------------------------------------- */

/* Gives this thread an alternate signal stack and installs the SIGSEGV and
 * SIGBUS handler that says in one line why the command dies (a kernel that
 * overflowed its stack, or the faulting address), then dies of the signal. */
void cli_fault_handlers(void);

/* ---- subcommands (cmd_*.c) --------------------------------------------- */

int cli_cmd_list(int argc, char **argv);
int cli_cmd_run(int argc, char **argv);
int cli_cmd_sweep(int argc, char **argv);
int cli_cmd_topology(int argc, char **argv);

/* ---- shared helpers (util.c) ------------------------------------------ */

/* The benches of every command: the built-ins and the plugins of
 * KERNBENCH_PLUGIN_PATH and --plugin, loaded by main before the command
 * runs. */
struct kb_registry;
extern struct kb_registry *cli_registry;
/* Its benches: how many, the i-th (NULL past the end), by name (NULL). */
size_t cli_bench_count(void);
const struct kb_bench_info *cli_bench_get(size_t i);
const struct kb_bench_info *cli_bench_find(const char *name);

/* The whole command line, as main received it (recorded as provenance). */
extern int cli_argc;
extern const char *const *cli_argv;

/* Prints the --help text of cmd (NULL: the whole program); returns the exit status. */
int cli_print_help(const char *cmd);
/* The --help text of a command (NULL: the whole program); NULL when unknown. */
const char *cli_help_text(const char *cmd);

/*
 * The effective topology: file (NULL: the embedded default), then each
 * "KEY=VALUE" of sets in order. A set without '=' or with an empty key or
 * value is a usage error of cmd (2); the topology's own errors are 1.
 */
struct kb_topology;
int cli_load_topology(const char *cmd, const char *file, const char *const *sets, size_t n_sets,
		      struct kb_topology **out);

/* The parameter called name of a bench, or NULL. */
struct kb_bench_info;
const struct kb_param_info *cli_find_param(const struct kb_bench_info *b, const char *name);
/* Picoseconds as exact decimal nanoseconds, "12345.678" (buf: 32 bytes). */
void cli_ps_to_ns(unsigned long long ps, char *buf, size_t n);

#endif
