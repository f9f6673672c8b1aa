/*
 * failmalloc: an LD_PRELOAD module that makes kernbench's own allocations
 * fail, in the manner of sqlite's and jansson's malloc-failure tests
 * (tests/robust/oom.sh drives it; doc/robustness.md).
 *
 * It counts the allocations (malloc, calloc, realloc, aligned_alloc,
 * posix_memalign, memalign, strdup, strndup) whose caller is kernbench's
 * code: the kernbench command (into which the library is linked by
 * default) or libkernbench.so. Allocations made by libc, ld.so, jansson
 * and the rest pass through uncounted: their failure handling is not
 * ours, and counting them would make N depend on libc's internals.
 * Environment:
 *   KB_FAILMALLOC_N=N        fail the Nth counted allocation (0: none)
 *   KB_FAILMALLOC_FROM=1     and every counted allocation after it
 *   KB_FAILMALLOC_REPORT=F   at exit, write the count to file F
 *   KB_FAILMALLOC_SKIP=A-B   an offset range (hex, in the command's
 *                            file) whose calls are not ours: jansson's
 *                            code, linked into the command (oom.sh)
 *   KB_FAILMALLOC_SITES=F    write each counted call's return address to
 *                            file F, as an offset in the command's file
 *                            (addr2line -f -e kernbench < F: which
 *                            allocation sites a run reaches)
 *
 * The allocator underneath is glibc's __libc_malloc family, so nothing
 * here resolves symbols (no dlsym bootstrapping, which itself allocates).
 * Elsewhere the module passes everything through and reports no count,
 * and oom.sh skips.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __GLIBC__
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
#define FM_ACTIVE 1
#else
#define FM_ACTIVE 0
#endif

enum { MAX_RANGES = 16 };

/* The text ranges of our code, found once by the constructor and read-only
 * after it; until then (ld.so's and libc's start-up) nothing counts. */
static struct { uintptr_t lo, hi; } ours[MAX_RANGES];
static int n_ours;
static uintptr_t skip_lo, skip_hi;      /* absolute, once the base is known */
static unsigned long fail_at;
static int fail_from;
static const char *report_path;
static atomic_ulong counted;
static uintptr_t exe_base;
static int sites_fd = -1;

static int is_kernbench_exe(void)
{
	char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	const char *b;

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	b = strrchr(buf, '/');
	b = b ? b + 1 : buf;
	/* libtool's uninstalled command is .libs/lt-kernbench or .libs/kernbench */
	return strcmp(b, "kernbench") == 0 || strcmp(b, "lt-kernbench") == 0;
}

static int add_object(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *name = info->dlpi_name;
	int exe = !name || !*name;

	(void)size;
	if (exe ? !*(int *)data : !strstr(name, "/libkernbench.so"))
		return 0;
	if (exe)
		exe_base = info->dlpi_addr;
	if (exe && skip_hi) {
		skip_lo += info->dlpi_addr;
		skip_hi += info->dlpi_addr;
	}
	for (int i = 0; i < info->dlpi_phnum && n_ours < MAX_RANGES; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];

		if (p->p_type == PT_LOAD && (p->p_flags & PF_X)) {
			ours[n_ours].lo = info->dlpi_addr + p->p_vaddr;
			ours[n_ours].hi = ours[n_ours].lo + p->p_memsz;
			n_ours++;
		}
	}
	return 0;
}

__attribute__((constructor)) static void failmalloc_init(void)
{
	const char *n = getenv("KB_FAILMALLOC_N"), *f = getenv("KB_FAILMALLOC_FROM");
	const char *s = getenv("KB_FAILMALLOC_SKIP");
	int exe = is_kernbench_exe();

	if (!FM_ACTIVE)
		return;
	fail_at = n ? strtoul(n, NULL, 10) : 0;
	fail_from = f && *f == '1';
	report_path = getenv("KB_FAILMALLOC_REPORT");
	if (s && exe && sscanf(s, "%lx-%lx", &skip_lo, &skip_hi) != 2)
		skip_lo = skip_hi = 0;
	dl_iterate_phdr(add_object, &exe);
	if ((s = getenv("KB_FAILMALLOC_SITES")))
		sites_fd = open(s, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
}

/* One line a counted call: write(2) only, no allocation. */
static void note_site(uintptr_t a)
{
	char line[24];
	int len = snprintf(line, sizeof(line), "%lx\n", (unsigned long)(a - exe_base - 1));

	if (write(sites_fd, line, (size_t)len) != len)
		(void)0;
}

__attribute__((destructor)) static void failmalloc_report(void)
{
	char line[32];
	int fd, len;

	if (!FM_ACTIVE || !report_path)
		return;
	fd = open(report_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return;
	len = snprintf(line, sizeof(line), "%lu\n", (unsigned long)atomic_load(&counted));
	if (write(fd, line, (size_t)len) != len)
		(void)0;        /* the script then finds no count and fails */
	close(fd);
}

/* Called at each failure: a breakpoint for a debugger (`break
 * failmalloc_hit` shows which allocation failed). */
__attribute__((noinline)) void failmalloc_hit(unsigned long k);
__attribute__((noinline)) void failmalloc_hit(unsigned long k)
{
	__asm__ volatile("" : : "r"(k) : "memory");
}

/* Whether the allocation called from CALLER is counted and must fail. */
static int should_fail(const void *caller)
{
	uintptr_t a = (uintptr_t)caller;
	int mine = 0;

	for (int i = 0; i < n_ours && !mine; i++)
		mine = a >= ours[i].lo && a < ours[i].hi;
	if (!mine || (a >= skip_lo && a < skip_hi))
		return 0;
	unsigned long k = atomic_fetch_add(&counted, 1) + 1;

	if (sites_fd >= 0)
		note_site(a);

	if (!fail_at || !(k == fail_at || (fail_from && k > fail_at)))
		return 0;
	failmalloc_hit(k);
	return 1;
}

#define CALLER __builtin_return_address(0)

#if FM_ACTIVE
void *malloc(size_t size)
{
	if (should_fail(CALLER)) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	if (should_fail(CALLER)) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	if (should_fail(CALLER)) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_realloc(p, size);
}

static void *aligned(size_t align, size_t size, const void *caller)
{
	if (should_fail(caller)) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_memalign(align, size);
}

void *aligned_alloc(size_t align, size_t size)
{
	return aligned(align, size, CALLER);
}

void *memalign(size_t align, size_t size)
{
	return aligned(align, size, CALLER);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	if (!(p = aligned(align, size, CALLER)))
		return ENOMEM;
	*out = p;
	return 0;
}

/* libc's own strdup would call malloc from libc, uncounted. */
static char *copy(const char *s, size_t n, const void *caller)
{
	char *p;

	if (should_fail(caller)) {
		errno = ENOMEM;
		return NULL;
	}
	if ((p = __libc_malloc(n + 1))) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

char *strdup(const char *s)
{
	return copy(s, strlen(s), CALLER);
}

char *strndup(const char *s, size_t n)
{
	return copy(s, strnlen(s, n), CALLER);
}
#endif
