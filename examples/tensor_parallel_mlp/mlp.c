/*
 * A two-layer MLP trained with data and tensor parallelism on a DP x TP mesh, the way a
 * framework uses dtr (README.md beside this file has the commands):
 *
 *   y = relu(X W1) W2,  loss = mean((y - T)^2) / 2,  SGD
 *
 *   X, T  [B, D], [B, O]   placements (S(0), R)   batch split over DP, replicated over TP
 *   W1    [D, H]           (R, S(1))              column-parallel (Megatron)
 *   W2    [H, O]           (R, S(0))              row-parallel
 *   y partial [B, O]       (S(0), P(sum))         each TP rank's h W2 is a partial sum
 *
 * Forward: one redistribution through the tape, (S(0), P) -> (S(0), R), the TP all-reduce.
 * Backward: the tape's backward plan of it (the gradient arrives Replicate, and a Partial
 * source takes a Replicate gradient: no communication), local matmuls, then the gradient
 * reducer all-reduces (AVG) each weight's gradient over the DP mesh dim, DDP-style.
 *
 * Run on a 1x1 mesh (one rank) it is the single-device model with the same code. The data
 * are small multiples of 1/16 and the learning rate 1/4, so the first step is exact in f64
 * and its loss is the same to the last bit on both meshes. Each update adds fraction bits
 * to the weights; from the second step on, squares and partial sums round, and the TP
 * all-reduce and the DP average add them in another order than one matmul does, so later
 * losses may differ by an ulp or two (README.md). Prints "step K loss <decimal> <hex>".
 */
#include <dtr/dtr.h>
#include <dtr/dtr_mpi.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 8, D = 4, H = 8, O = 4, STEPS = 4 };
static const double LR = 0.25;
static int rank;

#define CHECK(call)                                                                        \
    do {                                                                                   \
        if ((call) != DTR_OK) {                                                            \
            fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, dtr_last_error());    \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
        }                                                                                  \
    } while (0)

/* The initial value of element (i, j) of each global tensor. */
static double x_at(int64_t b, int64_t d) { return (double)((b * 7 + d * 3) % 9 - 4) / 8; }
static double t_at(int64_t b, int64_t o) { return (double)((b * 5 + o) % 7 - 3) / 8; }
static double w1_at(int64_t d, int64_t h) { return (double)((d * 5 + h * 3) % 11 - 5) / 16; }
static double w2_at(int64_t h, int64_t o) { return (double)((h * 3 + o * 7) % 13 - 6) / 16; }

/* A 2-d spec and this rank's block of it, filled from `at` when given. */
typedef struct {
    dtr_spec_t spec;
    int64_t rows, cols;
    double *v;
} block_t;

static void block_init(block_t *b, const dtr_mesh_t *mesh, const char *placements, int64_t r,
                       int64_t c, double (*at)(int64_t, int64_t)) {
    dtr_placement_t p[2];
    int n;
    int64_t shape[2] = {r, c};
    dtr_layout_t lay;
    CHECK(dtr_placements_parse(placements, p, 2, &n));
    CHECK(dtr_spec_init(&b->spec, mesh, p, n, shape, 2, DTR_F64));
    CHECK(dtr_spec_layout(&b->spec, rank, &lay));
    b->rows = lay.local_shape[0];
    b->cols = lay.local_shape[1];
    b->v = calloc((size_t)(b->rows * b->cols + 1), sizeof(double));
    for (int64_t i = 0; at && i < b->rows; i++)
        for (int64_t j = 0; j < b->cols; j++)
            b->v[i * b->cols + j] = at(lay.global_offset[0] + i, lay.global_offset[1] + j);
}

static size_t block_bytes(const block_t *b) { return (size_t)(b->rows * b->cols) * sizeof(double); }

/* c[m x n] = a[m x k] b[k x n], with a or b read transposed when ta / tb. */
static void matmul(const double *a, const double *b, double *c, int64_t m, int64_t k, int64_t n,
                   int ta, int tb) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++)
                s += (ta ? a[l * m + i] : a[i * k + l]) * (tb ? b[j * k + l] : b[l * n + j]);
            c[i * n + j] = s;
        }
}

/* The DP all-reduce (AVG) of one weight's gradient, in place: the reducer of a data-
 * parallel group with no shard group (DDP-like), as a framework's gradient hook runs it. */
