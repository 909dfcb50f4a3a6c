/* Safetensors files for the checkpoint tests, written into a fresh temporary directory. */
#ifndef DTR_TESTS_CHECKPOINT_FIXTURE_H
#define DTR_TESTS_CHECKPOINT_FIXTURE_H

#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A new empty directory under /tmp (the test's to remove; left for a failure's reader). */
static inline char *fixture_dir(void) {
    char *d = strdup("/tmp/dtr_ck_XXXXXX");
    cr_assert(d != NULL && mkdtemp(d) != NULL);
    return d;
}

/* dir/name (static buffer of the caller's). */
static inline const char *fixture_path(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

/* Writes raw bytes to dir/name; returns the path (malloc'd). */
static inline char *fixture_raw(const char *dir, const char *name, const void *bytes,
                                size_t n) {
    char path[512];
    fixture_path(path, sizeof path, dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL);
    cr_assert(n == 0 || fwrite(bytes, 1, n, f) == n);
    fclose(f);
    return strdup(path);
}

/* A safetensors file: the header length (len, or strlen(json) where len is -1), the JSON,
 * then data_len bytes of data (data NULL: bytes 0, 1, 2, ...). */
static inline char *fixture_file(const char *dir, const char *name, const char *json,
                                 int64_t len, const void *data, size_t data_len) {
    size_t jl = strlen(json), n = 8 + jl + data_len;
    unsigned char *buf = malloc(n);
    uint64_t hl = len < 0 ? (uint64_t)jl : (uint64_t)len;
    for (int k = 0; k < 8; k++) buf[k] = (unsigned char)(hl >> (8 * k));
    memcpy(buf + 8, json, jl);
    for (size_t k = 0; k < data_len; k++)
        buf[8 + jl + k] = data != NULL ? ((const unsigned char *)data)[k] : (unsigned char)k;
    char *p = fixture_raw(dir, name, buf, n);
    free(buf);
    return p;
}

#endif
