/*
 * A kernel instance runs on its own thread and feeds PE_CPU a bounded
 * stream of commands (the suspension mechanism: the kernel runs ahead of
 * simulated time by at most the stream's capacity, so memory stays bounded
 * however long the kernel is). Kernels never observe data, so running
 * ahead changes nothing simulated: PE_CPU consumes commands in program
 * order and models every wait in simulated time.
 */
#ifndef KB_RUNTIME_KERNEL_H
#define KB_RUNTIME_KERNEL_H

#include "kernbench/tl.h"
#include "pe/pe.h"
#include "tl/tl_impl.h"

typedef struct kb_kernel_run kb_kernel_run;

int kb__kernel_create(kb_kernel_run **out, kb_kernel_fn fn, void *args, const kb_tl_config *cfg,
		      kb_error *err);
/* Starts the kernel thread. */
int kb__kernel_start(kb_kernel_run *k, kb_error *err);
/* Stops feeding (the simulation is over or failed) and joins the thread. */
void kb__kernel_stop(kb_kernel_run *k);
void kb__kernel_destroy(kb_kernel_run *k);
uint64_t kb__kernel_commands(const kb_kernel_run *k);
/* The command source PE_CPU reads (kb_cmd_source.next; ctx is the run). */
kb_cmd *kb__kernel_next(void *run);

#endif
