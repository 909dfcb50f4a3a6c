/*
 * Gradient reduction under MPI on 8 ranks (a 2x4 mesh): every DDP hook and the compress
 * wrapper in every dtype, the FSDP and HSDP reducer (uneven and later-dim shards, runtime
 * factors, user factor, force-SUM), HSDP gradient accumulation and its order, the fused
 * all-reduce, fp16 overflow near 60000, and the error paths. Values are small integers over
 * powers of two, so every expected mean is exact in every dtype: checks compare for
 * equality.
 *
 * The device section runs the hooks, the reducer and the fused all-reduce on a context whose
 * memory is the fake device space, or CUDA memory where DTR_TEST_SPACE=cuda (a GPU machine:
 * the shared-GPU mode, every cast, divide and add a kernel; tools/gpu_device_pack.sh).
 *
 * Usage: [DTR_TEST_SPACE=cuda] mpirun -n 8 grad_mpi_test. Ends with "N passed, N failed" on
 * rank 0.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "tests/support/mpi_check.h"
#include "tests/support/mpi_paths.h"
#include "numeric/numeric.h"
#include "backends/mpi/dtr_mpi.h"
#include "tests/support/recording_backend.h"
#include "tests/support/fake_device.h"
#include "tests/support/test_space.h"

/* ---- values ------------------------------------------------------------------------- */

static dtr_mesh_t *mesh; /* 2x4: dim 0 the replicate group (0x1), dim 1 the shard group (0x2) */
static dtr_context_t *ctx;
/* Set while ctx is a device context: the cases copy their buffers into its space and back
 * around each call (test_device). The space is the fake device, or CUDA memory with
 * DTR_TEST_SPACE=cuda (test_space.h). */
static int on_device;
static test_space_t sp;

/* A copy of n host bytes in the device space (on_device), or the host buffer itself; back
 * into h, then freed. */
static void *dev_in(const void *h, size_t n) { return on_device ? test_space_in(&sp, h, n) : (void *)h; }
static void dev_out(void *h, void *d, size_t n) { if (on_device) test_space_out(&sp, h, d, n); }

/* Rank p's gradient at element k of microbatch m: an integer in -8..7. */
static double val(int p, int m, int64_t k) { return (double)((k * 7 + p * 13 + m * 5) % 16 - 8); }

/* Position of rank p in the group `dims` and the ranks of that group. */
static int group_of(unsigned dims, int p, int *members) {
    int n = 0;
    int64_t pc[2], c[2];
    dtr_mesh_coord(mesh, p, pc);
    for (int q = 0; q < world; q++) {
        dtr_mesh_coord(mesh, q, c);
        if (((dims & 1) || c[0] == pc[0]) && ((dims & 2) || c[1] == pc[1])) members[n++] = q;
    }
    return n;
}

/* Mean over the group `dims` of this rank, microbatch 0, element k, scaled by `scale`. */
static double group_mean(unsigned dims, int64_t k, double base, double step) {
    int members[8], n = group_of(dims, rank, members);
    double s = 0;
    for (int i = 0; i < n; i++) s += base + step * val(members[i], 0, k);
    return s / n;
}

static void fill(dtr_dtype_t t, void *buf, int64_t count, int m, double base, double step,
                 double scale) {
    for (int64_t k = 0; k < count; k++) dtr__store(t, buf, k, (base + step * val(rank, m, k)) * scale);
}

/* ---- DDP hooks ---------------------------------------------------------------------- */

static int hook_case(dtr_grad_hook_fn hook, void *arg, unsigned dims, dtr_dtype_t t,
                     int64_t count) {
    size_t item = (size_t)dtr_dtype_info(t)->size;
    void *buf = malloc((size_t)count * item + 1);
    fill(t, buf, count, 0, 0, 1, 1);
    void *d = dev_in(buf, (size_t)count * item);
    dtr_status_t st = hook(arg, ctx, mesh, dims, d, count, t);
    dev_out(buf, d, (size_t)count * item);
    int ok = st == DTR_OK;
    for (int64_t k = 0; k < count && ok; k++) {
        double got = dtr__load(t, buf, k), want = group_mean(dims, k, 0, 1);
        if (got != want) {
            printf("rank %d: element %lld: got %.9g, want %.9g\n", rank, (long long)k, got, want);
            ok = 0;
        }
    }
    free(buf);
    return ok;
}

