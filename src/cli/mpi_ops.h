/*
 * The MPI sweep as a module (kernbench-mpi.so, built with ./configure
 * --with-mpi): mpi_sweep.c exports one table of these calls, and the
 * command loads it (mpi_load.c) only when a sweep runs under an MPI
 * launcher. So a plain `kernbench run` does not map libmpi and the eight
 * libraries behind it at start-up, which cost about 1.6 ms of CPU per
 * process (issue 13: the whole process is what a user times).
 *
 * The module calls back cli_error, cli_kb_error and cli_now, which the
 * command exports for it alone (mpi_module.dynlist). The calls mean what
 * the cli_mpi_sweep_* of mpi_sweep.h say; start initialises MPI without
 * asking the environment again (the command already decided).
 */
#ifndef KB_CLI_MPI_OPS_H
#define KB_CLI_MPI_OPS_H

#include "cli/mpi_sweep.h"

/* Bumped whenever a call below changes, so a stale module is refused. */
#define CLI_MPI_OPS_ABI 1
#define CLI_MPI_OPS_SYMBOL "cli_mpi_module_ops"

typedef struct cli_mpi_ops {
	unsigned abi;
	int (*start)(cli_mpi_ctx **out);
	int (*rank)(const cli_mpi_ctx *m);
	int (*parallel)(const cli_mpi_ctx *m);
	unsigned (*jobs)(const cli_mpi_ctx *m, unsigned requested);
	int (*progress_wanted)(void);
	int (*setup_root)(cli_mpi_ctx *m, int stop, const kb_sweep *s, unsigned jobs);
	int (*setup_wait)(cli_mpi_ctx *m, int *stop);
	int (*setup_done)(cli_mpi_ctx *m, int status, const kb_sweep *s, unsigned jobs);
	int (*run)(cli_mpi_ctx *m, kb_sweep *s, unsigned jobs, kb_sweep_cb on_row,
		   void *payload);
	int (*work)(cli_mpi_ctx *m, const kb_sweep *s, unsigned jobs);
	int (*end)(cli_mpi_ctx *m, int status);
} cli_mpi_ops;

#endif
