/* Ragged shards: S(d){n0,n1,...} splits a length into the given sizes instead of by the chunk
 * rule (docs/semantics.md, "Ragged shards"). The split that every layout takes, and the
 * checks dtr_spec_init makes of the sizes. */
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "dtensor/dtensor.h"
#include "dtensor/order.h"

void dtr__split_piece(dtr_placement_t p, int64_t length, int64_t n, int64_t c, int64_t *size,
                int64_t *offset) {
    if (p.nsizes == 0 || length == 0) { /* (an empty piece holds nothing, whatever the sizes) */
        dtr_chunk(length, n, c, size, offset);
        return;
    }
    int64_t off = 0;
    for (int64_t k = 0; k < c; k++) off += p.sizes[k];
    *size = p.sizes[c];
    *offset = off;
}

/* The placement as text for an error, cut to fit. */
static void dtr__shown(dtr_placement_t p, char *buf, size_t len) {
    if (dtr_placement_format(p, buf, len) == DTR_OK) return;
    char head[DTR_PLACEMENT_TEXT_MAX];
    dtr_placement_t plain = p;
    plain.nsizes = 0;
    dtr_placement_format(plain, head, sizeof head);
    snprintf(buf, len, "%s{%d sizes}", head, (int)p.nsizes);
}

/* Every length the ragged shard on mesh dim i sees (one per coordinate of the mesh dims that
 * split tensor d before it) must be the sum of its sizes, or 0 (an empty piece, which every
 * coordinate holds none of). */
static dtr_status_t dtr__ragged_sum_check(const dtr_spec_t *spec, int i, const char *func) {
    const dtr_placement_t *pl = spec->placements;
    int m = dtr_mesh_ndims(spec->mesh), d = pl[i].dim, seq[DTR_MAX_MESH_DIMS];
    int n = dtr__shard_seq(pl, m, d, seq), k = 0;
    while (seq[k] != i) k++;
    int64_t sum = 0, c[DTR_MAX_MESH_DIMS] = {0};
    for (int q = 0; q < pl[i].nsizes; q++) sum += pl[i].sizes[q];
    (void)n;
    for (;;) {
        int64_t len = spec->shape[d], size, off;
        for (int q = 0; q < k; q++) {
            dtr__split_piece(pl[seq[q]], len, dtr_mesh_size(spec->mesh, seq[q]), c[q], &size, &off);
            len = size;
        }
        if (len != sum && len != 0) { /* (an empty piece: nothing to split) */
            char text[160];
            dtr__shown(pl[i], text, sizeof text);
            if (k == 0)
                return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                                  "placements[%d]: %s: sizes sum to %lld, but tensor dim %d "
                                  "has length %lld",
                                  i, text, (long long)sum, d, (long long)spec->shape[d]);
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "placements[%d]: %s: sizes sum to %lld, but it splits pieces of "
                              "length %lld of tensor dim %d (length %lld, split first by the "
                              "mesh dims before it in its order)",
                              i, text, (long long)sum, (long long)len, d,
                              (long long)spec->shape[d]);
        }
        int q = k - 1;
        for (; q >= 0; q--) {
            if (++c[q] < dtr_mesh_size(spec->mesh, seq[q])) break;
            c[q] = 0;
        }
        if (q < 0) return DTR_OK;
    }
}

dtr_status_t dtr__ragged_check(const dtr_spec_t *spec, const char *func) {
    int m = dtr_mesh_ndims(spec->mesh);
    for (int i = 0; i < m; i++) {
        dtr_placement_t p = spec->placements[i];
        if (p.kind != DTR_SHARD || p.nsizes == 0) continue;
        int64_t ranks = dtr_mesh_size(spec->mesh, i);
        if (p.nsizes != ranks) {
            char text[160];
            dtr__shown(p, text, sizeof text);
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "placements[%d]: %s: %d sizes for mesh dim %d of %lld ranks (one "
                              "size per rank)",
                              i, text, (int)p.nsizes, i, (long long)ranks);
        }
    }
    for (int i = 0; i < m; i++)
        if (spec->placements[i].kind == DTR_SHARD && spec->placements[i].nsizes > 0)
            DTR_CHECK(dtr__ragged_sum_check(spec, i, func));
    return DTR_OK;
}

bool dtr_spec_ragged(const dtr_spec_t *spec) {
    if (spec == NULL || spec->mesh == NULL) return false;
    int m = dtr_mesh_ndims(spec->mesh);
    for (int i = 0; i < m; i++)
        if (spec->placements[i].kind == DTR_SHARD && spec->placements[i].nsizes > 0) return true;
    return false;
}
