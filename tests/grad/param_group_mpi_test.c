/*
 * Parameter groups under MPI on 8 ranks (a 2x4 mesh): the foreach reduce-scatter into the
 * fused buffer for FSDP, HSDP and DDP in every reduce dtype, over mixed parameters (dtypes,
 * shard dims, uneven and empty dims), with exact means; HSDP accumulation and the recorded
 * collectives; the pipeline's order of operations, recorded; the foreach all-gather; and
 * the hostile inputs, each with a named error and untouched buffers; and the same on a
 * context whose buffers live in the fake device space, or in CUDA memory where
 * DTR_TEST_SPACE=cuda (a GPU machine: the shared-GPU mode; tools/gpu_device_pack.sh). Values
 * are small integers over powers of two, so every expected mean is exact in every dtype.
 *
 * Usage: [DTR_TEST_SPACE=cuda] mpirun -n 8 group_mpi_test. Ends with "N passed, N failed" on
 * rank 0.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "numeric/numeric.h"
#include "backends/mpi/dtr_mpi.h"
#include "tests/support/recording_backend.h"
#include "tests/support/mpi_check.h"
#include "tests/support/mpi_paths.h"
#include "tests/support/fake_device.h"
#include "tests/support/test_space.h"

static dtr_mesh_t *mesh; /* 2x4: dim 0 the replicate group (0x1), dim 1 the shard group (0x2) */
static dtr_context_t *ctx;

/* Rank p's gradient of parameter i at element k of microbatch m: an integer in -8..7. */
static double val(int i, int p, int m, int64_t k) {
    /* period 208 in k (not a power of two): a piece read from the wrong offset shows */
    return (double)(((k + 1000 * i) * 7 + (k % 13) * 3 + p * 13 + m * 5) % 16 - 8);
}

/* Mixed parameters: f32, bf16, f64 and f16; shard dims 0 and 1; uneven, tiny, empty. */
static const dtr_param_desc_t mixed[] = {
    {1, {1003}, 0, DTR_F32},    {3, {3, 11, 5}, 1, DTR_F32}, {2, {10, 7}, 0, DTR_BF16},
    {1, {3}, 0, DTR_F64},       {2, {0, 4}, 0, DTR_F32},     {2, {6, 9}, 1, DTR_F16},
};
#define NMIXED 6

typedef struct {
    int64_t numel, outer, len, inner, rows, off, shard;
    size_t item;
} geo_t;

static geo_t geo(const dtr_param_desc_t *p, unsigned shard_dims) {
    geo_t g = {.numel = 1, .outer = 1, .inner = 1, .len = p->shape[p->shard_dim]};
    int64_t rs, index;
    for (int d = 0; d < p->ndim; d++) g.numel *= p->shape[d];
    for (int d = 0; d < p->shard_dim; d++) g.outer *= p->shape[d];
    for (int d = p->shard_dim + 1; d < p->ndim; d++) g.inner *= p->shape[d];
    dtr_mesh_group_size(mesh, shard_dims, &rs);
    dtr_mesh_group_index(mesh, shard_dims, rank, &index);
    dtr_chunk(g.len, rs, index, &g.rows, &g.off);
    g.shard = g.outer * g.rows * g.inner;
    g.item = (size_t)dtr_dtype_info(p->dtype)->size;
    return g;
}

/* Buffers for a group's gradients and outputs, outputs filled with a sentinel. */
typedef struct {
    int n;
    void *grads[NMIXED], *copies[NMIXED], *outs[NMIXED];
    size_t grad_bytes[NMIXED], out_bytes[NMIXED];
    geo_t g[NMIXED];
} bufs_t;

static void bufs_make(bufs_t *b, const dtr_param_desc_t *params, int n, unsigned shard) {
    b->n = n;
    for (int i = 0; i < n; i++) {
        b->g[i] = geo(&params[i], shard);
        b->grad_bytes[i] = (size_t)b->g[i].numel * b->g[i].item;
        b->out_bytes[i] = (size_t)b->g[i].shard * b->g[i].item;
        b->grads[i] = malloc(b->grad_bytes[i] + 1);
        b->copies[i] = malloc(b->grad_bytes[i] + 1);
        b->outs[i] = malloc(b->out_bytes[i] + 1);
        memset(b->outs[i], 0x5a, b->out_bytes[i] + 1);
    }
}

static void bufs_fill(bufs_t *b, const dtr_param_desc_t *params, int first, int m, int M) {
    for (int i = 0; i < b->n; i++) {
        for (int64_t k = 0; k < b->g[i].numel; k++)
            dtr__store(params[i].dtype, b->grads[i], k, val(first + i, rank, m, k) / M);
        memcpy(b->copies[i], b->grads[i], b->grad_bytes[i]);
    }
}

static int bufs_inputs_kept(const bufs_t *b) {
    for (int i = 0; i < b->n; i++)
        if (memcmp(b->copies[i], b->grads[i], b->grad_bytes[i]) != 0) return 0;
    return 1;
}

static int bufs_outputs_untouched(const bufs_t *b) {
    for (int i = 0; i < b->n; i++)
        for (size_t k = 0; k <= b->out_bytes[i]; k++)
            if (((unsigned char *)b->outs[i])[k] != 0x5a) return 0;
    return 1;
}

static void bufs_free(bufs_t *b) {
    for (int i = 0; i < b->n; i++) {
        free(b->grads[i]);
        free(b->copies[i]);
        free(b->outs[i]);
    }
}

