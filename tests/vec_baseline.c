/*
 * The vector kernels built once more without KB_VEC_CLONES, so that
 * check_vector.c tests the baseline (SSE2) code too on a machine whose
 * loader picks the AVX2 clone: the same source, the code the baseline
 * clone is, under test-only names.
 */
#define KB_NO_VEC_CLONES 1
#include "vec_baseline.h"

#include "base/fp16.c"
#include "num/gemm.c"
#include "num/kernels.c"
