#include "testutil.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int kbt_run(const char *bench, const char *const *params, const char *const *sets, int threads,
	    int data, kb_result *res, kb_error *err)
{
	kb_params *p = NULL;
	kb_topology *t = NULL;
	kb_run_options o = KB_RUN_OPTIONS_INIT;
	int rc = kb_params_create(&p, err);

	for (size_t i = 0; !rc && params && params[i]; i++)
		rc = kb_params_set_assignment(p, params[i], err);
	if (!rc && sets) {
		rc = kb_topology_default(&t, err);
		for (size_t i = 0; !rc && sets[i]; i++)
			rc = kb_topology_set_assignment(t, sets[i], err);
	}
	o.threads = threads;
	o.data = data;
	if (!rc)
		rc = kb_bench_run(bench, p, t, &o, res, err);
	kb_topology_destroy(t);
	kb_params_destroy(p);
	return rc;
}

char *kbt_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *d = malloc(4096);

	if (!d)
		return NULL;
	snprintf(d, 4096, "%s/kbtest.XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(d)) {
		free(d);
		return NULL;
	}
	return d;
}

char *kbt_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		if (buf) {
			buf[n] = '\0';
			if (len)
				*len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

long kbt_cores(void)
{
	cpu_set_t set;

	return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
							    : sysconf(_SC_NPROCESSORS_ONLN);
}