/* Every output element against the exact mean over all 8 ranks and M microbatches. */
static int bufs_check(const bufs_t *b, const dtr_param_desc_t *params, int first, int M,
                      double D, const char *what) {
    for (int i = 0; i < b->n; i++) {
        const geo_t *g = &b->g[i];
        for (int64_t o = 0; o < g->outer; o++)
            for (int64_t r = 0; r < g->rows; r++)
                for (int64_t j = 0; j < g->inner; j++) {
                    int64_t k = (o * g->len + g->off + r) * g->inner + j;
                    double want = 0;
                    for (int q = 0; q < 8; q++)
                        for (int m = 0; m < M; m++) want += val(first + i, q, m, k) / M;
                    want /= D;
                    double got = dtr__load(params[i].dtype, b->outs[i], (o * g->rows + r) * g->inner + j);
                    if (got != want) {
                        printf("rank %d: %s: param %d element %lld: got %.9g, want %.9g\n", rank,
                               what, first + i, (long long)k, got, want);
                        return 0;
                    }
                }
        if (((unsigned char *)b->outs[i])[b->out_bytes[i]] != 0x5a) {
            printf("rank %d: %s: param %d: written past its shard\n", rank, what, first + i);
            return 0;
        }
    }
    return 1;
}

static dtr_param_group_t *make_group(const dtr_param_desc_t *params, int n, unsigned shard,
                                     unsigned rep, dtr_dtype_t reduce, double factor,
                                     bool force_sum) {
    dtr_param_group_desc_t d = {.mesh = mesh, .shard_dims = shard, .replicate_dims = rep,
                                .nparams = n, .params = params, .reduce_dtype = reduce,
                                .factor = factor, .force_sum = force_sum};
    dtr_param_group_t *g = NULL;
    if (dtr_param_group_create(ctx, &d, &g) != DTR_OK)
        printf("rank %d: create: %s\n", rank, dtr_last_error());
    return g;
}

/* The three modes on the 2 x 4 mesh: their shard and replicate dims. */
static const struct {
    const char *name;
    unsigned shard, rep;
} modes[] = {{"FSDP", 0x3, 0}, {"HSDP", 0x2, 0x1}, {"DDP", 0, 0x3}};

/* ---- every mode and dtype, blocking ------------------------------------------------------ */

static void test_modes(void) {
    static const dtr_dtype_t types[] = {DTR_F32, DTR_BF16, DTR_F16, DTR_F64};
    char what[200];
    for (int mi = 0; mi < 3; mi++)
        for (int ti = 0; ti < 4; ti++)
            for (int M = 1; M <= 2; M++) {
                snprintf(what, sizeof what, "%s, reduce %s, %d microbatch(es), 6 mixed params",
                         modes[mi].name, dtr_dtype_name(types[ti]), M);
                dtr_param_group_t *g =
                    make_group(mixed, NMIXED, modes[mi].shard, modes[mi].rep, types[ti], 0, false);
                bufs_t b;
                bufs_make(&b, mixed, NMIXED, modes[mi].shard);
                int ok = g != NULL;
                nrecs = 0;
                for (int m = 0; m < M && ok; m++) {
                    bufs_fill(&b, mixed, 0, m, M);
                    dtr_status_t st = dtr_param_group_reduce(
                        g, (const void *const *)b.grads, b.grad_bytes, m == M - 1, b.outs,
                        b.out_bytes);
                    ok = st == DTR_OK && bufs_inputs_kept(&b);
                    if (!ok) printf("rank %d: %s: microbatch %d: %s\n", rank, what, m, dtr_last_error());
                }
                ok = ok && bufs_check(&b, mixed, 0, M, 8, what);
                check(ok, what);
                /* The collectives: one reduce-scatter per microbatch over the shard group,
                 * one all-reduce of the whole fused buffer over the replicate group, SUM
                 * (MPI has no AVG: one divide by D at the end), in the reduce dtype. */
                int64_t fused = 0, ritem = dtr_dtype_info(types[ti])->size;
                dtr_param_group_info(g, NULL, &fused);
                int nrs = modes[mi].shard ? M : 0, nar = modes[mi].rep ? 1 : 0;
                int good = nrecs == nrs + nar;
                for (int k = 0; k < nrecs && good; k++)
                    good = recs[k].kind == (k < nrs ? 'r' : 'a') && recs[k].count == fused / ritem &&
                           recs[k].dtype == types[ti] && recs[k].op == DTR_REDUCE_SUM &&
                           recs[k].size == (k < nrs ? (modes[mi].shard == 0x3 ? 8 : 4)
                                                    : (modes[mi].rep == 0x3 ? 8 : 2));
                if (!good) printf("rank %d: recorded %s\n", rank, rec_kinds());
                snprintf(what, sizeof what,
                         "%s, reduce %s, M=%d: %d reduce-scatter(s), %d all-reduce of the fused "
                         "buffer, SUM",
                         modes[mi].name, dtr_dtype_name(types[ti]), M, nrs, nar);
                check(good, what);
                bufs_free(&b);
                dtr_param_group_destroy(g);
            }
}

/* One param dtype, host memory: span lists through the shared-memory segment read the
 * gradients where they lie (padding and gaps as zeros) and write the outputs where they go
 * (padding dropped), casting and dividing as they read and write (f16's pre 4 here): the
 * reduce-scatter, DDP's all-reduce from the gradients, HSDP's from the fused buffer. Blocking
 * and through the pipeline (two microbatches: outputs written from the accumulated sum). */
