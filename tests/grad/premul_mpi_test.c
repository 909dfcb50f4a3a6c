/*
 * The gradient reduction on a backend with a pre-multiplied SUM (premul_sum, NCCL's
 * ncclRedOpCreatePreMulSum), under mpirun on 8 ranks (a 2x4 mesh). The recording wrapper
 * offers one (recording_backend.h: each addend times the scale in the dtype, rounded to
 * the dtype, then MPI's SUM), on host memory and on the fake device space. Checked: the
 * DDP hook multiplies by 1 / n inside its all-reduce instead of dividing first; the reducer
 * and parameter groups hand their pre-divide factor to the reduce-scatter as 1 / factor
 * (FSDP2's PREMUL_SUM) and no longer divide in the pack; the values are the pre-multiply's
 * (data where it differs from a divide, with one contributing rank so every sum is exact);
 * a fractional factor, which a space's whole-number divide refuses, works on a device
 * context whose backend pre-multiplies; without the slot everything divides as before.
 *
 * On a GPU machine (a CUDA build): DTR_TEST_SPACE=cuda runs the same on CUDA memory (the
 * shared-GPU mode: MPI staged through host, every cast, zero and copy a kernel), and
 * DTR_TEST_SPACE=nccl on 1 rank calls the NCCL backend's premul_sum itself on a group of
 * one (ncclRedOpCreatePreMulSum; NCCL runs one rank's collective as a local kernel that
 * applies the scalar), reduce-scatter and all-reduce, f32, f64, f16 and bf16, each value
 * compared bit for bit with the host's x * (scale in the dtype) rounded to the dtype.
 *
 * Usage: mpirun -n 8 premul_mpi_test; DTR_TEST_SPACE=cuda mpirun -n 8 premul_mpi_test;
 * DTR_TEST_SPACE=nccl mpirun -n 1 premul_mpi_test. Ends with "N passed, N failed" on rank 0.
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
#include "tests/support/fake_device.h"
#if defined(DTR_HAVE_CUDA)
#include "backends/cuda/dtr_cuda.h"
#endif
#if defined(DTR_HAVE_NCCL)
#include "runtime/group.h"
#include "backends/nccl/dtr_nccl.h"
#endif

static dtr_mesh_t *mesh; /* 2x4: dim 0 the replicate group (0x1), dim 1 the shard group (0x2) */
static dtr_context_t *ctx;
static int on_device; /* buffers go through the device space */
/* The device space: the fake device, or CUDA memory (DTR_TEST_SPACE=cuda), whose state is
 * the context's own, so the test's copies run in order on the context's stream. */
static const dtr_memory_ops_t *space;
static void *space_state;

static void *dev_in(const void *h, size_t n) {
    if (!on_device) return (void *)h;
    void *d = NULL;
    space->alloc(space_state, (int64_t)n + 1, &d);
    space->copy(space_state, d, h, (int64_t)n, DTR_COPY_FROM_HOST);
    return d;
}

static void dev_out(void *h, void *d, size_t n) {
    if (!on_device) return;
    space->copy(space_state, h, d, (int64_t)n, DTR_COPY_TO_HOST);
    space->free(space_state, d);
}

/* v rounded to dtype t, as a double. */
static double in(dtr_dtype_t t, double v) {
    char b[8];
    dtr__store(t, b, 0, v);
    return dtr__load(t, b, 0);
}

/* Rank p's gradient element k: an integer in -8..7, for exact means in every dtype. */
static double ival(int p, int64_t k) { return (double)((k * 7 + p * 13) % 16 - 8); }

/* Rank 0's gradient element k in the one-contributor cases (zero elsewhere): quarters and
 * odd integers, exact in bf16, whose products with 1/3 round differently from x / 3. */
static double xval(int p, int64_t k) {
    return p != 0 ? 0 : (double)((k * 5) % 23 - 11) + 0.25 * (double)(k % 4);
}

