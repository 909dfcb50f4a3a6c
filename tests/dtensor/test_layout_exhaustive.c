/*
 * Exhaustive check of dtr_spec_layout against an independent brute force (shard orders
 * included: run_orders), over every mesh of
 * 1..3 dims with sizes 1..4, every shape of 0..3 dims with lengths 0..9, and every placement
 * combination: S(d) for each tensor dim, R, and P with each of its five ops (on 3-d meshes
 * one op per spec, rotating; see placement_choices).
 *
 * The brute force does not use the chunk formula: it keeps, per tensor dim, the explicit
 * list of global indices a rank holds, and splits it the way torch.chunk splits a tensor:
 * consecutive pieces of ceil(len / n), as many as needed, missing pieces empty. The rank's
 * layout must then be that list (contiguous, starting at global_offset, local_shape long;
 * an empty list at offset = the dim's global length, as DTensor does).
 * Every element is then assigned to the ranks that hold it, and within each replica group
 * (ranks that agree on their coordinates along non-Shard mesh dims) every element must be
 * held by exactly one rank. (DTR_CASES_DIV thins the 3-d meshes' shapes: skipped().)
 */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"

#define MAX_LEN 9
#define MAX_MESH 4

typedef struct {
    int len;
    int idx[MAX_LEN];
} index_list_t;

/* torch.chunk(list, n)[r], or empty when it has fewer than r+1 chunks. */
static void chunk_list(index_list_t *l, int n, int r) {
    if (l->len == 0) return;
    int c = (l->len + n - 1) / n;
    int nchunks = (l->len + c - 1) / c;
    if (r >= nchunks) {
        l->len = 0;
        return;
    }
    int start = r * c;
    int end = start + c < l->len ? start + c : l->len;
    memmove(l->idx, l->idx + start, (size_t)(end - start) * sizeof l->idx[0]);
    l->len = end - start;
}

typedef struct {
    long specs, ranks, elements;
} totals_t;

static int g_fail_count;

/* One spec. placements are already a valid combination for ndim. */
static void check_spec(const dtr_mesh_t *mesh, const int *msizes, int mdims,
                       const dtr_placement_t *pl, const int64_t *shape, int ndim,
                       totals_t *t) {
    dtr_spec_t spec;
    if (dtr_spec_init(&spec, mesh, pl, mdims, shape, ndim, DTR_F32) != DTR_OK) {
        cr_expect_fail("spec_init: %s", dtr_last_error());
        return;
    }
    int nranks = 1;
    for (int i = 0; i < mdims; i++) nranks *= msizes[i];
    /* counts[group][element]: group index from the non-shard coordinates. */
    static unsigned char counts[MAX_MESH * MAX_MESH * MAX_MESH][MAX_LEN * MAX_LEN * MAX_LEN];
    int numel = 1;
    for (int d = 0; d < ndim; d++) numel *= (int)shape[d];
    int ngroups = 1;
    for (int i = 0; i < mdims; i++)
        if (pl[i].kind != DTR_SHARD) ngroups *= msizes[i];
    for (int g = 0; g < ngroups; g++) memset(counts[g], 0, (size_t)numel);

    int64_t coord[3] = {0, 0, 0};
    for (int r = 0; r < nranks; r++) {
        index_list_t lists[3];
        for (int d = 0; d < ndim; d++) {
            lists[d].len = (int)shape[d];
            for (int k = 0; k < lists[d].len; k++) lists[d].idx[k] = k;
        }
        int group = 0;
        for (int i = 0; i < mdims; i++)
            if (pl[i].kind != DTR_SHARD) group = group * msizes[i] + (int)coord[i];
        /* Shards split in their order (order 0 first, ties by mesh dim). */
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < mdims; i++)
                if (pl[i].kind == DTR_SHARD && pl[i].order == k)
                    chunk_list(&lists[pl[i].dim], msizes[i], (int)coord[i]);
        dtr_layout_t l;
        if (dtr_spec_layout_at(&spec, coord, &l) != DTR_OK) {
            cr_expect_fail("layout_at: %s", dtr_last_error());
            return;
        }
        int64_t expect_numel = 1;
        for (int d = 0; d < ndim; d++) {
            int ok = l.local_shape[d] == lists[d].len;
            for (int k = 0; ok && k < lists[d].len; k++)
                ok = lists[d].idx[k] == l.global_offset[d] + k;
            /* An empty piece has no first index: DTensor puts it at the global length. */
            if (ok && lists[d].len == 0) ok = l.global_offset[d] == shape[d];
            if (!ok && g_fail_count++ < 10) {
                char ptext[128], stext[64];
                dtr_placements_format(pl, mdims, ptext, sizeof ptext);
                dtr_shape_format(shape, ndim, stext, sizeof stext);
                cr_expect_fail("shape %s placements %s mesh dims %d coord (%lld,%lld,%lld) dim %d: "
                        "dtr says %lld@%lld, brute force %d elements from %d",
                        stext, ptext, mdims, (long long)coord[0], (long long)coord[1],
                        (long long)coord[2], d, (long long)l.local_shape[d],
                        (long long)l.global_offset[d], lists[d].len,
                        lists[d].len ? lists[d].idx[0] : -1);
            }
            expect_numel *= lists[d].len;
        }
        if (l.numel != expect_numel || l.bytes != expect_numel * 4)
            cr_expect_fail("numel/bytes %lld/%lld, expected %lld", (long long)l.numel,
                    (long long)l.bytes, (long long)expect_numel);
        /* Assign this rank's elements (the product of its index lists). */
        if (ndim == 0) {
            counts[group][0]++;
        } else {
            int i0n = lists[0].len, i1n = ndim > 1 ? lists[1].len : 1,
                i2n = ndim > 2 ? lists[2].len : 1;
            int s1 = ndim > 1 ? (int)shape[1] : 1, s2 = ndim > 2 ? (int)shape[2] : 1;
            for (int a = 0; a < i0n; a++)
                for (int b = 0; b < i1n; b++)
                    for (int c = 0; c < i2n; c++) {
                        int e = lists[0].idx[a];
                        if (ndim > 1) e = e * s1 + lists[1].idx[b];
                        if (ndim > 2) e = e * s2 + lists[2].idx[c];
                        counts[group][e]++;
                    }
        }
        t->ranks++;
        for (int i = mdims - 1; i >= 0; i--) {
            if (++coord[i] < msizes[i]) break;
            coord[i] = 0;
        }
    }
    for (int g = 0; g < ngroups; g++)
        for (int e = 0; e < numel; e++)
            if (counts[g][e] != 1 && g_fail_count++ < 10) {
                char ptext[128], stext[64];
                dtr_placements_format(pl, mdims, ptext, sizeof ptext);
                dtr_shape_format(shape, ndim, stext, sizeof stext);
                cr_expect_fail("shape %s placements %s: replica group %d holds element %d %d times",
                        stext, ptext, g, e, counts[g][e]);
            }
    t->elements += (long)numel * ngroups;
    t->specs++;
}

