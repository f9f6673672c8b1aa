#include "base/memlimit.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/str.h"

static void lower(uint64_t *limit, const char **what, uint64_t v, const char *name)
{
	if (v < *limit) {
		*limit = v;
		*what = name;
	}
}

int kb__cgroup_file(const char *name, char *path, size_t n)
{
	char line[512], group[401];
	FILE *f = fopen("/proc/self/cgroup", "r");
	int found = 0;

	if (!f)
		return 0;
	/* The v2 line is "0::/PATH". */
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "0::%400[^\n]", group) == 1;
	fclose(f);
	return found && snprintf(path, n, "/sys/fs/cgroup%s/%s", group, name) < (int)n;
}

/* memory.max of the process's cgroup (v2); UINT64_MAX for "max" or none. */
static uint64_t cgroup_max(void)
{
	char path[512], line[64];
	uint64_t v = 0;
	FILE *f;

	if (!kb__cgroup_file("memory.max", path, sizeof(path)) || !(f = fopen(path, "r")))
		return UINT64_MAX;
	if (!fgets(line, sizeof(line), f) || kb__parse_u64(line, &v) != 0)
		v = 0;   /* "max", or unreadable: no limit */
	fclose(f);
	return v ? v : UINT64_MAX;
}

uint64_t kb__mem_limit(const char **what)
{
	uint64_t limit = UINT64_MAX;
	const char *name = "no limit";
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	struct rlimit rl;

	if (pages > 0 && page > 0)
		lower(&limit, &name, kb__mul_sat((uint64_t)pages, (uint64_t)page),
		      "physical memory");
	lower(&limit, &name, cgroup_max(), "cgroup's memory.max");
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		lower(&limit, &name, (uint64_t)rl.rlim_cur, "address-space limit (ulimit -v)");
	if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		lower(&limit, &name, (uint64_t)rl.rlim_cur, "data limit (ulimit -d)");
	if (what)
		*what = name;
	return limit;
}

/* "1.5 GiB": bytes in the largest binary unit that keeps a digit before
 * the point. */
static void human(uint64_t bytes, char *buf, size_t n)
{
	static const char *const unit[] = { "bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 6) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
	else
		snprintf(buf, n, "%.1f %s", v, unit[u]);
}

/* Needs up to this much are not checked: no host runs anything in less,
 * and finding the limits costs every process (two file opens for the
 * cgroup's memory.max, ~40 us in a VM: 4% of a small run, issue 13). */
#define NEED_UNCHECKED (64ull << 20)

int kb__mem_need(uint64_t need, const char *why, kb_error *err)
{
	const char *what;
	uint64_t limit;
	char a[32], b[32];

	if (need <= NEED_UNCHECKED)
		return KB_OK;
	limit = kb__mem_limit(&what);
	if (need <= limit)
		return KB_OK;
	human(need, a, sizeof(a));
	human(limit, b, sizeof(b));
	return kb__err(err, KB_ENOMEM,
		       "%s needs about %s of host memory, more than the limit of %s (%s): "
		       "make it smaller",
		       why, need == UINT64_MAX ? "16 EiB or more" : a, b, what);
}
