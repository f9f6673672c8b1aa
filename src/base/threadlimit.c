#include "base/threadlimit.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/memlimit.h"
#include "base/str.h"

/* The number after key at the start of a line of path; 0 when none (also
 * for "max", which is no limit). */
static uint64_t read_number(const char *path, const char *key)
{
	char line[512];
	uint64_t v = 0;
	size_t klen = strlen(key);
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, klen) == 0 && kb__parse_u64(line + klen, &v) == 0)
			break;
	fclose(f);
	return v;
}

void kb__thread_limit(kb_thread_limit *out)
{
	char path[512];
	struct rlimit rl;
	uint64_t max = 0, cur = 0;

	*out = (kb_thread_limit){ UINT64_MAX, 0, "no limit" };
	/* The kernel exempts root (and CAP_SYS_RESOURCE, not looked at here:
	 * such a process is then refused nothing up front). */
	if (getuid() != 0 && geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY) {
		uint64_t self = read_number("/proc/self/status", "Threads:");

		*out = (kb_thread_limit){ (uint64_t)rl.rlim_cur, self ? self : 1,
					  "RLIMIT_NPROC (ulimit -u)" };
	}
	if (kb__cgroup_file("pids.max", path, sizeof(path)))
		max = read_number(path, "");
	if (max && kb__cgroup_file("pids.current", path, sizeof(path)))
		cur = read_number(path, "");
	if (max && (cur < max ? max - cur : 0) < (out->limit - out->used))
		*out = (kb_thread_limit){ max, cur, "the cgroup's pids.max" };
}

int kb__threads_fit(uint64_t n, const char *why, const char *hint, const kb_thread_limit *l,
		    kb_error *err)
{
	kb_thread_limit now;

	if (!l) {
		kb__thread_limit(&now);
		l = &now;
	}
	if (l->limit == UINT64_MAX || (l->used <= l->limit && n <= l->limit - l->used))
		return KB_OK;
	return kb__err(err, KB_ERANGE, "%s needs %llu threads, more than %s allows: %llu, with "
		       "%llu running; %s", why, (unsigned long long)n, l->what,
		       (unsigned long long)l->limit, (unsigned long long)l->used, hint);
}
