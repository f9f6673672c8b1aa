/*
 * libm, loaded when the command first calls into it (issue 13). Mapping
 * and relocating libm at every start costs ~0.17 ms of CPU a process
 * (about 15 page faults, its ifunc resolvers, four mappings), while a
 * timing run never calls it: only data mode (exp, tanh in the engines'
 * kernels, log and sqrt for the seeded inputs) and sweep plots do. So the
 * command defines the libm functions it uses, each of which finds libm's
 * own on its first call and calls it from then on: the same function, so
 * the same bits. The command is linked --as-needed, so libm is not a
 * start-up dependency while every function it calls is defined here; one
 * that is not (a new call, or an unoptimised build that does not inline
 * floor) links libm at start as before. libkernbench.so keeps -lm.
 */
#define _GNU_SOURCE 1   /* RTLD_NEXT */
#include <dlfcn.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <gnu/lib-names.h>
#endif
#ifndef LIBM_SO
#define LIBM_SO "libm.so.6"
#endif

/* NAME's address in libm: already loaded (by a plugin's libraries, or in a
 * libc that has libm in it) after this program, else loaded now and kept
 * for the rest of the process. A libm that cannot be loaded leaves no
 * result to return, so the command stops with a message. */
static void *libm_fn(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name), *h;

	if (!f && (h = dlopen(LIBM_SO, RTLD_LAZY | RTLD_LOCAL)))
		f = dlsym(h, name);
	if (!f) {
		fprintf(stderr, "kernbench: cannot load %s from %s: %s\n", name, LIBM_SO, dlerror());
		_exit(1);
	}
	return f;
}

/* NAME(ARGS) calling libm's NAME, looked up once (two threads that both
 * look it up store the same address). */
#define LIBM_CALL(name, params, args)                                                   \
	double name params                                                              \
	{                                                                               \
		static double(*_Atomic fn) params;                                      \
		double(*f) params = atomic_load_explicit(&fn, memory_order_acquire);    \
                                                                                        \
		if (!f) {                                                               \
			/* POSIX's way to turn dlsym's result into a function pointer */ \
			*(void **)&f = libm_fn(#name);                                   \
			atomic_store_explicit(&fn, f, memory_order_release);            \
		}                                                                       \
		return f args;                                                          \
	}

LIBM_CALL(exp, (double x), (x))
LIBM_CALL(log, (double x), (x))
LIBM_CALL(log10, (double x), (x))
LIBM_CALL(sqrt, (double x), (x))
LIBM_CALL(tanh, (double x), (x))
LIBM_CALL(pow, (double x, double y), (x, y))
LIBM_CALL(fmax, (double x, double y), (x, y))
LIBM_CALL(fmin, (double x, double y), (x, y))