static void test_direct(void) {
    static const dtr_dtype_t ptypes[] = {DTR_F32, DTR_BF16, DTR_F32, DTR_F32, DTR_F32, DTR_F32};
    static const dtr_dtype_t types[] = {DTR_F32, DTR_BF16, DTR_BF16, DTR_F16, DTR_F32, DTR_BF16};
    char what[240];
    /* and large ones, whose pieces the shared-memory path splits into many chunks */
    static const dtr_param_desc_t large[NMIXED] = {
        {1, {300007}, 0, DTR_F32}, {2, {1001, 77}, 1, DTR_F32}, {3, {7, 10, 3}, 1, DTR_F32},
        {1, {70001}, 0, DTR_F32},  {2, {0, 4}, 0, DTR_F32},     {2, {3, 90001}, 0, DTR_F32}};
    /* this rank's groups on one node (all 8, its row, its column), as the MPI backend sees */
    int rs_on = mpi_paths_spans_on(0, 1, 8), row_on = mpi_paths_spans_on(rank / 4 * 4, 1, 4);
    int col_on = mpi_paths_spans_on(rank % 4, 4, 2);
    for (int ti = 0; ti < 6; ti++) {
        dtr_param_desc_t same[NMIXED];
        memcpy(same, ti < 4 ? mixed : large, sizeof same);
        for (int i = 0; i < NMIXED; i++) same[i].dtype = ptypes[ti];
        for (int mi = 0; mi < 3; mi++)
            for (int M = 1; M <= 2; M++) {
                dtr_param_group_t *g = make_group(same, NMIXED, modes[mi].shard, modes[mi].rep,
                                                  types[ti], 0, false);
                bufs_t b;
                bufs_make(&b, same, NMIXED, modes[mi].shard);
                int ok = g != NULL;
                nrecs = 0;
                dtr_grad_pipeline_t *p = NULL;
                ok = ok && dtr_grad_pipeline_create(ctx, &p) == DTR_OK;
                for (int m = 0; m < M && ok; m++) {
                    bufs_fill(&b, same, 0, m, M);
                    /* M = 2 through the pipeline, M = 1 blocking */
                    dtr_status_t st =
                        M == 2 ? dtr_grad_pipeline_push(p, g, (const void *const *)b.grads,
                                                        b.grad_bytes, m == M - 1, b.outs,
                                                        b.out_bytes)
                               : dtr_param_group_reduce(g, (const void *const *)b.grads,
                                                        b.grad_bytes, true, b.outs, b.out_bytes);
                    if (st == DTR_OK && M == 2) st = dtr_grad_pipeline_finish(p);
                    ok = st == DTR_OK && bufs_inputs_kept(&b);
                    if (!ok) printf("rank %d: microbatch %d: %s\n", rank, m, dtr_last_error());
                }
                dtr_grad_pipeline_destroy(p);
                snprintf(what, sizeof what,
                         "%s%s, all %s, reduce %s, %d microbatch(es)%s: exact means, span lists "
                         "inside a node with the divides and casts folded in",
                         ti < 4 ? "" : "large ", modes[mi].name, dtr_dtype_name(ptypes[ti]),
                         dtr_dtype_name(types[ti]), M, M == 2 ? " (pipeline)" : "");
                ok = ok && bufs_check(&b, same, 0, M, 8, what);
                dtr_grad_factors_t f = {0};
                ok = ok && dtr_param_group_info(g, &f, NULL) == DTR_OK;
                /* MPI has no AVG: SUM, and the one divide by the whole D at the end */
                double post = f.rs_op == DTR_REDUCE_AVG ? f.post * f.world : f.post;
                static const char *const kinds[3][2] = {{"r", "rr"}, {"ra", "rra"}, {"a", "a"}};
                int spans = strcmp(rec_kinds(), kinds[mi][M - 1]) == 0;
                for (int k = 0; k < nrecs && spans; k++) {
                    int ar = recs[k].kind == 'a';
                    int on = ar ? (mi == 1 ? col_on : rs_on) : (mi == 0 ? rs_on : row_on);
                    /* the stage that writes the outputs: FSDP's one reduce-scatter with
                     * nothing accumulated, or the all-reduce; DDP's one all-reduce from the
                     * gradients pre-divides (from the fused buffer it does not) */
                    int last = ar || (mi == 0 && M == 1);
                    double pre = !ar || (mi == 2 && M == 1) ? f.pre : 0;
                    spans = recs[k].spans == on &&
                            (!on || (recs[k].pre == pre && recs[k].post == (last ? post : 0) &&
                                     recs[k].recv_cast == (last && ptypes[ti] != types[ti])));
                }
                if (!spans) printf("rank %d: %s: recorded %s\n", rank, what, rec_kinds());
                check(ok && spans, what);
                bufs_free(&b);
                dtr_param_group_destroy(g);
            }
    }
}

