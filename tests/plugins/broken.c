/*
 * Plugins that must be refused, one per KBT_BROKEN value (tests/api.am
 * builds each): the error names the file and the exit status is 1
 * (tests/cli/plugin.sh).
 *   1  a definition built for another bench ABI
 *   2  a bench whose name a built-in has ("gemm")
 *   3  an invalid bench (a default outside its range)
 *   4  no kb_plugin_init at all
 *   5  an entry point that fails with its own message
 */
#include <kernbench.h>

#ifndef KBT_BROKEN
#error "KBT_BROKEN must be defined"
#endif

static int run(kb_bench_ctx *ctx, kb_result *res, kb_error *err)
{
	(void)ctx;
	(void)res;
	return kb_bench_error(err, KB_EINTERNAL, NULL, "never run");
}

static const kb_param_info params[] = {
	{ "n", KB_PARAM_INT, KBT_BROKEN == 3 ? "0" : "1", "elements", NULL, 1, 8 },
};

static const kb_bench_def def = {
	KBT_BROKEN == 1 ? KB_BENCH_ABI + 1 : KB_BENCH_ABI,
	{ KBT_BROKEN == 2 ? "gemm" : "kbt_broken", "refused", params, 1 },
	run, NULL, NULL,
};

#if KBT_BROKEN == 4
KB_PLUGIN_EXPORT int kbt_not_the_entry_point(kb_registry *reg, unsigned abi, kb_error *err);
KB_PLUGIN_EXPORT int kbt_not_the_entry_point(kb_registry *reg, unsigned abi, kb_error *err)
#else
KB_PLUGIN_EXPORT int kb_plugin_init(kb_registry *reg, unsigned abi, kb_error *err)
#endif
{
	(void)abi;
	if (KBT_BROKEN == 5)
		return kb_bench_error(err, KB_EINVAL, NULL, "this plugin refuses to start");
	return kb_registry_add(reg, &def, err);
}
