/*
 * Fuzz target: the topology parser. Loads the input as a topology document;
 * when it loads, the dump must load again and dump to the same text (the
 * round trip kb_topology_dump promises). A failed load must leave a code
 * and a message. Built as a libFuzzer target (--enable-fuzz) and, in every
 * build, as tests/fuzz/replay_topology for the corpus and the regressions.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), *dump = NULL, *dump2 = NULL;
	kb_topology *t = NULL, *t2 = NULL;
	kb_error err;
	int rc;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	rc = kb_topology_load_string(&t, text, &err);
	if (rc) {
		if (rc > 0 || t || err.code != rc || !err.message[0]) {
			fprintf(stderr, "fuzz_topology: failed load with rc %d, code %d, message '%s'\n",
				rc, err.code, err.message);
			abort();
		}
		goto done;
	}
	dump = kb_topology_dump(t);
	if (!dump)
		abort();
	if (kb_topology_load_string(&t2, dump, &err)) {
		fprintf(stderr, "fuzz_topology: the dump does not load again: %s\n%s", err.message, dump);
		abort();
	}
	dump2 = kb_topology_dump(t2);
	if (!dump2 || strcmp(dump, dump2) != 0) {
		fprintf(stderr, "fuzz_topology: dump differs after a reload:\n%s\n---\n%s", dump,
			dump2 ? dump2 : "(null)");
		abort();
	}
done:
	kb_free(dump2);
	kb_free(dump);
	kb_topology_destroy(t2);
	kb_topology_destroy(t);
	free(text);
	return 0;
}
