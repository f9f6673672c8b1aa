/*
 * Data mode (issue 4, ARCHITECTURE.md §7 and §9): real numbers through the
 * same pipeline.
 *
 * - every MATH kind as a composite head op, through the public API (own
 *   kernels: load into TCM, composite, store to HBM), against a direct
 *   host computation, with broadcast (G,T)x(G,1) and keep-dims (G,T)->(G,1);
 * - one softmax_merge step (prologue recipe + P.V GEMM + add epilogue)
 *   against the online-softmax formulas in double;
 * - gqa_decode_opt2 / opt3 against a double-precision attention recomputed
 *   here from the dumped q, k, v (plain loops), against the bench's own
 *   figures, and against each other; single and multi PE;
 * - gemm with each epilogue, against the bench and against the dump;
 * - data mode leaves timing alone (same oplog_sha256, sim time, events);
 * - memory-store errors are reported, never garbage;
 * - --dump file shapes, dtypes and the .npy format.
 *
 * All inputs are small so the suite runs in a few seconds.
 */
#include "suites.h"

/* The TCases live in check_data_{math,bench,timing,memory}.c, their shared
 * helpers in datautil.c. */
Suite *data_suite(void)
{
	Suite *s = suite_create("data");

	suite_add_tcase(s, data_math_tcase());
	suite_add_tcase(s, data_softmax_merge_tcase());
	suite_add_tcase(s, data_decode_tcase());
	suite_add_tcase(s, data_gemm_tcase());
	suite_add_tcase(s, data_timing_tcase());
	suite_add_tcase(s, data_memory_tcase());
	suite_add_tcase(s, data_dump_tcase());
	suite_add_tcase(s, data_golden_tcase());
	return s;
}
