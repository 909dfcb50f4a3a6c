/*
 * Batches on the backend --backend names (mpi under mpirun, gloo under tools/dtr_launch.sh:
 * tests/support/job.h), random cases: every rank draws the same case from the seed (a mesh of
 * 1 to 3 dims, sometimes on a shuffled subset of the world's ranks with bystanders, and a
 * list of 1 to 12 tensors with their own shapes (uneven and empty ones), dtypes and changes;
 * in one case of three every tensor makes the same change, as a layer's parameters do, in
 * one of three a reduction is blocked by a later shard so reduce_exchange rounds run),
 * plans the batch, runs it and checks every element of every tensor on every rank, that no
 * input was written and nothing past an output. Cases alternate between blocking and
 * non-blocking calls, the MPI backend as is and without its v-collectives (padded pieces),
 * and the exact pattern and random values (seeded; the check then allows the reductions'
 * rounding, pattern/pattern.h). Every case also runs the batch's baseline.
 *
 * Then the hostile inputs, each on every rank, each leaving every buffer as it was: a NULL
 * input in the middle of the list on one rank, a short output on one rank, an output
 * overlapping another tensor's input, two outputs sharing bytes, one rank's list differing.
 *
 * With --memory fake the contexts work on the fake device space and every buffer lives there
 * (the executor's device path, where no GPU is; the hostile inputs are host-only).
 *
 * Usage: mpirun -n N batch_test [--cases N] [--seed S] [--memory host|fake] [--backend mpi],
 * or tools/dtr_launch.sh -n N batch_test ... --backend gloo (no padded variant there)
 * Prints one line per failing case (seed and case number to rerun it) and a summary.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "backends/mpi/dtr_mpi.h"
#include "tests/support/job.h"
#include "tests/support/mpi_paths.h"
#include "tests/support/fake_device.h"
#include "tests/support/plan_util.h"
#include "tests/support/rand_cases.h"
#include "pattern/pattern.h"

#define GUARD 32
#define MAX_TENSORS 12

typedef struct {
    int mdims;
    int64_t msize[3];
    int *ranks;
    int64_t nranks;
    int n;
    dtr_spec_t src[MAX_TENSORS], dst[MAX_TENSORS];
    char text[MAX_TENSORS * 96];
} batch_case_t;

/* One tensor's change on mesh; like_src and like_dst (NULL: drawn) give the placements. */
static void draw_tensor(const batch_case_t *c, const dtr_mesh_t *mesh, const dtr_spec_t *like,
                        const dtr_spec_t *like_dst, int blocked, dtr_spec_t *src,
                        dtr_spec_t *dst) {
    for (;;) {
        int ndim = like != NULL ? like->ndim : 1 + pick(3);
        int64_t shape[3];
        for (int d = 0; d < ndim; d++) shape[d] = pick(10) == 0 ? 0 : 1 + pick(9);
        if (pick(4) == 0) shape[pick(ndim)] *= 4;
        dtr_reduce_op_t op = (dtr_reduce_op_t)pick(DTR_REDUCE_OP_LAST);
        dtr_placement_t a[3], b[3];
        for (int i = 0; i < c->mdims; i++) {
            a[i] = like != NULL ? like->placements[i] : random_placement(ndim, op);
            b[i] = like != NULL ? like_dst->placements[i] : random_placement(ndim, op);
        }
        if (like == NULL && blocked && c->mdims >= 2) {
            int i = pick(c->mdims - 1), j = i + 1 + pick(c->mdims - 1 - i), d = pick(ndim);
            for (int k = 0; k < c->mdims; k++) b[k] = a[k];
            a[i] = dtr_partial(op);
            b[i] = a[j] = b[j] = dtr_shard(d);
        } else if (like == NULL && c->mdims >= 2 && pick(2) == 0) { /* shard orders */
            nest_in_orders(c->mdims, c->msize, ndim, pick(3), a, b);
        }
        int64_t sizes[4];
        if (like == NULL && !blocked && pick(4) == 0) /* a ragged shard kept (rand_cases.h) */
            ragged_keep(c->mdims, c->msize, ndim, shape, a, b, sizes);
        for (int i = 0; like != NULL && i < c->mdims; i++) /* (the first tensor's sizes) */
            if (a[i].kind == DTR_SHARD && a[i].nsizes > 0) {
                shape[a[i].dim] = 0;
                for (int k = 0; k < a[i].nsizes; k++) shape[a[i].dim] += a[i].sizes[k];
            }
        dtr_dtype_t dtype = (dtr_dtype_t)pick(DTR_DTYPE_LAST);
        if (like != NULL && pick(2)) dtype = like->dtype; /* reductions coalesce by dtype */
        dtr_spec_t s, t;
        dtr_plan_t plan;
        if (dtr_spec_init(&s, mesh, a, c->mdims, shape, ndim, dtype) != DTR_OK ||
            dtr_spec_init(&t, mesh, b, c->mdims, shape, ndim, dtype) != DTR_OK ||
            dtr_plan_create(&s, &t, NULL, &plan) != DTR_OK)
            continue; /* an invalid change (Shard -> Partial, a reduction of fp8, ...) */
        *src = s;
        *dst = t;
        return;
    }
}

