#include "base/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"

/* Tells apart the temporaries of one process (several runs at once). */
static atomic_uint counter;

/* "DIR/.NAME.kbtmp-PID-N" beside path; NULL when out of memory. */
static char *temp_name(const char *path)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	int dlen = slash ? (int)(slash - path + 1) : 0;
	unsigned n = atomic_fetch_add(&counter, 1);
	size_t len = strlen(path) + 48;
	char *t = malloc(len);

	if (t)
		snprintf(t, len, "%.*s.%s.kbtmp-%ld-%u", dlen, path, base, (long)getpid(), n);
	return t;
}

int kb__outfile_open(kb_outfile *o, const char *path, const char *mode)
{
	struct stat st;
	int fd = -1, e;

	memset(o, 0, sizeof(*o));
	/* Only a regular file (or none yet) is replaced by a rename: a device,
	 * a pipe or a link keeps being written through. */
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		o->f = fopen(path, mode);
		if (!o->f)
			return -1;
		o->path = strdup(path);
		if (!o->path) {
			fclose(o->f);
			o->f = NULL;
			errno = ENOMEM;
			return -1;
		}
		return 0;
	}
	o->path = strdup(path);
	o->tmp = temp_name(path);
	if (!o->path || !o->tmp) {
		e = ENOMEM;
		goto fail;
	}
	/* 0666 less the umask, as fopen would create the file. */
	fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS) &&
	    access(path, W_OK) == 0) {
		/* A writable file in a directory we may not create in: write
		 * it in place, as before (it cannot be made whole-or-absent). */
		free(o->tmp);
		o->tmp = NULL;
		if ((o->f = fopen(path, mode)))
			return 0;
		e = errno;
		goto fail;
	}
	if (fd < 0 || !(o->f = fdopen(fd, mode))) {
		e = errno;
		if (fd >= 0) {
			close(fd);
			unlink(o->tmp);
		}
		goto fail;
	}
	return 0;
fail:
	free(o->path);
	free(o->tmp);
	memset(o, 0, sizeof(*o));
	errno = e;
	return -1;
}

int kb__outfile_close(kb_outfile *o, int keep)
{
	int rc = 0, e = 0;

	if (o->f) {
		if (ferror(o->f)) {
			rc = -1;
			e = errno ? errno : EIO;
		}
		if (fclose(o->f) == EOF && !rc) {
			rc = -1;
			e = errno;
		}
		o->f = NULL;
	}
	if (o->tmp) {
		if (keep && !rc && rename(o->tmp, o->path) != 0) {
			rc = -1;
			e = errno;
		}
		if (!keep || rc)
			unlink(o->tmp);
	}
	free(o->tmp);
	free(o->path);
	o->tmp = o->path = NULL;
	if (rc)
		errno = e;
	return rc;
}

int kb__outfile_error(kb_error *err, const char *doing, const char *what, const char *path)
{
	if (errno == ENOMEM)
		return kb__err(err, KB_ENOMEM, "out of memory %s %s '%s'", doing, what, path);
	return kb__err(err, KB_EIO, "cannot write %s '%s': %s", what, path,
		       strerror(errno ? errno : EIO));
}