static void test_hooks(void) {
    static const dtr_dtype_t types[] = {DTR_F32, DTR_F64, DTR_BF16, DTR_F16};
    static const unsigned groups[] = {0x3, 0x2, 0x1};
    char what[160];
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < 4; i++) {
            snprintf(what, sizeof what, "all-reduce hook, %s, dims 0x%x: the exact group mean",
                     dtr_dtype_name(types[i]), groups[g]);
            check(hook_case(dtr_hook_all_reduce, NULL, groups[g], types[i], 1001), what);
        }
    for (int i = 0; i < 2; i++) {
        snprintf(what, sizeof what, "fp16 compress hook on %s", dtr_dtype_name(types[i]));
        check(hook_case(dtr_hook_fp16_compress, NULL, 0x3, types[i], 777), what);
        snprintf(what, sizeof what, "bf16 compress hook on %s", dtr_dtype_name(types[i]));
        check(hook_case(dtr_hook_bf16_compress, NULL, 0x3, types[i], 777), what);
    }
    dtr_compress_wrapper_t w16 = {DTR_F16, dtr_hook_all_reduce, NULL};
    dtr_compress_wrapper_t wbf = {DTR_BF16, dtr_hook_all_reduce, NULL};
    check(hook_case(dtr_hook_compress_wrapper, &w16, 0x2, DTR_F32, 500),
          "compress wrapper (f16) around the all-reduce hook");
    check(hook_case(dtr_hook_compress_wrapper, &wbf, 0x3, DTR_F32, 500),
          "compress wrapper (bf16) around the all-reduce hook");

    /* What goes on the wire: the compress hook all-reduces f16 SUM, count elements. */
    float buf[10];
    fill(DTR_F32, buf, 10, 0, 0, 1, 1);
    nrecs = 0;
    dtr_status_t st = dtr_hook_fp16_compress(NULL, ctx, mesh, 0x3, buf, 10, DTR_F32);
    check(st == DTR_OK && nrecs == 1 && recs[0].kind == 'a' && recs[0].dtype == DTR_F16 &&
              recs[0].op == DTR_REDUCE_SUM && recs[0].count == 10,
          "fp16 compress hook: one f16 SUM all-reduce");

    /* Inside a node, larger: one all-reduce over span lists in place, the divide by N (and
     * the casts to f16 and back) on its passes; the same exact means. */
    int on = mpi_paths_spans_on(0, 1, 8);
    for (int h = 0; h < 2; h++) {
        nrecs = 0;
        int ok = hook_case(h ? dtr_hook_fp16_compress : dtr_hook_all_reduce, NULL, 0x3, DTR_F32,
                           4000);
        ok = ok && nrecs == 1 && recs[0].kind == 'a' && recs[0].count == 4000 &&
             recs[0].dtype == (h ? DTR_F16 : DTR_F32) && recs[0].spans == on;
        check(ok && (!on || (recs[0].pre == 8 && recs[0].recv_cast == h && recs[0].post == 0)),
              h ? "fp16 compress hook, 4000 f32: one f16 all-reduce, span lists in a node"
                : "all-reduce hook, 4000 f32: one all-reduce, span lists in a node, pre 8");
    }

    /* Rank 3 passes another count: MISMATCH everywhere, and no rank's buffer is divided. */
    float keep[10];
    fill(DTR_F32, buf, 10, 0, 0, 1, 1);
    memcpy(keep, buf, sizeof keep);
    st = dtr_hook_all_reduce(NULL, ctx, mesh, 0x3, buf, rank == 3 ? 9 : 10, DTR_F32);
    check(st == DTR_ERR_MISMATCH && memcmp(buf, keep, sizeof keep) == 0,
          "all-reduce hook, rank 3's count differs: MISMATCH everywhere, buffers untouched");

    /* Errors: a dtype a hook cannot reduce, a wrapper without a hook. */
    int32_t ibuf[4] = {1, 2, 3, 4};
    st = dtr_hook_all_reduce(NULL, ctx, mesh, 0x3, ibuf, 4, DTR_I32);
    check(st == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "dtype") != NULL &&
              ibuf[0] == 1,
          "all-reduce hook on i32: INVALID_ARGUMENT naming dtype, buffer untouched");
    dtr_compress_wrapper_t bad = {DTR_F16, NULL, NULL};
    st = dtr_hook_compress_wrapper(&bad, ctx, mesh, 0x3, buf, 10, DTR_F32);
    check(st == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "arg") != NULL,
          "compress wrapper without a hook: INVALID_ARGUMENT naming arg");
    dtr_compress_wrapper_t badlow = {DTR_F32, dtr_hook_all_reduce, NULL};
    st = dtr_hook_compress_wrapper(&badlow, ctx, mesh, 0x3, buf, 10, DTR_F32);
    check(st == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "low") != NULL,
          "compress wrapper to f32: INVALID_ARGUMENT naming low");
    st = dtr_hook_all_reduce(NULL, ctx, mesh, 0x4, buf, 10, DTR_F32);
    check(st == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "dims") != NULL,
          "dims naming a third mesh dim of a 2-D mesh: INVALID_ARGUMENT naming dims");
}

/* ---- the reducer -------------------------------------------------------------------- */

typedef struct {
    unsigned shard, rep;
    int ndim;
    int64_t shape[3];
    int shard_dim;
    dtr_dtype_t reduce;
    int microbatches;
    double factor;
    bool force_sum;
} rcase_t;

/* Runs a reducer case; the expected value of every shard element is the mean over the
 * shard x replicate group (or the sum over the user's factor) of the microbatches' sums. */
