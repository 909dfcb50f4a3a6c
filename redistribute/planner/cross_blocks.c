/*
 * The blocks of a layout without Partial dims, for changes between meshes (cross.c): each
 * mesh dim shards one tensor dim at most, so a layout's blocks are the products of per-dim
 * intervals. The distinct intervals along each dim come from the mesh's ranks once; a
 * block's class is the mixed-radix index of its intervals; a target block meets the blocks
 * whose intervals meet its own on every dim, found by binary search. The cost grows with
 * the ranks, never with the elements.
 */
#include <stdlib.h>
#include <string.h>

#include "dtensor/mesh.h"
#include "redistribute/planner/internal.h"

#define DTR__FUNC "dtr_cross_plan_create"

void dtr__xblocks_free(dtr__xblocks_t *b) {
    for (int d = 0; d < DTR_MAX_TENSOR_DIMS; d++) {
        free(b->lo[d]);
        free(b->len[d]);
    }
    free(b->first);
    free(b->holder);
    memset(b, 0, sizeof *b);
}

/* Steps coord through the mesh row-major; false after the last. */
bool dtr__xcoord_next(const dtr_mesh_t *mesh, int64_t *coord) {
    for (int i = dtr_mesh_ndims(mesh) - 1; i >= 0; i--) {
        if (++coord[i] < dtr_mesh_size(mesh, i)) return true;
        coord[i] = 0;
    }
    return false;
}

static int dtr__cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Index of the interval starting at lo along dim d (it exists). */
static int64_t dtr__interval(const dtr__xblocks_t *b, int d, int64_t lo) {
    int64_t a = 0, z = b->n[d] - 1;
    while (a < z) {
        int64_t m = (a + z) / 2;
        if (b->lo[d][m] < lo)
            a = m + 1;
        else
            z = m;
    }
    return a;
}

/* The class (mixed-radix index of its intervals) of a non-empty block. */
static int64_t dtr__class_of(const dtr__xblocks_t *b, const dtr_layout_t *l) {
    int64_t c = 0;
    for (int d = 0; d < b->ndim; d++) c = c * b->n[d] + dtr__interval(b, d, l->global_offset[d]);
    return c;
}

/* The distinct non-empty intervals along each dim of spec's blocks, over every rank. */
static dtr_status_t dtr__intervals(const dtr_spec_t *spec, dtr__xblocks_t *b) {
    int64_t nranks = dtr_mesh_nranks(spec->mesh), coord[DTR_MAX_MESH_DIMS] = {0};
    b->ndim = spec->ndim;
    int64_t *starts = malloc(sizeof *starts * (size_t)(nranks > 0 ? nranks : 1));
    if (starts == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld ranks", (long long)nranks);
    dtr_status_t st = DTR_OK;
    for (int d = 0; d < spec->ndim && st == DTR_OK; d++) {
        int64_t k = 0;
        memset(coord, 0, sizeof coord);
        do {
            dtr_layout_t l;
            dtr_spec_layout_at(spec, coord, &l);
            if (l.numel > 0) starts[k++] = l.global_offset[d];
        } while (dtr__xcoord_next(spec->mesh, coord));
        qsort(starts, (size_t)k, sizeof *starts, dtr__cmp_i64);
        int64_t m = 0;
        for (int64_t j = 0; j < k; j++)
            if (m == 0 || starts[j] != starts[m - 1]) starts[m++] = starts[j];
        b->n[d] = m;
        b->lo[d] = malloc(sizeof *b->lo[d] * (size_t)(m > 0 ? m : 1));
        b->len[d] = malloc(sizeof *b->len[d] * (size_t)(m > 0 ? m : 1));
        if (b->lo[d] == NULL || b->len[d] == NULL) {
            st = dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "intervals of dim %d", d);
            break;
        }
        /* the intervals of a layout tile the dim: each ends where the next starts */
        for (int64_t j = 0; j < m; j++) {
            b->lo[d][j] = starts[j];
            b->len[d][j] = (j + 1 < m ? starts[j + 1] : spec->shape[d]) - starts[j];
        }
    }
    free(starts);
    return st;
}

