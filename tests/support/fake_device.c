#include "tests/support/fake_device.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "numeric/numeric.h"

#define TAG ((uintptr_t)1 << 62)

static fake_device_counts_t counts;

static bool tagged(const void *p) { return ((uintptr_t)p & TAG) != 0; }
void *fake_device_host(const void *p) { return (void *)((uintptr_t)p & ~TAG); }
static void *tag(void *p) { return (void *)((uintptr_t)p | TAG); }

static dtr_status_t refuse(const char *what) {
    counts.refused++;
    return dtr__error(DTR_ERR_INTERNAL, "fake device", "%s", what);
}

static dtr_status_t fd_alloc(void *state, int64_t bytes, void **p) {
    (void)state;
    if (bytes < 1) return refuse("alloc: bytes < 1");
    void *q = malloc((size_t)bytes);
    if (q == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, "fake device", "alloc");
    memset(q, 0x5a, (size_t)bytes); /* contents are unspecified: never zero by luck */
    counts.alloc++;
    *p = tag(q);
    return DTR_OK;
}

static void fd_free(void *state, void *p) {
    (void)state;
    if (p != NULL) free(fake_device_host(p));
}

static dtr_status_t fd_copy(void *state, void *dst, const void *src, int64_t bytes,
                            dtr_copy_kind_t kind) {
    (void)state;
    bool dst_dev = kind != DTR_COPY_TO_HOST, src_dev = kind != DTR_COPY_FROM_HOST;
    if (tagged(dst) != dst_dev || tagged(src) != src_dev)
        return refuse("copy: an address of the wrong space");
    if (kind == DTR_COPY_WITHIN) counts.copy_within++;
    else if (kind == DTR_COPY_TO_HOST) counts.to_host++;
    else counts.from_host++;
    memmove(fake_device_host(dst), fake_device_host(src), (size_t)bytes);
    return DTR_OK;
}

static dtr_status_t fd_zero(void *state, void *dst, int64_t bytes) {
    (void)state;
    if (!tagged(dst)) return refuse("zero: a host address");
    counts.zero++;
    memset(fake_device_host(dst), 0, (size_t)bytes);
    return DTR_OK;
}

/* Row-major offset, in elements, of index idx + lo in a block of shape sh. */
static int64_t offset(int nd, const int64_t *sh, const int64_t *lo, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < nd; d++) off = off * sh[d] + lo[d] + idx[d];
    return off;
}

/* idx = the f-th index of the box ext, row-major */
static void unflatten(int nd, const int64_t *ext, int64_t f, int64_t *idx) {
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = f % ext[d];
        f /= ext[d];
    }
}

static dtr_status_t fd_copy_box(void *state, int nd, int64_t item, const void *src,
                                const int64_t *sshape, const int64_t *slo, const int64_t *ext,
                                void *dst, const int64_t *dshape, const int64_t *dlo) {
    (void)state;
    if (!tagged(src) || !tagged(dst)) return refuse("copy_box: a host address");
    counts.copy_box++;
    int64_t total = 1, idx[DTR_MAX_TENSOR_DIMS];
    for (int d = 0; d < nd; d++) total *= ext[d];
    const char *s = fake_device_host(src);
    char *t = fake_device_host(dst);
    for (int64_t f = 0; f < total; f++) {
        unflatten(nd, ext, f, idx);
        memcpy(t + offset(nd, dshape, dlo, idx) * item, s + offset(nd, sshape, slo, idx) * item,
               (size_t)item);
    }
    return DTR_OK;
}

static dtr_status_t fd_copy_range(void *state, int nd, int64_t item, void *block,
                                  const int64_t *bshape, const int64_t *blo, const int64_t *ext,
                                  int64_t u, int64_t v, void *flat, bool to_block) {
    (void)state;
    if (!tagged(block) || !tagged(flat)) return refuse("copy_range: a host address");
    counts.copy_range++;
    char *b = fake_device_host(block), *c = fake_device_host(flat);
    int64_t idx[DTR_MAX_TENSOR_DIMS];
    for (int64_t f = u; f < v; f++) {
        unflatten(nd, ext, f, idx);
        char *e = b + offset(nd, bshape, blo, idx) * item, *g = c + (f - u) * item;
        memcpy(to_block ? e : g, to_block ? g : e, (size_t)item);
    }
    return DTR_OK;
}

static dtr_status_t fd_divide(void *state, dtr_dtype_t dtype, const void *src, void *dst,
                              int64_t count, int64_t n) {
    (void)state;
    if (!tagged(src) || !tagged(dst)) return refuse("divide: a host address");
    counts.divide++;
    dtr__divide(dtype, fake_device_host(src), fake_device_host(dst), count, n);
    return DTR_OK;
}

static dtr_status_t fd_cast(void *state, dtr_dtype_t sd, const void *src, dtr_dtype_t dd,
                            void *dst, int64_t count) {
    (void)state;
    if (!tagged(src) || !tagged(dst)) return refuse("cast: a host address");
    counts.cast++;
    dtr__convert(sd, fake_device_host(src), dd, fake_device_host(dst), count);
    return DTR_OK;
}

static dtr_status_t fd_add(void *state, dtr_dtype_t dtype, const void *src, void *dst,
                           int64_t count) {
    (void)state;
    if (!tagged(src) || !tagged(dst)) return refuse("add: a host address");
    counts.add++;
    dtr__combine(dtype, DTR_REDUCE_SUM, fake_device_host(src), fake_device_host(dst), count);
    return DTR_OK;
}

static dtr_status_t fd_sync(void *state) {
    (void)state;
    return DTR_OK;
}

static void fd_destroy(void *state) { free(state); }

static const dtr_memory_ops_t fake_ops = {
    .name = "fake-device",
    .alloc = fd_alloc,
    .free = fd_free,
    .copy = fd_copy,
    .zero = fd_zero,
    .copy_box = fd_copy_box,
    .copy_range = fd_copy_range,
    .divide = fd_divide,
    .cast = fd_cast,
    .add = fd_add,
    .sync = fd_sync,
    .destroy = fd_destroy,
};

const dtr_memory_ops_t *fake_device_ops(void) { return &fake_ops; }
void *fake_device_state(void) { return calloc(1, 1); }
fake_device_counts_t fake_device_counts(void) { return counts; }