static dtr_mesh_t *draw(batch_case_t *c, int world) {
    memset(c, 0, sizeof *c);
    c->mdims = 1 + pick(3);
    int64_t total = 1;
    for (int i = 0; i < c->mdims; i++) {
        int64_t s = 1 + pick(4);
        while (total * s > world) s--;
        c->msize[i] = s;
        total *= s;
    }
    c->nranks = total;
    if (pick(3) == 0) {
        int *all = malloc((size_t)world * sizeof *all);
        for (int r = 0; r < world; r++) all[r] = r;
        for (int r = world - 1; r > 0; r--) {
            int j = pick(r + 1), t = all[r];
            all[r] = all[j];
            all[j] = t;
        }
        c->ranks = all;
    }
    dtr_mesh_t *mesh = NULL;
    if (dtr_mesh_create(c->mdims, c->msize, c->ranks, c->ranks ? c->nranks : 0, &mesh) != DTR_OK)
        return NULL;
    int style = pick(3); /* 0: mixed, 1: one change for all, 2: reductions blocked by shards */
    c->n = 1 + pick(MAX_TENSORS);
    for (int t = 0; t < c->n; t++) {
        if (style == 1 && t > 0) { /* the first tensor's change, other shapes and dtypes */
            draw_tensor(c, mesh, &c->src[0], &c->dst[0], 0, &c->src[t], &c->dst[t]);
        } else {
            draw_tensor(c, mesh, NULL, NULL, style == 2 && pick(2), &c->src[t], &c->dst[t]);
        }
    }
    size_t pos = (size_t)snprintf(c->text, sizeof c->text, "mesh %lld", (long long)c->msize[0]);
    for (int i = 1; i < c->mdims; i++)
        pos += (size_t)snprintf(c->text + pos, sizeof c->text - pos, "x%lld", (long long)c->msize[i]);
    pos += (size_t)snprintf(c->text + pos, sizeof c->text - pos, "%s:",
                            c->ranks ? " (shuffled ranks)" : "");
    for (int t = 0; t < c->n && pos < sizeof c->text; t++) {
        char sh[64], a[96], b[96];
        dtr_shape_format(c->src[t].shape, c->src[t].ndim, sh, sizeof sh);
        dtr_placements_format(c->src[t].placements, c->mdims, a, sizeof a);
        dtr_placements_format(c->dst[t].placements, c->mdims, b, sizeof b);
        pos += (size_t)snprintf(c->text + pos, sizeof c->text - pos, " [%s %s %s -> %s]", sh,
                                dtr_dtype_name(c->src[t].dtype), a, b);
    }
    return mesh;
}

/* This rank's buffers of a case: inputs filled, outputs poisoned past their end. */
typedef struct {
    void *in[MAX_TENSORS], *out[MAX_TENSORS], *copy[MAX_TENSORS];
    size_t in_bytes[MAX_TENSORS], out_bytes[MAX_TENSORS];
    bool inside;
} buffers_t;

