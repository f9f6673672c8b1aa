/*
 * An output file that is whole or absent (issue 18 §3): written under a
 * temporary name in its own directory and renamed into place only when
 * complete, so an interrupted, failed or disk-full run never leaves a file
 * cut mid-record at the name the user gave (and an earlier file there
 * stays as it was). Paths that are not regular files (/dev/null, a pipe,
 * a terminal, /dev/full) are written directly, and so is a writable file
 * in a directory where no temporary can be created.
 */
#ifndef KB_BASE_OUTFILE_H
#define KB_BASE_OUTFILE_H

#include <stdio.h>

#include "kernbench/common.h"   /* kb_error */

typedef struct kb_outfile {
	FILE *f;
	char *path;  /* the name the user gave */
	char *tmp;   /* the temporary name; NULL when written directly */
} kb_outfile;

/* Opens path for writing (mode "w" or "wb"); -1 with errno on failure
 * (nothing created). */
int kb__outfile_open(kb_outfile *o, const char *path, const char *mode);
/* The error of an output (what: "op_log", "trace") that could not be
 * opened or written (doing: "opening", "writing"), from errno: KB_ENOMEM
 * "out of memory DOING WHAT 'PATH'" where memory ran out (ENOMEM), else
 * KB_EIO "cannot write WHAT 'PATH': " and errno's text (EIO's if none). */
int kb__outfile_error(kb_error *err, const char *doing, const char *what, const char *path);
/* Closes the stream (if still open) and, when keep, renames the temporary
 * into place; otherwise, or when closing or renaming fails, removes it.
 * Returns 0, or -1 with errno (a write, close or rename error). Safe to
 * call twice and on a zeroed object. */
int kb__outfile_close(kb_outfile *o, int keep);

#endif
