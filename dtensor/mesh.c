#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "dtensor/mesh.h"

struct dtr_mesh {
    int ndims;
    int64_t sizes[DTR_MAX_MESH_DIMS];
    int64_t strides[DTR_MAX_MESH_DIMS]; /* row-major, in positions */
    int64_t nranks;
    /* Explicit rank list, or NULL for the identity (position p holds rank p). by_rank is
     * the inverse: positions sorted by their rank, for O(log N) coordinate look-ups. */
    int *ranks;
    int64_t *by_rank;
    uint64_t hash; /* dtr__mesh_hash, made at creation (every call's agreement reads it) */
};

/* qsort has no context argument; the list being sorted is passed through this. */
static _Thread_local const int *dtr__sort_ranks;

static int dtr__cmp_by_rank(const void *a, const void *b) {
    int ra = dtr__sort_ranks[*(const int64_t *)a];
    int rb = dtr__sort_ranks[*(const int64_t *)b];
    return (ra > rb) - (ra < rb);
}

/* Validates sizes (and computes their product) for dtr_mesh_create. */
static dtr_status_t dtr__check_sizes(int ndims, const int64_t *sizes, int64_t *nranks,
                                     const char *func) {
    if (ndims < 1 || ndims > DTR_MAX_MESH_DIMS)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, func, "ndims: %d, must be 1..%d", ndims,
                          DTR_MAX_MESH_DIMS);
    DTR_CHECK_PTR(sizes, func);
    int64_t total = 1;
    for (int i = 0; i < ndims; i++) {
        if (sizes[i] < 1)
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, func,
                              "sizes[%d]: %lld, a mesh dim must have at least 1 rank", i,
                              (long long)sizes[i]);
        if (dtr__mul_overflow(total, sizes[i], &total) || total > INT32_MAX)
            return dtr__error(DTR_ERR_OVERFLOW, func,
                              "sizes: more than %d ranks in all (limit of int ranks)",
                              INT32_MAX);
    }
    *nranks = total;
    return DTR_OK;
}

/* The mesh's dims and ranks hashed (dtr__mesh_hash), once. */
static uint64_t dtr__mesh_hash_make(const dtr_mesh_t *mesh) {
    uint64_t h = dtr__fnv(1469598103934665603ull, mesh->ndims);
    for (int i = 0; i < mesh->ndims; i++) h = dtr__fnv(h, mesh->sizes[i]);
    for (int64_t p = 0; mesh->ranks != NULL && p < mesh->nranks; p++) h = dtr__fnv(h, mesh->ranks[p]);
    return h;
}

dtr_status_t dtr_mesh_create(int ndims, const int64_t *sizes, const int *ranks, int64_t nranks,
                             dtr_mesh_t **out) {
    DTR_CHECK_PTR(out, __func__);
    int64_t total = 0;
    DTR_CHECK(dtr__check_sizes(ndims, sizes, &total, __func__));
    if (ranks != NULL && nranks != total)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "nranks: %lld ranks given for a mesh of %lld", (long long)nranks,
                          (long long)total);

    dtr_status_t st = DTR_OK;
    dtr_mesh_t *mesh = calloc(1, sizeof *mesh);
    if (mesh == NULL) return dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "mesh struct");
    mesh->ndims = ndims;
    mesh->nranks = total;
    int64_t stride = 1;
    for (int i = ndims - 1; i >= 0; i--) {
        mesh->sizes[i] = sizes[i];
        mesh->strides[i] = stride;
        stride *= sizes[i];
    }
    if (ranks == NULL) goto done;

    for (int64_t p = 0; p < total; p++) {
        if (ranks[p] < 0) {
            st = dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__, "ranks[%lld]: %d, must be >= 0",
                            (long long)p, ranks[p]);
            goto fail;
        }
    }
    mesh->ranks = malloc((size_t)total * sizeof *mesh->ranks);
    mesh->by_rank = malloc((size_t)total * sizeof *mesh->by_rank);
    if (mesh->ranks == NULL || mesh->by_rank == NULL) {
        st = dtr__error(DTR_ERR_OUT_OF_MEMORY, __func__, "rank list of %lld", (long long)total);
        goto fail;
    }
    memcpy(mesh->ranks, ranks, (size_t)total * sizeof *mesh->ranks);
    for (int64_t p = 0; p < total; p++) mesh->by_rank[p] = p;
    dtr__sort_ranks = mesh->ranks;
    qsort(mesh->by_rank, (size_t)total, sizeof *mesh->by_rank, dtr__cmp_by_rank);
    for (int64_t k = 1; k < total; k++) {
        int64_t a = mesh->by_rank[k - 1], b = mesh->by_rank[k];
        if (mesh->ranks[a] == mesh->ranks[b]) {
            st = dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                            "ranks: rank %d appears twice (positions %lld and %lld)",
                            mesh->ranks[a], (long long)(a < b ? a : b),
                            (long long)(a < b ? b : a));
            goto fail;
        }
    }