static void buffers_make(const batch_case_t *c, int rank, const dtr_fill_t *fills, buffers_t *b) {
    memset(b, 0, sizeof *b);
    for (int t = 0; t < c->n; t++) {
        dtr_layout_t sl = {0}, dl = {0};
        b->inside = dtr_spec_layout(&c->src[t], rank, &sl) == DTR_OK;
        if (b->inside) dtr_spec_layout(&c->dst[t], rank, &dl);
        b->in_bytes[t] = b->inside ? (size_t)sl.bytes : 16;
        b->out_bytes[t] = b->inside ? (size_t)dl.bytes : 16;
        b->in[t] = malloc(b->in_bytes[t] + 1);
        b->copy[t] = malloc(b->in_bytes[t] + 1);
        b->out[t] = malloc(b->out_bytes[t] + GUARD);
        memset(b->out[t], 0xab, b->out_bytes[t] + GUARD);
        if (b->inside)
            dtr_fill(&c->src[t], &fills[t], rank, b->in[t], b->in_bytes[t]);
        else
            for (size_t k = 0; k < b->in_bytes[t]; k++) ((unsigned char *)b->in[t])[k] = (unsigned char)(k * 7 + t);
        memcpy(b->copy[t], b->in[t], b->in_bytes[t]);
    }
}

static void buffers_free(const batch_case_t *c, buffers_t *b) {
    for (int t = 0; t < c->n; t++) {
        free(b->in[t]);
        free(b->copy[t]);
        free(b->out[t]);
    }
}

/* Inputs intact, nothing past an output, every output right (or, with untouched, every
 * output still all poison). 0, or 1 with the reason. */
static int buffers_check(const batch_case_t *c, int rank, const dtr_fill_t *fills,
                         const buffers_t *b, bool untouched, char *why, size_t len) {
    for (int t = 0; t < c->n; t++) {
        const unsigned char *out = b->out[t];
        if (memcmp(b->in[t], b->copy[t], b->in_bytes[t]) != 0) {
            snprintf(why, len, "tensor %d: the input was written", t);
            return 1;
        }
        for (size_t k = untouched ? 0 : b->out_bytes[t]; k < b->out_bytes[t] + GUARD; k++)
            if (out[k] != 0xab) {
                snprintf(why, len, "tensor %d: output byte %zu written%s", t, k,
                         untouched ? " by a failed call" : " past the end");
                return 1;
            }
        if (untouched) continue;
        if (!b->inside) {
            if (memcmp(out, b->in[t], b->in_bytes[t]) != 0) {
                snprintf(why, len, "tensor %d: a bystander's output is not its input", t);
                return 1;
            }
            continue;
        }
        dtr_pattern_report_t rep;
        if (dtr_fill_check(&c->src[t], &c->dst[t], &fills[t], rank, out, b->out_bytes[t], &rep) !=
            DTR_OK) {
            snprintf(why, len, "tensor %d: check: %s", t, dtr_last_error());
            return 1;
        }
        if (rep.mismatches > 0) {
            snprintf(why, len, "tensor %d: %lld of %lld elements wrong; first at local %lld: got "
                     "%.9g, want %.9g", t, (long long)rep.mismatches, (long long)rep.checked,
                     (long long)rep.first, rep.got, rep.want);
            return 1;
        }
    }
    return 0;
}

/* Cases with bit 8 of their index run through the change object (dtr_change_create of the
 * members' specs, then dtr_change_run / dtr_change_start): a batch of one runs as a plan. */
static bool via_change;

