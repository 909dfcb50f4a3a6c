/*
 * dtr_refuse on 4 ranks: one rank refuses its call before making it while the others make
 * it (a redistribution and a batch on a 2x2 mesh, a change from that mesh to a mesh of 2
 * other ranks' shape, an all-reduce over a mesh dim, a parameter group's reduction, a mesh
 * the refusing rank's call is the first on); the others return DTR_ERR_REMOTE naming the
 * refusing rank, the refusing rank its own status and message, nobody hangs, and the next
 * call on every rank pairs with the next and verifies. A rank the call leaves out returns
 * at once; a bad dims is refused by name.
 *
 * Usage: mpirun -n 4 mpi_refuse_test. Ends with "N passed, N failed" on rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "backends/mpi/dtr_mpi.h"
#include "tests/support/mpi_check.h"
#include "pattern/pattern.h"

static int has(const char *text) { return strstr(dtr_last_error(), text) != NULL; }

static dtr_mesh_t *mesh_of(const char *text, const int *ranks, int64_t n) {
    dtr_mesh_t *m = NULL;
    if (dtr_mesh_parse(text, ranks, n, &m) != DTR_OK) {
        printf("rank %d: mesh %s: %s\n", rank, text, dtr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return m;
}

static void spec_of(dtr_spec_t *s, const dtr_mesh_t *m, const char *pl, const char *shape) {
    dtr_placement_t p[4];
    int np, nd;
    int64_t sh[4];
    if (dtr_placements_parse(pl, p, 4, &np) != DTR_OK || dtr_shape_parse(shape, sh, 4, &nd) != DTR_OK ||
        dtr_spec_init(s, m, p, np, sh, nd, DTR_F32) != DTR_OK) {
        printf("rank %d: spec %s: %s\n", rank, pl, dtr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* One redistribution src -> dst on this rank's blocks (pattern in), checked; or, where
 * `refuser` is this rank, dtr_refuse in its place. The call's status. */
static dtr_status_t move(dtr_context_t *ctx, const dtr_spec_t *src, const dtr_spec_t *dst,
                         bool cross, int refuser, int *ok) {
    dtr_layout_t sl = {0}, dl = {0};
    bool in_src = dtr_spec_layout(src, rank, &sl) == DTR_OK;
    bool in_dst = dtr_spec_layout(dst, rank, &dl) == DTR_OK;
    unsigned char *in = malloc((size_t)sl.bytes + 1), *out = malloc((size_t)dl.bytes + 1);
    if (in_src) dtr_pattern_fill(src, rank, in, (size_t)sl.bytes);
    dtr_status_t st;
    *ok = 1;
    if (rank == refuser) {
        st = dtr_refuse(ctx, src->mesh, DTR_DIMS_MESH, cross ? dst->mesh : NULL,
                        DTR_ERR_PARSE, "src: 'S(' does not parse");
    } else if (cross) {
        dtr_cross_plan_t *p = NULL;
        st = dtr_cross_plan_create(src, dst, NULL, &p);
        if (st == DTR_OK)
            st = dtr_redistribute_cross(ctx, p, in, in_src ? (size_t)sl.bytes : 0, out,
                                        in_dst ? (size_t)dl.bytes : 0);
        dtr_cross_plan_destroy(p);
    } else {
        dtr_plan_t plan;
        st = dtr_plan_create(src, dst, NULL, &plan);
        if (st == DTR_OK) st = dtr_redistribute(ctx, &plan, in, (size_t)sl.bytes, out, (size_t)dl.bytes);
    }
    if (st == DTR_OK && in_dst) {
        dtr_pattern_report_t rep;
        *ok = dtr_pattern_check(src, dst, rank, out, (size_t)dl.bytes, &rep) == DTR_OK &&
              rep.mismatches == 0;
    }
    free(in);
    free(out);
    return st;
}

/* The refusing rank gets its own status and message; the others REMOTE naming it. */
static int refused_well(dtr_status_t st, int refuser, dtr_status_t own) {
    if (rank == refuser) return st == own && has("dtr_refuse: ");
    char who[32];
    snprintf(who, sizeof who, "rank %d rejected", refuser);
    return st == DTR_ERR_REMOTE && has(who);
}

static void redistributions(dtr_context_t *ctx) {
    dtr_mesh_t *m = mesh_of("2x2", NULL, 0);
    dtr_spec_t a, b;
    spec_of(&a, m, "S(0),R", "8x6");
    spec_of(&b, m, "R,S(1)", "8x6");
    int ok;
    for (int refuser = 0; refuser < world; refuser += 3) {
        dtr_status_t st = move(ctx, &a, &b, false, refuser, &ok);
        check(refused_well(st, refuser, DTR_ERR_PARSE), "redistribute: one rank refuses, every rank fails");
        st = move(ctx, &a, &b, false, -1, &ok);
        check(st == DTR_OK && ok, "redistribute: the next call pairs and verifies");
    }
    /* the first call on a mesh: the refusing rank makes its groups as the call would */
    int rev[4] = {3, 2, 1, 0};
    dtr_mesh_t *fresh = mesh_of("4", rev, 4);
    dtr_spec_t c, d;
    spec_of(&c, fresh, "S(0)", "9x2");
    spec_of(&d, fresh, "R", "9x2");
    dtr_status_t st = move(ctx, &c, &d, false, 2, &ok);
    check(refused_well(st, 2, DTR_ERR_PARSE), "a mesh's first call refused by one rank");
    st = move(ctx, &c, &d, false, -1, &ok);
    check(st == DTR_OK && ok, "then it pairs and verifies");
    dtr_mesh_destroy(fresh);
    dtr_mesh_destroy(m);
}

