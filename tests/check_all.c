/*
 * The test runner: `check_all` runs every suite; `check_all NAME...` runs
 * the named ones (automake runs one suite per test through tests/suite.sh,
 * so each shows as its own line and log). Exit status 0 when all pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"

typedef Suite *(*suite_fn)(void);

static const struct {
	const char *name;
	suite_fn fn;
} all[] = {
	{ "topology", topology_suite }, { "numerics", numerics_suite },
	{ "sim", sim_suite },           { "oplog", oplog_suite },
	{ "tl", tl_suite },             { "tcm", tcm_suite },
	{ "pe", pe_suite },
	{ "bench", bench_suite },       { "data", data_suite },
	{ "parallel", parallel_suite }, { "api", api_suite },
	{ "limits", limits_suite },     { "registry", registry_suite },
	{ "sweep", sweep_suite },
};

int main(int argc, char **argv)
{
	SRunner *sr = NULL;
	int failed, added = 0;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		int want = argc < 2;

		for (int a = 1; a < argc; a++)
			want |= strcmp(argv[a], all[i].name) == 0;
		if (!want)
			continue;
		if (!sr)
			sr = srunner_create(all[i].fn());
		else
			srunner_add_suite(sr, all[i].fn());
		added++;
	}
	if (!added) {
		fprintf(stderr, "check_all: no suite named");
		for (int a = 1; a < argc; a++)
			fprintf(stderr, " %s", argv[a]);
		fprintf(stderr, "\n");
		return 2;
	}
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
