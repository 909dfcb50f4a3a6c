/*
 * A range of a box as boxes: elements [u, v) of a box with extents ext (row-major) are, in
 * order, at most 2 nd - 1 boxes, each a run of consecutive elements of the range (a partial
 * row, then partial planes up to the largest whole slab, then back down). The CUDA space
 * copies a range (the balanced reduce_exchange's parts) as these box copies, so a range
 * moves at the box kernels' rate (16-byte units, whole rows) instead of element by element.
 * Plain C, no CUDA: tests/backends/cuda/range_boxes_test.c checks it on any machine.
 */
#ifndef DTR_BACKENDS_CUDA_RANGE_BOXES_H
#define DTR_BACKENDS_CUDA_RANGE_BOXES_H

#include <stdint.h>

#define DTR_RANGE_BOXES_MAX 64 /* 2 nd - 1 for nd up to 32 */

typedef struct {
    int64_t lo[32];  /* corner, relative to the box */
    int64_t ext[32]; /* extents */
    int64_t at;      /* its first element's place in the range (0 for the first box) */
} dtr_range_box_t;

/* Fills out[] with the boxes of elements [u, v) (0 <= u, v <= the box's count, nd 1..32)
 * and returns how many (0 when v <= u). */
static inline int dtr_range_boxes(int nd, const int64_t *ext, int64_t u, int64_t v,
                                  dtr_range_box_t *out) {
    int64_t slab[32]; /* elements of one step along dim d: the product of the later extents */
    int n = 0;
    if (v <= u) return 0;
    slab[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) slab[d] = slab[d + 1] * ext[d + 1];
    for (int64_t pos = u; pos < v;) {
        int j = 0; /* the outermost dim whose whole steps start at pos and fit before v */
        while (pos % slab[j] != 0 || pos + slab[j] > v) j++;
        dtr_range_box_t *b = &out[n++];
        for (int d = 0; d < nd; d++) {
            b->lo[d] = d <= j ? pos / slab[d] % ext[d] : 0;
            b->ext[d] = d < j ? 1 : ext[d];
        }
        int64_t steps = (v - pos) / slab[j];
        if (steps > ext[j] - b->lo[j]) steps = ext[j] - b->lo[j];
        b->ext[j] = steps;
        b->at = pos - u;
        pos += steps * slab[j];
    }
    return n;
}

#endif