static void cross(dtr_context_t *ctx) {
    int ra[2] = {0, 1}, rb[2] = {3, 2};
    dtr_mesh_t *ma = mesh_of("2", ra, 2), *mb = mesh_of("2", rb, 2);
    dtr_spec_t a, b;
    spec_of(&a, ma, "S(0)", "10x3");
    spec_of(&b, mb, "S(1)", "10x3");
    int ok;
    for (int refuser = 0; refuser < world; refuser++) {
        dtr_status_t st = move(ctx, &a, &b, true, refuser, &ok);
        check(refused_well(st, refuser, DTR_ERR_PARSE), "cross: one rank refuses, every rank fails");
        st = move(ctx, &a, &b, true, -1, &ok);
        check(st == DTR_OK && ok, "cross: the next call pairs and verifies");
    }
    dtr_mesh_destroy(ma);
    dtr_mesh_destroy(mb);
}

/* An all-reduce over mesh dim 1 of 2x2 ({0,1} and {2,3}); rank 1 refuses: rank 0 fails
 * with it, ranks 2 and 3 (the other group) are not concerned. */
static void group_collectives(dtr_context_t *ctx) {
    dtr_mesh_t *m = mesh_of("2x2", NULL, 0);
    float x[5], y[5];
    for (int k = 0; k < 5; k++) x[k] = (float)(rank + k);
    dtr_status_t st = rank == 1 ? dtr_refuse(ctx, m, 2u, NULL, DTR_ERR_OVERFLOW, "count: 2^70")
                                : dtr_all_reduce(ctx, m, 2u, x, y, 5, DTR_F32, DTR_REDUCE_SUM);
    bool want_ok = rank >= 2;
    check(want_ok ? st == DTR_OK : refused_well(st, 1, DTR_ERR_OVERFLOW),
          "all_reduce over dim 1: the refusing rank's group fails, the other group runs");
    st = dtr_all_reduce(ctx, m, 2u, x, y, 5, DTR_F32, DTR_REDUCE_SUM);
    int pair = rank < 2 ? 0 + 1 : 2 + 3;
    check(st == DTR_OK && y[0] == (float)pair && y[4] == (float)(pair + 8),
          "all_reduce: the next call pairs");
    /* a parameter group over the whole mesh (its reduction agrees over both dims) */
    dtr_param_desc_t p = {.ndim = 1, .shape = {6}, .dtype = DTR_F32, .shard_dim = 0};
    dtr_param_group_desc_t desc = {.mesh = m, .shard_dims = 1u, .replicate_dims = 2u,
                                   .nparams = 1, .params = &p, .reduce_dtype = DTR_F32};
    dtr_param_group_t *g = NULL;
    check(dtr_param_group_create(ctx, &desc, &g) == DTR_OK, "param group");
    float grad[6], shard[3];
    for (int k = 0; k < 6; k++) grad[k] = (float)(rank * 6 + k);
    const void *gp[1] = {grad};
    size_t gb[1] = {sizeof grad}, ob[1] = {sizeof shard};
    void *op[1] = {shard};
    st = rank == 3 ? dtr_refuse(ctx, m, 3u, NULL, DTR_ERR_INVALID_ARGUMENT, "grads[0]: None")
                   : dtr_param_group_reduce(g, gp, gb, true, op, ob);
    check(refused_well(st, 3, DTR_ERR_INVALID_ARGUMENT), "param group: one rank refuses");
    st = dtr_param_group_reduce(g, gp, gb, true, op, ob);
    /* mean over the 4 ranks of rank * 6 + k: 9 + k; this rank's shard of dim 0 by dim 0's
     * coordinate */
    int k0 = (rank / 2) * 3;
    check(st == DTR_OK && shard[0] == (float)(9 + k0) && shard[2] == (float)(11 + k0),
          "param group: the next reduction pairs");
    dtr_param_group_destroy(g);
    dtr_mesh_destroy(m);
}

static void edges(dtr_context_t *ctx) {
    int two[2] = {0, 1};
    dtr_mesh_t *m = mesh_of("2", two, 2), *wide = mesh_of("2x2", NULL, 0);
    /* ranks 2 and 3 are not on the mesh: the call leaves them out, no communication */
    if (rank >= 2) {
        dtr_status_t st = dtr_refuse(ctx, m, DTR_DIMS_MESH, NULL, DTR_OK, NULL);
        check(st == DTR_ERR_INVALID_ARGUMENT && has("dtr_refuse: this rank's arguments were refused"),
              "a rank the call leaves out returns at once");
    } else {
        check(1, "a rank the call leaves out returns at once");
    }
    dtr_status_t st = dtr_refuse(ctx, wide, 4u, NULL, DTR_ERR_PARSE, "x");
    check(st == DTR_ERR_INVALID_ARGUMENT && has("dims: 0x4 names a mesh dim past the 2 of this mesh"),
          "a bad dims is named");
    check(dtr_refuse(NULL, wide, 1u, NULL, DTR_ERR_PARSE, "x") == DTR_ERR_INVALID_ARGUMENT,
          "NULL ctx");
    dtr_mesh_destroy(m);
    dtr_mesh_destroy(wide);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 4) {
        if (rank == 0) printf("mpi_refuse_test: needs 4 ranks\n");
        MPI_Finalize();
        return 2;
    }
    dtr_context_t *ctx = NULL;
    if (dtr_context_create_mpi(MPI_COMM_WORLD, &ctx) != DTR_OK) MPI_Abort(MPI_COMM_WORLD, 2);
    redistributions(ctx);
    cross(ctx);
    group_collectives(ctx);
    edges(ctx);
    dtr_context_destroy(ctx);
    int rc = mpi_check_finish("refuse");
    MPI_Finalize();
    return rc;
}
