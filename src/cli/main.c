/*
 * kernbench: the command-line front end of the simulator. Dispatches to the
 * subcommands; the only place that decides the process exit status.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "kernbench/version.h"

static const char help_main[] =
	"Usage: kernbench COMMAND [OPTION]...\n"
	"A deterministic, multithreaded simulator of a PE-near-HBM AI accelerator.\n"
	"\n"
	"Commands:\n"
	"  list [--json]              list the built-in benches and their parameters\n"
	"  run BENCH [OPTION]...      run one bench and print its figures\n"
	"  sweep BENCH[,BENCH...] [OPTION]...\n"
	"                             run the Cartesian product of parameter lists\n"
	"  topology [OPTION]...       print the effective topology as JSON\n"
	"\n"
	"  -h, --help                 print this help (kernbench COMMAND --help: that command's)\n"
	"  -V, --version              print the version\n"
	"\n"
	"Exit status: 0 success, 1 a simulation, validation, topology or I/O error,\n"
	"2 a usage error.\n";

static const char help_list[] =
	"Usage: kernbench list [--json]\n"
	"List the built-in benches with their help and parameters (name, type,\n"
	"default, choices or range).\n"
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

int cli_argc;
const char *const *cli_argv;

static int unknown_command(const char *cmd)
{
	static const char *const cmds[] = { "list", "run", "sweep", "topology", "help" };
	static const char *const opts[] = { "--help", "--version" };
	char hint[96];

	if (cmd[0] == '-')
		return cli_usage(NULL, "unknown option '%s'%s", cmd, cli_hint(cmd, opts, 2, hint, sizeof(hint)));
	return cli_usage(NULL, "unknown command '%s'%s", cmd, cli_hint(cmd, cmds, 5, hint, sizeof(hint)));
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	cli_argc = argc;
	cli_argv = (const char *const *)argv;
	/* A closed pipe on an output is a write error with a message and exit
	 * status 1 (doc/sweep.md), not death by SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (!cmd)
		return cli_usage(NULL, "missing command");
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		if (argc > 2 && strcmp(cmd, "help") == 0) {
			const char *t = cli_help_text(argv[2]);

			return t ? print_help(t) : unknown_command(argv[2]);
		}
		return print_help(help_main);
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("kernbench %s\n", kb_version());
		return fflush(stdout) == 0 ? CLI_OK : cli_error("could not write the version");
	}
	if (strcmp(cmd, "list") == 0)
		return cli_cmd_list(argc - 2, argv + 2);
	if (strcmp(cmd, "run") == 0)
		return cli_cmd_run(argc - 2, argv + 2);
	if (strcmp(cmd, "sweep") == 0)
		return cli_cmd_sweep(argc - 2, argv + 2);
	if (strcmp(cmd, "topology") == 0)
		return cli_cmd_topology(argc - 2, argv + 2);
	return unknown_command(cmd);
}
