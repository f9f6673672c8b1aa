/*
 * Files found beside the running command (the MPI module, the shared
 * library), and the shared library made loadable for plugins when the
 * command has the library linked into it.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

int cli_beside_exe(const char *name, char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return 0;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return 0;
	slash[1] = '\0';
	return snprintf(out, len, "%s%s", exe, name) < (int)len && access(out, F_OK) == 0;
}

/*
 * A plugin links libkernbench.so, and the loader must find it before it
 * binds the plugin's kb_ calls, which go to the command's own copy of the
 * library (kb_api.dynlist exports it, and the command comes first in the
 * lookup order). A plugin built without a run path (cc -shared ...
 * -lkernbench) finds the library only where it is already loaded, as it is
 * in a command linked against it. So a command with the library linked in
 * loads it first, once, and only when there are plugins: from .libs/ beside
 * the command (the build tree), from libdir (installed), else by name.
 */
void cli_host_plugins(void)
{
#ifdef KB_LIB_SONAME
	static int done;
	char path[PATH_MAX + 64];

	if (done)
		return;
	done = 1;
	if (cli_beside_exe(".libs/" KB_LIB_SONAME, path, sizeof(path)) && dlopen(path, RTLD_LAZY | RTLD_LOCAL))
		return;
	if (dlopen(KB_LIBDIR "/" KB_LIB_SONAME, RTLD_LAZY | RTLD_LOCAL))
		return;
	(void)dlopen(KB_LIB_SONAME, RTLD_LAZY | RTLD_LOCAL);   /* else the plugin's load says why */
#endif
}
