/*
 * kernbench common definitions: export macro, error object, error codes.
 *
 * Thread rules: everything here may be called from any thread.
 */
#ifndef KERNBENCH_COMMON_H
#define KERNBENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KB_BUILDING_LIBRARY) && defined(__GNUC__)
#define KB_API __attribute__((visibility("default")))
#else
#define KB_API
#endif

#if defined(__GNUC__)
#define KB_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define KB_PRINTF(f, a)
#endif

/* threads of a run: one worker per core, at most one per PE, PEs whole
 * (sequential on one core or one PE); never more busy threads than cores.
 * The default of runs and simulations. */
#define KB_THREADS_AUTO (-1)

/* Error codes: every fallible function returns 0 or one of these (negative). */
typedef enum kb_status {
	KB_OK = 0,
	KB_EINVAL = -1,      /* bad argument or value (names the key / operand) */
	KB_ENOMEM = -2,      /* out of host memory */
	KB_EIO = -3,         /* file could not be read or written */
	KB_EPARSE = -4,      /* malformed JSON or number */
	KB_EKEY = -5,        /* unknown key */
	KB_ERANGE = -6,      /* value out of range */
	KB_ETYPE = -7,       /* wrong JSON type for a key */
	KB_ELOOKAHEAD = -8,  /* a message was sent with less than the link latency */
	KB_EDEADLOCK = -9,   /* nothing pending but work unfinished */
	KB_EVALIDATE = -10,  /* kernel validation error (see kb_error.detail) */
	KB_EMEM = -11,       /* simulated memory fault (address, uninitialised read) */
	KB_ENOTFOUND = -12,  /* unknown bench, parameter or recipe */
	KB_ESTATE = -13,     /* call not valid in the object's state */
	KB_EINTERNAL = -14   /* a bug in kernbench: please report it */
} kb_status;

/* Kernel validation errors of the tl model, in kb_error.detail. */
typedef enum kb_validation {
	KB_V_NONE = 0,
	KB_V_AUTOBIND_CONFLICT,   /* recipe primary_out and an explicit GEMM `a` */
	KB_V_PROLOGUE_HBM,        /* prologue recipe operand lives in HBM */
	KB_V_TWO_GEMMS,           /* more than one GEMM in one composite */
	KB_V_OVER_CAP,            /* composite over max_composite_logical_bytes */
	KB_V_UNKNOWN_RECIPE,      /* recipe name not in the table */
	KB_V_MISSING_OPERAND,     /* recipe / op operand missing or unknown */
	KB_V_TCM_EXHAUSTED,       /* TCM allocation does not fit */
	KB_V_SHAPE,               /* shape mismatch */
	KB_V_DTYPE,               /* dtype mismatch */
	KB_V_BAD_HANDLE,          /* NULL, freed, or foreign handle */
	KB_V_SPACE,               /* operand in the wrong memory space */
	KB_V_SCOPE,               /* unbalanced scratch scopes */
	KB_V_UNKNOWN_OP,          /* unknown op kind */
	KB_V_KERNEL,              /* the kernel failed the run itself (kb_tl_fail) */
	KB_V_TOO_MANY_STAGES,     /* composite over the plan's stages per tile (or steps) */
	KB_V_UNKNOWN_EXTRA        /* extra scalar the op does not take */
} kb_validation;

/* Which fields of kb_error the library that filled it knows. */
#define KB_ERROR_VERSION 1

/* Caller-supplied error object (jansson's json_error_t style). Callers
 * declare it without initialising it, so the library cannot read a size
 * from it; instead its size is fixed for good: fields added later come
 * out of `reserved`, and `version` tells a caller which ones the library
 * it runs against filled. */
typedef struct kb_error {
	int code;               /* kb_status */
	int detail;             /* kb_validation, when code == KB_EVALIDATE */
	int line;               /* 1-based line in `source`, 0 when not applicable */
	int column;             /* 1-based column, 0 when not applicable */
	char source[256];       /* file name, key, or kernel call site */
	char message[768];      /* full human-readable message */
	int version;            /* KB_ERROR_VERSION of the library that filled or cleared it */
	int reserved[63];       /* room for later fields; zero */
} kb_error;

/* Text of a status code ("invalid argument", ...). Never NULL. */
KB_API const char *kb_strerror(int code);
/* Name of a validation code ("autobind_conflict", ...). Never NULL. */
KB_API const char *kb_validation_name(int detail);
/* Clears an error object. Accepts NULL. */
KB_API void kb_error_clear(kb_error *err);

/* "Did you mean ...?": the one of n candidates closest to a mistyped name
 * (edit distance, letter case ignored) when it is close enough to be a typo
 * (about one edit in three characters), else NULL. Returns one of the
 * candidates' pointers; never the name itself. The library's own messages
 * for unknown benches, parameters and topology keys use the same rule. */
KB_API const char *kb_suggest(const char *name, const char *const *candidates, size_t n);

/* Library version string, e.g. "0.1.0". */
KB_API const char *kb_version(void);
/* Library version as KB_VERSION_HEX of the built library. */
KB_API unsigned kb_version_hex(void);
/* The git revision the library was built from ("0123abcd4567", with
 * "-dirty" when the tree had uncommitted changes), or "" when unknown (a
 * build outside a git checkout). Never NULL. */
KB_API const char *kb_git_revision(void);

/* Element types of tensors. */
typedef enum kb_dtype { KB_FP32 = 0, KB_FP16 = 1, KB_BF16 = 2 } kb_dtype;
/* Bytes per element of a dtype (4 or 2); 0 for an invalid value. */
KB_API size_t kb_dtype_size(kb_dtype dt);
/* "fp32", "fp16", "bf16"; NULL for an invalid value. */
KB_API const char *kb_dtype_name(kb_dtype dt);
/* Parses a dtype name; returns KB_EINVAL for an unknown name. */
KB_API int kb_dtype_parse(const char *name, kb_dtype *out);

/*
 * Conversions of n values between fp32 and the 16-bit storage types, for
 * uploads and downloads (kb_simulation_upload/download move raw bytes).
 * Narrowing rounds to nearest, ties to even; NaN stays NaN; values too
 * large become infinity; widening is exact. The same conversions as data
 * mode's engines. dst and src must not overlap.
 */
KB_API void kb_fp16_to_fp32(float *dst, const uint16_t *src, size_t n);
KB_API void kb_fp32_to_fp16(uint16_t *dst, const float *src, size_t n);
KB_API void kb_bf16_to_fp32(float *dst, const uint16_t *src, size_t n);
KB_API void kb_fp32_to_bf16(uint16_t *dst, const float *src, size_t n);

#ifdef __cplusplus
}
#endif
#endif
