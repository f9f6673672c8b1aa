/*
 * Fuzz target: the K=V parsers. The input is split into lines; each line is
 * applied with kb_topology_set_assignment to one default topology and with
 * kb_params_set_assignment to one kb_params, and the text around '=' is
 * given to kb_sweep_add_param / kb_sweep_add_set (name, comma-separated
 * value list) on a sweep over the bench "synthetic". Contracts checked: a
 * failed set leaves the topology unchanged, a topology changed by sets
 * still dumps and loads back, every error carries a message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/bench.h"
#include "kernbench/sweep.h"
#include "kernbench/topology.h"

#define MAX_LINES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(const char *what, int rc, const kb_error *err, const char *line)
{
	if (rc <= 0 && (rc == 0 || err->message[0]))
		return;
	fprintf(stderr, "fuzz_set: %s('%s') returned %d with message '%s'\n", what, line, rc,
		err->message);
	abort();
}

static void apply_line(kb_topology *t, kb_params *p, kb_sweep *s, char *line)
{
	char *before = kb_topology_dump(t), *after, *eq;
	kb_error err;
	int rc;

	rc = kb_topology_set_assignment(t, line, &err);
	check_error("kb_topology_set_assignment", rc, &err, line);
	if (rc) {
		after = kb_topology_dump(t);
		if (!before || !after || strcmp(before, after) != 0) {
			fprintf(stderr, "fuzz_set: failed set '%s' changed the topology\n", line);
			abort();
		}
		kb_free(after);
	}
	kb_free(before);
	rc = kb_params_set_assignment(p, line, &err);
	check_error("kb_params_set_assignment", rc, &err, line);
	eq = strchr(line, '=');
	if (eq) {
		*eq = '\0';
		rc = kb_sweep_add_param(s, line, eq + 1, &err);
		check_error("kb_sweep_add_param", rc, &err, line);
		rc = kb_sweep_add_set(s, line, eq + 1, &err);
		check_error("kb_sweep_add_set", rc, &err, line);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kb_sweep_options so = KB_SWEEP_OPTIONS_INIT;
	kb_topology *t = NULL, *t2 = NULL;
	kb_params *p = NULL;
	kb_sweep *s = NULL;
	char *text = malloc(size + 1), *line, *next, *dump = NULL;
	kb_error err;
	const char *bench_end;
	const char *const *values_end;
	size_t points;
	int n = 0;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (kb_topology_default(&t, &err) || kb_params_create(&p, &err) || kb_sweep_create(&s, &so, &err) ||
	    kb_sweep_add_bench(s, "synthetic", &err))
		abort();
	for (line = text; line && n < MAX_LINES; line = next, n++) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		apply_line(t, p, s, line);
	}
	/* The sweep describes its first and last points without running them. */
	points = kb_sweep_points(s);
	if (points) {
		const char *bench;
		const char *const *values;

		if (kb_sweep_point(s, 0, &bench, &values, &err) ||
		    kb_sweep_point(s, points - 1, &bench, &values, &err))
			abort();
	}
	if (kb_sweep_point(s, points, &bench_end, &values_end, &err) == 0)
		abort();
	/* Whatever the sets did, the topology is still a valid document. */
	dump = kb_topology_dump(t);
	if (!dump)
		abort();
	if (kb_topology_load_string(&t2, dump, &err)) {
		fprintf(stderr, "fuzz_set: topology after sets does not reload: %s\n", err.message);
		abort();
	}
	kb_free(dump);
	kb_topology_destroy(t2);
	kb_sweep_destroy(s);
	kb_params_destroy(p);
	kb_topology_destroy(t);
	free(text);
	return 0;
}