/* The fused buffer's layout and the factors of the groups used. */
static void test_layout(void) {
    dtr_param_group_t *g = make_group(mixed, NMIXED, 0x2, 0x1, DTR_BF16, 0, false);
    int ok = g != NULL;
    int64_t at = 0, fused = 0;
    for (int i = 0; i < NMIXED && ok; i++) {
        int64_t numel, shape[8], off;
        ok = dtr_param_group_param(g, i, &numel, shape, &off) == DTR_OK && off == at &&
             off % 512 == 0;
        geo_t e = geo(&mixed[i], 0x2);
        ok = ok && numel == e.shard && shape[mixed[i].shard_dim] == e.rows;
        int64_t chunk = (e.len + 3) / 4, piece = e.outer * chunk * e.inner * 2;
        at += (piece + 511) / 512 * 512;
    }
    dtr_grad_factors_t f = {0};
    ok = ok && dtr_param_group_info(g, &f, &fused) == DTR_OK && fused == at;
    check(ok, "layout: each view on a 512-byte boundary, fused bytes the aligned sum");
    check(f.world == 8 && f.rs_op == DTR_REDUCE_AVG && f.ar_op == DTR_REDUCE_AVG,
          "layout: HSDP bf16 on 2x4: D = 4 x 2, AVG");
    check(dtr_param_group_param(g, NMIXED, NULL, NULL, NULL) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "i: 6") != NULL,
          "param: i past the group: INVALID_ARGUMENT naming i");
    dtr_param_group_destroy(g);

    /* f16: SUM with pre 4 / post 2; a user factor; force-SUM. */
    static const struct {
        dtr_dtype_t t;
        double factor, D;
        bool force;
        const char *what;
    } fc[] = {{DTR_F16, 0, 8, false, "HSDP f16: pre 4, post 2, exact mean"},
              {DTR_F32, 4, 4, false, "HSDP f32, user factor 4: the sum over 8 divided by 4"},
              {DTR_BF16, 0, 8, true, "HSDP bf16, force SUM: exact mean"}};
    for (int c = 0; c < 3; c++) {
        g = make_group(mixed, NMIXED, 0x2, 0x1, fc[c].t, fc[c].factor, fc[c].force);
        bufs_t b;
        bufs_make(&b, mixed, NMIXED, 0x2);
        bufs_fill(&b, mixed, 0, 0, 1);
        ok = g != NULL && dtr_param_group_reduce(g, (const void *const *)b.grads, b.grad_bytes,
                                                 true, b.outs, b.out_bytes) == DTR_OK;
        check(ok && bufs_check(&b, mixed, 0, 1, fc[c].D, fc[c].what), fc[c].what);
        if (c == 0) {
            dtr_param_group_info(g, &f, NULL);
            check(f.pre == 4 && f.post == 2 && f.rs_op == DTR_REDUCE_SUM,
                  "HSDP f16 on 2x4: factors pre 4, post 2, SUM");
        }
        bufs_free(&b);
        dtr_param_group_destroy(g);
    }
}

/* ---- the pipeline ------------------------------------------------------------------------ */

/* Three layers of two parameters each, HSDP f32: pushed in backward order, with M
 * microbatches; the outputs exact, and the recorded operations in seed 004's order. */
static void pipeline_case(int M, const char *want_order, const char *what) {
    dtr_param_group_t *g[3];
    bufs_t b[3];
    dtr_grad_pipeline_t *p = NULL;
    int ok = dtr_grad_pipeline_create(ctx, &p) == DTR_OK;
    for (int l = 0; l < 3; l++) {
        g[l] = make_group(&mixed[2 * l], 2, 0x2, 0x1, DTR_F32, 0, false);
        bufs_make(&b[l], &mixed[2 * l], 2, 0x2);
        ok = ok && g[l] != NULL;
    }
    nrecs = 0;
    for (int m = 0; m < M && ok; m++)
        for (int l = 0; l < 3 && ok; l++) {
            bufs_fill(&b[l], &mixed[2 * l], 2 * l, m, M);
            ok = dtr_grad_pipeline_push(p, g[l], (const void *const *)b[l].grads,
                                        b[l].grad_bytes, m == M - 1, b[l].outs,
                                        b[l].out_bytes) == DTR_OK;
        }
    ok = ok && dtr_grad_pipeline_finish(p) == DTR_OK;
    for (int l = 0; l < 3 && ok; l++) ok = bufs_check(&b[l], &mixed[2 * l], 2 * l, M, 8, what);
    check(ok, what);
    char order[300];
    snprintf(order, sizeof order, "%s: recorded %s, want %s", what, rec_kinds(), want_order);
    check(strcmp(rec_kinds(), want_order) == 0, order);
    dtr_grad_pipeline_destroy(p);
    for (int l = 0; l < 3; l++) {
        bufs_free(&b[l]);
        dtr_param_group_destroy(g[l]);
    }
}

