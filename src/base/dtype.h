/*
 * Element sizes for the library's own hot paths.
 */
#ifndef KB_BASE_DTYPE_H
#define KB_BASE_DTYPE_H

#include <stddef.h>

#include "kernbench/common.h"

/* kb_dtype_size inline: the exported function is reached through the PLT
 * from inside the library, a call per tensor view sized (issue 13). */
static inline size_t kb__dtype_size(kb_dtype dt)
{
	switch (dt) {
	case KB_FP32: return 4;
	case KB_FP16: case KB_BF16: return 2;
	default: return 0;
	}
}

#endif
