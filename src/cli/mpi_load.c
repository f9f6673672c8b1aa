/*
 * The MPI calls of the sweep (mpi_sweep.h) as the command makes them: it
 * decides from the environment whether this process runs under an MPI
 * launcher, and only then loads the MPI module (mpi_ops.h) and hands every
 * call to it. Otherwise, and in a build without MPI, the sweep is one
 * plain process: the calls below answer for a NULL context.
 *
 * The module is looked for beside the running executable first, then in
 * .libs/ beside it (the build tree, where libtool leaves the module and a
 * command with the library linked in is ./kernbench), then where `make
 * install` puts it (KB_MPI_MODULE, pkglibdir).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/mpi_ops.h"

#define MODULE_NAME "kernbench-mpi.so"

static const cli_mpi_ops *mod;   /* set by a start that loaded the module */

/* KERNBENCH_MPI: 1 starts MPI, 0 never, unset or empty: as the launcher
 * says. Anything else is refused (issue 18 §5), in every build: a typo must
 * not silently run a plain sweep on every rank. */
static int launched_by_mpi(int *bad)
{
	static const char *const vars[] = {
		"OMPI_COMM_WORLD_SIZE",   /* Open MPI's mpirun */
		"PMIX_RANK",              /* PMIx launchers: srun --mpi=pmix, prterun */
		"PMI_RANK", "PMI_SIZE",   /* PMI-1/2: srun --mpi=pmi2, MPICH's hydra */
		"MPI_LOCALNRANKS",        /* MPICH's hydra */
		NULL
	};
	const char *force = getenv("KERNBENCH_MPI");
	size_t i;

	*bad = 0;
	if (force && *force) {
		*bad = strcmp(force, "0") != 0 && strcmp(force, "1") != 0;
		return strcmp(force, "1") == 0;
	}
	for (i = 0; vars[i]; i++)
		if (getenv(vars[i]))
			return 1;
	return 0;
}

#ifdef KB_MPI_MODULE
/* dlopens path; NULL with why (dlerror's words) when it cannot. */
static void *open_module(const char *path, char *why, size_t n)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		snprintf(why, n, "%s", dlerror());
	return h;
}

static int load_module(void)
{
	char beside[PATH_MAX + sizeof(".libs/" MODULE_NAME)], why[512] = "";
	const cli_mpi_ops *ops;
	void *h = NULL;
	const char *path = KB_MPI_MODULE;

	if (cli_beside_exe(MODULE_NAME, beside, sizeof(beside)) ||
	    cli_beside_exe(".libs/" MODULE_NAME, beside, sizeof(beside)))
		path = beside;
	h = open_module(path, why, sizeof(why));
	if (!h)
		return cli_error("sweep: started by an MPI launcher (or KERNBENCH_MPI=1), but the "
				 "MPI module %s cannot be loaded: %s", path, why);
	ops = (const cli_mpi_ops *)dlsym(h, CLI_MPI_OPS_SYMBOL);
	if (!ops || ops->abi != CLI_MPI_OPS_ABI) {
		dlclose(h);
		return cli_error("sweep: the MPI module %s is not this kernbench's (%s)", path,
				 ops ? "another version" : "no " CLI_MPI_OPS_SYMBOL);
	}
	mod = ops;   /* kept loaded: MPI stays initialised until the process ends */
	return CLI_OK;
}
#endif

int cli_mpi_sweep_start(cli_mpi_ctx **out)
{
	int bad, rc;

	*out = NULL;
	if (!launched_by_mpi(&bad) && !bad)
		return CLI_OK;
	if (bad)
		return cli_usage("sweep", "KERNBENCH_MPI='%s': expected 1 (start MPI), 0 (never) "
				 "or nothing (as the launcher says)", getenv("KERNBENCH_MPI"));
#ifdef KB_MPI_MODULE
	if (!mod && (rc = load_module()))
		return rc;
	return mod->start(out);
#else
	(void)rc;
	return CLI_OK;   /* built without MPI: every rank runs the plain sweep */
#endif
}

int cli_mpi_sweep_rank(const cli_mpi_ctx *m)
{
	return m ? mod->rank(m) : 0;
}

int cli_mpi_sweep_parallel(const cli_mpi_ctx *m)
{
	return m ? mod->parallel(m) : 0;
}

unsigned cli_mpi_sweep_jobs(const cli_mpi_ctx *m, unsigned requested)
{
	return m ? mod->jobs(m, requested) : requested;
}

int cli_mpi_sweep_progress_wanted(void)
{
	return mod ? mod->progress_wanted() : 0;
}

int cli_mpi_sweep_setup_root(cli_mpi_ctx *m, int stop, const kb_sweep *s, unsigned jobs)
{
	return m ? mod->setup_root(m, stop, s, jobs) : CLI_OK;
}

int cli_mpi_sweep_setup_wait(cli_mpi_ctx *m, int *stop)
{
	if (m)
		return mod->setup_wait(m, stop);
	*stop = 1;
	return CLI_OK;
}

int cli_mpi_sweep_setup_done(cli_mpi_ctx *m, int status, const kb_sweep *s, unsigned jobs)
{
	return m ? mod->setup_done(m, status, s, jobs) : status;
}

int cli_mpi_sweep_run(cli_mpi_ctx *m, kb_sweep *s, unsigned jobs, kb_sweep_cb on_row,
		      void *payload)
{
	if (m)
		return mod->run(m, s, jobs, on_row, payload);
	return cli_error("internal: an MPI sweep without MPI");
}

int cli_mpi_sweep_work(cli_mpi_ctx *m, const kb_sweep *s, unsigned jobs)
{
	if (m)
		return mod->work(m, s, jobs);
	return cli_error("internal: an MPI sweep without MPI");
}

int cli_mpi_sweep_end(cli_mpi_ctx *m, int status)
{
	return m ? mod->end(m, status) : status;
}
