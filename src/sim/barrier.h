/*
 * A barrier for the window loop that spins briefly and then sleeps on a
 * futex, so it stays cheap when every thread has a core and does not
 * collapse when there are more threads than cores (a pure spin barrier
 * costs a scheduler quantum per window when oversubscribed).
 */
#ifndef KB_SIM_BARRIER_H
#define KB_SIM_BARRIER_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Sleep while *addr == val / wake n sleepers: the futex system call
 * itself. The ops are the _PRIVATE ones of linux/futex.h: the word never
 * leaves the process, which spares the kernel a lookup. (liburcu's
 * futex_noasync did the same call, but its fallback for kernels without
 * futexes was the library's only symbol from liburcu-cds, and loading
 * that library cost every process ~60 symbol relocations and a mapping:
 * issue 13.) A failed wait (EAGAIN: the word moved; EINTR) or wake is
 * harmless: callers re-check the word. */
static inline void kb__futex_wait(_Atomic unsigned *addr, unsigned val)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static inline void kb__futex_wake(_Atomic unsigned *addr, int n)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

typedef struct kb_barrier {
	_Atomic unsigned arrived;
	_Atomic unsigned generation;   /* the futex word */
	_Atomic unsigned sleepers;
	_Atomic unsigned parties;        /* may change between episodes */
	unsigned spin;                 /* spins before sleeping */
} kb_barrier;

void kb__barrier_init(kb_barrier *b, unsigned parties, unsigned spin);
void kb__barrier_wait(kb_barrier *b);

#endif
