/*
 * The output of a sweep (kernbench/sweep.h, kb_sweep_writer): rows as they
 * arrive, flushed one by one; the lock; resume; the in-order rewrite.
 *
 * Resume and the final file. Rows arrive in point order, so an interrupted
 * sweep leaves a header and some complete rows (and maybe one cut row at
 * the end). Resume reads and verifies them (resume.c), marks their points
 * skipped, cuts the file after its last complete row and appends the new
 * rows, flushed one by one: at every moment the file holds every finished
 * row, so a second kill loses nothing either. kb_sweep_writer_finish then
 * writes the file in point order (header, then each point's row: the old
 * text for old points, the new text for new ones) into FILE.tmp, which is
 * renamed over FILE: the result is byte-identical to an uninterrupted sweep
 * except for wall_s, and a kill during the rewrite leaves FILE as it was.
 * Failed rows in the file count as done (delete them to run them again).
 *
 * The lock is flock on FILE, taken before FILE is read or changed and held
 * until the writer is finished or destroyed: two sweeps on one file would
 * mix their rows (issue 18 §4).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "sweep/sweep_impl.h"

/* Like --topology's 64 MiB, a bound on what resume reads, so a file that is
 * not a sweep's (a link to /dev/zero, a huge log) fails with the figure
 * instead of exhausting memory. 256 MiB is a million rows and more. */
#define MAX_RESUME_BYTES ((size_t)256 << 20)

struct kb_sweep_writer {
	kb_sweep *s;
	kb_sweep_writer_options opt;
	char *path;            /* NULL: a stream */
	FILE *f;
	int lock_fd;
	sweep_kept *rows;      /* per point, when figures or texts are kept */
	size_t total;
	int resumed;           /* rows were read: finish rewrites in order */
	size_t n_resumed, n_resumed_failed;
	char *warning;
};

static const char *out_name(const kb_sweep_writer *w)
{
	return w->path ? w->path : "standard output";
}

static int lock_output(kb_sweep_writer *w, kb_error *err)
{
	int fd = open(w->path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);

	if (fd < 0)
		return kb__err(err, KB_EIO, "%s: %s", w->path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;

		close(fd);
		return e == EWOULDBLOCK
			? kb__err(err, KB_ESTATE, "%s: another sweep is writing this file", w->path)
			: kb__err(err, KB_EIO, "%s: cannot lock: %s", w->path, strerror(e));
	}
	w->lock_fd = fd;
	return 0;
}

static int put_text(kb_sweep_writer *w, const char *text, kb_error *err)
{
	errno = 0;
	if (fputs(text, w->f) < 0 || fflush(w->f) != 0 || ferror(w->f))
		return kb__err(err, KB_EIO, "%s: could not write: %s", out_name(w),
			       strerror(errno ? errno : EIO));
	return 0;
}

static int write_header(kb_sweep_writer *w, kb_error *err)
{
	char *h = NULL;
	int rc = kb_sweep_header(&h, w->s, w->opt.format, w->opt.data, err);

	if (!rc && *h)
		rc = put_text(w, h, err);
	free(h);
	return rc;
}

static int read_all(const char *path, char **data, size_t *len, kb_error *err)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, got;
	struct stat st;

	if (!f)
		return kb__err(err, KB_EIO, "%s: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
	    (uintmax_t)st.st_size > MAX_RESUME_BYTES) {
		fclose(f);
		return kb__err(err, KB_ERANGE, "%s: %jd bytes, more than %zu, the most --resume "
			       "reads; not a sweep's output?", path, (intmax_t)st.st_size,
			       MAX_RESUME_BYTES);
	}
	do {
		if (n + 65536 > cap) {
			char *nb = realloc(buf, cap = cap * 2 + 65536);

			if (!nb) {
				free(buf);
				fclose(f);
				return kb__err(err, KB_ENOMEM, "out of memory");
			}
			buf = nb;
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (n > MAX_RESUME_BYTES) {
			free(buf);
			fclose(f);
			return kb__err(err, KB_ERANGE, "%s: more than %zu bytes, the most --resume "
				       "reads; not a sweep's output?", path, MAX_RESUME_BYTES);
		}
	} while (got > 0);
	if (ferror(f)) {
		free(buf);
		fclose(f);
		return kb__err(err, KB_EIO, "%s: %s", path, strerror(errno));
	}
	fclose(f);
	buf[n] = '\0';
	*data = buf;
	*len = n;
	return 0;
}

