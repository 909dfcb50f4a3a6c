/* One safetensors header, parsed and checked (internal.h). */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/internal.h"

/* The format's dtypes: name, bits per element, dtr's dtype (DTR_DTYPE_LAST: none). */
static const struct {
    const char *name;
    int bits;
    dtr_dtype_t dtype;
} dtr__st_dtypes[] = {
    {"BOOL", 8, DTR_DTYPE_LAST},     {"U8", 8, DTR_U8},
    {"I8", 8, DTR_DTYPE_LAST},       {"F8_E5M2", 8, DTR_F8E5M2},
    {"F8_E4M3", 8, DTR_F8E4M3},      {"F8_E8M0", 8, DTR_DTYPE_LAST},
    {"F4", 4, DTR_DTYPE_LAST},       {"F6_E2M3", 6, DTR_DTYPE_LAST},
    {"F6_E3M2", 6, DTR_DTYPE_LAST},  {"I16", 16, DTR_DTYPE_LAST},
    {"U16", 16, DTR_DTYPE_LAST},     {"F16", 16, DTR_F16},
    {"BF16", 16, DTR_BF16},          {"I32", 32, DTR_I32},
    {"U32", 32, DTR_DTYPE_LAST},     {"F32", 32, DTR_F32},
    {"F64", 64, DTR_F64},            {"I64", 64, DTR_I64},
    {"U64", 64, DTR_DTYPE_LAST},     {"C64", 64, DTR_C64},
};

void dtr__st_free(dtr__st_header_t *h) {
    for (int64_t i = 0; h->tensors != NULL && i < h->ntensors; i++) free(h->tensors[i].name);
    for (int64_t i = 0; h->meta != NULL && i < 2 * h->nmeta; i++) free(h->meta[i]);
    free(h->tensors);
    free(h->meta);
    memset(h, 0, sizeof *h);
}

/* A non-negative JSON integer into *v. */
static bool dtr__st_count(const json_t *j, int64_t *v) {
    if (!json_is_integer(j) || json_integer_value(j) < 0) return false;
    *v = (int64_t)json_integer_value(j);
    return true;
}

