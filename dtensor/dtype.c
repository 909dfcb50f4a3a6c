#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "dtensor/dtensor.h"

static const dtr_dtype_info_t dtr__dtypes[DTR_DTYPE_LAST] = {
    [DTR_F32] = {"f32", "float32 float", 4, true, false, "IEEE 754 binary32"},
    [DTR_F64] = {"f64", "float64 double", 8, true, false, "IEEE 754 binary64"},
    [DTR_F16] = {"f16", "float16 half", 2, true, false, "IEEE 754 binary16"},
    [DTR_BF16] = {"bf16", "bfloat16", 2, true, false, "bfloat16 (8-bit exponent)"},
    [DTR_I32] = {"i32", "int32 int", 4, false, false, "signed 32-bit integer"},
    [DTR_I64] = {"i64", "int64 long", 8, false, false, "signed 64-bit integer"},
    [DTR_U8] = {"u8", "uint8 byte", 1, false, false, "unsigned 8-bit integer"},
    [DTR_F8E4M3] = {"f8e4m3", "fp8e4m3 float8_e4m3fn e4m3", 1, true, true,
                    "fp8 E4M3 (storage only: moved, never reduced)"},
    [DTR_F8E5M2] = {"f8e5m2", "fp8e5m2 float8_e5m2 e5m2", 1, true, true,
                    "fp8 E5M2 (storage only: moved, never reduced)"},
    [DTR_C64] = {"c64", "complex64 cfloat", 8, true, false,
                 "complex of two f32 (reduced by sum and avg only)", true},
    [DTR_C128] = {"c128", "complex128 cdouble", 16, true, false,
                  "complex of two f64 (reduced by sum and avg only)", true},
};

const dtr_dtype_info_t *dtr_dtype_info(dtr_dtype_t dtype) {
    if ((unsigned)dtype >= DTR_DTYPE_LAST) return NULL;
    return &dtr__dtypes[dtype];
}

const char *dtr_dtype_name(dtr_dtype_t dtype) {
    const dtr_dtype_info_t *info = dtr_dtype_info(dtype);
    return info != NULL ? info->name : NULL;
}

/* Does the space-separated list hold word (case-insensitive, whole words)? */
static bool dtr__word_in_list(const char *list, const char *word) {
    for (const char *p = list; *p != '\0';) {
        const char *q = p;
        if (dtr__scan_word(&q, word) && (*q == ' ' || *q == '\0')) return true;
        p = strchr(p, ' ');
        if (p == NULL) break;
        p++;
    }
    return false;
}

dtr_status_t dtr_dtype_parse(const char *text, dtr_dtype_t *out) {
    DTR_CHECK_PTR(text, __func__);
    DTR_CHECK_PTR(out, __func__);
    /* Trim, and refuse anything that is not one plain word before matching. */
    const char *start = dtr__skip_space(text);
    char word[32];
    size_t n = 0;
    while (start[n] != '\0' && start[n] != ' ' && start[n] != '\t' && n + 1 < sizeof word) {
        word[n] = start[n];
        n++;
    }
    word[n] = '\0';
    if (n > 0 && *dtr__skip_space(start + n) == '\0') {
        for (int d = 0; d < DTR_DTYPE_LAST; d++) {
            if (dtr__word_in_list(dtr__dtypes[d].name, word) ||
                dtr__word_in_list(dtr__dtypes[d].aliases, word)) {
                *out = (dtr_dtype_t)d;
                return DTR_OK;
            }
        }
    }
    char names[160];
    size_t used = 0;
    for (int d = 0; d < DTR_DTYPE_LAST && used < sizeof names; d++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", d > 0 ? ", " : "",
                                 dtr__dtypes[d].name);
    return dtr__error(DTR_ERR_PARSE, __func__, "text \"%s\": not a dtype (%s)", text, names);
}
