/*
 * Proof of delivery (executor.h): a 64-bit digest of a whole tensor that does not depend on
 * its layout, from the blocks where they lie. Each element adds dtr_digest_mix(its flat
 * index, its bytes) into a sum mod 2^64, counted once: on a Replicate mesh dim only the
 * member at coordinate 0 adds its block. The ranks' partial sums then add up in one small
 * all-reduce, as four 16-bit limbs in int64 so that no sum overflows, whatever the backend.
 */
#include <stdio.h>
#include <string.h>

#include "dtensor/mesh.h"
#include "redistribute/executor/internal.h"

/* MurmurHash3's 64-bit finalizer. */
static inline uint64_t dtr__fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

static inline uint64_t dtr__mix(uint64_t index, uint64_t lo, uint64_t hi) {
    return dtr__fmix64(dtr__fmix64(index + 0x9e3779b97f4a7c15ull) ^ lo ^
                       (hi * 0xc2b2ae3d27d4eb4full));
}

uint64_t dtr_digest_mix(uint64_t index, uint64_t lo, uint64_t hi) { return dtr__mix(index, lo, hi); }

/* The sum over one row of n elements of `size` bytes at p, the first at flat index `base`.
 * One loop per size, so that each element is one load (x86-64 and the other targets dtr
 * builds for are little-endian). */
static uint64_t dtr__digest_row(const unsigned char *p, int size, uint64_t base, int64_t n) {
    uint64_t sum = 0;
#define DTR__ROW(T)                                                                         \
    for (int64_t j = 0; j < n; j++) {                                                       \
        T v;                                                                                \
        memcpy(&v, p + j * (int64_t)sizeof v, sizeof v);                                    \
        sum += dtr__mix(base + (uint64_t)j, (uint64_t)v, 0);                         \
    }
    switch (size) {
    case 1: DTR__ROW(uint8_t) break;
    case 2: DTR__ROW(uint16_t) break;
    case 4: DTR__ROW(uint32_t) break;
    case 8: DTR__ROW(uint64_t) break;
    default: /* 16: complex128, two words */
        for (int64_t j = 0; j < n; j++) {
            uint64_t w[2];
            memcpy(w, p + j * 16, 16);
            sum += dtr__mix(base + (uint64_t)j, w[0], w[1]);
        }
    }
#undef DTR__ROW
    return sum;
}

/* The sum over one block's elements (layout l of spec's tensor, bytes at p). */
static uint64_t dtr__digest_block(const dtr_spec_t *spec, const dtr_layout_t *l,
                                  const unsigned char *p) {
    int size = dtr_dtype_info(spec->dtype)->size, nd = spec->ndim;
    if (l->numel == 0) return 0;
    int64_t inner = nd > 0 ? l->local_shape[nd - 1] : 1, rows = l->numel / inner;
    int64_t stride[DTR_MAX_TENSOR_DIMS], at[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t d = nd - 1, s = 1; d >= 0; d--) {
        stride[d] = s;
        s *= spec->shape[d];
    }
    uint64_t sum = 0;
    for (int64_t r = 0; r < rows; r++, p += inner * size) {
        uint64_t base = 0; /* the flat index of this row's first element */
        for (int d = 0; d < nd; d++)
            base += (uint64_t)((l->global_offset[d] + (d == nd - 1 ? 0 : at[d])) * stride[d]);
        sum += dtr__digest_row(p, size, base, inner);
        for (int d = nd - 2; d >= 0 && ++at[d] == l->local_shape[d]; d--) at[d] = 0;
    }
    return sum;
}

dtr_status_t dtr_digest_local(const dtr_spec_t *spec, int rank, const void *local, int64_t bytes,
                              uint64_t *partial) {
    DTR_CHECK_PTR(spec, __func__);
    DTR_CHECK_PTR(partial, __func__);
    for (int i = 0; i < dtr_mesh_ndims(spec->mesh); i++)
        if (spec->placements[i].kind == DTR_PARTIAL)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "spec: a Partial placement (mesh dim %d) has no values to digest "
                              "until it is reduced", i);
    dtr_layout_t l;
    DTR_CHECK(dtr_spec_layout(spec, rank, &l));
    if (bytes != l.bytes)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "bytes: %lld, but rank %d's block of this spec holds %lld",
                          (long long)bytes, rank, (long long)l.bytes);
    if (local == NULL && l.bytes > 0)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "local: must not be NULL");
    int64_t coord[DTR_MAX_MESH_DIMS];
    DTR_CHECK(dtr_mesh_coord(spec->mesh, rank, coord));
    for (int i = 0; i < dtr_mesh_ndims(spec->mesh); i++)
        if (spec->placements[i].kind == DTR_REPLICATE && coord[i] != 0) {
            *partial = 0; /* (a replica: the member at coordinate 0 counts it) */
            return DTR_OK;
        }
    *partial = dtr__digest_block(spec, &l, local);
    return DTR_OK;
}

dtr_status_t dtr_digest(dtr_context_t *ctx, const dtr_spec_t *spec, const void *local,
                        int64_t bytes, uint64_t *out) {
    DTR_CHECK_PTR(ctx, __func__);
    DTR_CHECK_PTR(spec, __func__);
    DTR_CHECK_PTR(out, __func__);
    int64_t coord[DTR_MAX_MESH_DIMS];
    if (dtr_mesh_coord(spec->mesh, ctx->rank, coord) != DTR_OK) return DTR_OK; /* not on it */
    unsigned dims = (1u << dtr_mesh_ndims(spec->mesh)) - 1;
    uint64_t partial = 0;
    dtr_status_t st = strcmp(dtr_context_memory(ctx), "host") != 0
                          ? dtr__error(DTR_ERR_UNSUPPORTED, __func__,
                                       "ctx moves %s memory; the digest reads host memory",
                                       dtr_context_memory(ctx))
                          : dtr_digest_local(spec, ctx->rank, local, bytes, &partial);
    if (st != DTR_OK) { /* every rank fails with it (dtr_refuse), in step for the next call */
        char msg[400];
        snprintf(msg, sizeof msg, "%s", dtr__last_detail());
        dtr_refuse(ctx, spec->mesh, dims, NULL, st, msg);
        return dtr__error(st, __func__, "%s", msg);
    }
    int64_t limbs[4], sums[4];
    for (int k = 0; k < 4; k++) limbs[k] = (int64_t)((partial >> (16 * k)) & 0xffff);
    DTR_CHECK_AS(dtr_all_reduce(ctx, spec->mesh, dims, limbs, sums, 4, DTR_I64, DTR_REDUCE_SUM),
                 __func__);
    uint64_t digest = 0;
    for (int k = 0; k < 4; k++) digest += (uint64_t)sums[k] << (16 * k);
    *out = digest;
    return DTR_OK;
}