static dtr_status_t run_change(dtr_context_t *ctx, const dtr_batch_plan_t *bp, void **in,
                               const size_t *in_bytes, void **out, const size_t *out_bytes,
                               bool nonblocking) {
    dtr_spec_t src[MAX_TENSORS], dst[MAX_TENSORS];
    for (int t = 0; t < bp->ntensors; t++) src[t] = bp->plans[t].src, dst[t] = bp->plans[t].dst;
    dtr_change_t *c = NULL;
    dtr_status_t st = dtr_change_create(bp->ntensors, src, dst, NULL, &c);
    if (st == DTR_OK && dtr_change_form(c) != (bp->ntensors == 1 ? DTR_CHANGE_ONE : DTR_CHANGE_BATCH))
        st = DTR_ERR_INTERNAL;
    dtr_request_t *req = NULL;
    bool done = !nonblocking;
    if (st == DTR_OK)
        st = nonblocking ? dtr_change_start(ctx, c, (const void *const *)in, in_bytes, out,
                                            out_bytes, &req)
                         : dtr_change_run(ctx, c, (const void *const *)in, in_bytes, out, out_bytes);
    while (st == DTR_OK && !done) st = dtr_request_test(req, &done);
    dtr_change_destroy(c);
    return st;
}

static dtr_status_t run_on(dtr_context_t *ctx, const dtr_batch_plan_t *bp, void **in,
                           const size_t *in_bytes, void **out, const size_t *out_bytes,
                           bool nonblocking) {
    if (via_change) return run_change(ctx, bp, in, in_bytes, out, out_bytes, nonblocking);
    if (!nonblocking)
        return dtr_redistribute_batch(ctx, bp, (const void *const *)in, in_bytes, out, out_bytes);
    dtr_request_t *req = NULL;
    dtr_status_t st = dtr_redistribute_batch_start(ctx, bp, (const void *const *)in, in_bytes,
                                                   out, out_bytes, &req);
    bool done = false;
    while (st == DTR_OK && !done) st = dtr_request_test(req, &done);
    return st;
}

/* --memory fake: the contexts work on the fake device space (tests/redistribute/
 * fake_device.h), so every buffer of the batch lives there: the executor must pack,
 * unpack and copy bystanders through the space's table only. */
static bool fake;

static dtr_status_t run_batch(dtr_context_t *ctx, const dtr_batch_plan_t *bp, buffers_t *b,
                              bool nonblocking) {
    if (!fake) return run_on(ctx, bp, b->in, b->in_bytes, b->out, b->out_bytes, nonblocking);
    const dtr_memory_ops_t *m = fake_device_ops();
    void *ms = fake_device_state();
    void *din[MAX_TENSORS] = {NULL}, *dout[MAX_TENSORS] = {NULL};
    dtr_status_t st = DTR_OK;
    for (int t = 0; t < bp->ntensors && st == DTR_OK; t++) {
        st = m->alloc(ms, (int64_t)b->in_bytes[t] + 1, &din[t]);
        if (st == DTR_OK) st = m->alloc(ms, (int64_t)b->out_bytes[t] + GUARD, &dout[t]);
        if (st == DTR_OK)
            st = m->copy(ms, din[t], b->in[t], (int64_t)b->in_bytes[t], DTR_COPY_FROM_HOST);
        if (st == DTR_OK)
            st = m->copy(ms, dout[t], b->out[t], (int64_t)b->out_bytes[t] + GUARD,
                         DTR_COPY_FROM_HOST);
    }
    if (st == DTR_OK) st = run_on(ctx, bp, din, b->in_bytes, dout, b->out_bytes, nonblocking);
    /* Back to the host copies the checks read: the inputs too, to see they were kept. */
    for (int t = 0; t < bp->ntensors; t++) {
        if (din[t] != NULL)
            m->copy(ms, b->in[t], din[t], (int64_t)b->in_bytes[t], DTR_COPY_TO_HOST);
        if (dout[t] != NULL)
            m->copy(ms, b->out[t], dout[t], (int64_t)b->out_bytes[t] + GUARD, DTR_COPY_TO_HOST);
        m->free(ms, din[t]);
        m->free(ms, dout[t]);
    }
    m->destroy(ms);
    return st;
}

/* The rounds are a schedule of the members' plans: each member's communicating steps once,
 * in their order; coalesced rounds share kind, mesh dim (and dtype and op). */
