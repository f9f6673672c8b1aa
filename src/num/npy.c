/*
 * .npy writer and reader. Element bytes are produced and consumed one byte
 * at a time in little-endian order, so the files are the same on any host.
 */
#include "num/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/outfile.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
#define NPY_MAX_HEADER 65536 /* far above anything we write; bounds malloc */
#define CHUNK_ELEMS 1024
#define NPY_GROWTH_DIGITS 21 /* NumPy's GROWTH_AXIS_MAX_DIGITS */

/* ---- shared helpers ----------------------------------------------------- */

/* Element count, or -1 for a bad rank / negative dim / overflow. */
static int64_t numel_of(int rank, const int64_t *shape)
{
	int64_t n = 1;
	int i;

	if (rank < 0 || rank > KB_NPY_MAX_RANK || (rank > 0 && !shape))
		return -1;
	for (i = 0; i < rank; i++) {
		if (shape[i] < 0 || (shape[i] != 0 && n > INT64_MAX / 4 / shape[i]))
			return -1;
		n *= shape[i];
	}
	return n;
}

static void put_le(unsigned char *p, uint32_t v, int nbytes)
{
	int i;

	for (i = 0; i < nbytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le(const unsigned char *p, int nbytes)
{
	uint32_t v = 0;
	int i;

	for (i = 0; i < nbytes; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

/* ---- writer --------------------------------------------------------------- */

static int digits(int64_t v)
{
	int n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/*
 * Builds magic, version, header length and the padded dict into buf; returns
 * the total length (a multiple of 64) or 0 if buf is too small.
 */
static size_t build_header(char *buf, size_t size, const char *descr, int rank,
			   const int64_t *shape)
{
	size_t len = NPY_MAGIC_LEN + 4;
	int i;

	len += (size_t)snprintf(buf + len, size - len,
				"{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
	for (i = 0; i < rank && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "",
					(long long)shape[i]);
	if (len < size)
		len += (size_t)snprintf(buf + len, size - len, "%s), }",
					rank == 1 ? "," : "");
	/*
	 * Like NumPy, leave room for the first axis to grow to 21 digits so the
	 * header can be rewritten in place, then pad so that the data starts
	 * 64-aligned, the last header byte being '\n'.
	 */
	if (rank > 0 && len < size)
		len += (size_t)snprintf(buf + len, size - len, "%*s",
					NPY_GROWTH_DIGITS - digits(shape[0]), "");
	while (len < size && (len + 1) % NPY_ALIGN != 0)
		buf[len++] = ' ';
	if (len + 1 >= size)
		return 0;
	buf[len++] = '\n';
	memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
	buf[6] = 1;
	buf[7] = 0;
	put_le((unsigned char *)buf + 8, (uint32_t)(len - NPY_MAGIC_LEN - 4), 2);
	return len;
}

/* Encodes element i of data as little-endian file bytes; returns their size. */
static int encode_elem(unsigned char *p, kb_dtype dt, const unsigned char *data, size_t i)
{
	uint16_t h;
	uint32_t u;

	if (dt == KB_FP32) {
		memcpy(&u, data + 4 * i, 4);
		put_le(p, u, 4);
		return 4;
	}
	memcpy(&h, data + 2 * i, 2);
	if (dt == KB_FP16) {
		put_le(p, h, 2);
		return 2;
	}
	put_le(p, (uint32_t)h << 16, 4); /* bf16 widened exactly to fp32 */
	return 4;
}

/* Streams the elements through a small buffer; 0 or -1 with errno set. */
static int write_data(FILE *f, kb_dtype dt, const void *data, size_t n)
{
	unsigned char buf[CHUNK_ELEMS * 4];
	size_t i, len = 0;

	for (i = 0; i < n; i++) {
		len += (size_t)encode_elem(buf + len, dt, data, i);
		if (len + 4 > sizeof(buf) || i + 1 == n) {
			if (fwrite(buf, 1, len, f) != len)
				return -1;
			len = 0;
		}
	}
	return 0;
}

static int write_args_ok(const char *path, kb_dtype dt, int rank, const int64_t *shape,
			 const void *data)
{
	int64_t n = numel_of(rank, shape);

	return path && n >= 0 && (n == 0 || data) &&
	       (dt == KB_FP32 || dt == KB_FP16 || dt == KB_BF16);
}

int kb__npy_write(const char *path, kb_dtype dt, int rank, const int64_t *shape,
		  const void *data, kb_error *err)
{
	char hdr[512];
	size_t hlen;
	kb_outfile out;
	int e;

	if (!write_args_ok(path, dt, rank, shape, data))
		return kb__err(err, KB_EINVAL, "npy: bad arguments for %s", path ? path : "(null)");
	hlen = build_header(hdr, sizeof(hdr), dt == KB_FP16 ? "<f2" : "<f4", rank, shape);
	if (hlen == 0)
		return kb__err(err, KB_EINTERNAL, "npy: header of %s too long", path);
	/* Written under a temporary name and renamed into place when whole. */
	if (kb__outfile_open(&out, path, "wb"))
		return kb__outfile_error(err, "opening", "tensor", path);
	if (fwrite(hdr, 1, hlen, out.f) != hlen ||
	    write_data(out.f, dt, data, (size_t)numel_of(rank, shape)) < 0) {
		e = errno;
		kb__outfile_close(&out, 0);
		return kb__err(err, KB_EIO, "%s: %s", path, strerror(e));
	}
	/* Closing flushes: on /dev/full this is where ENOSPC shows up. */
	if (kb__outfile_close(&out, 1))
		return kb__err(err, KB_EIO, "%s: %s", path, strerror(errno));
	return KB_OK;
}

/* ---- reader --------------------------------------------------------------- */

static const char *skip_ws(const char *p)
{
	while (*p == ' ')
		p++;
	return p;
}

/* Finds "'key':" in the dict and returns the text after it, or NULL. */
static const char *find_key(const char *hdr, const char *key)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof(pat), "'%s':", key);
	p = strstr(hdr, pat);
	return p ? skip_ws(p + strlen(pat)) : NULL;
}

static int parse_descr(const char *hdr, kb_dtype *dt)
{
	const char *p = find_key(hdr, "descr");

	if (p && strncmp(p, "'<f4'", 5) == 0)
		*dt = KB_FP32;
	else if (p && strncmp(p, "'<f2'", 5) == 0)
		*dt = KB_FP16;
	else
		return -1;
	return 0;
}

/* Parses "(a, b, )" style tuples, NumPy's "(5,)" and "()" included. */
static int parse_shape(const char *hdr, int *rank, int64_t shape[KB_NPY_MAX_RANK])
{
	const char *p = find_key(hdr, "shape");
	char *end;

	*rank = 0;
	if (!p || *p++ != '(')
		return -1;
	for (p = skip_ws(p); *p != ')'; p = skip_ws(p)) {
		if (*rank == KB_NPY_MAX_RANK || *p < '0' || *p > '9')
			return -1;
		errno = 0;
		shape[(*rank)++] = strtoll(p, &end, 10);
		if (errno)
			return -1;
		p = skip_ws(end);
		if (*p == ',')
			p++;
		else if (*p != ')')
			return -1;
	}
	return numel_of(*rank, shape) < 0 ? -1 : 0;
}

static int parse_header(const char *hdr, kb_dtype *dt, int *rank,
			int64_t shape[KB_NPY_MAX_RANK])
{
	const char *fo = find_key(hdr, "fortran_order");

	if (!fo || strncmp(fo, "False", 5) != 0)
		return -1;
	if (parse_descr(hdr, dt) < 0)
		return -1;
	return parse_shape(hdr, rank, shape);
}

/* Reads exactly n bytes; a short read is KB_EIO with errno or "truncated". */
static int read_exact(FILE *f, void *buf, size_t n, const char *path, kb_error *err)
{
	if (fread(buf, 1, n, f) == n)
		return KB_OK;
	return kb__err(err, KB_EIO, "%s: %s", path,
		       ferror(f) ? strerror(errno) : "unexpected end of file");
}

/* Reads magic, version and the dict; *hdr is malloc'd and NUL-terminated. */
static int read_header(FILE *f, const char *path, char **hdr, kb_error *err)
{
	unsigned char pre[12];
	size_t lenbytes, hlen;
	int rc;

	if ((rc = read_exact(f, pre, 8, path, err)))
		return rc;
	if (memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0 || (pre[6] != 1 && pre[6] != 2))
		return kb__err(err, KB_EPARSE, "%s: not a version 1 or 2 .npy file", path);
	lenbytes = pre[6] == 1 ? 2 : 4;
	if ((rc = read_exact(f, pre + 8, lenbytes, path, err)))
		return rc;
	hlen = get_le(pre + 8, (int)lenbytes);
	if (hlen > NPY_MAX_HEADER)
		return kb__err(err, KB_EPARSE, "%s: header of %zu bytes is too long", path, hlen);
	*hdr = malloc(hlen + 1);
	if (!*hdr)
		return kb__err(err, KB_ENOMEM, "%s: out of memory", path);
	(*hdr)[hlen] = '\0';
	return read_exact(f, *hdr, hlen, path, err);
}

/* Turns little-endian file bytes into host-order elements, in place. */
static void decode_in_place(void *data, kb_dtype dt, size_t n)
{
	unsigned char *p = data;
	uint32_t u;
	uint16_t h;
	size_t i;

	for (i = 0; i < n; i++) {
		if (dt == KB_FP32) {
			u = get_le(p + 4 * i, 4);
			memcpy(p + 4 * i, &u, 4);
		} else {
			h = (uint16_t)get_le(p + 2 * i, 2);
			memcpy(p + 2 * i, &h, 2);
		}
	}
}

int kb__npy_read(const char *path, kb_dtype *dt, int *rank, int64_t shape[KB_NPY_MAX_RANK],
		 void **data, kb_error *err)
{
	char *hdr = NULL;
	void *buf = NULL;
	size_t n = 0, bytes;
	FILE *f;
	int rc;

	*data = NULL;
	f = fopen(path, "rb");
	if (!f)
		return kb__err(err, KB_EIO, "%s: %s", path, strerror(errno));
	if ((rc = read_header(f, path, &hdr, err)))
		goto cleanup;
	if (parse_header(hdr, dt, rank, shape) < 0) {
		rc = kb__err(err, KB_EPARSE, "%s: unsupported .npy header %s", path, hdr);
		goto cleanup;
	}
	n = (size_t)numel_of(*rank, shape);
	bytes = n * kb_dtype_size(*dt);
	if (bytes > 0 && !(buf = malloc(bytes))) {
		rc = kb__err(err, KB_ENOMEM, "%s: out of memory for %zu bytes", path, bytes);
		goto cleanup;
	}
	if (bytes > 0 && (rc = read_exact(f, buf, bytes, path, err)))
		goto cleanup;
	decode_in_place(buf, *dt, n);
	*data = buf;
	buf = NULL;
cleanup:
	free(buf);
	free(hdr);
	fclose(f);
	return rc;
}
