/*
 * Alternate signal stacks for the library's threads (altstack.h).
 */
#include "base/altstack.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

/* Room for a handler that formats a line and calls write(2), and for the
 * signal frame itself (SIGSTKSZ: with AVX-512 state about 10 KiB). */
#define ALT_BYTES ((size_t)64 << 10)

static size_t alt_bytes(size_t page)
{
	size_t n = ALT_BYTES;

#ifdef _SC_SIGSTKSZ
	long s = sysconf(_SC_SIGSTKSZ);   /* glibc >= 2.34: the CPU's own figure */

	if (s > 0 && (size_t)s > n)
		n = (size_t)s;
#endif
	return (n + page - 1) / page * page;
}

void kb__altstack_init(kb_altstack *a)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	stack_t old, ss;
	char *map;

	a->map = NULL;
	a->bytes = 0;
	/* A thread that has one (the application's, or a sanitizer's) keeps it. */
	if (sigaltstack(NULL, &old) != 0 || !(old.ss_flags & SS_DISABLE))
		return;
	ss.ss_size = alt_bytes(page);
	map = mmap(NULL, page + ss.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	if (map == MAP_FAILED)
		return;
	ss.ss_sp = map + page;
	ss.ss_flags = 0;
	/* The guard page: a handler that overflows the alternate stack faults
	 * instead of writing below it. */
	if (mprotect(map, page, PROT_NONE) != 0 || sigaltstack(&ss, NULL) != 0) {
		munmap(map, page + ss.ss_size);
		return;
	}
	a->map = map;
	a->bytes = page + ss.ss_size;
}

void kb__altstack_fini(kb_altstack *a)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	stack_t cur, off;

	if (!a->map)
		return;
	/* Still ours: disable it before the memory goes (a thread that installed
	 * another since has let go of ours already). */
	if (sigaltstack(NULL, &cur) != 0)
		return;   /* cannot tell whether it is in use: leave it mapped */
	if (cur.ss_sp == a->map + page && !(cur.ss_flags & SS_DISABLE)) {
		off.ss_sp = NULL;
		off.ss_size = 0;
		off.ss_flags = SS_DISABLE;
		if (sigaltstack(&off, NULL) != 0)
			return;   /* on it (cannot be at a thread's end) */
	}
	munmap(a->map, a->bytes);
	a->map = NULL;
}