static void test_pipeline(void) {
    /* push 0: RS0; push 1: wait RS0, RS1, AR0; push 2: wait RS1 and AR0, RS2, AR1;
     * finish: wait RS2 and AR1, AR2. */
    pipeline_case(1, "rraraa", "pipeline, 3 HSDP layers: RS0 RS1 AR0 RS2 AR1 AR2, exact");
    /* The first microbatch's pushes only reduce-scatter and accumulate. */
    pipeline_case(2, "rrrrraraa",
                  "pipeline, 3 layers x 2 microbatches: 3 RS, then RS0 RS1 AR0 RS2 AR1 AR2");

    /* A push that fails (rank 3's grads[1] NULL) leaves the layer pushed before it to
     * complete at finish; that layer's outputs are exact, the failed one's untouched. */
    dtr_param_group_t *g0 = make_group(mixed, 2, 0x2, 0x1, DTR_F32, 0, false);
    dtr_param_group_t *g1 = make_group(&mixed[2], 2, 0x2, 0x1, DTR_F32, 0, false);
    bufs_t b0, b1;
    bufs_make(&b0, mixed, 2, 0x2);
    bufs_make(&b1, &mixed[2], 2, 0x2);
    bufs_fill(&b0, mixed, 0, 0, 1);
    bufs_fill(&b1, &mixed[2], 2, 0, 1);
    dtr_grad_pipeline_t *p = NULL;
    dtr_grad_pipeline_create(ctx, &p);
    dtr_status_t st0 = dtr_grad_pipeline_push(p, g0, (const void *const *)b0.grads,
                                              b0.grad_bytes, true, b0.outs, b0.out_bytes);
    const void *bad[2] = {b1.grads[0], rank == 3 ? NULL : b1.grads[1]};
    dtr_status_t st1 = dtr_grad_pipeline_push(p, g1, bad, b1.grad_bytes, true, b1.outs,
                                              b1.out_bytes);
    int named = rank == 3 ? st1 == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "grads[1]")
                          : st1 == DTR_ERR_REMOTE && strstr(dtr_last_error(), "rank 3") != NULL;
    dtr_status_t st2 = dtr_grad_pipeline_finish(p);
    check(st0 == DTR_OK && named && st2 == DTR_OK,
          "pipeline: rank 3's NULL grads[1]: INVALID_ARGUMENT naming it there, REMOTE elsewhere");
    check(bufs_check(&b0, mixed, 0, 1, 8, "pipeline after a failed push") &&
              bufs_outputs_untouched(&b1) && bufs_inputs_kept(&b1),
          "pipeline: the layer before the failed push completes exactly; the failed one's "
          "outputs untouched");
    /* The same group pushed twice before finish: BUSY, and the pipeline drains. */
    st0 = dtr_grad_pipeline_push(p, g0, (const void *const *)b0.grads, b0.grad_bytes, true,
                                 b0.outs, b0.out_bytes);
    st1 = dtr_grad_pipeline_push(p, g0, (const void *const *)b0.grads, b0.grad_bytes, true,
                                 b0.outs, b0.out_bytes);
    st2 = dtr_grad_pipeline_finish(p);
    check(st0 == DTR_OK && st1 == DTR_ERR_BUSY && strstr(dtr_last_error(), "g:") != NULL &&
              st2 == DTR_OK && bufs_check(&b0, mixed, 0, 1, 8, "after BUSY"),
          "pipeline: a group pushed while its reduction is pending: BUSY, the first completes");
    dtr_grad_pipeline_destroy(p);
    bufs_free(&b0);
    bufs_free(&b1);
    dtr_param_group_destroy(g0);
    dtr_param_group_destroy(g1);
}

/* ---- the foreach all-gather --------------------------------------------------------------- */

static void test_all_gather(void) {
    static const unsigned shards[] = {0x3, 0x2};
    for (int s = 0; s < 2; s++) {
        dtr_param_group_t *g = make_group(mixed, NMIXED, shards[s], 0, DTR_F32, 0, false);
        void *in[NMIXED], *full[NMIXED];
        size_t in_bytes[NMIXED], full_bytes[NMIXED];
        int ok = g != NULL;
        for (int i = 0; i < NMIXED; i++) {
            geo_t e = geo(&mixed[i], shards[s]);
            in_bytes[i] = (size_t)e.shard * e.item;
            full_bytes[i] = (size_t)e.numel * e.item;
            in[i] = malloc(in_bytes[i] + 1);
            full[i] = malloc(full_bytes[i] + 1);
            memset(full[i], 0x5a, full_bytes[i] + 1);
            /* This rank's shard of a full tensor whose element k is val(i, 0, 0, k). */
            for (int64_t o = 0; o < e.outer; o++)
                for (int64_t r = 0; r < e.rows; r++)
                    for (int64_t j = 0; j < e.inner; j++)
                        dtr__store(mixed[i].dtype, in[i], (o * e.rows + r) * e.inner + j,
                                   val(i, 0, 0, (o * e.len + e.off + r) * e.inner + j));
        }
        nrecs = 0;
        ok = ok && dtr_param_group_all_gather(g, (const void *const *)in, in_bytes, full,
                                              full_bytes) == DTR_OK;
        for (int i = 0; i < NMIXED && ok; i++) {
            geo_t e = geo(&mixed[i], shards[s]);
            for (int64_t k = 0; k < e.numel && ok; k++)
                ok = dtr__load(mixed[i].dtype, full[i], k) == val(i, 0, 0, k);
            ok = ok && ((unsigned char *)full[i])[full_bytes[i]] == 0x5a;
            if (!ok) printf("rank %d: all-gather: param %d wrong\n", rank, i);
        }
        char what[160];
        snprintf(what, sizeof what,
                 "foreach all-gather over %s: 6 mixed params exact, in one all-gather",
                 shards[s] == 0x3 ? "8" : "4");
        check(ok && nrecs == 1 && recs[0].kind == 'g' && recs[0].size == (s == 0 ? 8 : 4), what);
        /* rank 2's full_bytes[4]... parameter 5 too small: BUFFER_TOO_SMALL, REMOTE elsewhere */
        size_t fb5 = full_bytes[5];
        if (rank == 2) full_bytes[5] = fb5 - 1;
        memset(full[5], 0x5a, fb5 + 1);
        dtr_status_t st = dtr_param_group_all_gather(g, (const void *const *)in, in_bytes, full,
                                                     full_bytes);
        full_bytes[5] = fb5;
        int untouched = 1;
        for (size_t k = 0; k <= fb5; k++) untouched &= ((unsigned char *)full[5])[k] == 0x5a;
        int named = rank == 2 ? st == DTR_ERR_BUFFER_TOO_SMALL && strstr(dtr_last_error(), "full_bytes[5]")
                    : (st == DTR_ERR_REMOTE || (shards[s] == 0x2 && st == DTR_OK));
        if (s == 0)
            check(named && untouched,
                  "all-gather: rank 2's full_bytes[5] short: BUFFER_TOO_SMALL naming it, REMOTE "
                  "elsewhere, nothing written");
        for (int i = 0; i < NMIXED; i++) {
            free(in[i]);
            free(full[i]);
        }
        dtr_param_group_destroy(g);
    }
}

/* ---- hostile inputs ----------------------------------------------------------------------- */

