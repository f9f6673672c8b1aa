/*
 * A kernel instance runs as a coroutine on the thread of its PE_CPU and
 * feeds it a bounded stream of commands (the suspension mechanism: the
 * kernel runs ahead of simulated time by at most the stream's capacity, so
 * memory stays bounded however long the kernel is). Kernels never observe
 * data, so running ahead changes nothing simulated: PE_CPU consumes
 * commands in program order and models every wait in simulated time.
 */
#ifndef KB_RUNTIME_KERNEL_H
#define KB_RUNTIME_KERNEL_H

#include "kernbench/tl.h"
#include "pe/pe.h"
#include "tl/tl_impl.h"

typedef struct kb_kernel_run kb_kernel_run;

/* Default and smallest kernel stack (kb_sim_options.kernel_stack_bytes). */
#define KB_KERNEL_STACK_DEFAULT ((size_t)1 << 20)
#define KB_KERNEL_STACK_MIN ((size_t)16 << 10)

/* stack_bytes: 0 for the default. threaded: on a thread of its own rather
 * than as a coroutine (kb_sim_options.kernel_threads). */
int kb__kernel_create(kb_kernel_run **out, kb_kernel_fn fn, void *args, const kb_tl_config *cfg,
		      size_t stack_bytes, int threaded, kb_error *err);
/* At most n (1 to the stream's capacity, 256, the default) commands
 * queued ahead of PE_CPU. A run that never asks for horizons (one worker)
 * has no use for a long stream, and a short one keeps the commands the
 * kernel wrote in cache until PE_CPU and PE_SCHEDULER read them. */
void kb__kernel_lookahead(kb_kernel_run *k, size_t n);
/* PE_CPU's reads resume the kernel once no more than n commands are
 * queued (default 0: when none is), so the stream holds between n and
 * the lookahead: the PE's horizon always sees at least n commands. */
void kb__kernel_low_water(kb_kernel_run *k, size_t n);
/* Maps the kernel's stack (with its guard) and prepares the coroutine; it
 * first runs when PE_CPU asks for a command. */
int kb__kernel_start(kb_kernel_run *k, kb_error *err);
/* Stops feeding (the simulation is over or failed): a kernel suspended
 * half-way runs to its end with every tl call failing. Any thread, once
 * the PE_CPU that ran the kernel is quiescent. */
void kb__kernel_stop(kb_kernel_run *k);
void kb__kernel_destroy(kb_kernel_run *k);
uint64_t kb__kernel_commands(const kb_kernel_run *k);
/* The tiles and tile-loop dispatch (ps) the kernel declared (kb__tl_tiles). */
void kb__kernel_tiles(const kb_kernel_run *k, uint64_t *tiles, uint64_t *loop_ps);
/* The command source PE_CPU reads (kb_cmd_source.next; ctx is the run). */
kb_cmd *kb__kernel_next(void *run);
/* The ring the kernel's commands queue in (PE_CPU's kb_cmd_source.ring). */
kb_cmd_ring *kb__kernel_ring(kb_kernel_run *k);
/* kb_cmd_source.peek: the commands queued ahead of PE_CPU. */
size_t kb__kernel_peek(void *run, size_t skip, const kb_cmd **out, size_t max);

#endif
