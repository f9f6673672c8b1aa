/*
 * A simulation an embedding program drives itself: a machine built from a
 * topology, HBM tensors it allocates and fills, kernels it launches on
 * chosen PEs, one run, and the results.
 *
 * Thread rules: one kb_simulation is used from one thread at a time; any
 * number of simulations may exist and run at once on different threads
 * (the library has no global mutable state). Kernels run on threads of the
 * simulation; the op_log callback runs on the thread that called
 * kb_simulation_run.
 */
#ifndef KERNBENCH_SIMULATION_H
#define KERNBENCH_SIMULATION_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/bench.h"
#include "kernbench/common.h"
#include "kernbench/oplog.h"
#include "kernbench/tl.h"
#include "kernbench/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kb_simulation kb_simulation;

typedef struct kb_sim_options {
	int threads;             /* KB_THREADS_AUTO (default), 0: one thread per engine,
				  * 1: sequential, N: N workers */
	int data;                /* nonzero: data mode (stages move and compute real numbers) */
	const char *oplog_path;  /* NULL: no file */
	const char *trace_path;  /* NULL: no trace */
	kb_oplog_cb on_record;   /* NULL: none */
	void *payload;
	uint32_t pes;            /* PEs to build; 0: all PEs of the topology */
	const char *trace_metadata; /* JSON object written as the trace's "metadata"
				     * (provenance, e.g. kb_provenance_json); NULL: none */
	/* Stack of each kernel instance, in bytes; 0: 1 MiB; else at least
	 * 16 KiB. Kernels run as coroutines on that stack; one that overflows
	 * it faults (SIGSEGV) on a guard region below it, never corrupts
	 * (kb_kernel_stack_fault tells that fault apart). */
	size_t kernel_stack_bytes;
	/* Nonzero: each kernel instance on a thread of its own instead of a
	 * coroutine on its PE's thread, for kernels that need one (a kernel
	 * calling into an interpreter with per-thread state, such as Python
	 * through ctypes). Only one of a PE's kernel and PE_CPU runs at a time
	 * either way; the results are the same. */
	int kernel_threads;
} kb_sim_options;
#define KB_SIM_OPTIONS_INIT { KB_THREADS_AUTO, 0, NULL, NULL, NULL, NULL, 0, NULL, 0, 0 }

/* Builds a machine from topo (NULL: the embedded default). */
KB_API int kb_simulation_create(kb_simulation **out, const kb_topology *topo,
				const kb_sim_options *opt, kb_error *err);
/* Accepts NULL. Frees everything, whatever state the simulation is in. */
KB_API void kb_simulation_destroy(kb_simulation *sim);
/* Number of PEs of the machine. */
KB_API uint32_t kb_simulation_pes(const kb_simulation *sim);

/* Allocates an HBM tensor; *addr receives its address. zero: fill with 0
 * (otherwise it is uninitialised, and reading it in data mode is an error). */
KB_API int kb_simulation_alloc(kb_simulation *sim, kb_dtype dt, int rank, const int64_t *shape,
			       int zero, uint64_t *addr, kb_error *err);
/* Copies host bytes into HBM at addr (must lie in one allocation). */
KB_API int kb_simulation_upload(kb_simulation *sim, uint64_t addr, const void *src, size_t bytes,
				kb_error *err);
/* Copies HBM bytes at addr to the host. */
KB_API int kb_simulation_download(kb_simulation *sim, uint64_t addr, void *dst, size_t bytes,
				  kb_error *err);
/* Launches fn on PEs first_pe .. first_pe + n_pes - 1 (program ids 0..n-1),
 * each called with args. Kernels run during kb_simulation_run. */
KB_API int kb_simulation_launch(kb_simulation *sim, kb_kernel_fn fn, void *args,
				uint32_t first_pe, uint32_t n_pes, kb_error *err);
/* Runs every launched kernel to completion; fills res (may be NULL; set
 * res->size with KB_RESULT_INIT, clear it with kb_result_clear). A
 * simulation runs once; a res of a bad size is refused before it runs. */
KB_API int kb_simulation_run(kb_simulation *sim, kb_result *res, kb_error *err);

/* For an application's SIGSEGV handler (on an alternate signal stack,
 * SA_ONSTACK; the threads the library starts have one): nonzero when addr
 * (siginfo's si_addr) lies in the guard region below the stack of the
 * kernel the calling thread runs now, i.e. that kernel overflowed its
 * stack; then *stack_bytes (if not NULL) is that stack's size. 0 for any
 * other address, and on a thread that runs no kernel. Async-signal-safe. */
KB_API int kb_kernel_stack_fault(const void *addr, size_t *stack_bytes);

#ifdef __cplusplus
}
#endif
#endif