/* The placements for one mesh dim and an ndim-d tensor: S(0..ndim-1), R, and P. On 1-d and
 * 2-d meshes every Partial op is a choice of its own. On 3-d meshes all five would multiply
 * the run time by up to 6 (74 s) for layouts that do not depend on the op, so there each
 * spec takes one op, rotating with `turn` so that every op appears over the sweep. */
static int placement_choices(int ndim, int mdims, int turn, dtr_placement_t *out) {
    int n = 0;
    for (int d = 0; d < ndim; d++) out[n++] = dtr_shard(d);
    out[n++] = dtr_replicate();
    if (mdims < 3) {
        for (int op = 0; op < DTR_REDUCE_OP_LAST; op++) out[n++] = dtr_partial((dtr_reduce_op_t)op);
    } else {
        out[n++] = dtr_partial((dtr_reduce_op_t)(turn % DTR_REDUCE_OP_LAST));
    }
    return n;
}

/* Mesh number mi of the MAX_MESH^mdims meshes of mdims dims (sizes 1..MAX_MESH). */
static dtr_mesh_t *mesh_number(int mdims, int mi, int *msizes) {
    int64_t sizes64[3];
    for (int i = 0, x = mi; i < mdims; i++, x /= MAX_MESH) {
        msizes[i] = x % MAX_MESH + 1;
        sizes64[i] = msizes[i];
    }
    dtr_mesh_t *mesh;
    cr_assert_eq(dtr_mesh_create(mdims, sizes64, NULL, 0, &mesh), DTR_OK);
    return mesh;
}

/* Whether to skip shape si on mesh mi: with DTR_CASES_DIV=D above 1 (tools/test.sh's asan
 * part, where the whole check takes 100 s), 3-d meshes take every D-th shape, rotating with
 * the mesh so that every shape still meets D of the 64 meshes; 1-d and 2-d meshes take all.
 * The plain part runs everything. */
static bool skipped(int mdims, int mi, int si) {
    static int div = 0;
    if (div == 0) {
        const char *e = getenv("DTR_CASES_DIV");
        div = e != NULL && atoi(e) > 1 ? atoi(e) : 1;
        if (div > 1) printf("exhaustive layout: 3-d meshes take every %d-th shape\n", div);
    }
    return mdims == 3 && div > 1 && (mi + si) % div != 0;
}

