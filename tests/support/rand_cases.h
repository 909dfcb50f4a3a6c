/* What the random-case tests share (mpi_exec_test, mpi_batch_test, plan_orders_test): a seeded
 * generator every rank runs in step (splitmix64; a case sets rng_state from the seed and its
 * number, so it can be replayed alone), and a random placement for a tensor of ndim dims. */
#ifndef DTR_TESTS_RAND_CASES_H
#define DTR_TESTS_RAND_CASES_H

#include <stdint.h>

#include "dtr.h"

static uint64_t rng_state;

static inline uint64_t rng(void) {
    uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline int pick(int n) { return (int)(rng() % (uint64_t)n); }

/* Replicate, Partial(op), or Shard of a random dim (Replicate or Partial for 0 dims). */
static inline dtr_placement_t random_placement(int ndim, dtr_reduce_op_t op) {
    int k = pick(ndim > 0 ? 5 : 3);
    if (k == 0) return dtr_replicate();
    if (k == 1) return dtr_partial(op);
    if (ndim == 0) return dtr_replicate();
    return dtr_shard(pick(ndim));
}

/* Random shard orders (a random permutation) on every tensor dim that two or more of the
 * mesh dims shard. */
static inline void random_orders(int mdims, dtr_placement_t *pl) {
    for (int d = 0; d < DTR_MAX_TENSOR_DIMS; d++) {
        int dims[DTR_MAX_MESH_DIMS], n = 0, perm[DTR_MAX_MESH_DIMS];
        for (int i = 0; i < mdims; i++)
            if (pl[i].kind == DTR_SHARD && pl[i].dim == d) dims[n++] = i;
        for (int k = 0; k < n; k++) perm[k] = k;
        for (int k = n - 1; k > 0; k--) {
            int j = pick(k + 1), t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
        }
        for (int k = 0; k < n; k++) pl[dims[k]].order = perm[k];
    }
}

/* One tensor dim sharded by two mesh dims (of more than one rank where the mesh has two) on
 * the source (which 0), the target (1) or both (2), then random orders on both. */
static inline void nest_in_orders(int mdims, const int64_t *msize, int ndim, int which,
                                  dtr_placement_t *src, dtr_placement_t *dst) {
    int big[DTR_MAX_MESH_DIMS], nb = 0;
    for (int k = 0; k < mdims; k++)
        if (msize[k] > 1) big[nb++] = k;
    int i = nb >= 2 ? big[0] : 0, j = nb >= 2 ? big[1] : 1;
    if (which != 1) src[i] = src[j] = dtr_shard(pick(ndim));
    if (which != 0) dst[i] = dst[j] = dtr_shard(pick(ndim));
    random_orders(mdims, src);
    random_orders(mdims, dst);
}

/* Ragged shards: for each tensor dim, the first mesh dim of its order (of more than one rank)
 * made ragged one time in two, with random sizes (zeros now and then) summing to the dim's
 * length, kept in sizes[mesh dim] (dtr_spec_init copies them). Returns how many. */
static inline int raggedize(const dtr_mesh_t *mesh, dtr_placement_t *pl, const int64_t *shape,
                            int ndim, int64_t sizes[][64]) {
    int made = 0, m = dtr_mesh_ndims(mesh);
    for (int d = 0; d < ndim; d++) {
        int first = -1;
        for (int i = 0; i < m; i++)
            if (pl[i].kind == DTR_SHARD && pl[i].dim == d &&
                (first < 0 || pl[i].order < pl[first].order))
                first = i;
        int64_t n = first < 0 ? 0 : dtr_mesh_size(mesh, first);
        if (n < 2 || n > 64 || pick(2) != 0) continue;
        for (int64_t c = 0; c < n; c++) sizes[first][c] = 0;
        for (int64_t x = 0; x < shape[d]; x++) sizes[first][pick((int)n)]++;
        if (pick(3) == 0) { /* the last rank's share moved to the first: an empty shard */
            sizes[first][0] += sizes[first][n - 1];
            sizes[first][n - 1] = 0;
        }
        pl[first].nsizes = (int32_t)n;
        pl[first].sizes = sizes[first];
        made++;
    }
    return made;
}

/* Makes the change a -> b keep a ragged shard, what the steps within one mesh plan
 * (redistribute/planner/ragged.c): S(d){sizes} on a random mesh dim i in both, random sizes
 * summing to d's length (one in three with an empty last shard) in sizes (msize[i] slots),
 * the only shard of d in both (others of d made R), shard orders back to mesh-dim order.
 * False (nothing changed) where mesh dim i has one rank or over 64. */
static inline bool ragged_keep(int mdims, const int64_t *msize, int ndim, const int64_t *shape,
                               dtr_placement_t *a, dtr_placement_t *b, int64_t *sizes) {
    int i = pick(mdims), d = pick(ndim);
    int64_t n = msize[i];
    if (n < 2 || n > 64) return false;
    for (int k = 0; k < mdims; k++) {
        if (a[k].kind == DTR_SHARD && a[k].dim == d) a[k] = dtr_replicate();
        if (b[k].kind == DTR_SHARD && b[k].dim == d) b[k] = dtr_replicate();
        a[k].order = b[k].order = 0;
    }
    for (int64_t k = 0; k < n; k++) sizes[k] = 0;
    for (int64_t x = 0; x < shape[d]; x++) sizes[pick((int)n)]++;
    if (pick(3) == 0) {
        sizes[0] += sizes[n - 1];
        sizes[n - 1] = 0;
    }
    a[i] = b[i] = dtr_shard(d);
    a[i].nsizes = b[i].nsizes = (int32_t)n;
    a[i].sizes = b[i].sizes = sizes;
    return true;
}

/* A mesh of n of the world's ranks in a random order, 1 to 3 dims. */
static inline dtr_mesh_t *random_mesh(int world, int n) {
    int64_t sizes[3];
    int nd = 0, left = n;
    while (left > 1 && nd < 2 && pick(3) != 0) {
        int f = 2 + pick(left - 1);
        while (left % f != 0) f--;
        if (f < 2) break;
        sizes[nd++] = f;
        left /= f;
    }
    sizes[nd++] = left;
    int all[64];
    for (int k = 0; k < world; k++) all[k] = k;
    for (int k = world - 1; k > 0; k--) {
        int j = pick(k + 1), t = all[k];
        all[k] = all[j];
        all[j] = t;
    }
    dtr_mesh_t *m = NULL;
    dtr_mesh_create(nd, sizes, all, n, &m);
    return m;
}

#endif