static void dp_reduce(dtr_context_t *ctx, const dtr_mesh_t *mesh, block_t *g) {
    dtr_reducer_desc_t desc = {.mesh = mesh,
                               .shard_dims = 0,
                               .replicate_dims = 1u << 0,
                               .ndim = 2,
                               .shape = {g->rows, g->cols},
                               .shard_dim = 0,
                               .param_dtype = DTR_F64,
                               .reduce_dtype = DTR_F64};
    dtr_reducer_t *r;
    double *out = malloc(block_bytes(g) + sizeof(double));
    CHECK(dtr_reducer_create(ctx, &desc, &r));
    CHECK(dtr_reducer_reduce(r, g->v, block_bytes(g), true, out, block_bytes(g)));
    memcpy(g->v, out, block_bytes(g));
    dtr_reducer_destroy(r);
    free(out);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mesh_text = argc > 1 ? argv[1] : "2x2";
    dtr_mesh_t *mesh;
    dtr_context_t *ctx;
    CHECK(dtr_check_headers());
    CHECK(dtr_mesh_parse(mesh_text, NULL, 0, &mesh));
    if (dtr_mesh_ndims(mesh) != 2 || dtr_mesh_nranks(mesh) != size) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -n DP*TP mlp DPxTP (e.g. -n 4 mlp 2x2)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    CHECK(dtr_context_create_mpi(MPI_COMM_WORLD, &ctx));

    block_t x, t, w1, w2, hpre, h, yp, y, gy, gyp, gh, gw1, gw2;
    block_init(&x, mesh, "S(0),R", B, D, x_at);
    block_init(&t, mesh, "S(0),R", B, O, t_at);
    block_init(&w1, mesh, "R,S(1)", D, H, w1_at);
    block_init(&w2, mesh, "R,S(0)", H, O, w2_at);
    block_init(&hpre, mesh, "S(0),S(1)", B, H, NULL);
    block_init(&h, mesh, "S(0),S(1)", B, H, NULL);
    block_init(&yp, mesh, "S(0),P", B, O, NULL);
    block_init(&y, mesh, "S(0),R", B, O, NULL);
    block_init(&gy, mesh, "S(0),R", B, O, NULL);
    block_init(&gyp, mesh, "S(0),R", B, O, NULL); /* the tape says which: checked below */
    block_init(&gh, mesh, "S(0),S(1)", B, H, NULL);
    block_init(&gw1, mesh, "R,S(1)", D, H, NULL);
    block_init(&gw2, mesh, "R,S(0)", H, O, NULL);
    const int64_t bl = x.rows, hl = w1.cols; /* local batch rows, local hidden units */

    dtr_plan_t tp_reduce;
    CHECK(dtr_plan_create(&yp.spec, &y.spec, NULL, &tp_reduce));
    for (int step = 0; step < STEPS; step++) {
        /* forward: column-parallel, relu, row-parallel, the TP all-reduce on the tape */
        matmul(x.v, w1.v, hpre.v, bl, D, hl, 0, 0);
        for (int64_t k = 0; k < bl * hl; k++) h.v[k] = hpre.v[k] > 0 ? hpre.v[k] : 0;
        matmul(h.v, w2.v, yp.v, bl, hl, O, 0, 0);
        dtr_tape_t *tape;
        CHECK(dtr_tape_create(NULL, &tape));
        CHECK(dtr_tape_from_local(tape, &yp.spec));
        CHECK(dtr_tape_redistribute(tape, ctx, &tp_reduce, yp.v, block_bytes(&yp), y.v,
                                    block_bytes(&y)));

        /* the loss: each DP rank's mean over its rows, averaged over DP */
        double part = 0, loss;
        for (int64_t k = 0; k < bl * O; k++) {
            double e = y.v[k] - t.v[k];
            part += e * e;
            gy.v[k] = e / (double)(bl * O);
        }
        part /= (double)(2 * bl * O);
        CHECK(dtr_all_reduce(ctx, mesh, 1u << 0, &part, &loss, 1, DTR_F64, DTR_REDUCE_AVG));
        if (rank == 0) printf("step %d loss %.17g %a\n", step, loss, loss);

        /* backward: through the tape, then the local matmuls */
        dtr_spec_t gs;
        CHECK(dtr_tape_backward(tape, ctx, gy.v, block_bytes(&gy), gyp.v, block_bytes(&gyp), &gs));
        dtr_tape_destroy(tape);
        if (!dtr_placement_equal(gs.placements[1], gyp.spec.placements[1])) {
            fprintf(stderr, "rank %d: the tape's gradient is not Replicate over TP\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        matmul(h.v, gyp.v, gw2.v, hl, bl, O, 1, 0);        /* gW2 = h^T gy */
        matmul(gyp.v, w2.v, gh.v, bl, O, hl, 0, 1);        /* gh = gy W2^T */
        for (int64_t k = 0; k < bl * hl; k++) gh.v[k] = hpre.v[k] > 0 ? gh.v[k] : 0;
        matmul(x.v, gh.v, gw1.v, D, bl, hl, 1, 0);         /* gW1 = X^T gh */

        /* data parallel: average the weights' gradients over DP, then SGD */
        dp_reduce(ctx, mesh, &gw1);
        dp_reduce(ctx, mesh, &gw2);
        for (int64_t k = 0; k < D * hl; k++) w1.v[k] -= LR * gw1.v[k];
        for (int64_t k = 0; k < hl * O; k++) w2.v[k] -= LR * gw2.v[k];
    }

    block_t *all[] = {&x, &t, &w1, &w2, &hpre, &h, &yp, &y, &gy, &gyp, &gh, &gw1, &gw2};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) free(all[k]->v);
    dtr_context_destroy(ctx);
    dtr_mesh_destroy(mesh);
    MPI_Finalize();
    return 0;
}