done:
    mesh->hash = dtr__mesh_hash_make(mesh);
    *out = mesh;
    return DTR_OK;
fail:
    dtr_mesh_destroy(mesh);
    return st;
}

dtr_status_t dtr_mesh_parse(const char *text, const int *ranks, int64_t nranks,
                            dtr_mesh_t **out) {
    DTR_CHECK_PTR(text, __func__);
    DTR_CHECK_PTR(out, __func__);
    int64_t sizes[DTR_MAX_MESH_DIMS];
    int ndims;
    DTR_CHECK(dtr__dims_parse(text, sizes, DTR_MAX_MESH_DIMS, &ndims, __func__, false));
    if (ndims == 0)
        return dtr__error(DTR_ERR_PARSE, __func__,
                          "text \"%s\": a mesh needs at least one dim, e.g. \"4\" or \"2x2\"",
                          text);
    DTR_CHECK_AS(dtr_mesh_create(ndims, sizes, ranks, nranks, out), __func__);
    return DTR_OK;
}

void dtr_mesh_destroy(dtr_mesh_t *mesh) {
    if (mesh == NULL) return;
    free(mesh->ranks);
    free(mesh->by_rank);
    free(mesh);
}

int dtr_mesh_ndims(const dtr_mesh_t *mesh) { return mesh != NULL ? mesh->ndims : -1; }

int64_t dtr_mesh_size(const dtr_mesh_t *mesh, int dim) {
    if (mesh == NULL || dim < 0 || dim >= mesh->ndims) return -1;
    return mesh->sizes[dim];
}

int64_t dtr_mesh_nranks(const dtr_mesh_t *mesh) { return mesh != NULL ? mesh->nranks : -1; }

static int dtr__rank_at_position(const dtr_mesh_t *mesh, int64_t p) {
    return mesh->ranks != NULL ? mesh->ranks[p] : (int)p;
}

bool dtr_mesh_equal(const dtr_mesh_t *a, const dtr_mesh_t *b) {
    if (a == b) return true;
    if (a == NULL || b == NULL || a->ndims != b->ndims) return false;
    for (int i = 0; i < a->ndims; i++)
        if (a->sizes[i] != b->sizes[i]) return false;
    if (a->ranks == NULL && b->ranks == NULL) return true;
    for (int64_t p = 0; p < a->nranks; p++)
        if (dtr__rank_at_position(a, p) != dtr__rank_at_position(b, p)) return false;
    return true;
}