/* Whether v holds on some rank (every rank learns it). */
static int any(int v) {
    int all = 0;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

/* ---- the DDP hook ------------------------------------------------------------------- */

static void test_hook(const char *where) {
    static const dtr_dtype_t types[] = {DTR_F32, DTR_F64, DTR_BF16, DTR_F16};
    static const unsigned groups[] = {0x3, 0x2, 0x1};
    char what[200];
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < 4; i++) {
            dtr_dtype_t t = types[i];
            int64_t count = 301, n = 0, item = dtr_dtype_info(t)->size;
            dtr_mesh_group_size(mesh, groups[g], &n);
            char *buf = malloc((size_t)(count * item));
            for (int64_t k = 0; k < count; k++) dtr__store(t, buf, k, ival(rank, k));
            fake_device_counts_t before = fake_device_counts();
            nrecs = 0;
            void *d = dev_in(buf, (size_t)(count * item));
            dtr_status_t st = dtr_hook_all_reduce(NULL, ctx, mesh, groups[g], d, count, t);
            dev_out(buf, d, (size_t)(count * item));
            int ok = st == DTR_OK && nrecs == 1 && recs[0].kind == 'a' &&
                     recs[0].scale == 1.0 / (double)n && recs[0].op == DTR_REDUCE_SUM &&
                     fake_device_counts().divide == before.divide;
            if (!ok)
                printf("rank %d: st %d, %d recs, scale %g, divides %lld\n", rank, (int)st, nrecs,
                       nrecs > 0 ? recs[0].scale : 0.0,
                       (long long)(fake_device_counts().divide - before.divide));
            int64_t c[2];
            dtr_mesh_coord(mesh, rank, c);
            for (int64_t k = 0; k < count && ok; k++) {
                double want = 0;
                for (int q = 0; q < world; q++) {
                    int64_t qc[2];
                    dtr_mesh_coord(mesh, q, qc);
                    if (((groups[g] & 1) || qc[0] == c[0]) && ((groups[g] & 2) || qc[1] == c[1]))
                        want += ival(q, k);
                }
                want /= (double)n;
                if (dtr__load(t, buf, k) != want) {
                    printf("rank %d: element %lld: got %.9g, want %.9g\n", rank, (long long)k,
                           dtr__load(t, buf, k), want);
                    ok = 0;
                }
            }
            free(buf);
            snprintf(what, sizeof what,
                     "%s: all-reduce hook, %s, dims 0x%x: one pre-multiplied SUM by 1/%lld, no "
                     "divide, the exact mean",
                     where, dtr_dtype_name(t), groups[g], (long long)n);
            check(ok, what);
        }
}

/* ---- the reducer and parameter groups ----------------------------------------------- */

/* The expected shard element of rank 0's gradient element x reduced with factor f in
 * reduce dtype rt: pre-multiplied (x * (1/f in rt), rounded to rt) or divided (x / f). */
static double want_of(double x, double f, dtr_dtype_t rt, int premul) {
    double v = in(rt, x);
    v = premul ? in(rt, v * in(rt, 1.0 / f)) : in(rt, in(DTR_F32, v) / in(DTR_F32, f));
    if (rt == DTR_F64 && !premul) v = x / f;
    return in(DTR_F32, v);
}

/* HSDP on 2x4 with user factor f, one contributing rank: every element of this rank's
 * shard checked against want_of; *differs: some element tells the two ways apart. */
static int reducer_case(double f, dtr_dtype_t rt, int premul, int *differs, char *why) {
    enum { LEN = 64 };
    dtr_reducer_desc_t d = {.mesh = mesh, .shard_dims = 0x2, .replicate_dims = 0x1, .ndim = 1,
                            .shape = {LEN}, .param_dtype = DTR_F32, .reduce_dtype = rt,
                            .factor = f};
    dtr_reducer_t *r = NULL;
    dtr_status_t st = dtr_reducer_create(ctx, &d, &r);
    if (st != DTR_OK) {
        snprintf(why, 200, "create: %s", dtr_last_error());
        return 0;
    }
    float grad[LEN], out[LEN / 4];
    for (int k = 0; k < LEN; k++) grad[k] = (float)xval(rank, k);
    int64_t ix = 0;
    dtr_mesh_group_index(mesh, 0x2, rank, &ix);
    nrecs = 0;
    void *dg = dev_in(grad, sizeof grad), *dout = dev_in(out, sizeof out);
    st = dtr_reducer_reduce(r, dg, sizeof grad, true, dout, sizeof out);
    dev_out(grad, dg, sizeof grad);
    dev_out(out, dout, sizeof out);
    dtr_reducer_destroy(r);
    int ok = st == DTR_OK && nrecs == 2 && recs[0].kind == 'r' && recs[1].kind == 'a' &&
             recs[0].scale == (premul ? 1.0 / f : 1) && recs[1].scale == 1;
    if (!ok) snprintf(why, 200, "st %d, %d recs, first scale %g", (int)st, nrecs, recs[0].scale);
    *differs = 0;
    for (int k = 0; k < LEN / 4 && ok; k++) {
        double x = xval(0, ix * (LEN / 4) + k), want = want_of(x, f, rt, premul);
        if (want != want_of(x, f, rt, !premul)) *differs = 1;
        if (out[k] != want) {
            snprintf(why, 200, "element %d: got %.9g, want %.9g", k, out[k], want);
            ok = 0;
        }
    }
    return ok;
}

