#include "sim/barrier.h"

#include <limits.h>
#include <sched.h>
#include <urcu/arch.h>

void kb__barrier_init(kb_barrier *b, unsigned parties, unsigned spin)
{
	atomic_init(&b->arrived, 0);
	atomic_init(&b->generation, 0);
	atomic_init(&b->sleepers, 0);
	atomic_init(&b->parties, parties);
	b->spin = spin;
}

void kb__barrier_wait(kb_barrier *b)
{
	unsigned gen = atomic_load_explicit(&b->generation, memory_order_acquire);

	if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) + 1 ==
	    atomic_load_explicit(&b->parties, memory_order_relaxed)) {
		/* Last to arrive: reset before releasing, so nobody re-enters early. */
		atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&b->generation, 1, memory_order_seq_cst);
		if (atomic_load_explicit(&b->sleepers, memory_order_seq_cst))
			kb__futex_wake(&b->generation, INT_MAX);
		return;
	}
	for (unsigned i = 0; i < b->spin; i++) {
		if (atomic_load_explicit(&b->generation, memory_order_acquire) != gen)
			return;
		caa_cpu_relax();
	}
	atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
	while (atomic_load_explicit(&b->generation, memory_order_seq_cst) == gen)
		kb__futex_wait(&b->generation, gen);
	atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
}