/* Position of a rank in row-major order, or -1. */
static int64_t dtr__position_of(const dtr_mesh_t *mesh, int rank) {
    if (mesh->ranks == NULL) return rank >= 0 && rank < mesh->nranks ? rank : -1;
    int64_t lo = 0, hi = mesh->nranks;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = mesh->ranks[mesh->by_rank[mid]];
        if (r == rank) return mesh->by_rank[mid];
        if (r < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

dtr_status_t dtr_mesh_rank_at(const dtr_mesh_t *mesh, const int64_t *coord, int *rank) {
    DTR_CHECK_PTR(mesh, __func__);
    DTR_CHECK_PTR(coord, __func__);
    DTR_CHECK_PTR(rank, __func__);
    int64_t p = 0;
    for (int i = 0; i < mesh->ndims; i++) {
        if (coord[i] < 0 || coord[i] >= mesh->sizes[i])
            return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                              "coord[%d]: %lld, must be 0..%lld", i, (long long)coord[i],
                              (long long)mesh->sizes[i] - 1);
        p += coord[i] * mesh->strides[i];
    }
    *rank = dtr__rank_at_position(mesh, p);
    return DTR_OK;
}

dtr_status_t dtr_mesh_coord(const dtr_mesh_t *mesh, int rank, int64_t *coord) {
    DTR_CHECK_PTR(mesh, __func__);
    DTR_CHECK_PTR(coord, __func__);
    int64_t p = dtr__position_of(mesh, rank);
    if (p < 0)
        return dtr__error(DTR_ERR_NOT_IN_MESH, __func__, "rank: %d is not in the mesh", rank);
    for (int i = 0; i < mesh->ndims; i++) coord[i] = p / mesh->strides[i] % mesh->sizes[i];
    return DTR_OK;
}

dtr_status_t dtr_mesh_group(const dtr_mesh_t *mesh, int rank, int dim, int *ranks,
                            int64_t cap, int64_t *count) {
    DTR_CHECK_PTR(mesh, __func__);
    DTR_CHECK_PTR(ranks, __func__);
    DTR_CHECK_PTR(count, __func__);
    if (dim < 0 || dim >= mesh->ndims)
        return dtr__error(DTR_ERR_INVALID_ARGUMENT, __func__,
                          "dim: %d, must be 0..%d for a %d-d mesh", dim, mesh->ndims - 1,
                          mesh->ndims);
    int64_t p = dtr__position_of(mesh, rank);
    if (p < 0)
        return dtr__error(DTR_ERR_NOT_IN_MESH, __func__, "rank: %d is not in the mesh", rank);
    int64_t n = mesh->sizes[dim];
    if (cap < n)
        return dtr__error(DTR_ERR_BUFFER_TOO_SMALL, __func__,
                          "cap: %lld, the group along mesh dim %d has %lld ranks",
                          (long long)cap, dim, (long long)n);
    int64_t base = p - (p / mesh->strides[dim] % n) * mesh->strides[dim];
    for (int64_t k = 0; k < n; k++) ranks[k] = dtr__rank_at_position(mesh, base + k * mesh->strides[dim]);
    *count = n;
    return DTR_OK;
}

dtr_status_t dtr_mesh_format(const dtr_mesh_t *mesh, char *buf, size_t len) {
    DTR_CHECK_PTR(mesh, __func__);
    DTR_CHECK_AS(dtr_shape_format(mesh->sizes, mesh->ndims, buf, len), __func__);
    return DTR_OK;
}

uint64_t dtr__mesh_hash(const dtr_mesh_t *mesh) { return mesh->hash; }

int dtr__int_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

dtr_status_t dtr__mesh_union(const dtr_mesh_t *a, const dtr_mesh_t *b, const char *func,
                             int **out, int *n) {
    int64_t na = dtr_mesh_nranks(a), nb = dtr_mesh_nranks(b), k = 0;
    int *r = malloc(sizeof *r * (size_t)(na + nb));
    if (r == NULL)
        return dtr__error(DTR_ERR_OUT_OF_MEMORY, func, "%lld ranks", (long long)(na + nb));
    for (int side = 0; side < 2; side++) {
        const dtr_mesh_t *m = side == 0 ? a : b;
        int64_t coord[DTR_MAX_MESH_DIMS] = {0};
        for (int64_t p = 0; p < dtr_mesh_nranks(m); p++) {
            dtr_mesh_rank_at(m, coord, &r[k++]);
            for (int d = dtr_mesh_ndims(m) - 1; d >= 0; d--) {
                if (++coord[d] < dtr_mesh_size(m, d)) break;
                coord[d] = 0;
            }
        }
    }
    qsort(r, (size_t)k, sizeof *r, dtr__int_cmp);
    int m = 0;
    for (int64_t i = 0; i < k; i++)
        if (m == 0 || r[i] != r[m - 1]) r[m++] = r[i];
    *out = r;
    *n = m;
    return DTR_OK;
}
