/*
 * Plugins: shared objects whose kb_plugin_init adds benches to a registry.
 * Every error names the file, so that a user with several plugins (from
 * --plugin and KERNBENCH_PLUGIN_PATH) knows which one to fix.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/grow.h"
#include "bench/registry_impl.h"

void kb__plugins_unload(kb_registry *reg)
{
	for (size_t i = reg->n_plugins; i-- > 0;) {
		dlclose(reg->plugins[i].handle);
		free(reg->plugins[i].path);
	}
	free(reg->plugins);
	reg->plugins = NULL;
	reg->n_plugins = reg->cap_plugins = 0;
}

static int loaded(const kb_registry *reg, const char *real)
{
	for (size_t i = 0; i < reg->n_plugins; i++)
		if (strcmp(reg->plugins[i].path, real) == 0)
			return 1;
	return 0;
}

static int remember(kb_registry *reg, char *real, void *handle, const char *path, kb_error *err)
{
	if (reg->n_plugins == reg->cap_plugins) {
		kb__plugin *p = kb__grow(reg->plugins, &reg->cap_plugins, sizeof(*p), 4);

		if (!p)
			return kb__err_at(err, KB_ENOMEM, path, 0, 0, "plugin '%s': out of memory", path);
		reg->plugins = p;
	}
	reg->plugins[reg->n_plugins++] = (kb__plugin){ real, handle };
	return KB_OK;
}

KB_API int kb_registry_load_plugin(kb_registry *reg, const char *path, kb_error *err)
{
	char *real;
	void *h;
	union {
		void *obj;
		kb_plugin_init_fn fn;
	} entry;
	int rc;

	kb_error_clear(err);
	if (!reg || !path || !*path)
		return kb__err(err, KB_EINVAL, "kb_registry_load_plugin: %s",
			       reg ? "no plugin file given" : "reg is NULL");
	real = realpath(path, NULL);
	if (!real)
		return kb__err_at(err, KB_EIO, path, 0, 0, "plugin '%s': %s", path, strerror(errno));
	if (loaded(reg, real)) {
		free(real);
		return KB_OK;
	}
	/* A path with a '/' so that dlopen never searches the library path
	 * for a bare name: the user named this file. */
	h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();

		rc = kb__err_at(err, KB_EIO, path, 0, 0, "plugin '%s' cannot be loaded: %s", path,
				why ? why : "unknown error");
		free(real);
		return rc;
	}
	dlerror();
	entry.obj = dlsym(h, KB_PLUGIN_ENTRY);
	if (!entry.obj) {
		dlclose(h);
		free(real);
		return kb__err_at(err, KB_ENOTFOUND, path, 0, 0,
				  "plugin '%s' has no entry point %s() (declare it with KB_PLUGIN_EXPORT "
				  "and C linkage)", path, KB_PLUGIN_ENTRY);
	}
	/* Kept from here on, even if the entry point fails: benches it added
	 * before failing still point into it. */
	rc = remember(reg, real, h, path, err);
	if (rc) {
		dlclose(h);
		free(real);
		return rc;
	}
	{
		kb_error e;

		kb_error_clear(&e);
		rc = entry.fn(reg, KB_BENCH_ABI, &e);
		if (rc) {
			kb__err_at(err, rc < 0 ? rc : KB_EINVAL, path, 0, 0, "plugin '%s': %s", path,
				   kb__err_text(&e, rc));
			if (err)
				err->detail = e.detail;
			return err ? err->code : rc;
		}
	}
	return KB_OK;
}

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with_so(const char *name)
{
	size_t n = strlen(name);

	return n > 3 && strcmp(name + n - 3, ".so") == 0;
}

/* Every *.so of a directory, in name order (the same order on every
 * machine and every MPI rank). */
static int load_dir(kb_registry *reg, const char *dir, kb_error *err)
{
	DIR *d = opendir(dir);
	char **names = NULL, path[PATH_MAX];
	size_t n = 0, cap = 0;
	struct dirent *de;
	int rc = KB_OK;

	if (!d)
		return kb__err_at(err, KB_EIO, dir, 0, 0, "plugin directory '%s': %s", dir,
				  strerror(errno));
	while (!rc && (de = readdir(d))) {
		if (!ends_with_so(de->d_name))
			continue;
		if (n == cap) {
			char **p = realloc(names, (cap = cap ? 2 * cap : 8) * sizeof(*p));

			if (!p) {
				rc = kb__err(err, KB_ENOMEM, "out of memory");
				break;
			}
			names = p;
		}
		if (!(names[n] = strdup(de->d_name)))
			rc = kb__err(err, KB_ENOMEM, "out of memory");
		else
			n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; !rc && i < n; i++) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, names[i]) >= sizeof(path))
			rc = kb__err_at(err, KB_EINVAL, dir, 0, 0, "plugin path too long in '%s'", dir);
		else
			rc = kb_registry_load_plugin(reg, path, err);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

KB_API int kb_registry_load_path(kb_registry *reg, const char *path, kb_error *err)
{
	char *copy, *save = NULL;
	int rc = KB_OK;

	kb_error_clear(err);
	if (!reg)
		return kb__err(err, KB_EINVAL, "kb_registry_load_path: reg is NULL");
	if (!path)
		return KB_OK;
	copy = strdup(path);
	if (!copy)
		return kb__err(err, KB_ENOMEM, "out of memory");
	for (char *e = strtok_r(copy, ":", &save); !rc && e; e = strtok_r(NULL, ":", &save))
		rc = is_dir(e) ? load_dir(reg, e, err) : kb_registry_load_plugin(reg, e, err);
	free(copy);
	return rc;
}
