/* Output paths that must not collide (issue 18 §3). */
#ifndef KB_BASE_OUTPATH_H
#define KB_BASE_OUTPATH_H

#include "base/err.h"

/*
 * Fails with KB_EINVAL naming both options when two outputs of one run
 * resolve to the same file, or when a file output lies inside the dump
 * directory (the dump writes there). Names may be NULL (no such output).
 * Paths resolve through their directory (realpath), so "x", "./x" and a
 * symlinked directory meet; existing files also compare by device and inode
 * (hard links).
 */
int kb__outputs_check(const char *const *paths, const char *const *options, int n,
		      const char *dump_dir, kb_error *err);

#endif