/* One tensor's entry {"dtype", "shape", "data_offsets"} into *t (name set by the caller). */
static dtr_status_t dtr__st_entry(const char *func, const char *label, const char *name,
                                  json_t *v, int64_t data_bytes, dtr__st_tensor_t *t) {
    if (!json_is_object(v))
        return dtr__error(DTR_ERR_PARSE, func, "%s: tensor '%s': not an object", label, name);
    const char *key;
    json_t *item;
    json_object_foreach(v, key, item) {
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 &&
            strcmp(key, "data_offsets") != 0)
            return dtr__error(DTR_ERR_PARSE, func,
                              "%s: tensor '%s': unknown key '%s' (dtype, shape, data_offsets)",
                              label, name, key);
    }
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape");
    json_t *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off))
        return dtr__error(DTR_ERR_PARSE, func,
                          "%s: tensor '%s': needs \"dtype\" (a string), \"shape\" and "
                          "\"data_offsets\" (arrays)", label, name);
    int bits = 0;
    for (size_t k = 0; k < sizeof dtr__st_dtypes / sizeof dtr__st_dtypes[0]; k++)
        if (strcmp(json_string_value(dt), dtr__st_dtypes[k].name) == 0) {
            bits = dtr__st_dtypes[k].bits;
            t->dtype = dtr__st_dtypes[k].dtype;
            snprintf(t->format_dtype, sizeof t->format_dtype, "%s", dtr__st_dtypes[k].name);
        }
    if (bits == 0)
        return dtr__error(DTR_ERR_PARSE, func, "%s: tensor '%s': unknown dtype '%s'", label,
                          name, json_string_value(dt));
    size_t nd = json_array_size(sh);
    if (nd > DTR_MAX_TENSOR_DIMS)
        return dtr__error(DTR_ERR_UNSUPPORTED, func,
                          "%s: tensor '%s': %zu dims, dtr takes at most %d", label, name, nd,
                          DTR_MAX_TENSOR_DIMS);
    /* numel * bits, overflow-checked: every dim at most 2^40, the product under 2^62 */
    int64_t bitcount = bits;
    for (size_t d = 0; d < nd; d++) {
        int64_t len;
        if (!dtr__st_count(json_array_get(sh, d), &len) || len > DTR_MAX_DIM_SIZE)
            return dtr__error(DTR_ERR_PARSE, func,
                              "%s: tensor '%s': shape[%zu] is not a length 0..2^40", label,
                              name, d);
        t->shape[d] = len;
        if (len != 0 && bitcount > (INT64_C(1) << 62) / len)
            return dtr__error(DTR_ERR_PARSE, func, "%s: tensor '%s': shape too large", label,
                              name);
        bitcount *= len;
    }
    t->ndim = (int)nd;
    if (bitcount % 8 != 0)
        return dtr__error(DTR_ERR_PARSE, func,
                          "%s: tensor '%s': %lld elements of %s are not whole bytes", label,
                          name, (long long)(bitcount / bits), t->format_dtype);
    if (json_array_size(off) != 2 || !dtr__st_count(json_array_get(off, 0), &t->begin) ||
        !dtr__st_count(json_array_get(off, 1), &t->end) || t->end < t->begin)
        return dtr__error(DTR_ERR_PARSE, func,
                          "%s: tensor '%s': data_offsets is not [begin, end] with 0 <= begin "
                          "<= end", label, name);
    if (t->end > data_bytes)
        return dtr__error(DTR_ERR_PARSE, func,
                          "%s: tensor '%s': data_offsets [%lld, %lld) outside the data "
                          "(%lld bytes)", label, name, (long long)t->begin, (long long)t->end,
                          (long long)data_bytes);
    if (t->end - t->begin != bitcount / 8)
        return dtr__error(DTR_ERR_PARSE, func,
                          "%s: tensor '%s': shape x %s is %lld bytes, data_offsets [%lld, "
                          "%lld) hold %lld", label, name, t->format_dtype,
                          (long long)(bitcount / 8), (long long)t->begin, (long long)t->end,
                          (long long)(t->end - t->begin));
    return DTR_OK;
}

/* "__metadata__": strings only, as key, value pairs. */
static dtr_status_t dtr__st_meta(const char *func, const char *label, json_t *v,
                                 dtr__st_header_t *h) {
    if (!json_is_object(v))
        return dtr__error(DTR_ERR_PARSE, func, "%s: __metadata__: not an object", label);
    h->meta = calloc(2 * json_object_size(v) + 1, sizeof *h->meta);
    if (h->meta == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "%s: metadata", label);
    const char *key;
    json_t *item;
    json_object_foreach(v, key, item) {
        if (!json_is_string(item))
            return dtr__error(DTR_ERR_PARSE, func, "%s: __metadata__: '%s' is not a string",
                              label, key);
        h->meta[2 * h->nmeta] = strdup(key);
        h->meta[2 * h->nmeta + 1] = strdup(json_string_value(item));
        if (h->meta[2 * h->nmeta++] == NULL || h->meta[2 * h->nmeta - 1] == NULL)
            return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "%s: metadata", label);
    }
    return DTR_OK;
}

