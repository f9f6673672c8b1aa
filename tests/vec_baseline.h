/* Test-only names of the baseline build of the vector kernels (vec_baseline.c). */
#ifndef KB_TESTS_VEC_BASELINE_H
#define KB_TESTS_VEC_BASELINE_H

#define kb__gemm_tile kbt_base_gemm_tile
#define kb__gemm_tile_scalar kbt_base_gemm_tile_scalar
#define kb__math_apply kbt_base_math_apply
#define kb__nshape_numel kbt_base_nshape_numel
#define kb__load_f32 kbt_base_load_f32
#define kb__store_f32 kbt_base_store_f32
#define kb__f16_to_f32 kbt_base_f16_to_f32
#define kb__f32_to_f16 kbt_base_f32_to_f16
#define kb__bf16_to_f32 kbt_base_bf16_to_f32
#define kb__f32_to_bf16 kbt_base_f32_to_bf16
#define kb_fp16_to_fp32 kbt_base_fp16_to_fp32
#define kb_fp32_to_fp16 kbt_base_fp32_to_fp16
#define kb_bf16_to_fp32 kbt_base_bf16_to_fp32
#define kb_fp32_to_bf16 kbt_base_fp32_to_bf16

#endif
