/*
 * NumPy .npy files (format 1.0, little-endian, C order) for --dump and for
 * tests.
 *
 * Written dtypes: fp32 as '<f4', fp16 as '<f2'. NumPy has no bfloat16, so a
 * bf16 tensor is widened (exactly) to fp32 and written as '<f4'; reading it
 * back gives KB_FP32.
 *
 * Thread rules: any thread; two threads must not write the same path.
 */
#ifndef KB_NUM_NPY_H
#define KB_NUM_NPY_H

#include <stdint.h>

#include "kernbench/common.h"

#define KB_NPY_MAX_RANK 4

/*
 * Writes data (rank 0..4, shape[i] >= 0, elements of dt in host order) to
 * path, replacing it. The header is padded with spaces and ends in '\n' so
 * that magic + lengths + header is a multiple of 64 bytes, as NumPy does.
 * I/O failures give KB_EIO naming the path and the system error; a regular
 * file left half-written is removed. Bad arguments give KB_EINVAL.
 */
int kb__npy_write(const char *path, kb_dtype dt, int rank, const int64_t *shape,
		  const void *data, kb_error *err);

/*
 * Reads a version 1.0 or 2.0 .npy file of '<f4' or '<f2' in C order, rank
 * <= 4. On success *data is a malloc'd buffer (free() it; NULL for zero
 * elements) in host byte order. KB_EIO for I/O errors, KB_EPARSE for a
 * malformed or unsupported header, KB_ENOMEM.
 */
int kb__npy_read(const char *path, kb_dtype *dt, int *rank, int64_t shape[KB_NPY_MAX_RANK],
		 void **data, kb_error *err);

#endif
