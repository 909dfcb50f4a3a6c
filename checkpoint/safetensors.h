/*
 * The safetensors format's header (safetensors.c): the bytes after the length, parsed
 * (Jansson) and checked against the data's size, and the format's dtype names. No I/O: the
 * rest of checkpoint/ reads files with it, and the fuzzer runs it on any bytes
 * (fuzz/fuzz_safetensors.c). Not installed.
 */
#ifndef DTR_CHECKPOINT_SAFETENSORS_H
#define DTR_CHECKPOINT_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtensor/dtensor.h"

/* Largest header dtr reads (as the safetensors library: 100,000,000 bytes). */
#define DTR__ST_MAX_HEADER 100000000LL

typedef struct {
    char *name;
    char format_dtype[16];
    dtr_dtype_t dtype; /* DTR_DTYPE_LAST: none in dtr */
    int ndim;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int64_t begin, end; /* data_offsets: from the start of the data */
    int file;           /* the checkpoint's file index */
} dtr__st_tensor_t;

/* One file's header, parsed. */
typedef struct {
    dtr__st_tensor_t *tensors;
    int64_t ntensors;
    char **meta; /* "__metadata__": key, value, key, value, ... */
    int64_t nmeta;
} dtr__st_header_t;

/* Parses the JSON header (len bytes, not NUL-terminated) of a file whose data section has
 * data_bytes bytes, and checks it (dtr_checkpoint.h). label names the file in errors
 * (func the calling function). *out written only on success; free with dtr__st_free. */
dtr_status_t dtr__st_parse(const char *func, const char *label, const char *json, size_t len,
                           int64_t data_bytes, dtr__st_header_t *out);
/* The same from a whole file's bytes: the length, the header, the data. */
dtr_status_t dtr__st_parse_image(const char *func, const char *label, const uint8_t *buf,
                                 size_t size, dtr__st_header_t *out);
void dtr__st_free(dtr__st_header_t *h);

/* The format's name of a dtr dtype ("F32"); NULL for one the format lacks (C128). */
const char *dtr__st_dtype_name(dtr_dtype_t dtype);
/* dtr's dtype of the format's name; false where the format has none by that name. */
bool dtr__st_dtype_parse(const char *name, dtr_dtype_t *dtype);

#endif