/* The same with a parameter group of two parameters (20 and 3x12 rows sharded on dim 0). */
static int group_case(double f, dtr_dtype_t rt, int *differs, char *why) {
    dtr_param_desc_t ps[2] = {{.ndim = 1, .shape = {20}, .dtype = DTR_F32},
                              {.ndim = 2, .shape = {12, 3}, .dtype = DTR_F32}};
    dtr_param_group_desc_t d = {.mesh = mesh, .shard_dims = 0x2, .replicate_dims = 0x1,
                                .nparams = 2, .params = ps, .reduce_dtype = rt, .factor = f};
    dtr_param_group_t *g = NULL;
    dtr_status_t st = dtr_param_group_create(ctx, &d, &g);
    if (st != DTR_OK) {
        snprintf(why, 200, "create: %s", dtr_last_error());
        return 0;
    }
    float a[20], b[36], oa[5], ob[9];
    for (int k = 0; k < 20; k++) a[k] = (float)xval(rank, k);
    for (int k = 0; k < 36; k++) b[k] = (float)xval(rank, 100 + k);
    void *da = dev_in(a, sizeof a), *db = dev_in(b, sizeof b);
    void *doa = dev_in(oa, sizeof oa), *dob = dev_in(ob, sizeof ob);
    const void *grads[2] = {da, db};
    void *outs[2] = {doa, dob};
    size_t gb[2] = {sizeof a, sizeof b}, ob_[2] = {sizeof oa, sizeof ob};
    nrecs = 0;
    st = dtr_param_group_reduce(g, grads, gb, true, outs, ob_);
    dev_out(a, da, sizeof a);
    dev_out(b, db, sizeof b);
    dev_out(oa, doa, sizeof oa);
    dev_out(ob, dob, sizeof ob);
    dtr_param_group_destroy(g);
    int ok = st == DTR_OK && nrecs == 2 && recs[0].kind == 'r' && recs[0].scale == 1.0 / f &&
             recs[1].kind == 'a' && recs[1].scale == 1;
    if (!ok) snprintf(why, 200, "st %d (%s), %d recs", (int)st, dtr_last_error(), nrecs);
    int64_t ix = 0;
    dtr_mesh_group_index(mesh, 0x2, rank, &ix);
    *differs = 0;
    for (int k = 0; k < 5 + 9 && ok; k++) {
        double x = k < 5 ? xval(0, ix * 5 + k) : xval(0, 100 + ix * 9 + (k - 5));
        double want = want_of(x, f, rt, 1), got = k < 5 ? oa[k] : ob[k - 5];
        if (want != want_of(x, f, rt, 0)) *differs = 1;
        if (got != want) {
            snprintf(why, 200, "shard element %d: got %.9g, want %.9g", k, got, want);
            ok = 0;
        }
    }
    return ok;
}

static void test_factors(const char *where) {
    char what[240], why[200] = "";
    static const dtr_dtype_t types[] = {DTR_F32, DTR_BF16, DTR_F64};
    static const double factors[] = {3, 2.5, 6};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int differs = 0;
            int ok = reducer_case(factors[j], types[i], 1, &differs, why);
            snprintf(what, sizeof what,
                     "%s: HSDP reducer, %s, factor %g: the reduce-scatter pre-multiplies by "
                     "1/%g, each value as NCCL's (%s)",
                     where, dtr_dtype_name(types[i]), factors[j], factors[j], ok ? "ok" : why);
            check(ok, what);
            if (types[i] != DTR_F64 && factors[j] == 3) {
                snprintf(what, sizeof what, "%s: %s factor 3: the data tells a pre-multiply "
                                            "from a divide",
                         where, dtr_dtype_name(types[i]));
                check(any(differs), what);
            }
        }
    for (int i = 0; i < 2; i++) {
        int differs = 0;
        int ok = group_case(3, types[i], &differs, why);
        snprintf(what, sizeof what,
                 "%s: parameter group of 2, %s, factor 3: one pre-multiplied reduce-scatter, "
                 "then the all-reduce (%s)",
                 where, dtr_dtype_name(types[i]), ok ? "ok" : why);
        check(ok, what);
        differs = any(differs);
        check(differs, "parameter group: the data tells a pre-multiply from a divide");
    }

    /* f16 with the default factor: pre 4 (a power of two: the multiply is the divide). */
    dtr_reducer_desc_t d = {.mesh = mesh, .shard_dims = 0x2, .replicate_dims = 0x1, .ndim = 1,
                            .shape = {32}, .param_dtype = DTR_F32, .reduce_dtype = DTR_F16};
    dtr_reducer_t *r = NULL;
    float grad[32], out[8];
    for (int k = 0; k < 32; k++) grad[k] = (float)ival(rank, k);
    nrecs = 0;
    void *dg = dev_in(grad, sizeof grad), *dout = dev_in(out, sizeof out);
    dtr_status_t st = dtr_reducer_create(ctx, &d, &r);
    if (st == DTR_OK) st = dtr_reducer_reduce(r, dg, sizeof grad, true, dout, sizeof out);
    dev_out(grad, dg, sizeof grad);
    dev_out(out, dout, sizeof out);
    dtr_reducer_destroy(r);
    int64_t ix = 0;
    dtr_mesh_group_index(mesh, 0x2, rank, &ix);
    int ok = st == DTR_OK && nrecs == 2 && recs[0].scale == 0.25 && recs[1].scale == 1;
    for (int k = 0; k < 8 && ok; k++) {
        double want = 0;
        for (int q = 0; q < world; q++) want += ival(q, ix * 8 + k);
        ok = out[k] == want / 8;
    }
    snprintf(what, sizeof what,
             "%s: HSDP f16 reducer, default factor 8: reduce-scatter pre-multiplies by 1/4, "
             "post-divide 2, the exact mean",
             where);
    check(ok, what);
}

