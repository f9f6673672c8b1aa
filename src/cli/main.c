/*
 * kernbench: the command-line front end of the simulator. Dispatches to the
 * subcommands; the only place that decides the process exit status.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernbench/registry.h"
#include "kernbench/version.h"

static int unknown_command(const char *cmd)
{
	static const char *const cmds[] = { "list", "run", "sweep", "topology", "help" };
	static const char *const opts[] = { "--help", "--version", "--plugin" };
	char hint[96];

	if (cmd[0] == '-')
		return cli_usage(NULL, "unknown option '%s'%s", cmd, cli_hint(cmd, opts, 3, hint, sizeof(hint)));
	return cli_usage(NULL, "unknown command '%s'%s", cmd, cli_hint(cmd, cmds, 5, hint, sizeof(hint)));
}

kb_registry *cli_registry;

/*
 * The benches every command sees: the built-ins, then the plugins of
 * KERNBENCH_PLUGIN_PATH, then each --plugin in order. Loaded here, before
 * any command runs, so that under mpirun every rank (same argv, same
 * environment) has the same benches before the MPI sweep starts.
 */
static int load_registry(const char *const *plugins, size_t n)
{
	const char *path = getenv("KERNBENCH_PLUGIN_PATH");
	kb_error err;
	int rc = kb_registry_create(&cli_registry, NULL, &err);

	if (!rc && (n > 0 || (path && *path)))
		cli_host_plugins();
	if (!rc)
		rc = kb_registry_load_path(cli_registry, path, &err);
	for (size_t i = 0; !rc && i < n; i++)
		rc = kb_registry_load_plugin(cli_registry, plugins[i], &err);
	return rc ? cli_kb_error(&err, rc) : CLI_OK;
}

static int dispatch(int argc, char **argv, const char *const *plugins, size_t n_plugins)
{
	const char *cmd = argc > 0 ? argv[0] : NULL;
	int (*fn)(int, char **) = NULL;
	int rc;

	if (!cmd)
		return cli_usage(NULL, "missing command");
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		if (argc > 1 && strcmp(cmd, "help") == 0) {
			const char *t = cli_help_text(argv[1]);

			return t ? cli_print_help(argv[1]) : unknown_command(argv[1]);
		}
		return cli_print_help(NULL);
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("kernbench %s\n", kb_version());
		return fflush(stdout) == 0 ? CLI_OK : cli_error("could not write the version");
	}
	if (strcmp(cmd, "list") == 0)
		fn = cli_cmd_list;
	else if (strcmp(cmd, "run") == 0)
		fn = cli_cmd_run;
	else if (strcmp(cmd, "sweep") == 0)
		fn = cli_cmd_sweep;
	else if (strcmp(cmd, "topology") == 0)
		fn = cli_cmd_topology;
	else
		return unknown_command(cmd);
	rc = load_registry(plugins, n_plugins);
	if (!rc)
		rc = fn(argc - 1, argv + 1);
	kb_registry_destroy(cli_registry);
	cli_registry = NULL;
	return rc;
}

int main(int argc, char **argv)
{
	const char **plugins = calloc((size_t)argc + 1, sizeof(*plugins));
	char **rest = calloc((size_t)argc + 1, sizeof(*rest));
	size_t n_plugins = 0;
	int n_rest = 0, rc;

	cli_argc = argc;
	cli_argv = (const char *const *)argv;
	/* A closed pipe on an output is a write error with a message and exit
	 * status 1 (doc/sweep.md), not death by SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	/* A kernel that overflows its stack says so, not "Segmentation fault". */
	cli_fault_handlers();
	if (!plugins || !rest) {
		free(plugins);
		free(rest);
		return cli_error("out of memory");
	}
	/* kernbench's own option, anywhere on the line: --plugin FILE. The
	 * provenance keeps the whole line (cli_argv). */
	rc = cli_take_plugins(argc - 1, argv + 1, rest, &n_rest, plugins, &n_plugins);
	if (!rc)
		rc = dispatch(n_rest, rest, plugins, n_plugins);
	free(plugins);
	free(rest);
	return rc;
}
