/*
 * kernbench sweep: builds a kb_sweep from the command line and hands the
 * rest to the library (kernbench/sweep.h): the rows go through a
 * kb_sweep_writer (CSV or JSON Lines, flushed row by row, the lock on
 * --out, --resume with every kept row verified, the in-order rewrite,
 * OUT.meta.json). What stays here is the command's own: options, the
 * progress line, the summary lines of sweep_headline.c and the plot.
 *
 * Under MPI (built with --with-mpi, started by mpirun or srun with several
 * ranks; mpi_sweep.h): every rank parses the same command line and builds
 * the same sweep; rank 0 alone opens, resumes, writes and plots, with the
 * same on_row as here, while cli_mpi_sweep_run runs the sweep with MPI as
 * the library's transport. Without MPI the same calls say "one process".
 */
#include <fcntl.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/plot.h"
#include "cli/mpi_sweep.h"
#include "cli/sweep_headline.h"
#include "kernbench/bench.h"
#include "kernbench/sweep.h"
#include "kernbench/topology.h"

enum {
	O_PARAM, O_SET, O_JOBS, O_THREADS, O_DATA, O_TOPOLOGY, O_OUT, O_RESUME, O_FORCE, O_PLOT,
	O_PLOT_FIGURES, O_PLOT_LOG, O_QUIET, O_HELP, N_OPTS
};

static const cli_opt opts[N_OPTS] = {
	[O_PARAM] = { "param", 0, CLI_LIST },
	[O_SET] = { "set", 0, CLI_LIST },
	[O_JOBS] = { "jobs", 'j', CLI_VALUE },
	[O_THREADS] = { "threads", 0, CLI_VALUE },
	[O_DATA] = { "data", 0, CLI_FLAG },
	[O_TOPOLOGY] = { "topology", 0, CLI_VALUE },
	[O_OUT] = { "out", 0, CLI_VALUE },
	[O_RESUME] = { "resume", 0, CLI_FLAG },
	[O_FORCE] = { "force", 0, CLI_FLAG },
	[O_PLOT] = { "plot", 0, CLI_VALUE },
	[O_PLOT_FIGURES] = { "plot-figures", 0, CLI_VALUE },
	[O_PLOT_LOG] = { "plot-log", 0, CLI_VALUE },
	[O_QUIET] = { "quiet", 0, CLI_FLAG },
	[O_HELP] = { "help", 'h', CLI_FLAG },
};

typedef struct sweep_cmd {
	cli_args a;
	kb_sweep *s;
	kb_topology *topo;        /* --topology, or the default (to check --set keys) */
	char **benches;
	size_t n_benches;
	char **keys;              /* swept keys as given: params, then sets */
	size_t *n_values;
	size_t n_keys;
	size_t total;
	kb_sweep_format fmt;
	const char *path;         /* NULL: standard output */
	kb_sweep_writer *w;       /* the rows' output */
	kb_sweep_figures *figs;   /* per point, after the run, for the plot and headline */
	int keep_figures;
	size_t pending, done, failures;
	double t0;
	int progress;
	cli_progress line;       /* the progress line (shared with run's, cli.h) */
	int write_failed;
	kb_sweep_options sopt;    /* -j, --threads, --data */
	size_t n_params;          /* keys[0..n_params) are --param keys */
	cli_mpi_ctx *mpi;         /* NULL: not under MPI */
} sweep_cmd;

/* ---- building the sweep ----------------------------------------------- */

static int split_benches(sweep_cmd *c, const char *list)
{
	const char *p = list;

	c->benches = calloc(strlen(list) + 2, sizeof(char *));
	if (!c->benches)
		return cli_error("out of memory");
	for (;;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p), i;
		char *b = strndup(p, n);

		if (!b)
			return cli_error("out of memory");
		c->benches[c->n_benches++] = b;
		if (!*b)
			return cli_usage("sweep", "'%s': empty bench name in the list", list);
		if (!cli_bench_find(b)) {
			char hint[96];

			return cli_usage("sweep", "unknown bench '%s'%s (see 'kernbench list')", b,
					 cli_hint_bench(b, hint, sizeof(hint)));
		}
		for (i = 0; i + 1 < c->n_benches; i++)
			if (strcmp(c->benches[i], b) == 0)
				return cli_usage("sweep", "bench '%s' given twice", b);
		if (!end)
			return 0;
		p = end + 1;
	}
}

