/*
 * What the kernbench command says when it dies of SIGSEGV or SIGBUS: one
 * line on stderr, then death by the same signal (exit status 128 + 11 from
 * a shell, a core dump where they are enabled), as without the handler.
 * The usual cause is a kernel (a plugin's) that overflowed its stack: the
 * library maps each kernel's stack above a guard region, and
 * kb_kernel_stack_fault tells a fault on it apart, so the line can name
 * the stack's size and the option that sets it instead of a bare
 * "Segmentation fault".
 *
 * The handler runs on an alternate signal stack (on the overflowed one it
 * could not): this thread's is set up here, the library's threads have
 * their own. It is async-signal-safe: write(2), raise(3) and
 * kb_kernel_stack_fault, with the numbers formatted by hand.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "kernbench/simulation.h"

/* The main thread's alternate signal stack (kernels of a --threads 1 run
 * run on this thread); the handler needs little beyond the signal frame. */
static char alt_stack[64 << 10];

typedef struct line {
	char buf[256];
	size_t n;
} line;

static void put(line *l, const char *s)
{
	while (*s && l->n < sizeof(l->buf) - 1)
		l->buf[l->n++] = *s++;
}

/* v in base 10 or 16, without leading zeros. */
static void put_num(line *l, uintmax_t v, unsigned base)
{
	char d[32];
	size_t i = sizeof(d);

	d[--i] = '\0';
	do {
		d[--i] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	put(l, d + i);
}

static void on_fault(int sig, siginfo_t *si, void *uctx)
{
	int saved = errno;
	size_t bytes = 0;
	line l = { .n = 0 };
	ssize_t w;

	(void)uctx;
	if (kb_kernel_stack_fault(si->si_addr, &bytes)) {
		put(&l, "kernbench: error: a kernel overflowed its stack of ");
		put_num(&l, bytes, 10);
		put(&l, " bytes (deep recursion or large local arrays? "
		    "kb_sim_options.kernel_stack_bytes sets it; default 1 MiB)\n");
	} else {
		put(&l, sig == SIGBUS ? "kernbench: fatal: SIGBUS at 0x" : "kernbench: fatal: SIGSEGV at 0x");
		put_num(&l, (uintptr_t)si->si_addr, 16);
		put(&l, " (a bug in a kernel, a plugin or kernbench)\n");
	}
	w = write(STDERR_FILENO, l.buf, l.n);
	(void)w;
	errno = saved;
	/* SA_RESETHAND has put back the default action; the signal is blocked
	 * until the handler returns, then kills the process. */
	raise(sig);
}

/* Leaves a handler that is there already (a sanitizer's, a debugging
 * preload's) in place: it has its own report to give. */
static void install(int sig)
{
	struct sigaction sa, old;

	if (sigaction(sig, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
	    (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN))
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

void cli_fault_handlers(void)
{
	stack_t ss, old;

	if (sigaltstack(NULL, &old) == 0 && (old.ss_flags & SS_DISABLE)) {
		ss.ss_sp = alt_stack;
		ss.ss_size = sizeof(alt_stack);
		ss.ss_flags = 0;
		sigaltstack(&ss, NULL);   /* failing, the handler runs where it can */
	}
	install(SIGSEGV);
	install(SIGBUS);
}
