/*
 * kernbench: the command-line front end of the simulator. Dispatches to the
 * subcommands; the only place that decides the process exit status.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "kernbench/version.h"

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

			return t ? cli_print_help(argv[2]) : unknown_command(argv[2]);
		}
		return cli_print_help(NULL);
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