/* Runs the batch on b and checks every element; 1 with the reason (after `tag`) in why. */
static int run_checked(dtr_context_t *ctx, const dtr_batch_plan_t *bp, const batch_case_t *c,
                       int rank, const dtr_fill_t *fills, buffers_t *b, bool nonblocking,
                       const char *tag, char *why, size_t len) {
    dtr_status_t st = run_batch(ctx, bp, b, nonblocking);
    if (st != DTR_OK) {
        snprintf(why, len, "%s%s: %s", tag, dtr_status_name(st), dtr_last_error());
        return 1;
    }
    char inner[1024] = "";
    if (!buffers_check(c, rank, fills, b, false, inner, sizeof inner)) return 0;
    snprintf(why, len, "%s%s", tag, inner);
    return 1;
}

static int check_rounds(const dtr_batch_plan_t *bp, char *why, size_t len) {
    int next[MAX_TENSORS] = {0};
    for (int r = 0; r < bp->nrounds; r++) {
        const dtr_batch_round_t *rd = &bp->rounds[r];
        for (int j = rd->first; j < rd->first + rd->count; j++) {
            const dtr_batch_item_t *it = &bp->items[j];
            const dtr_step_t *s = &bp->plans[it->tensor].steps[it->step];
            if (it->step < next[it->tensor] || s->kind != rd->kind || s->mesh_dim != rd->mesh_dim ||
                (rd->reduces && (s->op != rd->op || bp->plans[it->tensor].src.dtype != rd->dtype))) {
                snprintf(why, len, "round %d: tensor %d step %d does not fit it", r + 1, it->tensor,
                         it->step + 1);
                return 1;
            }
            next[it->tensor] = it->step + 1;
        }
    }
    return 0;
}

/* The MPI backend without its v-collectives: coalesced rounds pad uneven pieces. */
static dtr_backend_ops_t padded_ops;

static test_job_t job;

static int agree_all(int bad) { return test_job_max(&job, bad); }

/* Expect status `want` on this rank (DTR_ERR_REMOTE on the others when `who` >= 0 is not
 * this rank) and every buffer untouched. */
static int expect_refusal(const char *what, dtr_status_t st, dtr_status_t want, const char *has,
                          const batch_case_t *c, int rank, const dtr_fill_t *fills,
                          const buffers_t *b) {
    char why[512] = "";
    int bad = 0;
    if (st != want) {
        snprintf(why, sizeof why, "status %s, want %s (%s)", dtr_status_name(st),
                 dtr_status_name(want), dtr_last_error());
        bad = 1;
    } else if (has != NULL && strstr(dtr_last_error(), has) == NULL) {
        snprintf(why, sizeof why, "error \"%s\" does not name \"%s\"", dtr_last_error(), has);
        bad = 1;
    } else {
        bad = buffers_check(c, rank, fills, b, true, why, sizeof why);
    }
    if (bad) printf("FAIL hostile (%s): rank %d: %s\n", what, rank, why);
    return bad;
}

/* The hostile inputs, on a fixed batch: 3 tensors S(0) -> R, R -> S(1), P -> R over all
 * ranks. Returns the failures. */
