/* Given values: every rank's block read back from the files `dtr run --dump` writes. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/common.h"
#include "pattern/internal.h"
#include "pattern/pattern.h"

/* Opens DIR/rank<rank>.<suffix> and checks that it holds exactly bytes. */
static dtr_status_t dtr__open_block(const char *dir, const char *suffix, int rank, size_t bytes,
                                    FILE **f, char *path, size_t len, const char *func) {
    int n = snprintf(path, len, "%s/rank%d.%s", dir, rank, suffix);
    if (n < 0 || (size_t)n >= len)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "dir: path too long");
    *f = fopen(path, "rb");
    if (*f == NULL)
        return dtr__error(DTR_ERR_IO, func, "dir: cannot open '%s': %s", path,
                          strerror(errno));
    struct stat info;
    if (fstat(fileno(*f), &info) == 0 && !S_ISREG(info.st_mode)) {
        fclose(*f);
        *f = NULL;
        return dtr__error(DTR_ERR_IO, func, "dir: '%s' is %s, not a block file", path,
                          S_ISDIR(info.st_mode) ? "a directory" : "not a regular file");
    }
    long size = -1;
    if (fseek(*f, 0, SEEK_END) == 0) size = ftell(*f);
    if (size < 0 || fseek(*f, 0, SEEK_SET) != 0 || (size_t)size != bytes) {
        fclose(*f);
        *f = NULL;
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                          "dir: '%s' holds %ld bytes, but rank %d's block is %zu bytes", path,
                          size, rank, bytes);
    }
    return DTR_OK;
}

static dtr_status_t dtr__read_block(FILE *f, const char *path, void *buf, size_t bytes,
                                    const char *func) {
    bool ok = bytes == 0 || fread(buf, 1, bytes, f) == bytes;
    fclose(f);
    if (!ok)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "dir: cannot read '%s'", path);
    return DTR_OK;
}

dtr_status_t dtr_fill_read(const char *dir, const char *suffix, int rank, void *buf,
                           size_t bytes) {
    DTR_CHECK_PTR(dir, __func__);
    DTR_CHECK_PTR(suffix, __func__);
    if (buf == NULL && bytes > 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "buf: must not be NULL");
    char path[4096];
    FILE *f;
    DTR_CHECK(dtr__open_block(dir, suffix, rank, bytes, &f, path, sizeof path, __func__));
    return dtr__read_block(f, path, buf, bytes, __func__);
}

void dtr_fill_blocks_destroy(dtr_fill_blocks_t *b) {
    if (b == NULL) return;
    free(b->data);
    free(b);
}

/* Puts the block of the rank at coord (in block, l) into b; replicas must agree. */
static dtr_status_t dtr__place(dtr_fill_blocks_t *b, unsigned char *have, const dtr_spec_t *spec,
                               const int64_t *coord, const dtr_layout_t *l,
                               const unsigned char *block, int rank, const char *path) {
    int64_t q = dtr__contribution_index(spec, coord, NULL);
    int64_t idx[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t k = 0; k < l->numel; k++, dtr__next(l, idx)) {
        int64_t slot = q * b->numel + dtr__global(spec, l, idx);
        unsigned char *p = b->data + (size_t)slot * b->esize;
        const unsigned char *v = block + (size_t)k * b->esize;
        if (have[slot] && memcmp(p, v, b->esize) != 0)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, "dtr_fill_load",
                              "dir: '%s' (rank %d) holds element %lld of contribution %lld "
                              "with other bytes than a replica before it: replicas (the "
                              "ranks of a Replicate mesh dim) must agree",
                              path, rank, (long long)(slot % b->numel), (long long)q);
        memcpy(p, v, b->esize);
        have[slot] = 1;
    }
    return DTR_OK;
}

dtr_status_t dtr_fill_load(const dtr_spec_t *spec, const char *dir, const char *suffix,
                           dtr_fill_blocks_t **out) {
    DTR_CHECK_PTR(out, __func__);
    *out = NULL;
    DTR_CHECK_PTR(spec, __func__);
    DTR_CHECK_PTR(dir, __func__);
    DTR_CHECK_PTR(suffix, __func__);
    if (spec->mesh == NULL)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "spec: has no mesh");
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, count, numel = 1;
    dtr__contribution_index(spec, coord, &count);
    for (int d = 0; d < spec->ndim; d++) numel *= spec->shape[d];
    size_t esize = (size_t)dtr_dtype_info(spec->dtype)->size;
    if (numel > 0 && (uint64_t)count > (UINT64_MAX / 2) / (uint64_t)numel / esize)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "spec: too large to hold");
    size_t slots = (size_t)(count * numel);
    dtr_fill_blocks_t *b = calloc(1, sizeof *b);
    unsigned char *have = calloc(slots + 1, 1), *block = NULL;
    if (b != NULL) b->data = malloc(slots * esize + 1);
    if (b == NULL || have == NULL || b->data == NULL) {
        dtr_fill_blocks_destroy(b);
        free(have);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "blocks of %zu bytes", slots * esize);
    }
    b->count = count;
    b->numel = numel;
    b->esize = esize;
    b->dtype = spec->dtype;
    b->ndim = spec->ndim;
    memcpy(b->shape, spec->shape, (size_t)spec->ndim * sizeof *b->shape);
    dtr_status_t st = DTR_OK;
    int mdims = dtr_mesh_ndims(spec->mesh);
    for (int64_t p = 0; p < dtr_mesh_nranks(spec->mesh) && st == DTR_OK; p++) {
        int64_t rest = p;
        for (int i = mdims - 1; i >= 0; i--) {
            coord[i] = rest % dtr_mesh_size(spec->mesh, i);
            rest /= dtr_mesh_size(spec->mesh, i);
        }
        int rank = -1;
        dtr_layout_t l;
        st = dtr_mesh_rank_at(spec->mesh, coord, &rank);
        if (st == DTR_OK) st = dtr_spec_layout_at(spec, coord, &l);
        if (st != DTR_OK) break;
        unsigned char *grown = realloc(block, (size_t)l.bytes + 1);
        if (grown == NULL) {
            st = dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "a block of %lld bytes",
                            (long long)l.bytes);
            break;
        }
        block = grown;
        char path[4096];
        FILE *f;
        st = dtr__open_block(dir, suffix, rank, (size_t)l.bytes, &f, path, sizeof path, __func__);
        if (st == DTR_OK) st = dtr__read_block(f, path, block, (size_t)l.bytes, __func__);
        if (st == DTR_OK) st = dtr__place(b, have, spec, coord, &l, block, rank, path);
    }
    free(block);
    free(have);
    if (st != DTR_OK) {
        dtr_fill_blocks_destroy(b);
        return st;
    }
    *out = b;
    return DTR_OK;
}
