/* Inside a kb_registry: the copied definitions and the loaded plugins. */
#ifndef KB_BENCH_REGISTRY_IMPL_H
#define KB_BENCH_REGISTRY_IMPL_H

#include <stddef.h>

#include "kernbench/registry.h"

typedef struct kb__reg_entry {
	const kb_bench_def *def;  /* &copy, or a built-in's constant definition */
	kb_bench_def copy;        /* copy.info.params points at params */
	kb_param_info *params;    /* owned copies, strings included */
} kb__reg_entry;

typedef struct kb__plugin {
	char *path;               /* real path: the same file is loaded once */
	void *handle;             /* dlopen's */
} kb__plugin;

struct kb_registry {
	kb__reg_entry **entries;  /* pointers: definitions do not move as it grows */
	size_t n, cap;
	kb__plugin *plugins;
	size_t n_plugins, cap_plugins;
};

/* dlclose's every plugin of reg (after its definitions are gone). */
void kb__plugins_unload(kb_registry *reg);

#endif
