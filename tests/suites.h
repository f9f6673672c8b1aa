/* Every Check suite of the project; tests/check_all.c runs them. */
#ifndef KB_TESTS_SUITES_H
#define KB_TESTS_SUITES_H

#include <check.h>

Suite *topology_suite(void);
Suite *numerics_suite(void);
TCase *numerics_vector_tcase(void); /* check_vector.c */
Suite *sim_suite(void);
Suite *oplog_suite(void);
Suite *pe_suite(void);
Suite *tl_suite(void);
Suite *tcm_suite(void);
Suite *bench_suite(void);
Suite *data_suite(void);
TCase *data_math_tcase(void);          /* check_data_math.c */
TCase *data_softmax_merge_tcase(void); /* check_data_math.c */
TCase *data_decode_tcase(void);        /* check_data_bench.c */
TCase *data_gemm_tcase(void);          /* check_data_bench.c */
TCase *data_dump_tcase(void);          /* check_data_bench.c */
TCase *data_timing_tcase(void);        /* check_data_timing.c */
TCase *data_memory_tcase(void);        /* check_data_memory.c */
TCase *data_golden_tcase(void);        /* check_data_golden.c */
Suite *parallel_suite(void);
Suite *api_suite(void);
Suite *limits_suite(void);
Suite *registry_suite(void);
Suite *sweep_suite(void);

#endif