static int reducer_case(const rcase_t *c, const char *what, float *wrong_out, int *differs) {
    dtr_reducer_desc_t d = {.mesh = mesh, .shard_dims = c->shard, .replicate_dims = c->rep,
                            .ndim = c->ndim, .shard_dim = c->shard_dim, .param_dtype = DTR_F32,
                            .reduce_dtype = c->reduce, .factor = c->factor,
                            .force_sum = c->force_sum};
    memcpy(d.shape, c->shape, sizeof c->shape);
    dtr_reducer_t *r = NULL;
    dtr_status_t st = dtr_reducer_create(ctx, &d, &r);
    if (st != DTR_OK) {
        printf("rank %d: %s: create: %s\n", rank, what, dtr_last_error());
        return 0;
    }
    int64_t numel = 1, outer = 1, inner = 1, len = c->shape[c->shard_dim];
    for (int i = 0; i < c->ndim; i++) numel *= c->shape[i];
    for (int i = 0; i < c->shard_dim; i++) outer *= c->shape[i];
    for (int i = c->shard_dim + 1; i < c->ndim; i++) inner *= c->shape[i];
    int64_t shard_numel, shard_shape[8], index, rows, off;
    dtr_grad_factors_t f;
    dtr_reducer_info(r, &f, &shard_numel, shard_shape);
    dtr_mesh_group_index(mesh, c->shard, rank, &index);
    int64_t rs_n, ar_n;
    dtr_mesh_group_size(mesh, c->shard, &rs_n);
    dtr_mesh_group_size(mesh, c->rep, &ar_n);
    dtr_chunk(len, rs_n, index, &rows, &off);
    int ok = shard_numel == outer * rows * inner && shard_shape[c->shard_dim] == rows;
    float *grad = malloc((size_t)(numel + 1) * sizeof *grad);
    float *copy = malloc((size_t)(numel + 1) * sizeof *copy);
    float *out = malloc((size_t)(shard_numel + 1) * sizeof *out);
    out[shard_numel] = 12345.0f; /* nothing may be written past the shard */
    for (int m = 0; m < c->microbatches && ok; m++) {
        fill(DTR_F32, grad, numel, m, 0, 1, 1.0 / c->microbatches);
        memcpy(copy, grad, (size_t)numel * sizeof *grad);
        void *dg = dev_in(grad, (size_t)numel * sizeof *grad);
        void *dout = dev_in(out, (size_t)shard_numel * sizeof *out);
        st = dtr_reducer_reduce(r, dg, (size_t)numel * sizeof *grad,
                                m == c->microbatches - 1, dout, (size_t)shard_numel * sizeof *out);
        dev_out(grad, dg, (size_t)numel * sizeof *grad);
        dev_out(out, dout, (size_t)shard_numel * sizeof *out);
        ok = st == DTR_OK && memcmp(copy, grad, (size_t)numel * sizeof *grad) == 0;
        if (!ok) printf("rank %d: %s: microbatch %d: %s\n", rank, what, m, dtr_last_error());
    }
    double D = c->factor > 0 ? c->factor : (double)(rs_n * ar_n);
    int members[8], n = group_of(c->shard | c->rep, rank, members);
    int smembers[8], sn = group_of(c->shard, rank, smembers);
    if (differs != NULL) *differs = 0;
    for (int64_t o = 0; o < outer && ok; o++)
        for (int64_t i = 0; i < rows && ok; i++)
            for (int64_t j = 0; j < inner && ok; j++) {
                int64_t k = (o * len + off + i) * inner + j;
                double want = 0, last = 0, early = 0;
                for (int q = 0; q < n; q++)
                    for (int m = 0; m < c->microbatches; m++) {
                        want += val(members[q], m, k) / c->microbatches;
                        if (m == c->microbatches - 1) last += val(members[q], m, k) / c->microbatches;
                    }
                for (int q = 0; q < sn; q++)
                    for (int m = 0; m < c->microbatches - 1; m++)
                        early += val(smembers[q], m, k) / c->microbatches;
                want /= D;
                double got = out[(o * rows + i) * inner + j];
                if (got != want) {
                    printf("rank %d: %s: element %lld: got %.9g, want %.9g\n", rank, what,
                           (long long)k, got, want);
                    ok = 0;
                }
                /* The wrong order: each early microbatch all-reduced on its own would leave
                 * only its shard group's mean here. */
                double wrong = last / D + early / sn;
                if (wrong_out != NULL) *wrong_out = (float)wrong;
                if (differs != NULL && wrong != want) *differs = 1;
            }
    if (ok && out[shard_numel] != 12345.0f) {
        printf("rank %d: %s: written past the shard\n", rank, what);
        ok = 0;
    }
    free(grad);
    free(copy);
    free(out);
    dtr_reducer_destroy(r);
    return ok;
}

/* The reducer's run-time factors, its errors at create naming the field, and bad calls on
 * one rank that every rank returns from. */
static void test_reducer_setup(void) {
    /* The factors the reducer picked at run time, from the groups it uses. */
    dtr_reducer_desc_t d = {.mesh = mesh, .shard_dims = 0x2, .replicate_dims = 0x1, .ndim = 1,
                            .shape = {16}, .param_dtype = DTR_F32, .reduce_dtype = DTR_F16};
    dtr_reducer_t *r = NULL;
    dtr_grad_factors_t f = {0};
    const char *names[2];
    int nn = 0;
    if (dtr_reducer_create(ctx, &d, &r) == DTR_OK) {
        dtr_reducer_info(r, &f, NULL, NULL);
        nn = dtr_grad_ops(&f, names, 2);
    }
    check(f.world == 8 && f.pre == 4 && f.post == 2 && f.rs_op == DTR_REDUCE_SUM &&
              f.ar_op == DTR_REDUCE_SUM && nn == 2 &&
              strcmp(names[0], "reduce_scatter:sum") == 0 &&
              strcmp(names[1], "all_reduce:sum") == 0,
          "HSDP f16 on 2x4: D = 4 x 2 = 8, pre 4, post 2, SUM both");
    dtr_reducer_destroy(r);
    r = NULL;
    d.reduce_dtype = DTR_BF16;
    memset(&f, 0, sizeof f);
    if (dtr_reducer_create(ctx, &d, &r) == DTR_OK) dtr_reducer_info(r, &f, NULL, NULL);
    check(f.world == 8 && f.pre == 1 && f.post == 1 && f.rs_op == DTR_REDUCE_AVG &&
              f.ar_op == DTR_REDUCE_AVG,
          "HSDP bf16 on 2x4: AVG both, no explicit divide");
    dtr_reducer_destroy(r);

    /* Errors at create: each names the field. */
    dtr_reducer_desc_t e = d;
    e.replicate_dims = 0x2;
    r = NULL;
    check(dtr_reducer_create(ctx, &e, &r) == DTR_ERR_INVALID_ARGUMENT && r == NULL &&
              strstr(dtr_last_error(), "both") != NULL,
          "reducer: a mesh dim in both groups: INVALID_ARGUMENT");
    e = d;
    e.shard_dim = 1;
    check(dtr_reducer_create(ctx, &e, &r) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "shard_dim") != NULL,
          "reducer: shard_dim past the gradient's dims: INVALID_ARGUMENT naming it");
    e = d;
    e.param_dtype = DTR_I32;
    check(dtr_reducer_create(ctx, &e, &r) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "param_dtype") != NULL,
          "reducer: i32 gradients: INVALID_ARGUMENT naming param_dtype");
    e = d;
    e.factor = NAN;
    check(dtr_reducer_create(ctx, &e, &r) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "factor") != NULL,
          "reducer: a NaN factor: INVALID_ARGUMENT naming factor");
    e = d;
    e.shape[0] = -1;
    check(dtr_reducer_create(ctx, &e, &r) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "shape[0]") != NULL,
          "reducer: a negative dim: INVALID_ARGUMENT naming shape[0]");

    /* One rank's bad buffer size: it says why, the others say which rank, nobody hangs. */
    d.reduce_dtype = DTR_F32;
    r = NULL;
    dtr_reducer_create(ctx, &d, &r);
    float g[16], out[4];
    fill(DTR_F32, g, 16, 0, 0, 1, 1);
    size_t gb = rank == 5 ? sizeof g - 4 : sizeof g;
    dtr_status_t st = dtr_reducer_reduce(r, g, gb, true, out, sizeof out);
    check(rank == 5 ? st == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "grad_bytes")
                    : st == DTR_ERR_REMOTE && strstr(dtr_last_error(), "rank 5") != NULL,
          "reducer: rank 5's grad_bytes wrong: INVALID_ARGUMENT there, REMOTE naming it elsewhere");
    /* Ranks that disagree on sync: MISMATCH everywhere, no hang. */
    st = dtr_reducer_reduce(r, g, sizeof g, rank != 2, out, sizeof out);
    check(st == DTR_ERR_MISMATCH, "reducer: rank 2 skips the all-reduce alone: MISMATCH everywhere");
    st = dtr_reducer_reduce(r, g, sizeof g, true, out, rank == 1 ? 4 : sizeof out);
    check(rank == 1 ? st == DTR_ERR_BUFFER_TOO_SMALL : st == DTR_ERR_REMOTE,
          "reducer: rank 1's out too small: BUFFER_TOO_SMALL there, REMOTE elsewhere");
    /* ...and it still works afterwards. */
    st = dtr_reducer_reduce(r, g, sizeof g, true, out, sizeof out);
    int index = 0;
    {
        int64_t ix;
        dtr_mesh_group_index(mesh, 0x2, rank, &ix);
        index = (int)ix;
    }
    int good = st == DTR_OK;
    for (int k = 0; k < 4 && good; k++) good = out[k] == group_mean(0x3, index * 4 + k, 0, 1);
    check(good, "reducer: after the errors, the next reduction is exact");
    dtr_reducer_destroy(r);
}