/* Without the slot: the same case divides in the pack, as before. */
static void test_without(void) {
    char why[200] = "";
    int differs = 0;
    int ok = reducer_case(3, DTR_F32, 0, &differs, why);
    char what[240];
    snprintf(what, sizeof what,
             "no premul_sum: HSDP reducer f32 factor 3 divides before a plain SUM (%s)",
             ok ? "ok" : why);
    check(ok, what);
    differs = any(differs);
    check(differs, "no premul_sum: the data tells the divide from a pre-multiply");
}

#if defined(DTR_HAVE_NCCL)
/*
 * The NCCL backend's premul_sum on a group of one, every value against the host's. Sizes
 * that NCCL's one-rank kernel covers whole: it splits nElts over up to 32 blocks in
 * segments of alignUp(nElts / blocks, 16 bytes), so where blocks times that falls short of
 * nElts (2^20 + 3 f32 on 32 blocks: 3 short) it leaves the tail unwritten (NCCL 2.28,
 * src/device/onerank.cu; seen on an H100). dtr never takes that path: it pre-multiplies on
 * groups of two or more only (dtr__group_premul). The probe at the end prints the tail.
 */
static void test_nccl(void) {
    dtr_context_t *nctx = NULL;
    if (dtr_context_create_nccl(MPI_COMM_WORLD, 0, NULL, &nctx) != DTR_OK) {
        check(0, "nccl: a context on GPU 0");
        return;
    }
    const dtr_backend_ops_t *ops = NULL;
    const dtr_memory_ops_t *m = NULL;
    void *ms = NULL;
    dtr__context_tables(nctx, &ops, &m, &ms);
    int only = 0;
    void *g = NULL;
    check(dtr__group(nctx, &only, 1, 7, &g) == DTR_OK && ops->premul_sum != NULL,
          "nccl: a group of one, and the backend offers premul_sum");
    static const dtr_dtype_t types[] = {DTR_F32, DTR_F64, DTR_F16, DTR_BF16};
    static const double scales[] = {1.0 / 3, 0.125, 1.0 / 2.5, 1.0 / 6};
    static const int64_t sizes[] = {1 << 20, 999, (1 << 20) + 3};
    char what[200];
    for (int z = 0; z < 3; z++)
    for (int i = 0; i < 4 && g != NULL; i++)
        for (int j = 0; j < 4; j++)
            for (int scatter = 0; scatter < 2; scatter++) {
                int64_t N = sizes[z];
                if (z == 2 && (i != 0 || j != 0 || scatter)) continue; /* the probe: once */
                dtr_dtype_t t = types[i];
                int64_t item = dtr_dtype_info(t)->size;
                char *h = malloc((size_t)(N * item)), *back = malloc((size_t)(N * item));
                for (int64_t k = 0; k < N; k++) /* values over many binades, both signs */
                    dtr__store(t, h, k, ldexp((double)((k * 2654435761u) % 1999) - 999.5,
                                              (int)(k % 13) - 6));
                void *send = NULL, *recv = NULL;
                m->alloc(ms, N * item, &send);
                m->alloc(ms, N * item, &recv);
                m->copy(ms, send, h, N * item, DTR_COPY_FROM_HOST);
                dtr_backend_req_t req;
                dtr_status_t st =
                    ops->premul_sum(g, send, recv, N, t, scales[j], scatter != 0, &req);
                if (st == DTR_OK) st = ops->wait(g, &req);
                if (st == DTR_OK) st = m->copy(ms, back, recv, N * item, DTR_COPY_TO_HOST);
                int64_t bad = 0, first = -1;
                double sc = in(t, scales[j]);
                for (int64_t k = 0; k < N && st == DTR_OK; k++) {
                    char w[8];
                    dtr__store(t, w, 0, dtr__load(t, h, k) * sc);
                    if (memcmp(w, back + k * item, (size_t)item) != 0 && bad++ == 0) first = k;
                }
                if (st != DTR_OK || bad > 0)
                    printf("nccl %s scale %g %s, %lld values: %s; %lld differ (first %lld: got "
                           "%.9g, want %.9g)%s\n",
                           dtr_dtype_name(t), scales[j], scatter ? "reduce-scatter" : "all-reduce",
                           (long long)N, st == DTR_OK ? "ok" : dtr_last_error(), (long long)bad,
                           (long long)first, first >= 0 ? dtr__load(t, back, first) : 0.0,
                           first >= 0 ? dtr__load(t, h, first) * sc : 0.0,
                           z == 2 ? " (the probe of NCCL's one-rank tail)" : "");
                else if (z == 2)
                    printf("nccl: one-rank tail probe, %lld f32: every value written\n",
                           (long long)N);
                snprintf(what, sizeof what,
                         "nccl: premul_sum %s, %s, scale %g: %lld values bit for bit the host's",
                         dtr_dtype_name(t), scatter ? "reduce-scatter" : "all-reduce",
                         scales[j], (long long)N);
                if (z < 2) check(st == DTR_OK && bad == 0, what);
                m->free(ms, send);
                m->free(ms, recv);
                free(h);
                free(back);
            }
    dtr_context_destroy(nctx);
}
#endif

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const char *mode = getenv("DTR_TEST_SPACE") != NULL ? getenv("DTR_TEST_SPACE") : "fake";
    if (strcmp(mode, "nccl") == 0) {
#if defined(DTR_HAVE_NCCL)
        if (dtr_cuda_device_count() < 1) {
            printf("premul_mpi_test: skipped, no GPU: %s\n", dtr_last_error());
            MPI_Finalize();
            return 0;
        }
        test_nccl();
        int rc = mpi_check_finish("NCCL pre-multiplied sums on 1 rank");
        MPI_Finalize();
        return rc;
#else
        printf("premul_mpi_test: DTR_TEST_SPACE=nccl: built without NCCL\n");
        MPI_Finalize();
        return 2;
#endif
    }
    if (world != 8) {
        if (rank == 0) fprintf(stderr, "premul_mpi_test: run under mpirun -n 8\n");
        MPI_Finalize();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int64_t sizes[2] = {2, 4};
    rec_premul = 1;
    dtr_context_t *host = recording_mpi_context(NULL, NULL);
    space = fake_device_ops();
    space_state = fake_device_state();
    if (strcmp(mode, "cuda") == 0) {
#if defined(DTR_HAVE_CUDA)
        int gpus = dtr_cuda_device_count();
        if (gpus < 1 || dtr_memory_cuda_create(rank % gpus, NULL, &space_state) != DTR_OK) {
            printf("premul_mpi_test: skipped, no GPU: %s\n", dtr_last_error());
            MPI_Finalize();
            return 0;
        }
        space = dtr_memory_cuda_ops();
#else
        printf("premul_mpi_test: DTR_TEST_SPACE=cuda: built without CUDA\n");
        MPI_Finalize();
        return 2;
#endif
    }
    dtr_context_t *dev = recording_mpi_context(space, space_state);
    rec_premul = 0;
    dtr_context_t *plain = recording_mpi_context(NULL, NULL);
    if (dtr_mesh_create(2, sizes, NULL, 0, &mesh) != DTR_OK || host == NULL || dev == NULL ||
        plain == NULL) {
        fprintf(stderr, "rank %d: setup: %s\n", rank, dtr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ctx = host;
    test_hook("host");
    test_factors("host");
    ctx = dev;
    on_device = 1;
    test_hook(mode);
    test_factors(mode);
    on_device = 0;
    ctx = plain;
    test_without();
    dtr_context_destroy(host);
    dtr_context_destroy(dev);
    dtr_context_destroy(plain);
    dtr_mesh_destroy(mesh);
    int rc = mpi_check_finish("pre-multiplied gradient reduction on 8 ranks");
    MPI_Finalize();
    return rc;
}
