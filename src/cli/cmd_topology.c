/* kernbench topology: print the effective topology (default or file, then
 * --set), or with --hash its SHA-256 alone. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernbench/topology.h"

enum { O_TOPOLOGY, O_SET, O_HASH, O_HELP, N_OPTS };

static const cli_opt opts[N_OPTS] = {
	[O_TOPOLOGY] = { "topology", 0, CLI_VALUE },
	[O_SET] = { "set", 0, CLI_LIST },
	[O_HASH] = { "hash", 0, CLI_FLAG },
	[O_HELP] = { "help", 'h', CLI_FLAG },
};

int cli_cmd_topology(int argc, char **argv)
{
	kb_topology *t = NULL;
	char *text = NULL;
	cli_args a;
	int rc;

	rc = cli_parse("topology", opts, N_OPTS, argc, argv, &a);
	if (rc)
		goto done;
	if (a.vals[O_HELP].seen) {
		rc = cli_print_help("topology");
		goto done;
	}
	if (a.n_pos) {
		rc = cli_usage("topology", "unexpected argument '%s'", a.pos[0]);
		goto done;
	}
	rc = cli_load_topology("topology", a.vals[O_TOPOLOGY].value, a.vals[O_SET].list,
			       a.vals[O_SET].n_list, &t);
	if (rc)
		goto done;
	if (a.vals[O_HASH].seen) {
		char hex[65];
		kb_error err;

		if ((rc = kb_topology_sha256(t, hex, &err))) {
			rc = cli_kb_error(&err, rc);
			goto done;
		}
		puts(hex);
	} else {
		text = kb_topology_dump(t);
		if (!text) {
			rc = cli_error("out of memory");
			goto done;
		}
		fputs(text, stdout);
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		rc = cli_error("could not write the topology to standard output");
done:
	kb_free(text);
	kb_topology_destroy(t);
	cli_args_free(&a);
	return rc;
}