/* Every distinct block of spec and its holders (ranks of its mesh, ascending). */
dtr_status_t dtr__xblocks(const dtr_spec_t *spec, dtr__xblocks_t *b) {
    memset(b, 0, sizeof *b);
    DTR_CHECK(dtr__intervals(spec, b));
    int64_t nranks = dtr_mesh_nranks(spec->mesh), coord[DTR_MAX_MESH_DIMS] = {0};
    b->nclasses = 1;
    for (int d = 0; d < spec->ndim; d++) b->nclasses *= b->n[d];
    b->first = calloc((size_t)b->nclasses + 1, sizeof *b->first);
    b->holder = malloc(sizeof *b->holder * (size_t)(nranks > 0 ? nranks : 1));
    int64_t *cls = malloc(sizeof *cls * (size_t)(nranks > 0 ? nranks : 1));
    if (b->first == NULL || b->holder == NULL || cls == NULL) {
        free(cls);
        dtr__xblocks_free(b);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "blocks of %lld ranks", (long long)nranks);
    }
    /* counting sort of the ranks by class: counts, starts, then each rank in its place */
    int64_t p = 0;
    do {
        dtr_layout_t l;
        dtr_spec_layout_at(spec, coord, &l);
        cls[p] = l.numel > 0 ? dtr__class_of(b, &l) : -1;
        if (cls[p] >= 0) b->first[cls[p] + 1]++;
        p++;
    } while (dtr__xcoord_next(spec->mesh, coord));
    for (int64_t c = 0; c < b->nclasses; c++) b->first[c + 1] += b->first[c];
    int64_t *at = calloc((size_t)b->nclasses + 1, sizeof *at);
    if (at == NULL) {
        free(cls);
        dtr__xblocks_free(b);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "blocks of %lld ranks", (long long)nranks);
    }
    memset(coord, 0, sizeof coord);
    p = 0;
    do {
        if (cls[p] >= 0) dtr_mesh_rank_at(spec->mesh, coord, &b->holder[b->first[cls[p]] + at[cls[p]]++]);
        p++;
    } while (dtr__xcoord_next(spec->mesh, coord));
    for (int64_t c = 0; c < b->nclasses; c++) /* ascending ranks: the same order everywhere */
        qsort(b->holder + b->first[c], (size_t)(b->first[c + 1] - b->first[c]), sizeof *b->holder,
              dtr__int_cmp);
    free(at);
    free(cls);
    return DTR_OK;
}

static dtr_status_t dtr__piece_push(dtr__xpieces_t *p, const dtr__xpiece_t *x) {
    if (p->n == p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 64;
        dtr__xpiece_t *v = realloc(p->v, sizeof *v * (size_t)cap);
        if (v == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld messages", (long long)cap);
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = *x;
    return DTR_OK;
}

/* The first interval along d that ends after x (the one holding x). */
static int64_t dtr__interval_at(const dtr__xblocks_t *b, int d, int64_t x) {
    int64_t a = 0, z = b->n[d];
    while (a < z) {
        int64_t m = (a + z) / 2;
        if (b->lo[d][m] + b->len[d][m] <= x)
            a = m + 1;
        else
            z = m;
    }
    return a;
}

/* The boxes of target block t (on rank `to`) that the source blocks meet, one per block. */
dtr_status_t dtr__xtarget_pieces(const dtr__xblocks_t *b, int tensor, int to,
                                 const dtr_layout_t *t, dtr__xpieces_t *out) {
    int nd = b->ndim;
    int64_t first[DTR_MAX_TENSOR_DIMS], last[DTR_MAX_TENSOR_DIMS], at[DTR_MAX_TENSOR_DIMS];
    for (int d = 0; d < nd; d++) {
        first[d] = at[d] = dtr__interval_at(b, d, t->global_offset[d]);
        last[d] = dtr__interval_at(b, d, t->global_offset[d] + t->local_shape[d] - 1);
    }
    for (;;) {
        dtr__xpiece_t x = {.tensor = tensor, .from = -1, .to = to, .cls = 0, .numel = 1};
        for (int d = 0; d < nd; d++) {
            int64_t lo = b->lo[d][at[d]], hi = lo + b->len[d][at[d]];
            int64_t tlo = t->global_offset[d], thi = tlo + t->local_shape[d];
            x.lo[d] = lo > tlo ? lo : tlo;
            x.ext[d] = (hi < thi ? hi : thi) - x.lo[d];
            x.numel *= x.ext[d];
            x.cls = x.cls * b->n[d] + at[d];
        }
        DTR_CHECK(dtr__piece_push(out, &x));
        int d = nd - 1;
        for (; d >= 0; d--) {
            if (++at[d] <= last[d]) break;
            at[d] = first[d];
        }
        if (d < 0) return DTR_OK;
    }
}

bool dtr__xholds(const dtr__xblocks_t *b, int64_t cls, int rank) {
    const int *h = b->holder + b->first[cls];
    return bsearch(&rank, h, (size_t)(b->first[cls + 1] - b->first[cls]), sizeof *h,
                   dtr__int_cmp) != NULL;
}

/* How many boxes the blocks of b cut target block t into (without making them). */
int64_t dtr__xcount_pieces(const dtr__xblocks_t *b, const dtr_layout_t *t) {
    int64_t n = 1;
    for (int d = 0; d < b->ndim; d++)
        n *= dtr__interval_at(b, d, t->global_offset[d] + t->local_shape[d] - 1) -
             dtr__interval_at(b, d, t->global_offset[d]) + 1;
    return n;
}

dtr_status_t dtr__xblocks_part(const dtr_spec_t *src, dtr__xblocks_t *b, int *parts) {
    const dtr_mesh_t *mesh = src->mesh;
    int64_t coord[DTR_MAX_MESH_DIMS] = {0}, np = 1, top = 0, nh = b->first[b->nclasses];
    for (int i = 0; i < dtr_mesh_ndims(mesh); i++)
        if (src->placements[i].kind == DTR_PARTIAL) np *= dtr_mesh_size(mesh, i);
    do {
        int r;
        dtr_mesh_rank_at(mesh, coord, &r);
        if (r > top) top = r;
    } while (dtr__xcoord_next(mesh, coord));
    int *part = malloc(sizeof *part * (size_t)(top + 1));
    int *holder = malloc(sizeof *holder * (size_t)(nh > 0 ? nh : 1));
    int64_t *first = calloc((size_t)(b->nclasses * np + 1), sizeof *first);
    if (part == NULL || holder == NULL || first == NULL) {
        free(part), free(holder), free(first);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "the addends of %lld blocks",
                          (long long)b->nclasses);
    }
    memset(coord, 0, sizeof coord);
    do { /* each rank's addend: its coordinate over the Partial dims, row-major */
        int r, k = 0;
        dtr_mesh_rank_at(mesh, coord, &r);
        for (int i = 0; i < dtr_mesh_ndims(mesh); i++)
            if (src->placements[i].kind == DTR_PARTIAL)
                k = k * (int)dtr_mesh_size(mesh, i) + (int)coord[i];
        part[r] = k;
    } while (dtr__xcoord_next(mesh, coord));
    for (int64_t c = 0; c < b->nclasses; c++) /* a stable split: ascending within each */
        for (int64_t h = b->first[c]; h < b->first[c + 1]; h++)
            first[c * np + part[b->holder[h]] + 1]++;
    for (int64_t c = 0; c < b->nclasses * np; c++) first[c + 1] += first[c];
    int64_t *at = calloc((size_t)(b->nclasses * np + 1), sizeof *at);
    if (at == NULL) {
        free(part), free(holder), free(first);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "the addends");
    }
    for (int64_t c = 0; c < b->nclasses; c++)
        for (int64_t h = b->first[c]; h < b->first[c + 1]; h++) {
            int64_t k = c * np + part[b->holder[h]];
            holder[first[k] + at[k]++] = b->holder[h];
        }
    free(at);
    free(part);
    free(b->first);
    free(b->holder);
    b->first = first;
    b->holder = holder;
    b->nclasses *= np;
    *parts = (int)np;
    return DTR_OK;
}