/* A library error while adding: malformed lists are usage errors. */
static int add_error(const kb_error *err, int rc)
{
	if (rc == KB_EINVAL)
		return cli_usage("sweep", "%s", err->message);
	return cli_kb_error(err, rc);
}

static int check_param(const sweep_cmd *c, const char *name)
{
	size_t i;

	char hint[96];

	for (i = 0; i < c->n_benches; i++)
		if (!cli_find_param(cli_bench_find(c->benches[i]), name))
			return cli_usage("sweep", "bench '%s' has no parameter '%s'%s "
					 "(see 'kernbench list')", c->benches[i], name,
					 cli_hint_param(cli_bench_find(c->benches[i]), name, hint,
							sizeof(hint)));
	return 0;
}

/* Unknown topology keys and keys that cannot be swept (an object, the
 * schema) stop the sweep before any point runs. String-valued keys
 * (pe.scheduler.policy) sweep like numbers. */
static int check_set(const sweep_cmd *c, const char *key)
{
	kb_error err;
	double v;
	int rc = kb_topology_get_number(c->topo, key, &v, &err);

	/* A string key other than the schema: settable. */
	if (rc == KB_ETYPE && strcmp(key, "schema") != 0 && strstr(err.message, "is a string"))
		rc = KB_OK;
	return rc ? cli_kb_error(&err, rc) : 0;
}

static size_t count_items(const char *list)
{
	size_t n = 1;

	for (; *list; list++)
		n += *list == ',';
	return n;
}

static int add_keys(sweep_cmd *c, size_t opt, int is_set)
{
	const cli_optval *v = &c->a.vals[opt];
	size_t i;
	int rc;

	for (i = 0; i < v->n_list; i++) {
		const char *values;
		kb_error err;
		char *name;

		if ((rc = cli_split_assignment(v->list[i], &name, &values)) > 0)
			return rc;
		if (rc)
			return cli_usage("sweep", "%s '%s': expected %s=V1,V2,...",
					 is_set ? "--set" : "--param", v->list[i],
					 is_set ? "KEY" : "NAME");
		c->keys[c->n_keys] = name;
		c->n_values[c->n_keys++] = count_items(values);
		if ((rc = is_set ? check_set(c, name) : check_param(c, name)))
			return rc;
		rc = is_set ? kb_sweep_add_set(c->s, name, values, &err)
			    : kb_sweep_add_param(c->s, name, values, &err);
		if (rc)
			return add_error(&err, rc);
	}
	return 0;
}

static int sweep_options(const sweep_cmd *c, kb_sweep_options *o)
{
	long jobs = 0, threads = 1;
	const cli_optval *v = c->a.vals;

	if (v[O_JOBS].seen && cli_parse_long(v[O_JOBS].value, 0, 4096, &jobs))
		return cli_usage("sweep", "-j '%s': expected a whole number from 0 (all cores) "
				 "to 4096", v[O_JOBS].value);
	if (v[O_THREADS].seen && cli_parse_long(v[O_THREADS].value, 0, 4096, &threads))
		return cli_usage("sweep", "--threads '%s': expected a whole number from 0 to 4096",
				 v[O_THREADS].value);
	o->jobs = (unsigned)jobs;
	o->threads = (int)threads;
	o->data = v[O_DATA].seen > 0;
	return 0;
}