static void test_errors(void) {
    dtr_param_group_desc_t d = {.mesh = mesh, .shard_dims = 0x2, .replicate_dims = 0x1,
                                .nparams = NMIXED, .params = mixed, .reduce_dtype = DTR_F32};
    dtr_param_group_t *g = NULL;
    dtr_param_group_desc_t e = d;
    e.nparams = 0;
    check(dtr_param_group_create(ctx, &e, &g) == DTR_ERR_INVALID_ARGUMENT && g == NULL &&
              strstr(dtr_last_error(), "desc->nparams: 0") != NULL,
          "create: an empty list: INVALID_ARGUMENT naming desc->nparams");
    e = d;
    e.params = NULL;
    check(dtr_param_group_create(ctx, &e, &g) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "desc->params") != NULL,
          "create: NULL params: INVALID_ARGUMENT naming desc->params");
    dtr_param_desc_t bad[NMIXED];
    memcpy(bad, mixed, sizeof bad);
    bad[3].shard_dim = 1;
    e = d;
    e.params = bad;
    check(dtr_param_group_create(ctx, &e, &g) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "desc->params[3].shard_dim") != NULL,
          "create: params[3]'s shard dim past its dims: INVALID_ARGUMENT naming it");
    memcpy(bad, mixed, sizeof bad);
    bad[4].dtype = DTR_I32;
    check(dtr_param_group_create(ctx, &e, &g) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "desc->params[4].dtype") != NULL,
          "create: an i32 parameter: INVALID_ARGUMENT naming desc->params[4].dtype");
    e = d;
    e.replicate_dims = 0x2;
    check(dtr_param_group_create(ctx, &e, &g) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "both") != NULL,
          "create: a mesh dim in both groups: INVALID_ARGUMENT");
    e = d;
    e.reduce_dtype = DTR_U8;
    check(dtr_param_group_create(ctx, &e, &g) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "desc->reduce_dtype") != NULL,
          "create: a u8 reduce dtype: INVALID_ARGUMENT naming it");

    g = make_group(mixed, NMIXED, 0x2, 0x1, DTR_F32, 0, false);
    bufs_t b;
    bufs_make(&b, mixed, NMIXED, 0x2);
    bufs_fill(&b, mixed, 0, 0, 1);
    /* A NULL buffer in the middle, on rank 3 only. */
    void *grads[NMIXED];
    memcpy(grads, b.grads, sizeof grads);
    if (rank == 3) grads[2] = NULL;
    dtr_status_t st = dtr_param_group_reduce(g, (const void *const *)grads, b.grad_bytes, true,
                                             b.outs, b.out_bytes);
    check((rank == 3 ? st == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "grads[2]")
                     : st == DTR_ERR_REMOTE && strstr(dtr_last_error(), "rank 3") != NULL) &&
              bufs_outputs_untouched(&b) && bufs_inputs_kept(&b),
          "reduce: rank 3's grads[2] NULL: named there, REMOTE naming rank 3 elsewhere, "
          "buffers untouched");
    /* A short output on rank 5. */
    size_t ob = b.out_bytes[2];
    if (rank == 5) b.out_bytes[2] = ob - 1;
    st = dtr_param_group_reduce(g, (const void *const *)b.grads, b.grad_bytes, true, b.outs,
                                b.out_bytes);
    b.out_bytes[2] = ob;
    check((rank == 5 ? st == DTR_ERR_BUFFER_TOO_SMALL && strstr(dtr_last_error(), "out_bytes[2]")
                     : st == DTR_ERR_REMOTE) &&
              bufs_outputs_untouched(&b) && bufs_inputs_kept(&b),
          "reduce: rank 5's out_bytes[2] short: BUFFER_TOO_SMALL naming it, REMOTE elsewhere, "
          "untouched");
    /* An output overlapping an input. */
    void *outs[NMIXED];
    memcpy(outs, b.outs, sizeof outs);
    if (rank == 0) outs[1] = b.grads[1];
    st = dtr_param_group_reduce(g, (const void *const *)b.grads, b.grad_bytes, true, outs,
                                b.out_bytes);
    check((rank == 0 ? st == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "outs[1]: overlaps grads[1]")
                     : st == DTR_ERR_REMOTE) &&
              bufs_inputs_kept(&b),
          "reduce: rank 0's outs[1] is grads[1]: INVALID_ARGUMENT naming both, input kept");
    /* One rank's list differs: rank 6 made its group with another shape for parameter 1. */
    memcpy(bad, mixed, sizeof bad);
    if (rank == 6) bad[1].shape[2] = 4;
    dtr_param_group_t *h = make_group(bad, NMIXED, 0x2, 0x1, DTR_F32, 0, false);
    bufs_t hb;
    bufs_make(&hb, bad, NMIXED, 0x2);
    bufs_fill(&hb, bad, 0, 0, 1);
    st = dtr_param_group_reduce(h, (const void *const *)hb.grads, hb.grad_bytes, true, hb.outs,
                                hb.out_bytes);
    check(st == DTR_ERR_MISMATCH && bufs_outputs_untouched(&hb) && bufs_inputs_kept(&hb),
          "reduce: rank 6's list differs: MISMATCH everywhere, buffers untouched");
    bufs_free(&hb);
    dtr_param_group_destroy(h);
    /* Ranks disagree on sync. */
    st = dtr_param_group_reduce(g, (const void *const *)b.grads, b.grad_bytes, rank != 2,
                                b.outs, b.out_bytes);
    check(st == DTR_ERR_MISMATCH && bufs_outputs_untouched(&b),
          "reduce: rank 2 alone skips the all-reduce: MISMATCH everywhere");
    st = dtr_param_group_reduce(g, NULL, b.grad_bytes, true, b.outs, b.out_bytes);
    check(st == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "grads: must not be NULL"),
          "reduce: grads NULL everywhere: INVALID_ARGUMENT naming grads");
    /* ...and the group still works afterwards. */
    st = dtr_param_group_reduce(g, (const void *const *)b.grads, b.grad_bytes, true, b.outs,
                                b.out_bytes);
    check(st == DTR_OK && bufs_check(&b, mixed, 0, 1, 8, "after the errors"),
          "reduce: after the errors, the next reduction is exact");
    bufs_free(&b);
    dtr_param_group_destroy(g);
}


