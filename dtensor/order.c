/*
 * Shard orders: in which order the mesh dims sharding one tensor dim split it (PyTorch's
 * DTensorSpec.shard_order), their checks and normal form, and PyTorch's older spelling,
 * _StridedShard(dim, split_factor), turned into orders.
 *
 * An order is written on the placements: the mesh dims sharding tensor dim d split it in
 * increasing placements[i].order, ties in mesh-dim order. A spec stores them normalised:
 * all 0 when that is mesh-dim order, else each mesh dim's index in the sequence.
 */
#include <string.h>

#include "core/common.h"
#include "dtensor/order.h"

int dtr__shard_seq(const dtr_placement_t *pl, int m, int d, int *dims) {
    int n = 0;
    for (int i = 0; i < m; i++) {
        if (pl[i].kind != DTR_SHARD || pl[i].dim != d) continue;
        /* Insertion by (order, mesh dim): i is the largest mesh dim so far. */
        int k = n++;
        while (k > 0 && pl[dims[k - 1]].order > pl[i].order) {
            dims[k] = dims[k - 1];
            k--;
        }
        dims[k] = i;
    }
    return n;
}

void dtr__orders_normalize(dtr_placement_t *pl, int m, const int64_t *msize) {
    bool done[DTR_MAX_MESH_DIMS] = {false};
    for (int i = 0; i < m; i++) {
        if (pl[i].kind != DTR_SHARD) pl[i].order = 0;
        pl[i].split_factor = 0;
    }
    for (int i = 0; i < m; i++) {
        if (pl[i].kind != DTR_SHARD || done[i]) continue;
        int dims[DTR_MAX_MESH_DIMS];
        int n = dtr__shard_seq(pl, m, pl[i].dim, dims);
        bool ascending = true;
        int last = -1;
        for (int k = 0; k < n; k++) {
            if (msize != NULL && msize[dims[k]] == 1) continue; /* (splits nothing) */
            ascending = ascending && last < dims[k];
            last = dims[k];
        }
        for (int k = 0; k < n; k++) {
            pl[dims[k]].order = ascending ? 0 : k;
            done[dims[k]] = true;
        }
    }
}

bool dtr__orders_default(const dtr_placement_t *pl, int m) {
    for (int i = 0; i < m; i++)
        if (pl[i].kind == DTR_SHARD && pl[i].order != 0) return false;
    return true;
}

dtr_status_t dtr__orders_check(const dtr_placement_t *pl, int m, const char *func) {
    for (int i = 0; i < m; i++) {
        if (pl[i].kind != DTR_SHARD) continue;
        int dims[DTR_MAX_MESH_DIMS];
        int n = dtr__shard_seq(pl, m, pl[i].dim, dims);
        bool zero = true;
        unsigned seen = 0;
        for (int k = 0; k < n; k++) {
            int o = pl[dims[k]].order;
            zero = zero && o == 0;
            if (o >= 0 && o < n) seen |= 1u << o;
        }
        if (!zero && seen != (1u << n) - 1)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "placements[%d]: S(%d)[%d]: the %d mesh dims sharding tensor dim "
                              "%d need the orders 0..%d, each once (or none)",
                              i, (int)pl[i].dim, (int)pl[i].order, n, (int)pl[i].dim, n - 1);
    }
    return DTR_OK;
}

/* ---- _StridedShard ---------------------------------------------------------------------- */

/* PyTorch's _maybe_convert_StridedShard_to_shard_order for one tensor dim: from the last
 * mesh dim to the first, each goes where the mesh dims already placed before it make up its
 * split factor. False when no place does. */
static bool dtr__strided_seq(const dtr_mesh_t *mesh, const dtr_placement_t *pl, int m, int d,
                             int *seq, int *n) {
    *n = 0;
    for (int i = m - 1; i >= 0; i--) {
        if (pl[i].kind != DTR_SHARD || pl[i].dim != d) continue;
        int64_t sf = pl[i].split_factor > 1 ? pl[i].split_factor : 1, acc = 1;
        int at = -1;
        for (int k = 0; k <= *n; k++) {
            if (acc == sf) {
                at = k;
                break;
            }
            if (k < *n) acc *= dtr_mesh_size(mesh, seq[k]);
        }
        if (at < 0) return false;
        memmove(seq + at + 1, seq + at, (size_t)(*n - at) * sizeof *seq);
        seq[at] = i;
        (*n)++;
    }
    return true;
}

/* An ordered list of index intervals [lo, hi): the elements one rank holds of a tensor dim
 * under _StridedShard's semantics (it can be strided). */
#define DTR__IV_MAX 4096
typedef struct {
    int n;
    int64_t lo[DTR__IV_MAX], hi[DTR__IV_MAX];
} dtr__ivs_t;

/* Appends positions [a, b) of the list `in` to `out`. False when out is full. */
static bool dtr__ivs_take(const dtr__ivs_t *in, int64_t a, int64_t b, dtr__ivs_t *out) {
    int64_t pos = 0;
    for (int k = 0; k < in->n; k++) {
        int64_t len = in->hi[k] - in->lo[k];
        int64_t u = a > pos ? a : pos, v = b < pos + len ? b : pos + len;
        pos += len;
        if (u >= v) continue;
        int64_t from = in->lo[k] + (u - (pos - len)), to = from + (v - u);
        if (out->n > 0 && out->hi[out->n - 1] == from) {
            out->hi[out->n - 1] = to;
        } else {
            if (out->n == DTR__IV_MAX) return false;
            out->lo[out->n] = from;
            out->hi[out->n++] = to;
        }
    }
    return true;
}

