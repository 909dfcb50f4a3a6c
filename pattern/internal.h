/* What pattern.c and blocks.c share: walking a block's elements in row-major order. */
#ifndef DTR_PATTERN_INTERNAL_H
#define DTR_PATTERN_INTERNAL_H

#include <stdint.h>

#include "dtensor/dtensor.h"
#include "pattern/pattern.h"

/* Global row-major index of the local element at idx (local coordinates). */
static inline int64_t dtr__global(const dtr_spec_t *spec, const dtr_layout_t *l,
                                  const int64_t *idx) {
    int64_t e = 0;
    for (int d = 0; d < spec->ndim; d++) e = e * spec->shape[d] + l->global_offset[d] + idx[d];
    return e;
}

/* idx to the next local element, row-major. */
static inline void dtr__next(const dtr_layout_t *l, int64_t *idx) {
    for (int d = l->ndim - 1; d >= 0; d--) {
        if (++idx[d] < l->local_shape[d]) break;
        idx[d] = 0;
    }
}

/* The contribution index of the rank at coord: its coordinates on spec's Partial mesh
 * dims, row-major; and how many contributions there are. */
static inline int64_t dtr__contribution_index(const dtr_spec_t *spec, const int64_t *coord,
                                              int64_t *count) {
    int64_t q = 0, n = 1;
    for (int i = 0; i < dtr_mesh_ndims(spec->mesh); i++) {
        if (spec->placements[i].kind != DTR_PARTIAL) continue;
        q = q * dtr_mesh_size(spec->mesh, i) + coord[i];
        n *= dtr_mesh_size(spec->mesh, i);
    }
    if (count != NULL) *count = n;
    return q;
}

/* The blocks of dtr_fill_load: contribution q's value of element e at
 * data + (q * numel + e) * esize. */
struct dtr_fill_blocks {
    int64_t count, numel;
    size_t esize;
    dtr_dtype_t dtype;
    int ndim;
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    unsigned char *data;
};

/* The last error again under `func` (what DTR_CHECK_AS does inside the library, whose
 * dtr__error_as the installed libdtr.so keeps hidden; pattern.c). */
dtr_status_t dtr__again_as(dtr_status_t st, const char *func);

/* Element e (global, row-major) of a source without Partial mesh dims filled with fill
 * (NULL: the pattern; not DTR_FILL_GIVEN), as a real float dtype holds it (pattern.c). */
double dtr__fill_element(const dtr_fill_t *fill, dtr_dtype_t dtype, int64_t e);

#endif
