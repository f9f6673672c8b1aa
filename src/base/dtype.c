/* The element types the library knows (kb_dtype, kernbench/common.h). */
#include <string.h>

#include "base/dtype.h"

KB_API size_t kb_dtype_size(kb_dtype dt)
{
	return kb__dtype_size(dt);
}

KB_API const char *kb_dtype_name(kb_dtype dt)
{
	switch (dt) {
	case KB_FP32: return "fp32";
	case KB_FP16: return "fp16";
	case KB_BF16: return "bf16";
	default: return NULL;
	}
}

KB_API int kb_dtype_parse(const char *name, kb_dtype *out)
{
	static const kb_dtype all[] = { KB_FP32, KB_FP16, KB_BF16 };
	for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++) {
		if (strcmp(name, kb_dtype_name(all[i])) == 0) {
			*out = all[i];
			return KB_OK;
		}
	}
	return KB_EINVAL;
}