/* Reads and verifies the old rows, skips their points, reopens for appending. */
static int open_resume(kb_sweep_writer *w, kb_error *err)
{
	char *data = NULL;
	size_t len = 0, keep_len = 0;
	int rc;

	if ((rc = read_all(w->path, &data, &len, err)))
		return rc;
	rc = kb__sweep_resume_parse(w->s, w->path, data, len, w->opt.format, w->opt.data, w->rows,
				    &keep_len, err);
	free(data);
	/* Rows that do not fit are named first; then the record, before
	 * anything of the old output is changed. */
	if (!rc)
		rc = kb__sweep_meta_check(w->s, w->path, w->opt.force, &w->warning, err);
	for (size_t i = 0; !rc && i < w->total; i++)
		if (w->rows[i].present) {
			rc = kb_sweep_skip(w->s, i, err);
			w->n_resumed++;
			w->n_resumed_failed += !w->rows[i].ok;
		}
	if (rc)
		return rc;
	if (truncate(w->path, (off_t)keep_len) != 0)
		return kb__err(err, KB_EIO, "%s: %s", w->path, strerror(errno));
	if (!(w->f = fopen(w->path, "a")))
		return kb__err(err, KB_EIO, "%s: %s", w->path, strerror(errno));
	w->resumed = 1;
	if ((rc = kb__sweep_meta_write(w->s, w->path, w->opt.argc, w->opt.argv, err)))
		return rc;
	return keep_len == 0 ? write_header(w, err) : 0;
}

static int open_new(kb_sweep_writer *w, kb_error *err)
{
	int rc;

	if (w->path && (rc = kb__sweep_meta_write(w->s, w->path, w->opt.argc, w->opt.argv, err)))
		return rc;
	w->f = w->path ? fopen(w->path, "w") : (w->opt.stream ? w->opt.stream : stdout);
	if (!w->f)
		return kb__err(err, KB_EIO, "%s: %s", w->path, strerror(errno));
	return write_header(w, err);
}

KB_API int kb_sweep_writer_open(kb_sweep_writer **out, kb_sweep *s, const char *path,
				const kb_sweep_writer_options *opt, kb_error *err)
{
	kb_sweep_writer *w;
	int rc;

	kb_error_clear(err);
	if (!out || !s || !opt)
		return kb__err(err, KB_EINVAL, "kb_sweep_writer_open: NULL argument");
	*out = NULL;
	if (opt->version != KB_SWEEP_WRITER_VERSION)
		return kb__err(err, KB_EINVAL, "kb_sweep_writer_open: options version %u, this "
			       "library knows %u (use KB_SWEEP_WRITER_OPTIONS_INIT)", opt->version,
			       KB_SWEEP_WRITER_VERSION);
	if (opt->format != KB_SWEEP_CSV && opt->format != KB_SWEEP_JSONL)
		return kb__err(err, KB_EINVAL, "kb_sweep_writer_open: unknown format %d",
			       (int)opt->format);
	if (opt->resume && !path)
		return kb__err(err, KB_EINVAL, "resume needs an output file");
	if (s->n_benches == 0)
		return kb__err(err, KB_ESTATE, "the sweep has no bench");
	if (!(w = calloc(1, sizeof(*w))))
		return kb__err(err, KB_ENOMEM, "out of memory");
	w->s = s;
	w->opt = *opt;
	w->lock_fd = -1;
	w->total = kb_sweep_points(s);
	if ((path && !(w->path = strdup(path))) ||
	    ((opt->keep_figures || opt->resume) && !(w->rows = calloc(w->total + 1, sizeof(*w->rows))))) {
		kb_sweep_writer_destroy(w);
		return kb__err(err, KB_ENOMEM, "out of memory");
	}
	rc = w->path ? lock_output(w, err) : 0;
	if (!rc)
		rc = opt->resume ? open_resume(w, err) : open_new(w, err);
	if (rc) {
		kb_sweep_writer_destroy(w);
		return rc;
	}
	*out = w;
	return 0;
}

KB_API int kb_sweep_writer_row(kb_sweep_writer *w, const kb_sweep_row *row, kb_error *err)
{
	char *text = NULL;
	int rc;

	kb_error_clear(err);
	if (row && (rc = kb__sweep_row_check(row, "kb_sweep_writer_row", err)))
		return rc;
	if (!w || !row || !w->f || row->index >= w->total)
		return kb__err(err, KB_EINVAL, "kb_sweep_writer_row: NULL argument, a closed "
			       "writer or a row of another sweep");
	if ((rc = kb_sweep_format_row(&text, w->s, row, w->opt.format, w->opt.data, err)))
		return rc;
	if ((rc = put_text(w, text, err))) {
		free(text);
		return rc;
	}
	if (w->rows) {
		sweep_kept *k = &w->rows[row->index];
		char txt[KB_SWEEP_N_FIGS][40];

		kb__sweep_figure_texts(row, txt);
		/* From the text, so a resumed row and a fresh one give the same numbers. */
		for (int i = 0; i < KB_SWEEP_N_FIGS; i++)
			k->fig[i] = txt[i][0] ? strtod(txt[i], NULL) : NAN;
		k->present = 1;
		k->ok = row->status == 0;
		if (w->resumed) {
			free(k->text);
			k->text = text;
			text = NULL;
		}
	}
	free(text);
	return 0;
}

