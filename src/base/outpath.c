#include "base/outpath.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* path with its directory resolved (the file itself may not exist yet);
 * the text as given when the directory does not resolve. */
static void resolve(const char *path, char out[2 * PATH_MAX])
{
	char dir[PATH_MAX], real[PATH_MAX];
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	size_t dlen = slash ? (size_t)(slash - path) : 0;

	if (slash && dlen == 0)
		snprintf(dir, sizeof(dir), "/");
	else if (slash)
		snprintf(dir, sizeof(dir), "%.*s", (int)dlen, path);
	else
		snprintf(dir, sizeof(dir), ".");
	if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		/* A directory named by itself. */
		if (!realpath(path, out))
			snprintf(out, 2 * PATH_MAX, "%s", path);
		return;
	}
	if (!realpath(dir, real)) {
		snprintf(out, 2 * PATH_MAX, "%s", path);
		return;
	}
	snprintf(out, 2 * PATH_MAX, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base);
}

static int same(const char *a, const char *b)
{
	char ra[2 * PATH_MAX], rb[2 * PATH_MAX];
	struct stat sa, sb;

	if (stat(a, &sa) == 0 && stat(b, &sb) == 0 && S_ISREG(sa.st_mode))
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	resolve(a, ra);
	resolve(b, rb);
	return strcmp(ra, rb) == 0;
}

static int inside(const char *dir, const char *path)
{
	char rd[2 * PATH_MAX], rp[2 * PATH_MAX];
	size_t n;

	if (!realpath(dir, rd))
		resolve(dir, rd);
	resolve(path, rp);
	n = strlen(rd);
	while (n > 1 && rd[n - 1] == '/')
		n--;
	return strncmp(rd, rp, n) == 0 && (rp[n] == '/' || rp[n] == '\0');
}

int kb__outputs_check(const char *const *paths, const char *const *options, int n,
		      const char *dump_dir, kb_error *err)
{
	for (int i = 0; i < n; i++) {
		struct stat st;

		if (!paths[i])
			continue;
		/* Character devices (/dev/null, /dev/stdout) may take several. */
		if (stat(paths[i], &st) == 0 && S_ISCHR(st.st_mode))
			continue;
		if (dump_dir && inside(dump_dir, paths[i]))
			return kb__err(err, KB_EINVAL,
				       "%s '%s' is inside the dump directory '%s', which the dump "
				       "writes: choose another path",
				       options[i], paths[i], dump_dir);
		for (int j = i + 1; j < n; j++)
			if (paths[j] && same(paths[i], paths[j]))
				return kb__err(err, KB_EINVAL,
					       "%s '%s' and %s '%s' are the same file: give each "
					       "output a path of its own",
					       options[i], paths[i], options[j], paths[j]);
	}
	return KB_OK;
}
