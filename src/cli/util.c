/*
 * Helpers the subcommands share beyond argument parsing and messages
 * (args.c): the command line as main received it, the --help texts, the
 * effective topology, a bench's parameter by name, picoseconds as exact
 * nanoseconds. They live here, not in one command's file, so that no
 * command file depends on another.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernbench/bench.h"
#include "kernbench/registry.h"
#include "kernbench/topology.h"

int cli_argc;
const char *const *cli_argv;

static const char help_main[] =
	"Usage: kernbench COMMAND [OPTION]... [--plugin FILE]...\n"
	"A deterministic, multithreaded simulator of a PE-near-HBM AI accelerator.\n"
	"\n"
	"Commands:\n"
	"  list [--json]              list the benches (built-in and plugins) and their parameters\n"
	"  run BENCH [OPTION]...      run one bench and print its figures\n"
	"  sweep BENCH[,BENCH...] [OPTION]...\n"
	"                             run the Cartesian product of parameter lists\n"
	"  topology [OPTION]...       print the effective topology as JSON\n"
	"\n"
	"  -h, --help                 print this help (kernbench COMMAND --help: that command's)\n"
	"  -V, --version              print the version\n"
	"      --plugin FILE          anywhere on the line (before a '--'): load the benches\n"
	"                             of a plugin (a shared object exporting kb_plugin_init);\n"
	"                             repeatable, after those of KERNBENCH_PLUGIN_PATH\n"
	"                             (colon-separated files, or directories of *.so)\n"
	"\n"
	"Exit status: 0 success, 1 a simulation, validation, topology or I/O error,\n"
	"2 a usage error; 139 (SIGSEGV) when a kernel overflowed its stack, after a\n"
	"line saying so (kernbench(1), EXIT STATUS).\n";

static const char help_list[] =
	"Usage: kernbench list [--json]\n"
	"List the benches (the built-in ones, then the plugins' in load order) with\n"
	"their help and parameters (name, type, default, choices or range).\n"
	"\n"
	"      --json                 print the list as one JSON array\n"
	"  -h, --help                 print this help\n";

static const char help_run[] =
	"Usage: kernbench run BENCH [OPTION]...\n"
	"Run one bench and print a summary of its figures.\n"
	"\n"
	"      --param K=V            set bench parameter K (repeatable)\n"
	"      --set KEY=VALUE        override a topology key (repeatable, in order)\n"
	"      --topology FILE        start from this topology file (default: embedded)\n"
	"      --threads N|auto       auto (default): one worker per core, at most one\n"
	"                             per PE; 0: one thread per engine; 1: sequential;\n"
	"                             N: N workers (never more busy threads than cores)\n"
	"      --data                 data mode: compute real numbers\n"
	"      --op-log FILE          write the op_log (JSON Lines) to FILE\n"
	"      --trace FILE           write a Chrome/Perfetto trace to FILE\n"
	"      --dump DIR             write input and output tensors as .npy (needs --data)\n"
	"      --json                 print the result as one JSON object\n"
	"  -h, --help                 print this help\n";

static const char help_sweep[] =
	"Usage: kernbench sweep BENCH[,BENCH...] [OPTION]...\n"
	"Run every point of the Cartesian product of the value lists, in parallel,\n"
	"and write one row per point in a fixed order (benches in the order given,\n"
	"then the lists as an odometer: --param keys, then --set keys, the last\n"
	"varying fastest).\n"
	"\n"
	"      --param K=V1,V2,...    sweep bench parameter K (repeatable)\n"
	"      --set KEY=V1,V2,...    sweep topology key KEY (repeatable)\n"
	"  -j, --jobs N               points run at once (default: all cores)\n"
	"      --threads T            threads of each point (default 1: sequential)\n"
	"      --data                 data mode for every point\n"
	"      --topology FILE        base topology of every point\n"
	"      --out FILE             write rows to FILE.csv or FILE.jsonl (default: CSV\n"
	"                             on standard output)\n"
	"      --resume               run only the points missing from --out FILE\n"
	"      --force                with --resume: continue even when FILE.meta.json\n"
	"                             records another topology hash or version\n"
	"      --plot FILE.svg        plot each figure against the first swept key\n"
	"      --plot-figures LIST    with --plot: the figures to draw, e.g. sim_time_ns,wall_s\n"
	"                             (default: all but wall_s)\n"
	"      --plot-log AXES        with --plot: log10 axes x, y, xy or none (default:\n"
	"                             auto, x at 8x span, y at 100x)\n"
	"      --quiet                no progress line on standard error\n"
	"  -h, --help                 print this help\n"
	"\n"
	"Exit status: 0 when every point succeeded, 1 when one failed (its row holds\n"
	"the error) or the sweep could not run, 2 a usage error.\n";

static const char help_topology[] =
	"Usage: kernbench topology [OPTION]...\n"
	"Print the effective topology as JSON: the embedded default or --topology\n"
	"FILE, then every --set applied in order.\n"
	"\n"
	"      --topology FILE        start from this topology file\n"
	"      --set KEY=VALUE        override a topology key (repeatable, in order)\n"
	"      --hash                 print only the SHA-256 of that JSON (the hash\n"
	"                             results and sweeps record)\n"
	"  -h, --help                 print this help\n";

const char *cli_help_text(const char *cmd)
{
	if (!cmd)
		return help_main;
	if (strcmp(cmd, "list") == 0)
		return help_list;
	if (strcmp(cmd, "run") == 0)
		return help_run;
	if (strcmp(cmd, "sweep") == 0)
		return help_sweep;
	if (strcmp(cmd, "topology") == 0)
		return help_topology;
	return NULL;
}

static int print_help(const char *text)
{
	if (!text)
		return cli_usage(NULL, "no help for that command");
	fputs(text, stdout);
	return fflush(stdout) == 0 && !ferror(stdout) ? CLI_OK
		: cli_error("could not write the help text");
}

int cli_print_help(const char *cmd)
{
	return print_help(cli_help_text(cmd));
}

int cli_load_topology(const char *cmd, const char *file, const char *const *sets, size_t n_sets,
		      kb_topology **out)
{
	kb_topology *t = NULL;
	kb_error err;
	size_t i;
	int rc;

	kb_error_clear(&err);
	for (i = 0; i < n_sets; i++) {
		const char *eq = strchr(sets[i], '=');

		if (!eq || eq == sets[i] || !eq[1])
			return cli_usage(cmd, "--set '%s': expected KEY=VALUE", sets[i]);
	}
	rc = file ? kb_topology_load_file(&t, file, &err) : kb_topology_default(&t, &err);
	if (rc)
		return cli_kb_error(&err, rc);
	for (i = 0; i < n_sets; i++) {
		rc = kb_topology_set_assignment(t, sets[i], &err);
		if (rc) {
			kb_topology_destroy(t);
			return cli_kb_error(&err, rc);
		}
	}
	*out = t;
	return CLI_OK;
}

size_t cli_bench_count(void)
{
	return kb_registry_count(cli_registry);
}

const kb_bench_info *cli_bench_get(size_t i)
{
	const kb_bench_def *d = kb_registry_at(cli_registry, i);

	return d ? &d->info : NULL;
}

const kb_bench_info *cli_bench_find(const char *name)
{
	const kb_bench_def *d = NULL;

	return kb_registry_lookup(cli_registry, name, &d, NULL) == 0 ? &d->info : NULL;
}

const kb_param_info *cli_find_param(const kb_bench_info *b, const char *name)
{
	size_t i;

	for (i = 0; i < b->n_params; i++)
		if (strcmp(b->params[i].name, name) == 0)
			return &b->params[i];
	return NULL;
}

void cli_ps_to_ns(unsigned long long ps, char *buf, size_t n)
{
	snprintf(buf, n, "%llu.%03llu", ps / 1000, ps % 1000);
}
