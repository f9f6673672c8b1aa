/*
 * Threads a run may start, so that an option asking for more than the
 * system allows is refused before the first one starts instead of failing
 * half-way (kernel_threads starts one thread per kernel instance).
 */
#ifndef KB_BASE_THREADLIMIT_H
#define KB_BASE_THREADLIMIT_H

#include <stdint.h>

#include "base/err.h"

typedef struct kb_thread_limit {
	uint64_t limit;      /* UINT64_MAX: none known */
	uint64_t used;       /* of it, threads running now */
	const char *what;    /* its name, for messages */
} kb_thread_limit;

/* The tighter of RLIMIT_NPROC (ulimit -u: its soft limit, with this
 * process's threads as the ones running; the kernel counts every thread of
 * the user, but other processes' are not known here; it does not apply to
 * root) and the cgroup's pids.max (with its pids.current). */
void kb__thread_limit(kb_thread_limit *out);

/* KB_ERANGE "WHY needs N threads, more than LIMIT allows: L, with U
 * running; HINT" when n more threads do not fit in l (NULL: the
 * kb__thread_limit of now), else KB_OK. why names the option and its value
 * ("kernel_threads = 1, a thread for each of 64 kernel instances"). */
int kb__threads_fit(uint64_t n, const char *why, const char *hint, const kb_thread_limit *l,
		    kb_error *err);

#endif