/* ---- device contexts: the fake device space, or CUDA memory (DTR_TEST_SPACE=cuda) -------- */

static test_space_t sp; /* the device context's space (test_space.h) */

/* Copies of a group's host buffers in the device space. */
typedef struct {
    void *grads[NMIXED], *outs[NMIXED];
} dbufs_t;

static void dbufs_make(dbufs_t *d, const bufs_t *b) {
    for (int i = 0; i < b->n; i++) {
        d->grads[i] = test_space_in(&sp, b->grads[i], b->grad_bytes[i]);
        d->outs[i] = test_space_in(&sp, b->outs[i], b->out_bytes[i] + 1);
    }
}

/* The device buffers back into the host ones the checks read (inputs too, to see them kept). */
static void dbufs_back(dbufs_t *d, bufs_t *b, bool free_them) {
    for (int i = 0; i < b->n; i++) {
        test_space_get(&sp, b->grads[i], d->grads[i], b->grad_bytes[i]);
        test_space_get(&sp, b->outs[i], d->outs[i], b->out_bytes[i] + 1);
        if (free_them) {
            sp.ops->free(sp.state, d->grads[i]);
            sp.ops->free(sp.state, d->outs[i]);
        }
    }
}

/* The pipeline over two groups on the device context dctx. */
static void device_pipeline(dtr_context_t *dctx) {
    dtr_param_group_t *g0 = make_group(mixed, 3, 0x2, 0x1, DTR_BF16, 0, false);
    dtr_param_group_t *g1 = make_group(&mixed[3], 3, 0x2, 0x1, DTR_BF16, 0, false);
    bufs_t b0, b1;
    dbufs_t d0, d1;
    bufs_make(&b0, mixed, 3, 0x2);
    bufs_make(&b1, &mixed[3], 3, 0x2);
    bufs_fill(&b0, mixed, 0, 0, 1);
    bufs_fill(&b1, &mixed[3], 3, 0, 1);
    dbufs_make(&d0, &b0);
    dbufs_make(&d1, &b1);
    dtr_grad_pipeline_t *p = NULL;
    int ok = dtr_grad_pipeline_create(dctx, &p) == DTR_OK &&
             dtr_grad_pipeline_push(p, g1, (const void *const *)d1.grads, b1.grad_bytes,
                                    true, d1.outs, b1.out_bytes) == DTR_OK &&
             dtr_grad_pipeline_push(p, g0, (const void *const *)d0.grads, b0.grad_bytes,
                                    true, d0.outs, b0.out_bytes) == DTR_OK &&
             dtr_grad_pipeline_finish(p) == DTR_OK;
    dbufs_back(&d0, &b0, true);
    dbufs_back(&d1, &b1, true);
    check(ok && bufs_check(&b0, mixed, 0, 1, 8, "device pipeline") &&
              bufs_check(&b1, &mixed[3], 3, 1, 8, "device pipeline"),
          "device: the pipeline over two groups, exact");
    dtr_grad_pipeline_destroy(p);
    bufs_free(&b0);
    bufs_free(&b1);
    dtr_param_group_destroy(g0);
    dtr_param_group_destroy(g1);
}

/* The foreach all-gather of the mixed params on the device context (ctx). */
static void device_all_gather(void) {
    dtr_param_group_t *g = make_group(mixed, NMIXED, 0x3, 0, DTR_F32, 0, false);
    void *in[NMIXED], *full[NMIXED];
    size_t in_bytes[NMIXED], full_bytes[NMIXED];
    int ok = g != NULL;
    for (int i = 0; i < NMIXED; i++) {
        geo_t e = geo(&mixed[i], 0x3);
        in_bytes[i] = (size_t)e.shard * e.item;
        full_bytes[i] = (size_t)e.numel * e.item;
        char *h = malloc(full_bytes[i] + 1);
        memset(h, 0x5a, full_bytes[i] + 1);
        full[i] = test_space_in(&sp, h, full_bytes[i] + 1);
        for (int64_t o = 0; o < e.outer; o++)
            for (int64_t r = 0; r < e.rows; r++)
                for (int64_t j = 0; j < e.inner; j++)
                    dtr__store(mixed[i].dtype, h, (o * e.rows + r) * e.inner + j,
                               val(i, 0, 0, (o * e.len + e.off + r) * e.inner + j));
        in[i] = test_space_in(&sp, h, in_bytes[i]);
        free(h);
    }
    ok = ok && dtr_param_group_all_gather(g, (const void *const *)in, in_bytes, full,
                                          full_bytes) == DTR_OK;
    for (int i = 0; i < NMIXED; i++) {
        geo_t e = geo(&mixed[i], 0x3);
        char *h = malloc(full_bytes[i] + 1);
        test_space_out(&sp, h, full[i], full_bytes[i] + 1);
        for (int64_t k = 0; k < e.numel && ok; k++)
            ok = dtr__load(mixed[i].dtype, h, k) == val(i, 0, 0, k);
        ok = ok && (unsigned char)h[full_bytes[i]] == 0x5a; /* nothing past the end */
        free(h);
        sp.ops->free(sp.state, in[i]);
    }
    check(ok, "device: the foreach all-gather of 6 mixed params, exact");
    dtr_param_group_destroy(g);
}

