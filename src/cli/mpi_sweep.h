/*
 * `kernbench sweep` over MPI ranks: MPI as a transport of the library's
 * sweep (kb_sweep_run_transport on rank 0, kb_sweep_serve on the others).
 * mpi_load.c gives these calls to cmd_sweep.c: under an MPI launcher it
 * loads the module kernbench-mpi.so (mpi_sweep.c, mpi_ops.h, built with
 * ./configure --with-mpi) and hands them on; otherwise, and without MPI,
 * a plain sweep is a context that is not parallel (NULL), so cmd_sweep.c
 * has no #ifdef.
 *
 * Every rank runs the same command line and builds the same kb_sweep (so a
 * point index means the same everywhere; the set-up checks it: the ranks'
 * sweep definitions must be equal). Rank 0 alone opens, resumes, writes and
 * plots, with the same on_row as the single-process sweep.
 */
#ifndef KB_CLI_MPI_SWEEP_H
#define KB_CLI_MPI_SWEEP_H

#include "kernbench/sweep.h"

typedef struct cli_mpi_ctx cli_mpi_ctx;

/*
 * Starts MPI when this process was started by an MPI launcher (mpirun,
 * mpiexec, srun: found from the environment) or KERNBENCH_MPI=1;
 * KERNBENCH_MPI=0 never starts it; any other value is a usage error. *out
 * is NULL when MPI is not used. Returns 0 or an exit status (message
 * printed).
 */
int cli_mpi_sweep_start(cli_mpi_ctx **out);
/* This rank, and whether there are several ranks (else: the plain sweep). */
int cli_mpi_sweep_rank(const cli_mpi_ctx *m);
int cli_mpi_sweep_parallel(const cli_mpi_ctx *m);
/* Points this rank runs at once: -j N, or under MPI (0) the cores of the
 * node shared by the ranks on it; requested when not parallel. */
unsigned cli_mpi_sweep_jobs(const cli_mpi_ctx *m, unsigned requested);
/* Whether rank 0 should draw progress: stderr (or mpirun's) is a terminal,
 * or KERNBENCH_PROGRESS=1. */
int cli_mpi_sweep_progress_wanted(void);

/*
 * Set-up agreement. Rank 0, after parsing, building and opening the output,
 * calls cli_mpi_sweep_setup_root with stop nonzero when the command ends
 * there (help, usage or set-up error); the others wait in
 * cli_mpi_sweep_setup_wait and end quietly when told to stop. Then every
 * rank builds the sweep and calls cli_mpi_sweep_setup_done with its own
 * status: a failure anywhere, or a sweep that differs from rank 0's (the
 * rank names the difference), ends the command everywhere. Each returns 0
 * or an exit status. jobs: this rank's cli_mpi_sweep_jobs.
 */
int cli_mpi_sweep_setup_root(cli_mpi_ctx *m, int stop, const kb_sweep *s, unsigned jobs);
int cli_mpi_sweep_setup_wait(cli_mpi_ctx *m, int *stop);
int cli_mpi_sweep_setup_done(cli_mpi_ctx *m, int status, const kb_sweep *s, unsigned jobs);

/* Rank 0: runs the sweep over every rank and calls on_row in point order,
 * exactly as kb_sweep_run would. Returns 0, or 1 after printing why the
 * sweep stopped (the rows delivered before stay). */
int cli_mpi_sweep_run(cli_mpi_ctx *m, kb_sweep *s, unsigned jobs, kb_sweep_cb on_row,
		      void *payload);
/* Other ranks: run the points rank 0 hands out until it says stop. */
int cli_mpi_sweep_work(cli_mpi_ctx *m, const kb_sweep *s, unsigned jobs);

/* Ends MPI (NULL: nothing); returns status. */
int cli_mpi_sweep_end(cli_mpi_ctx *m, int status);

#endif
