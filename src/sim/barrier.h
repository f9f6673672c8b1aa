/*
 * A barrier for the window loop that spins briefly and then sleeps on a
 * futex, so it stays cheap when every thread has a core and does not
 * collapse when there are more threads than cores (a pure spin barrier
 * costs a scheduler quantum per window when oversubscribed).
 */
#ifndef KB_SIM_BARRIER_H
#define KB_SIM_BARRIER_H

#include <stdatomic.h>

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