static int hostile(dtr_context_t *ctx, int rank, int world) {
    int64_t size = world;
    dtr_mesh_t *mesh = NULL;
    batch_case_t c;
    memset(&c, 0, sizeof c);
    c.n = 3;
    c.mdims = 1;
    if (dtr_mesh_create(1, &size, NULL, 0, &mesh) != DTR_OK) return 1;
    const char *from[3] = {"S(0)", "R", "P"}, *to[3] = {"R", "S(1)", "R"};
    for (int t = 0; t < 3; t++)
        if (spec_from(mesh, t == 1 ? "6x10" : "9x4", from[t], DTR_F32, &c.src[t]) != DTR_OK ||
            spec_from(mesh, t == 1 ? "6x10" : "9x4", to[t], DTR_F32, &c.dst[t]) != DTR_OK)
            return 1;
    dtr_fill_t fills[3] = {{0}, {0}, {0}};
    dtr_batch_plan_t *bp = NULL, *other = NULL;
    if (dtr_batch_plan_create(3, c.src, c.dst, NULL, NULL, &bp) != DTR_OK ||
        dtr_batch_plan_create(2, c.src, c.dst, NULL, NULL, &other) != DTR_OK) {
        printf("FAIL hostile: plan: %s\n", dtr_last_error());
        return 1;
    }
    int fails = 0;
    buffers_t b;
    /* a NULL input in the middle, on the last rank */
    buffers_make(&c, rank, fills, &b);
    void *keep = b.in[1];
    if (rank == world - 1) b.in[1] = NULL;
    dtr_status_t st = dtr_redistribute_batch(ctx, bp, (const void *const *)b.in, b.in_bytes, b.out,
                                             b.out_bytes);
    b.in[1] = keep;
    fails += agree_all(expect_refusal("NULL in[1] on one rank", st,
                                      rank == world - 1 ? DTR_ERR_INVALID_ARGUMENT : DTR_ERR_REMOTE,
                                      rank == world - 1 ? "in[1]: must not be NULL" : NULL, &c,
                                      rank, fills, &b));
    /* a short output on rank 0 */
    b.out_bytes[2] -= rank == 0 ? 4 : 0;
    st = dtr_redistribute_batch(ctx, bp, (const void *const *)b.in, b.in_bytes, b.out, b.out_bytes);
    b.out_bytes[2] += rank == 0 ? 4 : 0;
    fails += agree_all(expect_refusal("short out[2] on rank 0", st,
                                      rank == 0 ? DTR_ERR_BUFFER_TOO_SMALL : DTR_ERR_REMOTE,
                                      rank == 0 ? "out_bytes[2]" : NULL, &c, rank, fills, &b));
    /* an output overlapping another tensor's input, on rank 0 */
    void *keep_out = b.out[1];
    if (rank == 0) b.out[1] = (char *)b.in[0] + 4;
    st = dtr_redistribute_batch(ctx, bp, (const void *const *)b.in, b.in_bytes, b.out, b.out_bytes);
    b.out[1] = keep_out;
    fails += agree_all(expect_refusal("out[1] overlapping in[0] on rank 0", st,
                                      rank == 0 ? DTR_ERR_INVALID_ARGUMENT : DTR_ERR_REMOTE,
                                      rank == 0 ? "out[1]: overlaps in[0]" : NULL, &c, rank,
                                      fills, &b));
    /* two outputs sharing bytes, on the last rank */
    keep_out = b.out[2];
    if (rank == world - 1) b.out[2] = b.out[0];
    st = dtr_redistribute_batch(ctx, bp, (const void *const *)b.in, b.in_bytes, b.out, b.out_bytes);
    b.out[2] = keep_out;
    fails += agree_all(expect_refusal("out[2] == out[0] on one rank", st,
                                      rank == world - 1 ? DTR_ERR_INVALID_ARGUMENT : DTR_ERR_REMOTE,
                                      rank == world - 1 ? "overlaps out[" : NULL, &c, rank,
                                      fills, &b));
    /* rank 0 holds a batch of two tensors, the others of three */
    st = dtr_redistribute_batch(ctx, rank == 0 ? other : bp, (const void *const *)b.in, b.in_bytes,
                                b.out, b.out_bytes);
    fails += agree_all(expect_refusal("one rank's list differs", st, DTR_ERR_MISMATCH,
                                      "different batches", &c, rank, fills, &b));
    /* and then the batch itself still runs on the same context */
    st = dtr_redistribute_batch(ctx, bp, (const void *const *)b.in, b.in_bytes, b.out, b.out_bytes);
    char why[512] = "";
    int bad = st != DTR_OK ? (snprintf(why, sizeof why, "%s", dtr_last_error()), 1)
                           : buffers_check(&c, rank, fills, &b, false, why, sizeof why);
    if (bad) printf("FAIL hostile (the good call after the refusals): rank %d: %s\n", rank, why);
    fails += agree_all(bad);
    buffers_free(&c, &b);
    dtr_batch_plan_destroy(bp);
    dtr_batch_plan_destroy(other);
    dtr_mesh_destroy(mesh);
    return fails;
}