static int dtr__st_by_offset(const void *a, const void *b) {
    const dtr__st_tensor_t *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* The tensors' data tile the data section exactly: no overlap, no gap, nothing after. */
static dtr_status_t dtr__st_tiling(const char *func, const char *label, dtr__st_header_t *h,
                                   int64_t data_bytes) {
    qsort(h->tensors, (size_t)h->ntensors, sizeof *h->tensors, dtr__st_by_offset);
    int64_t at = 0;
    for (int64_t i = 0; i < h->ntensors; i++) {
        const dtr__st_tensor_t *t = &h->tensors[i];
        if (t->begin < at)
            return dtr__error(DTR_ERR_PARSE, func,
                              "%s: tensor '%s' [%lld, %lld) overlaps tensor '%s' (ending at "
                              "%lld)", label, t->name, (long long)t->begin, (long long)t->end,
                              h->tensors[i - 1].name, (long long)at);
        if (t->begin > at)
            return dtr__error(DTR_ERR_PARSE, func,
                              "%s: bytes [%lld, %lld) of the data belong to no tensor", label,
                              (long long)at, (long long)t->begin);
        at = t->end;
    }
    if (at != data_bytes)
        return dtr__error(DTR_ERR_PARSE, func,
                          "%s: the data has %lld bytes, the tensors end at %lld", label,
                          (long long)data_bytes, (long long)at);
    return DTR_OK;
}

static dtr_status_t dtr__st_walk(const char *func, const char *label, json_t *root,
                                 int64_t data_bytes, dtr__st_header_t *h) {
    size_t n = json_object_size(root);
    h->tensors = calloc(n + 1, sizeof *h->tensors);
    if (h->tensors == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "%s: header", label);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        dtr_status_t st;
        if (strcmp(key, "__metadata__") == 0) {
            st = dtr__st_meta(func, label, v, h);
        } else {
            dtr__st_tensor_t *t = &h->tensors[h->ntensors];
            if ((t->name = strdup(key)) == NULL)
                return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "%s: header", label);
            h->ntensors++;
            st = dtr__st_entry(func, label, key, v, data_bytes, t);
        }
        if (st != DTR_OK) return st;
    }
    return dtr__st_tiling(func, label, h, data_bytes);
}

dtr_status_t dtr__st_parse(const char *func, const char *label, const char *json, size_t len,
                           int64_t data_bytes, dtr__st_header_t *out) {
    json_error_t err;
    /* duplicate names are an error, as two tensors cannot share one */
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL)
        return dtr__error(DTR_ERR_PARSE, func, "%s: header: not JSON at byte %d (line %d, "
                                               "column %d): %s",
                          label, err.position, err.line, err.column, err.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return dtr__error(DTR_ERR_PARSE, func, "%s: header: not a JSON object", label);
    }
    dtr__st_header_t h = {0};
    dtr_status_t st = dtr__st_walk(func, label, root, data_bytes, &h);
    json_decref(root);
    if (st != DTR_OK) {
        dtr__st_free(&h);
        return st;
    }
    *out = h;
    return DTR_OK;
}

dtr_status_t dtr__st_parse_image(const char *func, const char *label, const uint8_t *buf,
                                 size_t size, dtr__st_header_t *out) {
    if (size < 8)
        return dtr__error(DTR_ERR_PARSE, func, "%s: %zu bytes, shorter than the 8-byte header "
                                               "length", label, size);
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--) n = n << 8 | buf[k];
    if (n > (uint64_t)DTR__ST_MAX_HEADER || n > size - 8)
        return dtr__error(DTR_ERR_PARSE, func,
                          "%s: header length %llu past the end of the file (%zu bytes) or over "
                          "%lld", label, (unsigned long long)n, size, DTR__ST_MAX_HEADER);
    return dtr__st_parse(func, label, (const char *)buf + 8, (size_t)n,
                         (int64_t)(size - 8 - n), out);
}

const char *dtr__st_dtype_name(dtr_dtype_t dtype) {
    for (size_t k = 0; k < sizeof dtr__st_dtypes / sizeof dtr__st_dtypes[0]; k++)
        if (dtr__st_dtypes[k].dtype == dtype && dtype != DTR_DTYPE_LAST)
            return dtr__st_dtypes[k].name;
    return NULL;
}

bool dtr__st_dtype_parse(const char *name, dtr_dtype_t *dtype) {
    for (size_t k = 0; k < sizeof dtr__st_dtypes / sizeof dtr__st_dtypes[0]; k++)
        if (strcmp(dtr__st_dtypes[k].name, name) == 0) {
            *dtype = dtr__st_dtypes[k].dtype;
            return true;
        }
    return false;
}
