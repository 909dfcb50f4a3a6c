/*
 * A program written outside dtr, built only from an installed tree:
 *   mpicc consumer.c $(pkg-config --cflags --libs dtr)       (or CMake's dtr::dtr)
 * On 4 ranks (a 2x2 mesh) it redistributes uneven f64 and bf16-sized tensors through
 * several layouts and checks every element of every rank's block against the value its
 * global index must hold. Prints "consumer: N passed, N failed" and exits 0 only if all
 * passed.
 */
#include <dtr/dtr.h>
#include <dtr/dtr_mpi.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed, rank;

static void check(int ok, const char *what) {
    if (ok)
        passed++;
    else {
        failed++;
        fprintf(stderr, "rank %d: FAIL: %s (%s)\n", rank, what, dtr_last_error());
    }
}

/* The value at a global index: distinct for every element, exact in f64. */
static double value_at(const int64_t *idx, int ndim, const int64_t *shape) {
    int64_t flat = 0;
    for (int d = 0; d < ndim; d++) flat = flat * shape[d] + idx[d];
    return (double)flat * 0.5 + 0.125;
}

/* Fills (fill != 0) or checks this rank's block of spec; returns the mismatches. */
static int64_t walk_block(const dtr_spec_t *spec, double *buf, int fill) {
    dtr_layout_t lay;
    if (dtr_spec_layout(spec, rank, &lay) != DTR_OK) return -1;
    int64_t bad = 0, idx[DTR_MAX_TENSOR_DIMS] = {0}, local[DTR_MAX_TENSOR_DIMS] = {0};
    for (int64_t k = 0; k < lay.numel; k++) {
        int64_t rem = k;
        for (int d = lay.ndim - 1; d >= 0; d--) {
            local[d] = rem % lay.local_shape[d];
            rem /= lay.local_shape[d];
            idx[d] = lay.global_offset[d] + local[d];
        }
        double want = value_at(idx, spec->ndim, spec->shape);
        if (fill)
            buf[k] = want;
        else if (buf[k] != want)
            bad++;
    }
    return bad;
}

/* One redistribution of a tensor of `shape` on mesh from `from` to `to`, checked. */
static void run_case(dtr_context_t *ctx, const dtr_mesh_t *mesh, const char *shape_text,
                     const char *from, const char *to, const dtr_plan_options_t *opts) {
    char what[200];
    snprintf(what, sizeof what, "%s: %s -> %s", shape_text, from, to);
    int64_t shape[DTR_MAX_TENSOR_DIMS];
    int ndim, n;
    dtr_placement_t pf[DTR_MAX_MESH_DIMS], pt[DTR_MAX_MESH_DIMS];
    dtr_spec_t src, dst;
    dtr_layout_t ls, ld;
    dtr_plan_t plan;
    if (dtr_shape_parse(shape_text, shape, DTR_MAX_TENSOR_DIMS, &ndim) != DTR_OK ||
        dtr_placements_parse(from, pf, DTR_MAX_MESH_DIMS, &n) != DTR_OK ||
        dtr_spec_init(&src, mesh, pf, n, shape, ndim, DTR_F64) != DTR_OK ||
        dtr_placements_parse(to, pt, DTR_MAX_MESH_DIMS, &n) != DTR_OK ||
        dtr_spec_init(&dst, mesh, pt, n, shape, ndim, DTR_F64) != DTR_OK ||
        dtr_spec_layout(&src, rank, &ls) != DTR_OK || dtr_spec_layout(&dst, rank, &ld) != DTR_OK ||
        dtr_plan_create(&src, &dst, opts, &plan) != DTR_OK) {
        check(0, what);
        return;
    }
    double *in = malloc((size_t)(ls.numel + 1) * sizeof *in);
    double *copy = malloc((size_t)(ls.numel + 1) * sizeof *copy);
    double *out = malloc((size_t)(ld.numel + 1) * sizeof *out);
    walk_block(&src, in, 1);
    memcpy(copy, in, (size_t)ls.numel * sizeof *in);
    for (int64_t k = 0; k < ld.numel; k++) out[k] = -1.0;
    dtr_status_t st = dtr_redistribute(ctx, &plan, in, (size_t)ls.numel * sizeof *in, out,
                                       (size_t)ld.numel * sizeof *out);
    check(st == DTR_OK, what);
    int64_t bad = st == DTR_OK ? walk_block(&dst, out, 0) : -1;
    snprintf(what, sizeof what, "%s: %s -> %s: every element (%lld wrong)", shape_text, from,
             to, (long long)bad);
    check(bad == 0, what);
    check(memcmp(copy, in, (size_t)ls.numel * sizeof *in) == 0, "input buffer untouched");
    free(in);
    free(copy);
    free(out);
}