/* Case `index`'s batch run and checked on ctx (non-blocking for index & 2), its baseline
 * run, and (index & 4) the same plan again on new buffers, non-blocking the other way. */
static int run_case(dtr_context_t *ctx, const dtr_batch_plan_t *bp, const batch_case_t *c,
                    int rank, const dtr_fill_t *fills, buffers_t *b, int index, char *why,
                    size_t len) {
    bool nonblocking = index & 2;
    int bad = run_checked(ctx, bp, c, rank, fills, b, nonblocking, "", why, len);
    if (!bad && dtr_redistribute_batch_baseline(ctx, bp) != DTR_OK) {
        snprintf(why, len, "baseline: %s", dtr_last_error());
        bad = 1;
    }
    /* the same plan again on new buffers: the context keeps what the plan fixes (batch.c,
     * dtr__batch_fix), nothing of the last call's buffers */
    if (!bad && (index & 4)) {
        buffers_t again;
        buffers_make(c, rank, fills, &again);
        bad = run_checked(ctx, bp, c, rank, fills, &again, !nonblocking, "again: ", why, len);
        buffers_free(c, &again);
    }
    return bad;
}

int main(int argc, char **argv) {
    test_job_start(&argc, &argv, &job);
    int rank = job.rank, world = job.world;
    int cases = 100;
    uint64_t seed = 20261124;
    for (int k = 1; k + 1 < argc; k += 2) {
        if (strcmp(argv[k], "--cases") == 0) cases = atoi(argv[k + 1]);
        if (strcmp(argv[k], "--seed") == 0) seed = strtoull(argv[k + 1], NULL, 10);
        if (strcmp(argv[k], "--memory") == 0) fake = strcmp(argv[k + 1], "fake") == 0;
    }
    padded_ops = *dtr_backend_mpi_ops();
    padded_ops.name = "mpi-padded";
    padded_ops.all_gatherv = NULL;
    padded_ops.reduce_scatterv = NULL;
    /* the cases' own contexts (they may move to the fake device; the tallies stay on host
     * memory); over Gloo the second is the first: the padded variant is MPI's */
    dtr_context_t *ctx[2] = {NULL, NULL};
    void *state = NULL;
    if (dtr_context_create_named(job.backend, &ctx[0]) != DTR_OK ||
        (!job.mpi && (ctx[1] = ctx[0]) == NULL) ||
        (job.mpi && (dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state) != DTR_OK ||
                     dtr_context_create(&padded_ops, state, &ctx[1]) != DTR_OK)) ||
        (fake && (dtr_context_set_memory(ctx[0], fake_device_ops(), fake_device_state()) != DTR_OK ||
                  dtr_context_set_memory(ctx[1], fake_device_ops(), fake_device_state()) != DTR_OK))) {
        fprintf(stderr, "rank %d: context: %s\n", rank, dtr_last_error());
        exit(2);
    }
    int failures = 0, tensors = 0, rounds = 0, coalesced = 0, members = 0, one_by_one = 0;
    int ordered = 0, ragged = 0;
    int kinds[DTR_STEP_KIND_LAST] = {0};
    for (int index = 0; index < cases; index++) {
        rng_state = seed * 1000003ull + (uint64_t)index;
        batch_case_t c;
        dtr_mesh_t *mesh = draw(&c, world);
        dtr_batch_plan_t *bp = NULL;
        char why[1024] = "";
        int bad = 0;
        if (mesh == NULL || dtr_batch_plan_create(c.n, c.src, c.dst, NULL, NULL, &bp) != DTR_OK) {
            snprintf(why, sizeof why, "plan: %s", dtr_last_error());
            bad = 1;
        } else {
            bad = check_rounds(bp, why, sizeof why);
        }
        bool padded = index & 1, nonblocking = index & 2;
        via_change = index & 8;
        dtr_fill_t fills[MAX_TENSORS];
        for (int t = 0; t < c.n; t++)
            fills[t] = (dtr_fill_t){.kind = (index >> 2) & 1 ? DTR_FILL_RANDOM : DTR_FILL_PATTERN,
                                    .seed = seed * 1000003ull + (uint64_t)(index * 16 + t)};
        buffers_t b;
        buffers_make(&c, rank, fills, &b);
        if (!bad) bad = run_case(ctx[padded], bp, &c, rank, fills, &b, index, why, sizeof why);
        if (bad)
            printf("FAIL seed %llu case %d (%s, %s, fill %s): %s: rank %d: %s\n",
                   (unsigned long long)seed, index, padded && job.mpi ? "padded" : job.backend,
                   nonblocking ? "non-blocking" : "blocking",
                   fills[0].kind == DTR_FILL_RANDOM ? "random" : "pattern", c.text, rank, why);
        failures += agree_all(bad);
        for (int t = 0; t < c.n; t++) /* tensors with a shard order on either side */
            for (int i = 0, any = 0; i < c.mdims && !any; i++)
                ordered += any = (c.src[t].placements[i].kind == DTR_SHARD &&
                                  c.src[t].placements[i].order != 0) ||
                                 (c.dst[t].placements[i].kind == DTR_SHARD &&
                                  c.dst[t].placements[i].order != 0);
        for (int t = 0; t < c.n; t++) ragged += dtr_spec_ragged(&c.src[t]);
        if (bp != NULL) {
            tensors += bp->ntensors;
            rounds += bp->nrounds;
            for (int r = 0; r < bp->nrounds; r++) {
                coalesced += bp->rounds[r].coalesced && bp->rounds[r].count > 1;
                members += bp->rounds[r].count;
                kinds[bp->rounds[r].kind]++;
            }
            for (int k = 0; k < DTR_STEP_KIND_LAST; k++) one_by_one += bp->member_count[k];
        }
        buffers_free(&c, &b);
        dtr_batch_plan_destroy(bp);
        dtr_mesh_destroy(mesh);
        free(c.ranks);
    }
    int hostile_fails = world >= 2 && !fake ? hostile(ctx[0], rank, world) : 0;
    /* shared memory inside a node, MPI across nodes (tools/mpirun_nodes.sh) */
    if (job.mpi && mpi_paths_check("batches") > 0 && rank == 0) {
        printf("FAIL: a group took the wrong path\n");
        failures++;
    }
    if (rank == 0) {
        printf("%s batch on %d ranks: %d cases, %d tensors, seed %llu\n  %d rounds (%d coalescing "
               "2 or more member steps) for %d member steps; %d collectives one by one\n  rounds "
               "by kind:",
               job.backend, world, cases, tensors, (unsigned long long)seed, rounds, coalesced,
               members, one_by_one);
        for (int k = 0; k < DTR_STEP_KIND_LAST; k++)
            if (dtr_step_kind_info((dtr_step_kind_t)k)->collective)
                printf(" %s %d", dtr_step_kind_info((dtr_step_kind_t)k)->name, kinds[k]);
        printf("\n  tensors with shard orders: %d, keeping a ragged shard: %d\n  hostile "
               "inputs: %d failed\n", ordered, ragged, hostile_fails);
        if (world >= 4 && cases >= 100 && (coalesced == 0 || kinds[DTR_STEP_REDUCE_EXCHANGE] == 0 ||
                                           kinds[DTR_STEP_EXCHANGE] == 0)) {
            printf("  FAIL: no coalesced round, reduce_exchange round or exchange round ran\n");
            failures++;
        }
        if (world >= 2 && cases >= 50 && ragged == 0) {
            printf("  FAIL: no tensor keeping a ragged shard ran\n");
            failures++;
        }
        if (world >= 4 && cases >= 50 && ordered == 0) {
            printf("  FAIL: no tensor with a shard order ran\n");
            failures++;
        }
        printf("  batches on %d ranks: %d passed, %d failed\n", world, cases - failures, failures);
    }
    if (ctx[1] != ctx[0]) dtr_context_destroy(ctx[1]);
    dtr_context_destroy(ctx[0]);
    test_job_end(&job);
    return failures + hostile_fails > 0 ? 1 : 0;
}
