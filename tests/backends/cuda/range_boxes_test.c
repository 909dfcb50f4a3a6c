/* backends/cuda/range_boxes.h: the boxes of a range cover it exactly, in order. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/cuda/range_boxes.h"

/* Element e's place (row-major) in a box of extents ext. */
static int64_t flat_of(int nd, const int64_t *ext, const int64_t *idx) {
    int64_t f = 0;
    for (int d = 0; d < nd; d++) f = f * ext[d] + idx[d];
    return f;
}

/* Walks every box's elements in row-major order: each must be the next of the range. */
static int cover(int nd, const int64_t *ext, int64_t u, int64_t v, char *why, size_t n) {
    dtr_range_box_t boxes[DTR_RANGE_BOXES_MAX];
    int nb = dtr_range_boxes(nd, ext, u, v, boxes);
    if (nb > 2 * nd - 1 && v > u) {
        snprintf(why, n, "%d boxes, more than 2 nd - 1", nb);
        return 0;
    }
    int64_t next = u;
    for (int i = 0; i < nb; i++) {
        const dtr_range_box_t *b = &boxes[i];
        if (b->at != next - u) {
            snprintf(why, n, "box %d at %lld, want %lld", i, (long long)b->at,
                     (long long)(next - u));
            return 0;
        }
        int64_t idx[32] = {0}, count = 1;
        for (int d = 0; d < nd; d++) {
            if (b->ext[d] < 1 || b->lo[d] + b->ext[d] > ext[d]) {
                snprintf(why, n, "box %d dim %d: lo %lld ext %lld outside %lld", i, d,
                         (long long)b->lo[d], (long long)b->ext[d], (long long)ext[d]);
                return 0;
            }
            count *= b->ext[d];
        }
        for (int64_t k = 0; k < count; k++) {
            int64_t rem = k, at[32];
            for (int d = nd - 1; d >= 0; d--) {
                idx[d] = rem % b->ext[d];
                rem /= b->ext[d];
                at[d] = b->lo[d] + idx[d];
            }
            if (flat_of(nd, ext, at) != next) {
                snprintf(why, n, "box %d element %lld is %lld, want %lld", i, (long long)k,
                         (long long)flat_of(nd, ext, at), (long long)next);
                return 0;
            }
            next++;
        }
    }
    if (next != (v > u ? v : u)) {
        snprintf(why, n, "covered up to %lld, want %lld", (long long)next, (long long)v);
        return 0;
    }
    return 1;
}

Test(range_boxes, whole_box_is_one_box) {
    int64_t ext[3] = {4, 5, 6};
    dtr_range_box_t b[DTR_RANGE_BOXES_MAX];
    cr_assert_eq(dtr_range_boxes(3, ext, 0, 120, b), 1);
    cr_assert(b[0].lo[0] == 0 && b[0].ext[0] == 4 && b[0].ext[1] == 5 && b[0].ext[2] == 6);
}

Test(range_boxes, worst_case_and_exact_steps) {
    int64_t ext[3] = {4, 5, 6};
    dtr_range_box_t b[DTR_RANGE_BOXES_MAX];
    /* from element 1 (row 0, col 1) to 118: partial row, rows, planes, rows, partial row */
    cr_assert_eq(dtr_range_boxes(3, ext, 1, 119, b), 5);
    cr_assert(b[0].lo[2] == 1 && b[0].ext[2] == 5 && b[0].ext[1] == 1 && b[0].at == 0);
    cr_assert(b[1].lo[1] == 1 && b[1].ext[1] == 4 && b[1].ext[2] == 6 && b[1].at == 5);
    cr_assert(b[2].lo[0] == 1 && b[2].ext[0] == 2 && b[2].at == 29);
    cr_assert(b[3].lo[0] == 3 && b[3].ext[1] == 4 && b[3].at == 89);
    cr_assert(b[4].lo[1] == 4 && b[4].ext[2] == 5 && b[4].at == 113);
    cr_assert_eq(dtr_range_boxes(3, ext, 7, 7, b), 0);
}

Test(range_boxes, random_ranges_cover_exactly) {
    unsigned seed = 20261128;
    srand(seed);
    char why[200];
    for (int c = 0; c < 20000; c++) {
        int nd = 1 + rand() % 5;
        int64_t ext[32], total = 1;
        for (int d = 0; d < nd; d++) {
            ext[d] = 1 + rand() % 7;
            total *= ext[d];
        }
        int64_t u = rand() % (total + 1), v = rand() % (total + 1);
        if (u > v) {
            int64_t t = u;
            u = v;
            v = t;
        }
        if (!cover(nd, ext, u, v, why, sizeof why))
            cr_assert_fail("seed %u case %d: nd %d ext %lldx%lldx%lld.. [%lld, %lld): %s", seed, c,
                     nd, (long long)ext[0], (long long)(nd > 1 ? ext[1] : 0),
                     (long long)(nd > 2 ? ext[2] : 0), (long long)u, (long long)v, why);
    }
}