/* Rewrites the resumed file in point order through FILE.tmp and rename. */
static int rewrite_in_order(kb_sweep_writer *w, kb_error *err)
{
	size_t n = strlen(w->path) + 5;
	char *tmp = malloc(n), *h = NULL;
	FILE *f;
	int rc = 0, bad = 0;

	if (!tmp)
		return kb__err(err, KB_ENOMEM, "out of memory");
	snprintf(tmp, n, "%s.tmp", w->path);
	if ((rc = kb_sweep_header(&h, w->s, w->opt.format, w->opt.data, err)))
		goto done;
	if (!(f = fopen(tmp, "w"))) {
		rc = kb__err(err, KB_EIO, "%s: %s", tmp, strerror(errno));
		goto done;
	}
	errno = 0;
	bad = fputs(h, f) < 0;
	for (size_t i = 0; !bad && i < w->total; i++)
		if (w->rows[i].text && fputs(w->rows[i].text, f) < 0)
			bad = 1;
	if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0)
		bad = 1;
	if (fclose(f) != 0 || bad)
		rc = kb__err(err, KB_EIO, "%s: could not write: %s (%s keeps every row, out of "
			     "order)", tmp, strerror(errno ? errno : EIO), w->path);
	if (rc == 0 && rename(tmp, w->path) != 0)
		rc = kb__err(err, KB_EIO, "%s: %s", w->path, strerror(errno));
	if (rc)
		remove(tmp);
done:
	free(h);
	free(tmp);
	return rc;
}

KB_API int kb_sweep_writer_finish(kb_sweep_writer *w, kb_error *err)
{
	int rc = 0;

	kb_error_clear(err);
	if (!w || !w->f)
		return kb__err(err, KB_EINVAL, "kb_sweep_writer_finish: NULL or closed writer");
	if (w->path) {
		if (fclose(w->f) != 0)
			rc = kb__err(err, KB_EIO, "%s: %s", w->path, strerror(errno));
	} else if (fflush(w->f) != 0) {
		rc = kb__err(err, KB_EIO, "%s: could not write: %s", out_name(w), strerror(errno));
	}
	w->f = NULL;
	if (!rc && w->resumed)
		rc = rewrite_in_order(w, err);
	if (w->lock_fd >= 0)
		close(w->lock_fd);
	w->lock_fd = -1;
	return rc;
}

KB_API size_t kb_sweep_writer_resumed(const kb_sweep_writer *w, size_t *failed)
{
	if (failed)
		*failed = w ? w->n_resumed_failed : 0;
	return w ? w->n_resumed : 0;
}

KB_API int kb_sweep_writer_figures(const kb_sweep_writer *w, size_t index,
				   kb_sweep_figures *out, kb_error *err)
{
	kb_sweep_figures f;
	size_t n;

	kb_error_clear(err);
	if (!w || !out || out->size < offsetof(kb_sweep_figures, fig))
		return kb__err(err, KB_EINVAL, "kb_sweep_writer_figures: NULL argument or size "
			       "not set");
	if (!w->rows)
		return kb__err(err, KB_ESTATE, "the writer keeps no figures (keep_figures)");
	if (index >= w->total)
		return kb__err(err, KB_ERANGE, "point %zu out of range (the sweep has %zu)", index,
			       w->total);
	n = out->size < sizeof(f) ? out->size : sizeof(f);
	f.size = out->size;
	f.present = w->rows[index].present;
	f.ok = w->rows[index].ok;
	for (int i = 0; i < KB_SWEEP_N_FIGS; i++)
		f.fig[i] = f.present ? w->rows[index].fig[i] : NAN;
	memcpy(out, &f, n);
	return 0;
}

KB_API const char *kb_sweep_writer_warning(const kb_sweep_writer *w)
{
	return w ? w->warning : NULL;
}

KB_API void kb_sweep_writer_destroy(kb_sweep_writer *w)
{
	if (!w)
		return;
	if (w->f && w->path)
		fclose(w->f);
	else if (w->f)
		fflush(w->f);
	if (w->lock_fd >= 0)
		close(w->lock_fd);
	for (size_t i = 0; w->rows && i < w->total; i++)
		free(w->rows[i].text);
	free(w->rows);
	free(w->warning);
	free(w->path);
	free(w);
}