static void run_mesh_dims(int mdims) {
    totals_t t = {0, 0, 0};
    int msizes[3];
    int nmeshes = 1;
    for (int i = 0; i < mdims; i++) nmeshes *= MAX_MESH;
    for (int mi = 0; mi < nmeshes; mi++) {
        dtr_mesh_t *mesh = mesh_number(mdims, mi, msizes);
        for (int ndim = 0; ndim <= 3; ndim++) {
            int nshapes = 1, ncombos = 1;
            for (int d = 0; d < ndim; d++) nshapes *= MAX_LEN + 1;
            for (int si = 0; si < nshapes; si++) {
                if (skipped(mdims, mi, si)) continue;
                dtr_placement_t choices[3 + 1 + DTR_REDUCE_OP_LAST];
                int nc = placement_choices(ndim, mdims, mi + si, choices);
                ncombos = 1;
                for (int i = 0; i < mdims; i++) ncombos *= nc;
                int64_t shape[3];
                for (int d = 0, x = si; d < ndim; d++, x /= MAX_LEN + 1) shape[d] = x % (MAX_LEN + 1);
                for (int ci = 0; ci < ncombos; ci++) {
                    dtr_placement_t pl[3];
                    for (int i = 0, x = ci; i < mdims; i++, x /= nc) pl[i] = choices[x % nc];
                    check_spec(mesh, msizes, mdims, pl, shape, ndim, &t);
                }
            }
        }
        dtr_mesh_destroy(mesh);
    }
    cr_expect_eq(g_fail_count, 0);
    cr_log_info("%d-d meshes: %ld specs, %ld rank layouts, %ld element-group checks", mdims,
                t.specs, t.ranks, t.elements);
    printf("exhaustive layout, %d-d meshes: %ld specs, %ld rank layouts, %ld element checks\n",
           mdims, t.specs, t.ranks, t.elements);
}

Test(layout_exhaustive, meshes_of_1_dim) { run_mesh_dims(1); }
Test(layout_exhaustive, meshes_of_2_dims) { run_mesh_dims(2); }
Test(layout_exhaustive, meshes_of_3_dims, .timeout = 600) { run_mesh_dims(3); }

/* Shard orders: every mesh of 2..3 dims with sizes 1..4, shapes of 1..2 dims with lengths
 * 0..9, placements of S(0), S(1) and R only (Partial lays out as R), and for each tensor dim
 * that two or more mesh dims shard, every order of them. */
static void run_orders(int mdims) {
    totals_t t = {0, 0, 0};
    int msizes[3];
    int nmeshes = 1, ordered = 0;
    for (int i = 0; i < mdims; i++) nmeshes *= MAX_MESH;
    static const int perms2[2][2] = {{0, 1}, {1, 0}};
    static const int perms3[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                     {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int mi = 0; mi < nmeshes; mi++) {
        dtr_mesh_t *mesh = mesh_number(mdims, mi, msizes);
        for (int ndim = 1; ndim <= 2; ndim++) {
            int nshapes = 1, nc = ndim + 1, ncombos = 1;
            for (int d = 0; d < ndim; d++) nshapes *= MAX_LEN + 1;
            for (int i = 0; i < mdims; i++) ncombos *= nc;
            for (int si = 0; si < nshapes; si++) {
                if (skipped(mdims, mi, si)) continue;
                int64_t shape[3];
                for (int d = 0, x = si; d < ndim; d++, x /= MAX_LEN + 1) shape[d] = x % (MAX_LEN + 1);
                for (int ci = 0; ci < ncombos; ci++) {
                    dtr_placement_t pl[3];
                    int dims[2][3], n[2] = {0, 0};
                    for (int i = 0, x = ci; i < mdims; i++, x /= nc) {
                        int k = x % nc;
                        pl[i] = k < ndim ? dtr_shard(k) : dtr_replicate();
                        if (k < ndim) dims[k][n[k]++] = i;
                    }
                    int np0 = n[0] == 3 ? 6 : n[0] == 2 ? 2 : 1;
                    int np1 = n[1] == 3 ? 6 : n[1] == 2 ? 2 : 1;
                    for (int a = 0; a < np0; a++)
                        for (int b = 0; b < np1; b++) {
                            if (a == 0 && b == 0) continue; /* (mesh-dim order: run_mesh_dims) */
                            for (int k = 0; k < n[0] && n[0] > 1; k++)
                                pl[dims[0][k]].order = n[0] == 3 ? perms3[a][k] : perms2[a][k];
                            for (int k = 0; k < n[1] && n[1] > 1; k++)
                                pl[dims[1][k]].order = n[1] == 3 ? perms3[b][k] : perms2[b][k];
                            check_spec(mesh, msizes, mdims, pl, shape, ndim, &t);
                            ordered++;
                        }
                }
            }
        }
        dtr_mesh_destroy(mesh);
    }
    cr_expect_eq(g_fail_count, 0);
    cr_expect_gt(ordered, 1000);
    printf("exhaustive layout with shard orders, %d-d meshes: %ld specs, %ld rank layouts, %ld "
           "element checks\n",
           mdims, t.specs, t.ranks, t.elements);
}

Test(layout_exhaustive, shard_orders_on_2_dims) { run_orders(2); }
Test(layout_exhaustive, shard_orders_on_3_dims, .timeout = 600) { run_orders(3); }
