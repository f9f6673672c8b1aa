/* Helpers shared by the Check suites. */
#ifndef KB_TESTS_TESTUTIL_H
#define KB_TESTS_TESTUTIL_H

#include <kernbench.h>

/* Runs a bench with "K=V" params (NULL-terminated list) and optional
 * topology assignments ("key=value", NULL-terminated; NULL for none).
 * Returns the kb_bench_run status; res must be cleared by the caller. */
int kbt_run(const char *bench, const char *const *params, const char *const *sets, int threads,
	    int data, kb_result *res, kb_error *err);
/* A temporary directory (mkdtemp) under $TMPDIR; free with free(). */
char *kbt_tmpdir(void);
/* Reads a whole file; NULL when it cannot; *len receives its size. */
char *kbt_slurp(const char *path, size_t *len);
/* The cores this process may run on (its affinity mask), as the library
 * counts them for its executors. */
long kbt_cores(void);

#endif
