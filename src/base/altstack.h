/*
 * An alternate signal stack for a thread the library starts (the parallel
 * executor's workers, the sweep pool's, kernel threads), so that an
 * application's SIGSEGV handler installed with SA_ONSTACK can run when a
 * kernel overflows its stack on one of them: without one, the kernel
 * delivers the signal on the overflowed stack, which faults again, and the
 * process dies with no word. Installs no handler and changes no signal
 * disposition: those stay the application's.
 */
#ifndef KB_BASE_ALTSTACK_H
#define KB_BASE_ALTSTACK_H

#include <stddef.h>

typedef struct kb_altstack {
	char *map;       /* guard page + stack; NULL: none of ours installed */
	size_t bytes;
} kb_altstack;

/* Gives the calling thread an alternate signal stack of its own (with a
 * guard page below it) if it has none. Failure is not an error: the thread
 * goes on without one (a->map NULL), as does one that already has one. */
void kb__altstack_init(kb_altstack *a);
/* At the thread's end: takes down what kb__altstack_init installed. */
void kb__altstack_fini(kb_altstack *a);

#endif