/* A change between two meshes through the change object (dtr_change_create, _run): S(0) on
 * ranks 0,1 into R on ranks 2,3, every element checked where it lands. */
static void change_case(dtr_context_t *ctx) {
    int ra[2] = {0, 1}, rb[2] = {2, 3};
    int64_t two = 2, shape[2] = {7, 3};
    dtr_mesh_t *a = NULL, *b = NULL;
    dtr_placement_t s0 = dtr_shard(0), r = dtr_replicate();
    dtr_spec_t src, dst;
    dtr_change_t *change = NULL;
    if (dtr_mesh_create(1, &two, ra, 2, &a) != DTR_OK || dtr_mesh_create(1, &two, rb, 2, &b) != DTR_OK ||
        dtr_spec_init(&src, a, &s0, 1, shape, 2, DTR_F64) != DTR_OK ||
        dtr_spec_init(&dst, b, &r, 1, shape, 2, DTR_F64) != DTR_OK ||
        dtr_change_create(1, &src, &dst, NULL, &change) != DTR_OK) {
        check(0, "the change object: a change between meshes planned");
    } else {
        check(dtr_change_form(change) == DTR_CHANGE_CROSS, "the change object: its form");
        dtr_layout_t ls = {0}, ld = {0};
        int in_src = dtr_spec_layout(&src, rank, &ls) == DTR_OK;
        int in_dst = dtr_spec_layout(&dst, rank, &ld) == DTR_OK;
        double *in = calloc((size_t)ls.numel + 1, sizeof *in), *out = calloc((size_t)ld.numel + 1, sizeof *out);
        if (in_src) walk_block(&src, in, 1);
        const void *ins[1] = {in_src ? in : NULL};
        void *outs[1] = {in_dst ? out : NULL};
        size_t ib[1] = {(size_t)ls.numel * sizeof *in}, ob[1] = {(size_t)ld.numel * sizeof *out};
        check(dtr_change_run(ctx, change, ins, ib, outs, ob) == DTR_OK,
              "the change object: dtr_change_run between meshes");
        if (in_dst) check(walk_block(&dst, out, 0) == 0, "the change object: every element landed");
        free(in);
        free(out);
    }
    dtr_change_destroy(change);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* The headers this was compiled against and the library it loaded agree. */
    check(dtr_check_headers() == DTR_OK, "dtr_check_headers");
    check(dtr_version() == DTR_VERSION_CODE, "dtr_version() equals DTR_VERSION_CODE");
    check(strcmp(dtr_version_string(), DTR_VERSION_STRING) == 0, "dtr_version_string()");

    /* A bad argument is an error naming it, not a crash. */
    dtr_mesh_t *bad_mesh = NULL;
    check(dtr_mesh_parse("2x0", NULL, 0, &bad_mesh) != DTR_OK && bad_mesh == NULL &&
              strstr(dtr_last_error(), "dtr_mesh_parse") != NULL,
          "a bad mesh is refused by name");

    dtr_mesh_t *mesh = NULL;
    dtr_context_t *ctx = NULL;
    if (size != 4 || dtr_mesh_parse("2x2", NULL, 0, &mesh) != DTR_OK ||
        dtr_context_create_mpi(MPI_COMM_WORLD, &ctx) != DTR_OK) {
        check(0, "setup: run on 4 ranks (mpirun -n 4)");
    } else {
        run_case(ctx, mesh, "7x10", "S(0),S(1)", "S(1),S(0)", NULL);
        run_case(ctx, mesh, "7x10", "S(0),S(1)", "R,R", NULL);
        run_case(ctx, mesh, "9x5x3", "S(0),S(0)", "S(2),S(1)", NULL);
        /* planned for where the ranks run (docs/integration.md, "Jobs over several nodes") */
        dtr_cost_model_t cost;
        uint32_t across = 99;
        check(dtr_cost_model_from_env(&cost) == DTR_OK &&
                  dtr_mpi_mesh_across_nodes(MPI_COMM_WORLD, mesh, &across) == DTR_OK &&
                  dtr_cost_model_nodes(&cost, across, NULL, NULL) == DTR_OK,
              "a node-aware cost model");
        check(across == 0, "one node: no mesh dim crosses nodes");
        dtr_plan_options_t opts = {.strategy = DTR_STRATEGY_OPTIMAL, .cost = &cost};
        run_case(ctx, mesh, "6x4", "R,S(1)", "S(0),R", &opts);
        change_case(ctx);
        dtr_context_destroy(ctx);
        dtr_mesh_destroy(mesh);
    }

    int counts[2] = {passed, failed}, total[2];
    MPI_Reduce(counts, total, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("consumer: %d passed, %d failed\n", total[0], total[1]);
    MPI_Finalize();
    return failed ? 1 : 0;
}
