/*
 * Host memory a run may use, so that an absurd size is refused before the
 * work starts instead of being found by the OS (issue 18 §2).
 */
#ifndef KB_BASE_MEMLIMIT_H
#define KB_BASE_MEMLIMIT_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* "/sys/fs/cgroup/GROUP/NAME" of the process's cgroup (v2) into path[n];
 * 0 when there is none or it does not fit. */
int kb__cgroup_file(const char *name, char *path, size_t n);

/* The smallest of physical memory, the cgroup's memory.max, RLIMIT_AS
 * (ulimit -v) and RLIMIT_DATA; *what names it. UINT64_MAX when none is
 * known. */
uint64_t kb__mem_limit(const char **what);

/* KB_ENOMEM "WHY needs about N of host memory, more than the L of LIMIT"
 * when need exceeds the limit, else KB_OK (needs of 64 MiB or less
 * without looking the limit up). The caller names what the user
 * set in why ("lps = 65536 x population = 1048576 messages in flight"). */
int kb__mem_need(uint64_t need, const char *why, kb_error *err);

/* a * b, or UINT64_MAX when it does not fit (an estimate that saturates). */
static inline uint64_t kb__mul_sat(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static inline uint64_t kb__add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

#endif
