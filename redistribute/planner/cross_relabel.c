/*
 * Relabeling a change between meshes (cross.c, opts->relabel): which rank of the
 * destination mesh B holds which of its coordinates. The ranks stay B's; their order is
 * chosen so that the destination ranks already hold (as source ranks) as many of the bytes
 * of their blocks as can be: an assignment problem, coordinates against ranks, the weight of
 * a pair the bytes of the coordinate's blocks (summed over the tensors) that the rank's
 * source blocks hold.
 *
 * Up to DTR__EXACT ranks it is solved exactly (the Hungarian method, O(n^3) on the dense
 * weights, scaled so that among the best orders the one keeping most of B's own order
 * wins). Above, greedily: the boxes by size, largest first, each giving its coordinate the
 * first free holder of its block (the coordinate's own rank first). A layout's blocks are
 * equal or disjoint, so where an order moving nothing exists every coordinate's blocks lie
 * in one block per tensor; for one tensor the greedy then fills each block's holders with
 * its coordinates and finds that order too. cross_test checks both against every
 * permutation on small meshes.
 */
#include <stdlib.h>
#include <string.h>

#include "redistribute/planner/internal.h"

#define DTR__FUNC "dtr_cross_plan_create"
#define DTR__EXACT 256

/* B's ranks by coordinate (orig) and a sorted (rank, column) index of them. */
typedef struct {
    int64_t n;
    int *orig;
    int64_t *by_rank; /* rank * 2^32 + column, ascending */
} dtr__cols_t;

static int dtr__cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The column of rank r in B, or -1. */
static int64_t dtr__col(const dtr__cols_t *c, int r) {
    int64_t a = 0, z = c->n;
    while (a < z) {
        int64_t m = (a + z) / 2;
        if ((c->by_rank[m] >> 32) < r)
            a = m + 1;
        else
            z = m;
    }
    return a < c->n && (c->by_rank[a] >> 32) == r ? (c->by_rank[a] & 0xffffffff) : -1;
}

/* Every tensor's pieces of every coordinate of B (`to` holds the coordinate's index). */
static dtr_status_t dtr__coord_pieces(const dtr_cross_plan_t *p, const dtr__xblocks_t *b,
                                      dtr__xpieces_t *ps) {
    for (int t = 0; t < p->ntensors; t++) {
        const dtr_spec_t *dst = &p->t[t].dst;
        int64_t coord[DTR_MAX_MESH_DIMS] = {0}, ci = 0;
        if (b[t].nclasses == 0) continue;
        do {
            dtr_layout_t l;
            dtr_spec_layout_at(dst, coord, &l);
            if (l.numel > 0) DTR_CHECK(dtr__xtarget_pieces(&b[t], t, (int)ci, &l, ps));
            ci++;
        } while (dtr__xcoord_next(dst->mesh, coord));
    }
    return DTR_OK;
}

/* The Hungarian method on costs a (n x n, row-major): row i's column into col[i]. */
static dtr_status_t dtr__hungarian(int64_t n, const int64_t *a, int64_t *col) {
    int64_t *u = calloc((size_t)(5 * (n + 1)), sizeof *u);
    bool *used = malloc((size_t)(n + 1));
    if (u == NULL || used == NULL) {
        free(u);
        free(used);
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "relabeling %lld ranks", (long long)n);
    }
    int64_t *v = u + (n + 1), *row = v + (n + 1), *way = row + (n + 1), *minv = way + (n + 1);
    const int64_t inf = INT64_MAX / 4;
    for (int64_t i = 1; i <= n; i++) {
        row[0] = i;
        int64_t j0 = 0;
        for (int64_t j = 0; j <= n; j++) minv[j] = inf, used[j] = false;
        do {
            used[j0] = true;
            int64_t i0 = row[j0], delta = inf, j1 = 0;
            for (int64_t j = 1; j <= n; j++) {
                if (used[j]) continue;
                int64_t cur = a[(i0 - 1) * n + (j - 1)] - u[i0] - v[j];
                if (cur < minv[j]) minv[j] = cur, way[j] = j0;
                if (minv[j] < delta) delta = minv[j], j1 = j;
            }
            for (int64_t j = 0; j <= n; j++) {
                if (used[j])
                    u[row[j]] += delta, v[j] -= delta;
                else
                    minv[j] -= delta;
            }
            j0 = j1;
        } while (row[j0] != 0);
        do {
            int64_t j1 = way[j0];
            row[j0] = row[j1];
            j0 = j1;
        } while (j0 != 0);
    }
    for (int64_t j = 1; j <= n; j++) col[row[j] - 1] = j - 1;
    free(u);
    free(used);
    return DTR_OK;
}

/* Exactly: the dense weights, then the assignment of least cost -(w (n + 1) + kept). */
static dtr_status_t dtr__exact(const dtr_cross_plan_t *p, const dtr__xblocks_t *b,
                               const dtr__xpieces_t *ps, const dtr__cols_t *c, int64_t *col) {
    int64_t n = c->n;
    int64_t *w = calloc((size_t)(n * n), sizeof *w);
    if (w == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "relabeling %lld ranks", (long long)n);
    for (int64_t k = 0; k < ps->n; k++) {
        const dtr__xpiece_t *x = &ps->v[k];
        const dtr__xblocks_t *tb = &b[x->tensor];
        int64_t bytes = x->numel * dtr_dtype_info(p->t[x->tensor].dst.dtype)->size;
        for (int64_t h = tb->first[x->cls]; h < tb->first[x->cls + 1]; h++) {
            int64_t j = dtr__col(c, tb->holder[h]);
            if (j >= 0) w[x->to * n + j] += bytes;
        }
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) w[i * n + j] = -(w[i * n + j] * (n + 1) + (i == j));
    dtr_status_t st = dtr__hungarian(n, w, col);
    free(w);
    return st;
}

