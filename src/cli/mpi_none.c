/*
 * The MPI calls of the sweep in a build without MPI (mpi_sweep.h): one
 * process, never parallel. KERNBENCH_MPI is checked the same way, so a typo
 * is an error in every build.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/mpi_sweep.h"

int cli_mpi_sweep_start(cli_mpi_ctx **out)
{
	const char *e = getenv("KERNBENCH_MPI");

	*out = NULL;
	if (e && *e && strcmp(e, "0") != 0 && strcmp(e, "1") != 0)
		return cli_usage("sweep", "KERNBENCH_MPI='%s': expected 1 (start MPI), 0 (never) "
				 "or nothing (as the launcher says)", e);
	return 0;
}

int cli_mpi_sweep_rank(const cli_mpi_ctx *m)
{
	(void)m;
	return 0;
}

int cli_mpi_sweep_parallel(const cli_mpi_ctx *m)
{
	(void)m;
	return 0;
}

unsigned cli_mpi_sweep_jobs(const cli_mpi_ctx *m, unsigned requested)
{
	(void)m;
	return requested;
}

int cli_mpi_sweep_progress_wanted(void)
{
	return 0;
}

int cli_mpi_sweep_setup_root(cli_mpi_ctx *m, int stop, const kb_sweep *s, unsigned jobs)
{
	(void)m, (void)stop, (void)s, (void)jobs;
	return 0;
}

int cli_mpi_sweep_setup_wait(cli_mpi_ctx *m, int *stop)
{
	(void)m;
	*stop = 1;
	return 0;
}

int cli_mpi_sweep_setup_done(cli_mpi_ctx *m, int status, const kb_sweep *s, unsigned jobs)
{
	(void)m, (void)s, (void)jobs;
	return status;
}

int cli_mpi_sweep_run(cli_mpi_ctx *m, kb_sweep *s, unsigned jobs, kb_sweep_cb on_row,
		      void *payload)
{
	(void)m, (void)s, (void)jobs, (void)on_row, (void)payload;
	return cli_error("internal: an MPI sweep in a build without MPI");
}

int cli_mpi_sweep_work(cli_mpi_ctx *m, const kb_sweep *s, unsigned jobs)
{
	(void)m, (void)s, (void)jobs;
	return cli_error("internal: an MPI sweep in a build without MPI");
}

int cli_mpi_sweep_end(cli_mpi_ctx *m, int status)
{
	(void)m;
	return status;
}