static void test_reducer(void) {
    static const dtr_dtype_t types[] = {DTR_F32, DTR_BF16, DTR_F16, DTR_F64};
    char what[200];
    for (int i = 0; i < 4; i++) {
        rcase_t fsdp = {.shard = 0x3, .ndim = 1, .shape = {1003}, .reduce = types[i],
                        .microbatches = 1};
        snprintf(what, sizeof what, "FSDP over 8, 1003 elements (uneven), reduce %s",
                 dtr_dtype_name(types[i]));
        check(reducer_case(&fsdp, what, NULL, NULL), what);
        rcase_t later = {.shard = 0x3, .ndim = 3, .shape = {3, 11, 5}, .shard_dim = 1,
                         .reduce = types[i], .microbatches = 1};
        snprintf(what, sizeof what, "FSDP over 8, 3x11x5 sharded on dim 1, reduce %s",
                 dtr_dtype_name(types[i]));
        check(reducer_case(&later, what, NULL, NULL), what);
        rcase_t hsdp = {.shard = 0x2, .rep = 0x1, .ndim = 2, .shape = {10, 7},
                        .reduce = types[i], .microbatches = 1};
        snprintf(what, sizeof what, "HSDP 2x4, 10x7, reduce %s", dtr_dtype_name(types[i]));
        check(reducer_case(&hsdp, what, NULL, NULL), what);
    }
    for (int i = 0; i < 4; i++) {
        rcase_t ar = {.shard = 0, .rep = 0x3, .ndim = 2, .shape = {9, 5}, .reduce = types[i],
                      .microbatches = 2};
        snprintf(what, sizeof what, "FSDP all-reduce variant (no shard group), reduce %s",
                 dtr_dtype_name(types[i]));
        check(reducer_case(&ar, what, NULL, NULL), what);
    }
    rcase_t tiny = {.shard = 0x3, .ndim = 1, .shape = {3}, .reduce = DTR_F32, .microbatches = 2};
    check(reducer_case(&tiny, "FSDP, 3 elements on 8 ranks (5 empty shards)", NULL, NULL),
          "FSDP with empty shards");
    rcase_t user = {.shard = 0x2, .rep = 0x1, .ndim = 1, .shape = {64}, .reduce = DTR_F32,
                    .microbatches = 1, .factor = 4};
    check(reducer_case(&user, "HSDP, user factor 4", NULL, NULL),
          "user factor 4: the sum over 8 ranks divided by 4");
    rcase_t fsum = {.shard = 0x2, .rep = 0x1, .ndim = 1, .shape = {64}, .reduce = DTR_BF16,
                    .microbatches = 1, .force_sum = true};
    nrecs = 0;
    check(reducer_case(&fsum, "HSDP bf16, force SUM", NULL, NULL), "force SUM: exact mean");
    check(nrecs == 2 && recs[0].op == DTR_REDUCE_SUM && recs[1].op == DTR_REDUCE_SUM,
          "force SUM: both collectives SUM");

    /* HSDP gradient accumulation: 2 microbatches on 2x4, exactly the mean over 8 ranks and
     * both microbatches; the collectives run RS, RS, AR (accumulate, then all-reduce); and
     * the result is not what the wrong order would give. */
    static const dtr_dtype_t acc_types[] = {DTR_F32, DTR_BF16, DTR_F16};
    for (int i = 0; i < 3; i++) {
        rcase_t acc = {.shard = 0x2, .rep = 0x1, .ndim = 1, .shape = {1000}, .reduce = acc_types[i],
                       .microbatches = 2};
        int differs = 0;
        nrecs = 0;
        snprintf(what, sizeof what, "HSDP accumulation, 2 microbatches, reduce %s",
                 dtr_dtype_name(acc_types[i]));
        check(reducer_case(&acc, what, NULL, &differs), what);
        int order = nrecs == 3 && recs[0].kind == 'r' && recs[1].kind == 'r' &&
                    recs[2].kind == 'a' && recs[0].count == 250 && recs[2].count == 250 &&
                    recs[0].dtype == acc_types[i];
        snprintf(what, sizeof what,
                 "HSDP accumulation (%s): reduce-scatter, reduce-scatter, then one all-reduce",
                 dtr_dtype_name(acc_types[i]));
        check(order, what);
        check(differs, "HSDP accumulation: the result differs from the all-reduce-first order");
    }

    test_reducer_setup();
}