static int output_options(sweep_cmd *c)
{
	const cli_optval *v = c->a.vals;

	c->path = v[O_OUT].value;
	c->fmt = KB_SWEEP_CSV;
	if (c->path && cli_ends_with(c->path, ".jsonl"))
		c->fmt = KB_SWEEP_JSONL;
	else if (c->path && !cli_ends_with(c->path, ".csv"))
		return cli_usage("sweep", "--out '%s': the name must end in .csv or .jsonl", c->path);
	if (v[O_RESUME].seen && !c->path)
		return cli_usage("sweep", "--resume needs --out FILE");
	if (v[O_FORCE].seen && !v[O_RESUME].seen)
		return cli_usage("sweep", "--force goes with --resume");
	if (v[O_PLOT].seen && !cli_ends_with(v[O_PLOT].value, ".svg"))
		return cli_usage("sweep", "--plot '%s': the name must end in .svg", v[O_PLOT].value);
	if (v[O_PLOT_FIGURES].seen && !v[O_PLOT].seen)
		return cli_usage("sweep", "--plot-figures goes with --plot");
	if (v[O_PLOT_LOG].seen && !v[O_PLOT].seen)
		return cli_usage("sweep", "--plot-log goes with --plot");
	if (v[O_PLOT_LOG].seen) {
		int x, y;

		if (cli_plot_log_axes(v[O_PLOT_LOG].value, &x, &y))
			return CLI_USAGE;
	}
	if (v[O_PLOT_FIGURES].seen)
		return cli_plot_check_figures(v[O_PLOT_FIGURES].value);
	return 0;
}

static int build(sweep_cmd *c)
{
	kb_sweep_options o = KB_SWEEP_OPTIONS_INIT;
	const cli_optval *v = c->a.vals;
	size_t nk = v[O_PARAM].n_list + v[O_SET].n_list, i;
	kb_error err;
	int rc;

	if (c->a.n_pos != 1)
		return cli_usage("sweep", c->a.n_pos ? "give the benches as one comma-separated list"
				 : "missing BENCH[,BENCH...]");
	if ((rc = split_benches(c, c->a.pos[0])) || (rc = sweep_options(c, &o)) ||
	    (rc = output_options(c)))
		return rc;
	o.registry = cli_registry;
	o.jobs = cli_mpi_sweep_jobs(c->mpi, o.jobs);  /* under MPI: the node's cores shared */
	c->sopt = o;
	c->n_params = v[O_PARAM].n_list;
	c->keys = calloc(nk + 1, sizeof(char *));
	c->n_values = calloc(nk + 1, sizeof(size_t));
	if (!c->keys || !c->n_values)
		return cli_error("out of memory");
	rc = v[O_TOPOLOGY].seen ? kb_topology_load_file(&c->topo, v[O_TOPOLOGY].value, &err)
				: kb_topology_default(&c->topo, &err);
	if (rc || (rc = kb_sweep_create(&c->s, &o, &err)))
		return cli_kb_error(&err, rc);
	if (v[O_TOPOLOGY].seen && (rc = kb_sweep_set_topology(c->s, c->topo, &err)))
		return cli_kb_error(&err, rc);
	for (i = 0; i < c->n_benches; i++)
		if ((rc = kb_sweep_add_bench(c->s, c->benches[i], &err)))
			return add_error(&err, rc);
	if ((rc = add_keys(c, O_PARAM, 0)) || (rc = add_keys(c, O_SET, 1)))
		return rc;
	c->total = kb_sweep_points(c->s);
	return 0;
}

/* ---- writing rows ------------------------------------------------------ */

static void progress(sweep_cmd *c)
{
	double el = cli_now() - c->t0;
	double eta = c->done ? el / (double)c->done * (double)(c->pending - c->done) : 0;

	cli_progress_show(&c->line, "[%zu/%zu] failures %zu, elapsed %.1fs, eta %.1fs", c->done,
			  c->pending, c->failures, el, eta);
	if (c->done >= c->pending) {
		fputc('\n', stderr);  /* the last one stays, ended */
		fflush(stderr);
		c->line.shown = 0;
	}
}

