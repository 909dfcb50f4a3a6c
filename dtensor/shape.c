/*
 * Shapes as text and the chunk rule: what both the mesh (mesh.c: "2x4" sizes, its printed
 * form) and the spec (spec.c: local shapes) build on, so that neither needs the other.
 */
#include <string.h>

#include "core/common.h"
#include "dtensor/dtensor.h"
#include "dtensor/internal.h"

/* Scans "2x5" for dtr_shape_parse and dtr_mesh_parse; also "[2, 5]" and "(2, 5)" (a JSON
 * array, a Python tuple: what the JSON output and Python print) where `brackets`. Errors name
 * `func` and quote the text as given. */
dtr_status_t dtr__dims_parse(const char *text, int64_t *out, int cap, int *ndim,
                             const char *func, bool brackets) {
    const char *p = dtr__skip_space(text);
    char close = '\0', sep = 'x';
    if (brackets && (*p == '[' || *p == '(')) {
        close = *p == '[' ? ']' : ')';
        sep = ',';
        p = dtr__skip_space(p + 1);
        if (*p == close && *dtr__skip_space(p + 1) == '\0') {
            *ndim = 0;
            return DTR_OK;
        }
    } else if (*p == '\0' || (dtr__scan_word(&p, "scalar") && *dtr__skip_space(p) == '\0')) {
        *ndim = 0;
        return DTR_OK;
    } else {
        p = dtr__skip_space(text);
    }
    int64_t dims[DTR_MAX_TENSOR_DIMS + 1];
    int limit = cap < DTR_MAX_TENSOR_DIMS + 1 ? cap : DTR_MAX_TENSOR_DIMS + 1;
    int n = 0;
    for (;;) {
        p = dtr__skip_space(p);
        const char *at = p;
        int64_t value;
        int rc = dtr__scan_i64(&p, &value);
        if (rc == -1)
            return dtr__error(DTR_ERR_PARSE, func,
                              "text \"%s\": at offset %td: expected a size (an integer)%s",
                              text, at - text,
                              n == 0 ? "" : sep == 'x' ? " after 'x'" : " after ','");
        if (rc == -2 || value > DTR_MAX_DIM_SIZE)
            return dtr__error(DTR_ERR_OVERFLOW, func,
                              "text \"%s\": dim %d: %.*s exceeds 2^40", text, n,
                              (int)(p > at ? p - at : (int)strlen(at)), at);
        if (value < (brackets ? 0 : 1)) /* (a mesh's sizes start at 1, a shape's at 0) */
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "text \"%s\": dim %d: %lld, must be >= %d", text, n,
                              (long long)value, brackets ? 0 : 1);
        if (n == limit)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "text \"%s\": more than %d dims", text, limit);
        dims[n++] = value;
        p = dtr__skip_space(p);
        if (*p == sep || (sep == 'x' && *p == 'X')) {
            p = dtr__skip_space(p + 1);
            /* a tuple's trailing comma: "(4,)" */
            if (close == ')' && *p == close) break;
            continue;
        }
        if (close == '\0' && *p == '\0') break;
        if (close != '\0' && *p == close) break;
        if (*p == '\0')
            return dtr__error(DTR_ERR_PARSE, func, "text \"%s\": '%c' missing at the end",
                              text, close);
        return dtr__error(DTR_ERR_PARSE, func,
                          "text \"%s\": at offset %td: expected '%c' between sizes, found '%c'",
                          text, p - text, sep, *p);
    }
    if (close != '\0' && *dtr__skip_space(p + 1) != '\0')
        return dtr__error(DTR_ERR_PARSE, func, "text \"%s\": text after '%c'", text, close);
    memcpy(out, dims, (size_t)n * sizeof *out);
    *ndim = n;
    return DTR_OK;
}

dtr_status_t dtr_shape_parse(const char *text, int64_t *out, int cap, int *ndim) {
    DTR_CHECK_PTR(text, __func__);
    DTR_CHECK_PTR(out, __func__);
    DTR_CHECK_PTR(ndim, __func__);
    if (cap < 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "cap: %d, must be >= 0", cap);
    return dtr__dims_parse(text, out, cap, ndim, __func__, true);
}

dtr_status_t dtr__shape_bytes(const int64_t *shape, int ndim, dtr_dtype_t dtype,
                              const char *func, int64_t *bytes) {
    const dtr_dtype_info_t *info = dtr_dtype_info(dtype);
    if (info == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "dtype: %d is not a dtype", (int)dtype);
    if (ndim < 0 || ndim > DTR_MAX_TENSOR_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "ndim: %d, must be 0..%d", ndim,
                          DTR_MAX_TENSOR_DIMS);
    int64_t b = info->size;
    bool empty = false;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "shape[%d]: %lld, must be >= 0",
                              d, (long long)shape[d]);
        if (shape[d] > DTR_MAX_DIM_SIZE)
            return dtr__error(DTR_ERR_OVERFLOW, func, "shape[%d]: %lld exceeds 2^40", d,
                              (long long)shape[d]);
        /* Zero-length dims are legal; the size check ignores them so a later fill of the
         * other dims cannot overflow either. */
        empty |= shape[d] == 0;
        if (dtr__mul_overflow(b, shape[d] > 0 ? shape[d] : 1, &b))
            return dtr__error(DTR_ERR_OVERFLOW, func,
                              "shape: the tensor's byte size (%s, %d dims) overflows int64",
                              info->name, ndim);
    }
    *bytes = empty ? 0 : b;
    return DTR_OK;
}

dtr_status_t dtr_shape_bytes(const int64_t *shape, int ndim, dtr_dtype_t dtype, int64_t *bytes) {
    DTR_CHECK_PTR(bytes, __func__);
    if (ndim > 0) DTR_CHECK_PTR(shape, __func__);
    return dtr__shape_bytes(shape, ndim, dtype, __func__, bytes);
}

dtr_status_t dtr_shape_format(const int64_t *shape, int ndim, char *buf, size_t len) {
    DTR_CHECK_PTR(buf, __func__);
    if (ndim < 0 || ndim > DTR_MAX_TENSOR_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "ndim: %d, must be 0..%d", ndim,
                          DTR_MAX_TENSOR_DIMS);
    if (ndim > 0) DTR_CHECK_PTR(shape, __func__);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "shape[%d]: %lld, must be >= 0",
                              i, (long long)shape[i]);
    char text[DTR_MAX_TENSOR_DIMS * 21 + 8];
    size_t pos = 0;
    if (ndim == 0) DTR_CHECK(dtr__buf_printf(text, sizeof text, &pos, __func__, "scalar"));
    for (int i = 0; i < ndim; i++)
        DTR_CHECK(dtr__buf_printf(text, sizeof text, &pos, __func__, "%s%lld", i ? "x" : "",
                                  (long long)shape[i]));
    return dtr__copy_out(buf, len, text, pos, __func__);
}

dtr_status_t dtr_chunk(int64_t length, int64_t n, int64_t r, int64_t *size, int64_t *offset) {
    DTR_CHECK_PTR(size, __func__);
    DTR_CHECK_PTR(offset, __func__);
    if (length < 0 || n < 1 || r < 0 || r >= n)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "length %lld, n %lld, r %lld: need length >= 0, n >= 1, 0 <= r < n",
                          (long long)length, (long long)n, (long long)r);
    /* c*r <= length + n, so nothing here overflows for length <= 2^62. */
    int64_t c = length / n + (length % n != 0);
    int64_t start = c * r;
    *offset = start < length ? start : length;
    int64_t end = start + c < length ? start + c : length;
    *size = end > start ? end - start : 0;
    return DTR_OK;
}