/* Inside a node the reducer's collectives run over span lists: DDP's all-reduce and FSDP's
 * reduce-scatter from the gradient into the output (padding dropped), HSDP's reduce-scatter
 * from it and its all-reduce into the output, divides and casts on their passes. Recorded:
 * span lists (a group across simulated nodes: none), the pre-divide on reading, the post
 * and the cast on the last write; the means exact, nothing written past the shard. */
static void test_reducer_spans(void) {
    char what[200]; /* whether all 8 ranks, this rank's row and its column take span lists */
    int on[3] = {mpi_paths_spans_on(0, 1, 8), mpi_paths_spans_on(rank / 4 * 4, 1, 4),
                 mpi_paths_spans_on(rank % 4, 4, 2)};
    static const dtr_dtype_t types[] = {DTR_F32, DTR_BF16, DTR_F16};
    static const struct { const char *name, *kinds; unsigned shard, rep; } modes[] = {
        {"DDP", "a", 0, 0x3}, {"FSDP", "r", 0x3, 0}, {"HSDP", "ra", 0x2, 0x1}};
    for (int t = 0; t < 3; t++)
        for (int mi = 0; mi < 3; mi++) {
            rcase_t c = {.shard = modes[mi].shard, .rep = modes[mi].rep, .ndim = 2,
                         .shape = {1001, 33}, .reduce = types[t], .microbatches = 1};
            snprintf(what, sizeof what, "reducer %s over span lists, 1001x33, reduce %s",
                     modes[mi].name, dtr_dtype_name(types[t]));
            nrecs = 0;
            int ok = reducer_case(&c, what, NULL, NULL);
            int64_t rs = c.shard == 0 ? 1 : c.shard == 0x2 ? 4 : 8, ar = 8 / rs;
            dtr_grad_factors_t f;
            dtr_grad_factors(rs, ar, types[t], 0, false, &f);
            int good = strcmp(rec_kinds(), modes[mi].kinds) == 0;
            for (int k = 0; k < nrecs && good; k++) /* HSDP: its row, then its column */
                good = recs[k].spans == on[mi < 2 ? 0 : k + 1];
            if (good && recs[0].spans && recs[nrecs - 1].spans) {
                const rec_t *z = &recs[nrecs - 1];
                dtr_reduce_op_t op = z->kind == 'a' ? f.ar_op : f.rs_op;
                double post = op == DTR_REDUCE_AVG ? (double)(z->kind == 'a' ? ar : rs) : f.post;
                good = recs[0].pre == f.pre && z->post == post &&
                       z->recv_cast == (types[t] != DTR_F32);
            }
            check(ok && good, what);
        }
}

/* ---- factors ------------------------------------------------------------------------ */

static void test_factors(void) {
    dtr_grad_factors_t f;
    int ok = dtr_grad_factors(4, 3, DTR_F16, 0, false, &f) == DTR_OK && f.world == 12 &&
             f.pre == 4 && f.post == 3 && f.rs_op == DTR_REDUCE_SUM;
    ok = ok && dtr_grad_factors(6, 1, DTR_F16, 0, false, &f) == DTR_OK && f.pre == 4 &&
         f.post == 1.5;
    ok = ok && dtr_grad_factors(8, 1, DTR_F32, 0, false, &f) == DTR_OK &&
         f.rs_op == DTR_REDUCE_AVG && f.ar_op == DTR_REDUCE_AVG && f.pre == 1 && f.post == 1;
    ok = ok && dtr_grad_factors(1, 1, DTR_BF16, 0, false, &f) == DTR_OK &&
         f.rs_op == DTR_REDUCE_SUM && f.pre == 1 && f.post == 1;
    ok = ok && dtr_grad_factors(8, 1, DTR_F32, 3, false, &f) == DTR_OK && f.pre == 3 &&
         f.post == 1 && f.rs_op == DTR_REDUCE_SUM;
    ok = ok && dtr_grad_factors(8, 1, DTR_F32, 8, false, &f) == DTR_OK &&
         f.rs_op == DTR_REDUCE_AVG;
    ok = ok && dtr_grad_factors(4, 2, DTR_F32, 0, true, &f) == DTR_OK && f.pre == 1 &&
         f.post == 8 && f.rs_op == DTR_REDUCE_SUM && f.ar_op == DTR_REDUCE_SUM;
    ok = ok && dtr_grad_factors(4, 2, DTR_F16, 16, false, &f) == DTR_OK && f.pre == 4 &&
         f.post == 4;
    check(ok, "runtime factors: f16 pre/post of D, AVG for f32/bf16, user factor, force SUM");
    check(dtr_grad_factors(0, 1, DTR_F32, 0, false, &f) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "rs_size") != NULL,
          "runtime factors: rs_size 0 is INVALID_ARGUMENT naming it");
    check(dtr_grad_factors(2, 1, DTR_I64, 0, false, &f) == DTR_ERR_INVALID_ARGUMENT &&
              strstr(dtr_last_error(), "reduce_dtype") != NULL,
          "runtime factors: i64 is INVALID_ARGUMENT naming reduce_dtype");
}