/* A row going to the terminal that shows the progress line would land
 * after it ("... eta 0.4sgqa_decode_opt2,4,..."): erase the line first
 * (carriage return, erase to end of line); the next row redraws it. */
static void clear_progress(sweep_cmd *c)
{
	if (!c->path && isatty(STDOUT_FILENO))
		cli_progress_clear(&c->line);
}

static int on_row(const kb_sweep_row *row, void *payload)
{
	sweep_cmd *c = payload;
	kb_error err;
	int rc;

	clear_progress(c);
	if ((rc = kb_sweep_writer_row(c->w, row, &err))) {
		if (!c->write_failed)
			cli_kb_error(&err, rc);
		c->write_failed = 1;
		return 1;
	}
	c->failures += row->status != 0;
	c->done++;
	if (c->progress)
		progress(c);
	return 0;
}

/* ---- opening the output -------------------------------------------------- */

/* The writer locks --out, reads it back with --resume, writes OUT.meta.json. */
static int open_output(sweep_cmd *c)
{
	kb_sweep_writer_options wo = KB_SWEEP_WRITER_OPTIONS_INIT;
	kb_error err;
	int rc;

	wo.format = c->fmt;
	wo.data = c->a.vals[O_DATA].seen > 0;
	wo.resume = c->a.vals[O_RESUME].seen > 0;
	wo.force = c->a.vals[O_FORCE].seen > 0;
	wo.keep_figures = c->keep_figures;
	wo.argc = cli_argc;
	wo.argv = cli_argv;
	if ((rc = kb_sweep_writer_open(&c->w, c->s, c->path, &wo, &err)))
		return cli_kb_error(&err, rc);
	if (kb_sweep_writer_warning(c->w))
		cli_warn("--resume --force: %s; continuing", kb_sweep_writer_warning(c->w));
	return 0;
}

/* ---- the command ------------------------------------------------------- */

/* --plot's path can be written: checked before any point runs (issue 18
 * §6), so an hours-long sweep does not end on "No such file or directory".
 * A file this creates to find out is removed again. */
static int check_plot_path(const char *path)
{
	struct stat st;
	int existed = stat(path, &st) == 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);

	if (fd < 0)
		return cli_error("%s: %s", path, strerror(errno));
	close(fd);
	if (!existed)
		unlink(path);
	return 0;
}

static void cmd_free(sweep_cmd *c)
{
	size_t i;

	kb_sweep_writer_destroy(c->w);
	free(c->figs);
	for (i = 0; i < c->n_benches; i++)
		free(c->benches[i]);
	free(c->benches);
	for (i = 0; i < c->n_keys; i++)
		free(c->keys[i]);
	free(c->keys);
	free(c->n_values);
	kb_sweep_destroy(c->s);
	kb_topology_destroy(c->topo);
	cli_args_free(&c->a);
}

/* Figures are kept for the plot and the headline. */
static void want_figures(sweep_cmd *c)
{
	c->keep_figures = c->a.vals[O_PLOT].seen ||
			  sweep_headline_wanted((const char *const *)c->benches, c->n_benches);
}

/* Every point's figures, from the writer (resumed rows and new ones). */
static int collect_figures(sweep_cmd *c)
{
	kb_error err;
	int rc;

	if (!c->keep_figures)
		return 0;
	c->figs = calloc(c->total + 1, sizeof(*c->figs));
	if (!c->figs)
		return cli_error("out of memory");
	for (size_t i = 0; i < c->total; i++) {
		c->figs[i] = (kb_sweep_figures)KB_SWEEP_FIGURES_INIT;
		if ((rc = kb_sweep_writer_figures(c->w, i, &c->figs[i], &err)))
			return cli_kb_error(&err, rc);
	}
	return 0;
}