static int dtr__cmp_piece_bytes(const void *a, const void *b) {
    const dtr__xpiece_t *x = a, *y = b; /* numel holds bytes here */
    if (x->numel != y->numel) return x->numel > y->numel ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    if (x->tensor != y->tensor) return x->tensor < y->tensor ? -1 : 1;
    return (x->cls > y->cls) - (x->cls < y->cls);
}

/* Greedily, largest box first (see the top of the file); col[] of -1 where unplaced. */
static dtr_status_t dtr__greedy(const dtr_cross_plan_t *p, const dtr__xblocks_t *b,
                                dtr__xpieces_t *ps, const dtr__cols_t *c, int64_t *col,
                                bool *taken) {
    int64_t classes = 0;
    for (int t = 0; t < p->ntensors; t++) classes += b[t].nclasses;
    int64_t *cursor = calloc((size_t)(classes + p->ntensors + 1), sizeof *cursor);
    if (cursor == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "relabeling");
    int64_t *base = cursor + classes;
    for (int t = 1; t < p->ntensors; t++) base[t] = base[t - 1] + b[t - 1].nclasses;
    for (int64_t k = 0; k < ps->n; k++)
        ps->v[k].numel *= dtr_dtype_info(p->t[ps->v[k].tensor].dst.dtype)->size;
    if (ps->n > 1) qsort(ps->v, (size_t)ps->n, sizeof *ps->v, dtr__cmp_piece_bytes);
    for (int64_t k = 0; k < ps->n; k++) {
        const dtr__xpiece_t *x = &ps->v[k];
        const dtr__xblocks_t *tb = &b[x->tensor];
        if (col[x->to] >= 0) continue;
        int own = c->orig[x->to];
        if (!taken[x->to] && dtr__xholds(tb, x->cls, own)) {
            col[x->to] = x->to;
            taken[x->to] = true;
            continue;
        }
        int64_t *at = &cursor[base[x->tensor] + x->cls];
        for (; tb->first[x->cls] + *at < tb->first[x->cls + 1]; ++*at) {
            int64_t j = dtr__col(c, tb->holder[tb->first[x->cls] + *at]);
            if (j >= 0 && !taken[j]) {
                col[x->to] = j;
                taken[j] = true;
                break;
            }
        }
    }
    free(cursor);
    return DTR_OK;
}

/* The columns of B's ranks: orig by coordinate, by_rank sorted. */
static dtr_status_t dtr__columns(const dtr_mesh_t *mb, dtr__cols_t *c) {
    c->n = dtr_mesh_nranks(mb);
    c->orig = malloc(sizeof *c->orig * (size_t)c->n);
    c->by_rank = malloc(sizeof *c->by_rank * (size_t)c->n);
    if (c->orig == NULL || c->by_rank == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "relabeling %lld ranks", (long long)c->n);
    int64_t coord[DTR_MAX_MESH_DIMS] = {0};
    for (int64_t k = 0; k < c->n; k++) {
        dtr_mesh_rank_at(mb, coord, &c->orig[k]);
        c->by_rank[k] = ((int64_t)c->orig[k] << 32) | k;
        dtr__xcoord_next(mb, coord);
    }
    qsort(c->by_rank, (size_t)c->n, sizeof *c->by_rank, dtr__cmp_i64);
    return DTR_OK;
}

dtr_status_t dtr__xrelabel(const dtr_cross_plan_t *p, const dtr__xblocks_t *b, int *ranks) {
    dtr__cols_t c = {0};
    dtr__xpieces_t ps = {0};
    dtr_status_t st = dtr__columns(p->t[0].dst.mesh, &c);
    int64_t n = c.n, *col = malloc(sizeof *col * (size_t)n);
    bool *taken = calloc((size_t)n, sizeof *taken);
    if (st == DTR_OK && (col == NULL || taken == NULL))
        st = dtr__error(DTR_ERR_OUT_OF_MEMORY, DTR__FUNC, "relabeling %lld ranks", (long long)n);
    for (int64_t i = 0; st == DTR_OK && i < n; i++) col[i] = -1;
    if (st == DTR_OK) st = dtr__coord_pieces(p, b, &ps);
    if (st == DTR_OK) st = n <= DTR__EXACT ? dtr__exact(p, b, &ps, &c, col) : dtr__greedy(p, b, &ps, &c, col, taken);
    if (st == DTR_OK && n > DTR__EXACT) { /* the rest: their own rank where free, then in order */
        for (int64_t i = 0; i < n; i++)
            if (col[i] < 0 && !taken[i]) col[i] = i, taken[i] = true;
        int64_t next = 0;
        for (int64_t i = 0; i < n; i++) {
            if (col[i] >= 0) continue;
            while (taken[next]) next++;
            col[i] = next;
            taken[next] = true;
        }
    }
    for (int64_t i = 0; st == DTR_OK && i < n; i++) ranks[i] = c.orig[col[i]];
    free(ps.v);
    free(col);
    free(taken);
    free(c.orig);
    free(c.by_rank);
    return st;
}