static int64_t dtr__ivs_len(const dtr__ivs_t *l) {
    int64_t n = 0;
    for (int k = 0; k < l->n; k++) n += l->hi[k] - l->lo[k];
    return n;
}

/* Does PyTorch's left-to-right reading of the _StridedShard placements give, at every
 * coordinate of d's sharding mesh dims, the block the order gives? False also when the
 * check would be too large (why says which). */
static bool dtr__strided_same(const dtr_mesh_t *mesh, const dtr_placement_t *strided,
                              const dtr_placement_t *ordered, int m, int d, int64_t length,
                              bool *too_large) {
    static _Thread_local dtr__ivs_t bufs[2];
    int dims[DTR_MAX_MESH_DIMS], n = 0;
    for (int i = 0; i < m; i++)
        if (strided[i].kind == DTR_SHARD && strided[i].dim == d) dims[n++] = i;
    int64_t c[DTR_MAX_MESH_DIMS] = {0};
    int seq[DTR_MAX_MESH_DIMS];
    int ns = dtr__shard_seq(ordered, m, d, seq);
    *too_large = false;
    for (;;) {
        /* PyTorch: mesh-dim order, each placement picking positions of the current list. */
        dtr__ivs_t *a = &bufs[0], *b = &bufs[1];
        a->n = 1;
        a->lo[0] = 0;
        a->hi[0] = length;
        for (int q = 0; q < n; q++) {
            int64_t sf = strided[dims[q]].split_factor > 1 ? strided[dims[q]].split_factor : 1;
            int64_t len = dtr__ivs_len(a), nch = dtr_mesh_size(mesh, dims[q]);
            b->n = 0;
            for (int64_t j = 0; j < sf; j++) {
                int64_t s1, o1, s2, o2;
                dtr_chunk(len, sf, j, &s1, &o1);
                dtr_chunk(s1, nch, c[q], &s2, &o2);
                if (!dtr__ivs_take(a, o1 + o2, o1 + o2 + s2, b)) {
                    *too_large = true;
                    return false;
                }
            }
            dtr__ivs_t *t = a;
            a = b;
            b = t;
        }
        /* The order: one contiguous block. */
        int64_t off = 0, size = length;
        for (int k = 0; k < ns; k++) {
            int q = 0;
            while (dims[q] != seq[k]) q++;
            int64_t s, o;
            dtr_chunk(size, dtr_mesh_size(mesh, seq[k]), c[q], &s, &o);
            off += o;
            size = s;
        }
        if (size == 0 ? dtr__ivs_len(a) != 0
                      : a->n != 1 || a->lo[0] != off || a->hi[0] != off + size)
            return false;
        int q = n - 1;
        for (; q >= 0; q--) {
            if (++c[q] < dtr_mesh_size(mesh, dims[q])) break;
            c[q] = 0;
        }
        if (q < 0) return true;
    }
}

dtr_status_t dtr__orders_from_strided(const dtr_mesh_t *mesh, dtr_placement_t *pl, int m,
                                      const int64_t *shape, int ndim, const char *func) {
    bool any = false;
    for (int i = 0; i < m; i++) any = any || (pl[i].kind == DTR_SHARD && pl[i].split_factor > 1);
    if (!any) return DTR_OK;
    dtr_placement_t ordered[DTR_MAX_MESH_DIMS];
    memcpy(ordered, pl, (size_t)m * sizeof *pl);
    for (int d = 0; d < ndim; d++) {
        int seq[DTR_MAX_MESH_DIMS], n;
        if (!dtr__strided_seq(mesh, pl, m, d, seq, &n)) {
            int i = 0;
            while (!(pl[i].kind == DTR_SHARD && pl[i].dim == d && pl[i].split_factor > 1)) i++;
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "placements[%d]: _S(%d, %d) is no shard order on this mesh: no "
                              "order of the mesh dims sharding tensor dim %d splits it %d ways "
                              "before mesh dim %d",
                              i, d, (int)pl[i].split_factor, d, (int)pl[i].split_factor, i);
        }
        for (int k = 0; k < n; k++) {
            ordered[seq[k]].order = k;
            ordered[seq[k]].split_factor = 0;
        }
    }
    for (int d = 0; d < ndim; d++) {
        bool too_large;
        if (dtr__strided_same(mesh, pl, ordered, m, d, shape[d], &too_large)) continue;
        if (too_large)
            return dtr__error(DTR_ERR_UNSUPPORTED, func,
                              "placements: the _StridedShard of tensor dim %d has more than %d "
                              "pieces per rank to compare with a shard order; write the order "
                              "(S(d)[k]) instead",
                              d, DTR__IV_MAX);
        char text[DTR_MAX_MESH_DIMS * DTR_PLACEMENT_TEXT_MAX];
        dtr_placement_t shown[DTR_MAX_MESH_DIMS];
        memcpy(shown, ordered, (size_t)m * sizeof *pl);
        dtr__orders_normalize(shown, m, NULL);
        dtr_placements_format(shown, m, text, sizeof text);
        return dtr__error(DTR_ERR_UNSUPPORTED, func,
                          "placements: on tensor dim %d of length %lld the _StridedShard "
                          "layout (strided pieces) is not the shard order %s; dtr holds one "
                          "block per rank",
                          d, (long long)shape[d], text);
    }
    memcpy(pl, ordered, (size_t)m * sizeof *pl);
    return DTR_OK;
}
