/*
 * A plugin bench whose kernel dies (tests/cli/stack_overflow.sh): with
 * poke=0 it recurses through `kib` KiB of frames, past its 1 MiB stack
 * (the default) onto the guard region below it; with poke=1 it writes to
 * address 0x10 instead, a fault that is no stack overflow. With small kib
 * it runs to its end.
 */
#include <stdint.h>

#include <kernbench.h>

#include "../deep_stack.h"

typedef struct ovf_args {
	int64_t kib, poke;
} ovf_args;

static void ovf_kernel(kb_tl *tl, void *p)
{
	const ovf_args *a = p;

	if (a->poke) {
		int *volatile bad = (int *)(uintptr_t)0x10;

		*bad = 1;
	}
	if (kbt_deep((int)a->kib) > 0)
		kb_tl_cpu_overhead(tl, 10);
}

static int ovf_run(kb_bench_ctx *ctx, kb_result *res, kb_error *err)
{
	ovf_args a = { kb_bench_param_int(ctx, "kib"), kb_bench_param_int(ctx, "poke") };
	uint32_t pes = (uint32_t)kb_bench_param_int(ctx, "pes");
	kb_simulation *sim = NULL;
	int rc = kb_bench_simulation(ctx, pes, &sim, err);

	if (!rc)
		rc = kb_simulation_launch(sim, ovf_kernel, &a, 0, pes, err);
	if (!rc)
		rc = kb_bench_simulate(ctx, sim, &a, res, err);
	kb_simulation_destroy(sim);
	return rc;
}

static const kb_param_info ovf_params[] = {
	{ "kib", KB_PARAM_INT, "4096", "KiB of stack the kernel uses", NULL, 1, 1 << 20 },
	{ "pes", KB_PARAM_INT, "1", "PEs, one kernel each", NULL, 1, 4 },
	{ "poke", KB_PARAM_INT, "0", "1: write to address 0x10 instead", NULL, 0, 1 },
};

static const kb_bench_def ovf_def = {
	KB_BENCH_ABI,
	{ "kbt_overflow", "a kernel that overflows its stack",
	  ovf_params, sizeof(ovf_params) / sizeof(ovf_params[0]) },
	ovf_run, NULL, NULL,
};

KB_PLUGIN_EXPORT int kb_plugin_init(kb_registry *reg, unsigned abi, kb_error *err)
{
	(void)abi;
	return kb_registry_add(reg, &ovf_def, err);
}