/* ---- the fused all-reduce ----------------------------------------------------------- */

static void test_fused(void) {
    for (int avg = 0; avg < 2; avg++) {
        float a[1], b[200], c[129], e[5];
        float *bufs[4] = {a, b, c, e};
        int64_t counts[4] = {1, 200, 129, 5};
        unsigned dims[4] = {0x3, 0x3, 0x3, 0x1};
        dtr_fused_entry_t entries[4];
        for (int i = 0; i < 4; i++) {
            fill(DTR_F32, bufs[i], counts[i], i, 0, 1, 1);
            entries[i] = (dtr_fused_entry_t){bufs[i], counts[i], dims[i]};
        }
        int64_t bytes = 0;
        nrecs = 0;
        dtr_status_t st = dtr_fused_all_reduce(ctx, mesh, entries, 4, DTR_F32,
                                               avg ? DTR_REDUCE_AVG : DTR_REDUCE_SUM, &bytes);
        int ok = st == DTR_OK;
        for (int i = 0; i < 4 && ok; i++) {
            int members[8], n = group_of(dims[i], rank, members);
            for (int64_t k = 0; k < counts[i] && ok; k++) {
                double want = 0;
                for (int q = 0; q < n; q++) want += val(members[q], i, k);
                if (avg) want /= n;
                if (bufs[i][k] != (float)want) {
                    printf("rank %d: fused entry %d element %lld: got %g, want %g\n", rank, i,
                           (long long)k, bufs[i][k], want);
                    ok = 0;
                }
            }
        }
        check(ok, avg ? "fused all-reduce AVG: exact means" : "fused all-reduce SUM: exact sums");
        /* 4 B -> 512, 800 -> 1024, 516 -> 1024 in one buffer; 20 B -> 512 in the other. */
        check(bytes == 2560 && nrecs == 2 && recs[0].count == 640 && recs[1].count == 128 &&
                  recs[0].op == DTR_REDUCE_SUM && recs[1].op == DTR_REDUCE_SUM,
              "fused all-reduce: one SUM per group, slices 512-byte aligned (2560 and 512 B)");
    }
    float x[4];
    dtr_fused_entry_t bad[2] = {{x, 4, 0x3}, {rank == 6 ? NULL : x, 4, 0x3}};
    dtr_status_t st = dtr_fused_all_reduce(ctx, mesh, bad, 2, DTR_F32, DTR_REDUCE_SUM, NULL);
    check(rank == 6 ? st == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "NULL")
                    : st == DTR_ERR_REMOTE,
          "fused all-reduce: rank 6 passes a NULL buf: INVALID_ARGUMENT there, REMOTE elsewhere");
}

/* ---- fp16 near 60000 ---------------------------------------------------------------- */

static int count_nonfinite(const uint16_t *h, int64_t n) {
    int c = 0;
    for (int64_t k = 0; k < n; k++) c += !isfinite(dtr__f16_to_f32(h[k]));
    return c;
}

static void test_fp16_overflow(void) {
    /* Values 59904 + 256j, j in -8..7 (57856..61696): exact in f16, the largest finite
     * being 65504. The mean over 8 ranks is exact too. */
    const double base = 59904, step = 256;
    enum { N = 4096 };
    float *g = malloc(N * sizeof *g);
    uint16_t *h = malloc(N * sizeof *h);
    fill(DTR_F32, g, N, 0, base, step, 1);
    dtr_status_t st = dtr_hook_fp16_compress(NULL, ctx, mesh, 0x3, g, N, DTR_F32);
    int ok = st == DTR_OK;
    for (int64_t k = 0; k < N && ok; k++) ok = isfinite(g[k]) && g[k] == group_mean(0x3, k, base, step);
    check(ok, "fp16 compress hook, values near 60000 on 8 ranks: no overflow, exact mean");

    /* Why it divides first: SUM, then divide, overflows the same values to inf. */
    fill(DTR_F16, h, N, 0, base, step, 1);
    st = dtr_all_reduce(ctx, mesh, 0x3, h, h, N, DTR_F16, DTR_REDUCE_SUM);
    check(st == DTR_OK && count_nonfinite(h, N) == N,
          "the same values, f16 SUM before dividing: every element overflows to inf");

    /* The FSDP/HSDP f16 path (pre 4, post 2 on 8 ranks) keeps values up to 65504 * 4 / 8
     * per rank: 28672 + 256j (26624..30464) reduce exactly, where SUM-then-divide
     * overflows (8 x 28000 > 65504). */
    dtr_reducer_desc_t d = {.mesh = mesh, .shard_dims = 0x2, .replicate_dims = 0x1,
                            .ndim = 1, .shape = {N}, .param_dtype = DTR_F32,
                            .reduce_dtype = DTR_F16};
    dtr_reducer_t *r = NULL;
    float out[N / 4];
    int64_t ix;
    dtr_mesh_group_index(mesh, 0x2, rank, &ix);
    for (int pass = 0; pass < 2; pass++) {
        double b = pass == 0 ? 28672 : base;
        fill(DTR_F32, g, N, 0, b, step, 1);
        st = dtr_reducer_create(ctx, &d, &r);
        if (st == DTR_OK) st = dtr_reducer_reduce(r, g, N * sizeof *g, true, out, sizeof out);
        dtr_reducer_destroy(r);
        r = NULL;
        int finite = 0, exact = st == DTR_OK;
        for (int k = 0; k < N / 4 && st == DTR_OK; k++) {
            finite += isfinite(out[k]) != 0;
            exact = exact && out[k] == group_mean(0x3, ix * (N / 4) + k, b, step);
        }
        if (pass == 0)
            check(exact && finite == N / 4,
                  "HSDP f16 (pre 4, post 2), values near 28672 on 8 ranks: exact, no overflow");
        else
            /* The documented limit: 8 x 60000 / 4 = 120000 > 65504 before the post-divide. */
            check(st == DTR_OK && finite < N / 4,
                  "HSDP f16 (pre 4, post 2), values near 60000: past the pre/post limit, inf "
                  "(documented)");
    }
    free(g);
    free(h);
}