/* Ranks other than 0: build the same sweep, run the points they are given. */
static int mpi_worker(sweep_cmd *c, int argc, char **argv)
{
	int rc, stop = 0;

	if ((rc = cli_mpi_sweep_setup_wait(c->mpi, &stop)) || stop)
		return rc;
	rc = cli_parse("sweep", opts, N_OPTS, argc, argv, &c->a);
	if (rc == 0)
		rc = build(c);
	if ((rc = cli_mpi_sweep_setup_done(c->mpi, rc, c->s, c->sopt.jobs)))
		return rc;
	return cli_mpi_sweep_work(c->mpi, c->s, c->sopt.jobs);
}

/* Runs the points and closes the output; returns the exit status so far. */
static int run_rows(sweep_cmd *c)
{
	kb_error err;
	int rc;
	size_t old_failed = 0, old = kb_sweep_writer_resumed(c->w, &old_failed);

	c->pending = c->total - old;
	c->t0 = cli_now();
	c->progress = isatty(STDERR_FILENO) && !c->a.vals[O_QUIET].seen && c->pending > 0;
	if (cli_mpi_sweep_parallel(c->mpi)) {
		c->progress = cli_mpi_sweep_progress_wanted() && !c->a.vals[O_QUIET].seen &&
			      c->pending > 0;
		rc = cli_mpi_sweep_run(c->mpi, c->s, c->sopt.jobs, on_row, c);
	} else {
		rc = kb_sweep_run(c->s, on_row, c, &err);
		if (rc && !c->write_failed)
			cli_kb_error(&err, rc);
	}
	if (c->progress && c->done < c->pending)
		fputc('\n', stderr);
	if (rc || c->write_failed)
		return CLI_FAIL;
	if ((rc = kb_sweep_writer_finish(c->w, &err)))
		return cli_kb_error(&err, rc);
	c->failures += old_failed;
	return collect_figures(c);
}

int cli_cmd_sweep(int argc, char **argv)
{
	sweep_cmd c;
	int rc, stop = 0;

	memset(&c, 0, sizeof(c));
	if ((rc = cli_mpi_sweep_start(&c.mpi)))
		return rc;
	if (cli_mpi_sweep_parallel(c.mpi) && cli_mpi_sweep_rank(c.mpi) > 0) {
		rc = mpi_worker(&c, argc, argv);
		cmd_free(&c);
		return cli_mpi_sweep_end(c.mpi, rc);
	}
	rc = cli_parse("sweep", opts, N_OPTS, argc, argv, &c.a);
	if (rc == 0 && c.a.vals[O_HELP].seen) {
		rc = cli_print_help("sweep");
		stop = 1;
	}
	if (rc == 0 && !stop && (rc = build(&c)))
		stop = 1;
	if (rc == 0 && !stop)
		want_figures(&c);
	if (rc == 0 && !stop && c.a.vals[O_PLOT].seen)
		rc = check_plot_path(c.a.vals[O_PLOT].value);
	if (rc == 0 && !stop)
		rc = open_output(&c);
	if (cli_mpi_sweep_parallel(c.mpi)) {
		int r = cli_mpi_sweep_setup_root(c.mpi, rc || stop, c.s, c.sopt.jobs);

		rc = rc ? rc : r;
	}
	if (rc || stop || (rc = run_rows(&c)))
		goto done;
	if (c.figs)
		rc = sweep_headline(c.path ? stdout : stderr, c.s, (const char *const *)c.benches,
				    c.n_benches, (const char *const *)c.keys, c.n_keys, c.figs);
	if (rc == 0 && c.a.vals[O_PLOT].seen)
		rc = cli_plot_sweep(c.a.vals[O_PLOT].value, c.s, c.n_benches,
				(const char *const *)c.benches, c.n_keys,
				(const char *const *)c.keys, c.n_values, c.figs,
				c.a.vals[O_PLOT_FIGURES].value, c.a.vals[O_PLOT_LOG].value);
	if (rc == 0 && c.failures)
		rc = CLI_FAIL;
done:
	cmd_free(&c);
	rc = cli_mpi_sweep_end(c.mpi, rc);
	return rc;
}
