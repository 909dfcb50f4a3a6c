/*
 * libFuzzer harness for specs and layouts: a mesh, shape, placements and dtype decoded from
 * the input (out-of-range shard dims, bad ops and dtypes, sizes up to 2^40 included) go
 * through dtr_mesh_create and dtr_spec_init. A spec that is accepted must give, on every
 * rank, the layout an independent computation of torch.chunk's nesting gives, and the local
 * blocks must cover the tensor exactly once per replica. A refused one must leave the spec as
 * it was and say why.
 */
#include <stdint.h>
#include <string.h>

#include "dtr.h"
#include "fuzz/fuzz_util.h"

/* A dim size: small mostly; a 0x80 byte brings a 40-bit value (overflow paths). */
static int64_t dim_size(fuzz_bytes_t *b) {
    unsigned v = fuzz_byte(b);
    if (!(v & 0x80)) return v % 13;
    int64_t big = 0;
    for (int k = 0; k < 5; k++) big = (big << 8) | fuzz_byte(b);
    return (v & 0x40) ? -big : big;
}

static dtr_placement_t placement(fuzz_bytes_t *b) {
    unsigned v = fuzz_byte(b);
    switch (v % 4) {
    case 0:
    case 1:
        return dtr_shard((int32_t)((v >> 2) % 6) - 1); /* -1 .. 4: some out of range */
    case 2:
        return dtr_replicate();
    default: {
        dtr_placement_t p = dtr_partial(DTR_REDUCE_SUM);
        p.op = (dtr_reduce_op_t)((v >> 2) % (DTR_REDUCE_OP_LAST + 1)); /* one bad op */
        return p;
    }
    }
}

/* torch.chunk: pieces of ceil(len / n), the last ones short or empty. */
static void chunk(int64_t len, int64_t n, int64_t k, int64_t *size, int64_t *off) {
    int64_t c = (len + n - 1) / n;
    int64_t o = c * k < len ? c * k : len;
    *off = o;
    *size = len - o < c ? len - o : c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_bytes_t b = {data, size};
    int mdims = 1 + (int)(fuzz_byte(&b) % 3);
    int64_t msize[3];
    for (int i = 0; i < mdims; i++) msize[i] = 1 + fuzz_byte(&b) % 5;
    int ndim = (int)(fuzz_byte(&b) % 4);
    int64_t shape[3] = {0};
    for (int d = 0; d < ndim; d++) shape[d] = dim_size(&b);
    dtr_placement_t pl[3];
    for (int i = 0; i < mdims; i++) pl[i] = placement(&b);
    dtr_dtype_t dtype = (dtr_dtype_t)(fuzz_byte(&b) % (DTR_DTYPE_LAST + 1));

    dtr_mesh_t *mesh = NULL;
    FUZZ_ASSERT(dtr_mesh_create(mdims, msize, NULL, 0, &mesh) == DTR_OK, "mesh_create");
    dtr_spec_t spec, keep;
    memset(&spec, 0x3c, sizeof spec);
    keep = spec;
    dtr_status_t st = dtr_spec_init(&spec, mesh, pl, mdims, shape, ndim, dtype);
    if (st != DTR_OK) {
        fuzz_check_error(st);
        FUZZ_ASSERT(memcmp(&spec, &keep, sizeof spec) == 0, "spec written on error");
        dtr_mesh_destroy(mesh);
        return 0;
    }
    const dtr_dtype_info_t *info = dtr_dtype_info(dtype);
    FUZZ_ASSERT(info != NULL, "accepted a bad dtype");
    /* negative shard dims count from the end (Shard(-1) is the last dim), stored normalised */
    for (int i = 0; i < mdims; i++) {
        FUZZ_ASSERT(pl[i].kind != DTR_SHARD || (pl[i].dim >= -ndim && pl[i].dim < ndim),
                    "accepted shard dim %d of a %d-d tensor", pl[i].dim, ndim);
        if (pl[i].kind == DTR_SHARD && pl[i].dim < 0) pl[i].dim += ndim;
        FUZZ_ASSERT(dtr_placement_equal(pl[i], spec.placements[i]), "stored placement %d", i);
    }
    bool small = true;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        FUZZ_ASSERT(shape[d] >= 0, "accepted a negative dim");
        small = small && shape[d] <= 12;
        numel *= small ? shape[d] : 1;
    }
    int64_t total = 0, replicas = 1;
    for (int i = 0; i < mdims; i++)
        if (pl[i].kind != DTR_SHARD) replicas *= msize[i];
    int64_t nranks = dtr_mesh_nranks(mesh);
    for (int r = 0; r < nranks; r++) {
        int64_t coord[3];
        FUZZ_ASSERT(dtr_mesh_coord(mesh, r, coord) == DTR_OK, "coord");
        dtr_layout_t lay;
        FUZZ_ASSERT(dtr_spec_layout(&spec, r, &lay) == DTR_OK, "layout of rank %d", r);
        int64_t n = 1;
        for (int d = 0; d < ndim; d++) {
            int64_t len = shape[d], off = 0;
            for (int i = 0; i < mdims; i++) {
                if (pl[i].kind != DTR_SHARD || pl[i].dim != d) continue;
                int64_t s, o;
                chunk(len, msize[i], coord[i], &s, &o);
                off += o;
                len = s;
            }
            if (len == 0) off = shape[d]; /* DTensor: an empty shard sits at the global length */
            FUZZ_ASSERT(lay.local_shape[d] == len && lay.global_offset[d] == off,
                        "rank %d dim %d: layout %lld@%lld, reference %lld@%lld", r, d,
                        (long long)lay.local_shape[d], (long long)lay.global_offset[d],
                        (long long)len, (long long)off);
            n *= small ? len : 1;
        }
        if (small) {
            FUZZ_ASSERT(lay.numel == n && lay.bytes == n * info->size, "rank %d numel", r);
            total += n;
        }
    }
    if (small)
        FUZZ_ASSERT(total == numel * replicas, "blocks cover %lld elements, want %lld x %lld",
                    (long long)total, (long long)numel, (long long)replicas);
    dtr_mesh_destroy(mesh);
    return 0;
}