/* ---- the collectives themselves ----------------------------------------------------- */

static void test_collectives(void) {
    float a[8], b[8];
    fill(DTR_F32, a, 8, 0, 0, 1, 1);
    /* Rank 3 passes a different count: every rank gets MISMATCH, nothing hangs. */
    dtr_status_t st = dtr_all_reduce(ctx, mesh, 0x3, a, b, rank == 3 ? 7 : 8, DTR_F32,
                                     DTR_REDUCE_SUM);
    check(st == DTR_ERR_MISMATCH, "all-reduce, rank 3's count differs: MISMATCH everywhere");
    st = dtr_all_reduce(ctx, mesh, 0x3, a, a + 1, 4, DTR_F32, DTR_REDUCE_SUM);
    check(st == DTR_ERR_INVALID_ARGUMENT && strstr(dtr_last_error(), "overlap") != NULL,
          "all-reduce, overlapping send and recv: INVALID_ARGUMENT naming the overlap");
    /* AVG through SUM-then-divide (MPI has no AVG) over a row of 4. */
    fill(DTR_F32, a, 8, 0, 0, 1, 1);
    st = dtr_all_reduce(ctx, mesh, 0x2, a, b, 8, DTR_F32, DTR_REDUCE_AVG);
    int ok = st == DTR_OK;
    for (int k = 0; k < 8 && ok; k++) ok = b[k] == group_mean(0x2, k, 0, 1);
    check(ok, "all-reduce AVG over mesh dim 1 (4 ranks): exact means");
    /* Reduce-scatter over the column of 2: this rank gets piece (its row). */
    float send[8], recv[4];
    fill(DTR_F32, send, 8, 0, 0, 1, 1);
    st = dtr_reduce_scatter(ctx, mesh, 0x1, send, recv, 4, DTR_F32, DTR_REDUCE_SUM);
    int64_t ix;
    dtr_mesh_group_index(mesh, 0x1, rank, &ix);
    ok = st == DTR_OK;
    for (int k = 0; k < 4 && ok; k++) ok = recv[k] == 2 * group_mean(0x1, ix * 4 + k, 0, 1);
    check(ok, "reduce-scatter SUM over mesh dim 0 (2 ranks): exact sums of this rank's piece");
    int64_t n = 0;
    check(dtr_mesh_group_size(mesh, 0x3, &n) == DTR_OK && n == 8 &&
              dtr_mesh_group_size(mesh, 0, &n) == DTR_OK && n == 1 &&
              dtr_mesh_group_size(mesh, 0x8, &n) == DTR_ERR_INVALID_ARGUMENT,
          "group sizes: 0x3 is 8, 0 is 1, 0x8 is INVALID_ARGUMENT");
}

/* ---- device contexts: the fake device space, or CUDA memory (DTR_TEST_SPACE=cuda) ---- */

/* The fused all-reduce (AVG) of three device buffers, two groups: exact means. */
static int fused_device_case(void) {
    float a[3], b[130], c[7];
    float *bufs[3] = {a, b, c};
    int64_t counts[3] = {3, 130, 7};
    unsigned dims[3] = {0x3, 0x3, 0x2};
    dtr_fused_entry_t entries[3];
    void *d[3];
    for (int i = 0; i < 3; i++) {
        fill(DTR_F32, bufs[i], counts[i], i, 0, 1, 1);
        d[i] = dev_in(bufs[i], (size_t)counts[i] * sizeof(float));
        entries[i] = (dtr_fused_entry_t){d[i], counts[i], dims[i]};
    }
    dtr_status_t st = dtr_fused_all_reduce(ctx, mesh, entries, 3, DTR_F32, DTR_REDUCE_AVG, NULL);
    int ok = st == DTR_OK;
    for (int i = 0; i < 3; i++) {
        dev_out(bufs[i], d[i], (size_t)counts[i] * sizeof(float));
        int members[8], n = group_of(dims[i], rank, members);
        for (int64_t k = 0; k < counts[i] && ok; k++) {
            double want = 0;
            for (int q = 0; q < n; q++) want += val(members[q], i, k);
            ok = bufs[i][k] == (float)(want / n);
        }
    }
    return ok;
}

/* The hooks, the reducer and the fused all-reduce on a context whose memory is the fake
 * device space: every buffer of the caller and of the library lives there, and the casts,
 * divides, copies and accumulation go through the space's table (the space faults on a
 * device address read directly, and refuses host addresses). */