static void test_device(void) {
    dtr_context_t *host_ctx = ctx, *dctx = NULL;
    if (test_space_open("group_mpi_test", rank, &sp) != 0) {
        check(0, "device: a space for the device contexts");
        return;
    }
    dtr_memory_ops_t no_add = *sp.ops;
    no_add.add = NULL;
    dctx = recording_mpi_context(sp.ops, sp.state); /* owns sp.state */
    if (dctx == NULL) {
        check(0, "device: a context on the device space");
        return;
    }
    ctx = dctx; /* make_group creates on ctx */
    static const dtr_dtype_t types[] = {DTR_F32, DTR_BF16, DTR_F16};
    char what[200];
    for (int ti = 0; ti < 3; ti++) {
        dtr_param_group_t *g = make_group(mixed, NMIXED, 0x2, 0x1, types[ti], 0, false);
        bufs_t b;
        dbufs_t d;
        bufs_make(&b, mixed, NMIXED, 0x2);
        fake_device_counts_t before = fake_device_counts();
        int ok = g != NULL;
        for (int m = 0; m < 2 && ok; m++) {
            bufs_fill(&b, mixed, 0, m, 2);
            dbufs_make(&d, &b);
            ok = dtr_param_group_reduce(g, (const void *const *)d.grads, b.grad_bytes, m == 1,
                                        d.outs, b.out_bytes) == DTR_OK;
            if (!ok) printf("rank %d: device reduce: %s\n", rank, dtr_last_error());
            dbufs_back(&d, &b, true);
            ok = ok && bufs_inputs_kept(&b);
        }
        fake_device_counts_t after = fake_device_counts();
        snprintf(what, sizeof what,
                 "device: HSDP reduce %s, 2 microbatches, 6 mixed params in the %s device "
                 "space: exact, cast and add through the space",
                 dtr_dtype_name(types[ti]), sp.name);
        check(ok && bufs_check(&b, mixed, 0, 2, 8, what) &&
                  test_space_counted(&sp, after.cast > before.cast && after.add > before.add &&
                          after.refused == before.refused),
              what);
        bufs_free(&b);
        dtr_param_group_destroy(g);
    }
    /* The pipeline and the all-gather on the device context. */
    device_pipeline(dctx);
    device_all_gather();
    /* What a device space cannot do: a fractional factor; accumulating without add. */
    dtr_param_group_t *g = NULL;
    dtr_param_group_desc_t dd = {.mesh = mesh, .shard_dims = 0x2, .replicate_dims = 0x1,
                                 .nparams = 2, .params = mixed, .reduce_dtype = DTR_F32,
                                 .factor = 2.5};
    check(dtr_param_group_create(dctx, &dd, &g) == DTR_ERR_UNSUPPORTED &&
              strstr(dtr_last_error(), "desc->factor: 2.5") != NULL,
          "device: a factor of 2.5: UNSUPPORTED naming desc->factor (whole-number divides)");
    dtr_context_destroy(dctx);
    dctx = test_space_open("group_mpi_test", rank, &sp) == 0
               ? recording_mpi_context(&no_add, sp.state) : NULL;
    check(dctx != NULL, "device: a context on a space without add");
    if (dctx != NULL) {
        ctx = dctx;
        g = make_group(mixed, 2, 0x2, 0x1, DTR_F32, 0, false);
        bufs_t b;
        dbufs_t d;
        bufs_make(&b, mixed, 2, 0x2);
        bufs_fill(&b, mixed, 0, 0, 1);
        dbufs_make(&d, &b);
        dtr_status_t st = dtr_param_group_reduce(g, (const void *const *)d.grads, b.grad_bytes,
                                                 false, NULL, NULL);
        check(st == DTR_ERR_UNSUPPORTED && strstr(dtr_last_error(), "sync: false") != NULL,
              "device: a space without add, sync false: UNSUPPORTED naming sync");
        st = dtr_param_group_reduce(g, (const void *const *)d.grads, b.grad_bytes, true, d.outs,
                                    b.out_bytes);
        dbufs_back(&d, &b, true);
        check(st == DTR_OK && bufs_check(&b, mixed, 0, 1, 8, "no add, sync"),
              "device: a space without add still reduces a synced microbatch");
        bufs_free(&b);
        dtr_param_group_destroy(g);
    }
    dtr_context_destroy(dctx);
    ctx = host_ctx;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 8) {
        if (rank == 0) fprintf(stderr, "group_mpi_test: run under mpirun -n 8\n");
        MPI_Finalize();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int space_rc = test_space_probe("group_mpi_test", rank); /* DTR_TEST_SPACE usable? */
    if (space_rc >= 0) return MPI_Finalize(), space_rc;
    int64_t sizes[2] = {2, 4};
    if (dtr_mesh_create(2, sizes, NULL, 0, &mesh) != DTR_OK ||
        (ctx = recording_mpi_context(NULL, NULL)) == NULL) {
        fprintf(stderr, "rank %d: setup: %s\n", rank, dtr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    test_modes();
    test_direct();
    test_layout();
    test_pipeline();
    test_all_gather();
    test_errors();
    test_device();
    check(mpi_paths_check("parameter groups") == 0, "each group's path: shared memory inside a node, MPI across nodes");
    dtr_context_destroy(ctx);
    dtr_mesh_destroy(mesh);
    int rc = mpi_check_finish("parameter groups on 8 ranks");
    MPI_Finalize();
    return rc;
}