dtr_status_t dtr__xsplit_parts(dtr__xpieces_t *ps, int64_t from, int parts) {
    int64_t end = ps->n;
    for (int64_t k = from; k < end; k++) {
        ps->v[k].cls *= parts;
        ps->v[k].part = 0;
        for (int j = 1; j < parts; j++) {
            dtr__xpiece_t x = ps->v[k];
            x.cls += j;
            x.part = j;
            DTR_CHECK(dtr__piece_push(ps, &x));
        }
    }
    return DTR_OK;
}

dtr_status_t dtr__xshare(const dtr__xblocks_t *b, dtr__xpieces_t *ps, int64_t item,
                         int64_t min_bytes) {
    int64_t n = ps->n, *lack = calloc((size_t)b->nclasses + 1, sizeof *lack);
    if (lack == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "%lld blocks", (long long)b->nclasses);
    for (int64_t i = 0; i < n; i++)
        if (!dtr__xholds(b, ps->v[i].cls, ps->v[i].to)) lack[ps->v[i].cls] += ps->v[i].numel;
    dtr_status_t st = DTR_OK;
    for (int64_t i = 0; i < n && st == DTR_OK; i++) {
        dtr__xpiece_t x = ps->v[i];
        int64_t h = b->first[x.cls + 1] - b->first[x.cls];
        if (lack[x.cls] == 0 || x.numel == 0 || dtr__xholds(b, x.cls, x.to)) continue;
        /* its part of the block's lack times the holders: the holders' shares it makes */
        __int128 want = ((__int128)x.numel * h + lack[x.cls] - 1) / lack[x.cls];
        if (want < 2) continue;
        int d = 0;
        while (d < b->ndim && x.ext[d] < 2) d++;
        if (d == b->ndim) continue;
        int64_t len = x.ext[d], row = x.numel / len, s = want > len ? len : (int64_t)want;
        if (x.numel * item < s * min_bytes) continue; /* (a piece would not pay its message) */
        for (int64_t j = 0; j < s && st == DTR_OK; j++) {
            int64_t size, off;
            dtr_chunk(len, s, j, &size, &off);
            dtr__xpiece_t y = x;
            y.lo[d] = x.lo[d] + off;
            y.ext[d] = size;
            y.numel = row * size;
            if (j == 0)
                ps->v[i] = y;
            else
                st = dtr__piece_push(ps, &y);
        }
    }
    free(lack);
    return st;
}

dtr_reduce_op_t dtr__xpartial_op(const dtr_spec_t *spec) {
    for (int i = 0; i < dtr_mesh_ndims(spec->mesh); i++)
        if (spec->placements[i].kind == DTR_PARTIAL) return spec->placements[i].op;
    return DTR_REDUCE_SUM;
}