static void test_device(void) {
    dtr_context_t *host_ctx = ctx;
    if (test_space_open("grad_mpi_test", rank, &sp) != 0) {
        check(0, "device: a space for the device contexts");
        return;
    }
    dtr_context_t *dctx = recording_mpi_context(sp.ops, sp.state); /* owns sp.state */
    if (dctx == NULL) {
        check(0, "device: a context on the device space");
        return;
    }
    ctx = dctx;
    on_device = 1;
    static const dtr_dtype_t types[] = {DTR_F32, DTR_BF16, DTR_F16};
    char what[200];
    fake_device_counts_t before = fake_device_counts();
    for (int i = 0; i < 3; i++) {
        snprintf(what, sizeof what, "device: all-reduce hook, %s, dims 0x3: the exact mean",
                 dtr_dtype_name(types[i]));
        check(hook_case(dtr_hook_all_reduce, NULL, 0x3, types[i], 1001), what);
    }
    check(test_space_counted(&sp, fake_device_counts().divide > before.divide &&
                  fake_device_counts().refused == before.refused),
          "device: the hooks divide through the space");
    before = fake_device_counts();
    check(hook_case(dtr_hook_fp16_compress, NULL, 0x3, DTR_F32, 777),
          "device: fp16 compress hook on f32: the exact mean");
    dtr_compress_wrapper_t wbf = {DTR_BF16, dtr_hook_all_reduce, NULL};
    check(hook_case(dtr_hook_compress_wrapper, &wbf, 0x2, DTR_F32, 500),
          "device: compress wrapper (bf16) around the all-reduce hook");
    check(test_space_counted(&sp, fake_device_counts().cast >= before.cast + 4),
          "device: the compress hooks cast down and back through the space");

    for (int i = 0; i < 3; i++) {
        rcase_t acc = {.shard = 0x2, .rep = 0x1, .ndim = 3, .shape = {3, 11, 5}, .shard_dim = 1,
                       .reduce = types[i], .microbatches = 2};
        int differs = 0;
        nrecs = 0;
        before = fake_device_counts();
        snprintf(what, sizeof what,
                 "device: HSDP reducer, 3x11x5 on dim 1, 2 microbatches, reduce %s: exact, "
                 "accumulated by the space's add",
                 dtr_dtype_name(types[i]));
        int ok = reducer_case(&acc, what, NULL, &differs);
        check(ok && differs && nrecs == 3 && recs[2].kind == 'a' &&
                  test_space_counted(&sp, fake_device_counts().add > before.add &&
                          fake_device_counts().refused == before.refused),
              what);
    }
    rcase_t fsdp = {.shard = 0x3, .ndim = 1, .shape = {1003}, .reduce = DTR_F16,
                    .microbatches = 1};
    check(reducer_case(&fsdp, "device FSDP f16", NULL, NULL),
          "device: FSDP reducer over 8, 1003 elements (uneven), f16 pre 4 post 2: exact");
    check(fused_device_case(), "device: fused all-reduce AVG of 3 buffers in 2 groups: exact");

    /* What a device space cannot do, and host buffers on a device context. */
    dtr_reducer_desc_t d = {.mesh = mesh, .shard_dims = 0x2, .replicate_dims = 0x1, .ndim = 1,
                            .shape = {16}, .param_dtype = DTR_F32, .reduce_dtype = DTR_F32,
                            .factor = 2.5};
    dtr_reducer_t *r = NULL;
    check(dtr_reducer_create(ctx, &d, &r) == DTR_ERR_UNSUPPORTED && r == NULL &&
              strstr(dtr_last_error(), "desc->factor: 2.5") != NULL,
          "device: reducer with factor 2.5: UNSUPPORTED naming desc->factor");
    float h[16];
    fill(DTR_F32, h, 16, 0, 0, 1, 1);
    dtr_status_t st;
    if (sp.fake) { /* CUDA cannot tell a host address from its own: a kernel would fault */
        before = fake_device_counts();
        st = dtr_hook_all_reduce(NULL, ctx, mesh, 0x3, h, 16, DTR_F32);
        check(st != DTR_OK && fake_device_counts().refused > before.refused &&
                  h[0] == (float)val(rank, 0, 0),
              "device: a host buffer given to the hook: refused by the space on every rank, kept");
    }
    on_device = 0;
    dtr_context_destroy(dctx);

    dtr_memory_ops_t no_add = *sp.ops;
    no_add.add = NULL;
    dctx = test_space_open("grad_mpi_test", rank, &sp) == 0
               ? recording_mpi_context(&no_add, sp.state) : NULL;
    check(dctx != NULL, "device: a context on a space without add");
    if (dctx != NULL) {
        ctx = dctx;
        on_device = 1;
        d.factor = 0;
        r = NULL;
        float out[4];
        void *dg = dev_in(h, sizeof h), *dout = dev_in(out, sizeof out);
        st = dtr_reducer_create(ctx, &d, &r);
        if (st == DTR_OK) st = dtr_reducer_reduce(r, dg, sizeof h, false, NULL, 0);
        check(st == DTR_ERR_UNSUPPORTED && strstr(dtr_last_error(), "sync: false") != NULL,
              "device: reducer on a space without add, sync false: UNSUPPORTED naming sync");
        st = dtr_reducer_reduce(r, dg, sizeof h, true, dout, sizeof out);
        dev_out(h, dg, sizeof h);
        dev_out(out, dout, sizeof out);
        int64_t ix;
        dtr_mesh_group_index(mesh, 0x2, rank, &ix);
        int ok = st == DTR_OK;
        for (int k = 0; k < 4 && ok; k++) ok = out[k] == group_mean(0x3, ix * 4 + k, 0, 1);
        check(ok, "device: a space without add still reduces a synced microbatch");
        dtr_reducer_destroy(r);
        on_device = 0;
    }
    dtr_context_destroy(dctx);
    ctx = host_ctx;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 8) {
        if (rank == 0) fprintf(stderr, "grad_mpi_test: run under mpirun -n 8\n");
        MPI_Finalize();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int space_rc = test_space_probe("grad_mpi_test", rank); /* DTR_TEST_SPACE usable? */
    if (space_rc >= 0) return MPI_Finalize(), space_rc;
    int64_t sizes[2] = {2, 4};
    if (dtr_mesh_create(2, sizes, NULL, 0, &mesh) != DTR_OK ||
        (ctx = recording_mpi_context(NULL, NULL)) == NULL) {
        fprintf(stderr, "rank %d: setup: %s\n", rank, dtr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    test_collectives();
    test_hooks();
    test_factors();
    test_reducer();
    test_reducer_spans();
    test_fused();
    test_fp16_overflow();
    test_device();
    check(mpi_paths_check("gradient reduction") == 0, "each group's path: shared memory inside a node, MPI across nodes");
    dtr_context_destroy(ctx);
    dtr_mesh_destroy(mesh);
    int rc = mpi_check_finish("gradient reduction on 8 ranks");
    MPI_Finalize();
    return rc;
}
