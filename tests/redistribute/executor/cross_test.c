/*
 * Changes between meshes (dtr_redistribute_cross) on the backend --backend names (mpi under
 * mpirun, gloo under tools/dtr_launch.sh: tests/support/job.h), random cases: every rank
 * draws the same case from the seed: a source mesh and a destination mesh of 1 to 3 dims,
 * each over a random subset of the world's ranks in a random order (so the two are disjoint,
 * overlap, or are the same ranks reshaped or permuted, and some ranks are in neither), a
 * shape of 0 to 3 dims with uneven and zero lengths, random placements (Partial of one op on
 * the source, Shard and Replicate on the destination, shard orders now and then, ragged
 * shards (S(d){sizes}) on either side or both one tensor in three), every
 * dtype, now and then a cast; one case in three relabeled, one in four under a random
 * staging cap (many rounds of chunks), one in three planned with no message start-up cost
 * (a replicated block's boxes cut among its holders), one in five a batch of up to three tensors between
 * the same meshes, one in three through the non-blocking calls (_start, then
 * dtr_request_test). Even cases fill the source with the exact pattern, odd ones with random
 * values (reduction order and precision show). Each case checks every element
 * of every destination rank's block, that every source rank's input is intact, that nothing
 * is written past the output, and that a rank in neither mesh returns at once; each plan
 * runs twice on one context. Then the unhappy paths: one rank's wrong sizes (its error
 * there, REMOTE on the others, nobody hangs), and a mesh naming a rank past the
 * communicator (an error naming it, at once); on mpi, that the non-blocking start returns
 * with its exchange in flight. With --memory fake (mpi) every case runs on a context on the
 * fake device (every buffer there, the casts a sender makes as it packs through the space's
 * own copy_box and cast), which must never be handed a host address.
 *
 * Usage: mpirun -n N cross_test [--cases N] [--seed S] [--backend mpi] [--memory fake], or
 * tools/dtr_launch.sh -n N cross_test ... --backend gloo (XTRACE=1: print each case before
 * it runs, to find one that hangs). Prints one line per failing
 * case (seed and case number to rerun it) and "cross: N passed, N failed".
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "backends/mpi/dtr_mpi.h"
#include "tests/support/fake_device.h"
#include "tests/support/job.h"
#include "tests/support/rand_cases.h"
#include "pattern/pattern.h"

#define GUARD 16

typedef struct {
    dtr_mesh_t *mesh[2]; /* source, destination */
    int n;               /* tensors: 1, or a batch of up to 3 */
    dtr_spec_t src[3], dst[3];
    bool relabel;
    int64_t cap;
    char text[4096];
} xcase_t;

static bool on_fake; /* --memory fake: every case on the fake device (run_on, below) */

static const dtr_dtype_t dtypes[] = {DTR_F32, DTR_F64, DTR_F16, DTR_BF16, DTR_I32,
                                     DTR_I64, DTR_U8,  DTR_F8E4M3, DTR_C64};

/* Tensor t of a case on its meshes: a shape, a dtype, placements, now and then a cast (and
 * its command line appended to c->text); false where the draw is no valid pair. */
static bool draw_tensor(xcase_t *c, int t, int k) {
    int ndim = pick(4);
    int64_t shape[3];
    for (int d = 0; d < ndim; d++) shape[d] = pick(5) == 0 ? 0 : 1 + pick(11);
    if (k % 5 < 2 && ndim < 2) /* (boxes of several rows summed at the receivers) */
        for (; ndim < 2 + (int)pick(2); ndim++) shape[ndim] = 2 + pick(10);
    dtr_dtype_t dtype = dtypes[pick(9)];
    if (k % 5 < 2 && (!dtr_dtype_info(dtype)->is_float || dtr_dtype_info(dtype)->is_complex))
        dtype = (k / 5) % 2 ? DTR_BF16 : DTR_F32; /* (sums at the receivers take real floats) */
    bool storage = dtr_dtype_info(dtype)->storage_only, complex = dtr_dtype_info(dtype)->is_complex;
    dtr_reduce_op_t op = complex ? (dtr_reduce_op_t)pick(2) : (dtr_reduce_op_t)pick(4);
    if (k % 5 < 2) op = DTR_REDUCE_SUM; /* (cases that sum at the receivers where they can) */
    if (k % 5 == 3 && !complex) /* (max and min: what a ragged source combines at the receivers too) */
        op = (k / 5) % 2 ? DTR_REDUCE_MAX : DTR_REDUCE_MIN;
    dtr_placement_t pa[3], pb[3];
    for (int i = 0; i < dtr_mesh_ndims(c->mesh[0]); i++) {
        pa[i] = random_placement(ndim, op);
        if (storage && pa[i].kind == DTR_PARTIAL) pa[i] = dtr_replicate();
    }
    for (int i = 0; i < dtr_mesh_ndims(c->mesh[1]); i++) {
        pb[i] = random_placement(ndim, op);
        if (pb[i].kind == DTR_PARTIAL) pb[i] = dtr_replicate();
    }
    if (pick(4) == 0) random_orders(dtr_mesh_ndims(c->mesh[0]), pa);
    if (pick(4) == 0) random_orders(dtr_mesh_ndims(c->mesh[1]), pb);
    /* every sixth case casts (float to float, complex to complex) */
    dtr_dtype_t to = dtype;
    if ((k + t) % 6 == 5 && dtr_dtype_info(dtype)->is_float && !storage && !complex)
        to = dtype == DTR_F32 ? DTR_BF16 : DTR_F32;
    /* one tensor in three with ragged shards (S(d){sizes}), from, to or both; a ragged
     * source's Partial is reduced on its mesh where each ragged shard is the only shard of
     * its tensor dim (planner/ragged.c: any op, any cast), else combined at the receivers (a
     * sum; max and min on host memory), so it stays only where one of them can be */
    int64_t sa[3][64], sb[3][64];
    if (pick(3) == 0) {
        bool ragged = raggedize(c->mesh[0], pa, shape, ndim, sa) > 0;
        raggedize(c->mesh[1], pb, shape, ndim, sb);
        bool combines = op == DTR_REDUCE_SUM || (!on_fake && op != DTR_REDUCE_AVG); /* (host: max, min) */
        bool summed = combines && to == dtype && dtr_dtype_info(dtype)->is_float &&
                      !complex && !storage && c->cap == 0 && k % 5 != 2; /* (2: at the source) */
        int m = dtr_mesh_ndims(c->mesh[0]);
        bool alone = true;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < m && pa[i].kind == DTR_SHARD && pa[i].nsizes > 0; j++)
                alone &= j == i || dtr_mesh_size(c->mesh[0], j) == 1 ||
                         pa[j].kind != DTR_SHARD || pa[j].dim != pa[i].dim;
        for (int i = 0; ragged && !alone && i < m; i++)
            if (pa[i].kind == DTR_PARTIAL && (!summed || dtr_mesh_size(c->mesh[0], i) == 1))
                pa[i] = dtr_replicate();
    }
    if (dtr_spec_init(&c->src[t], c->mesh[0], pa, dtr_mesh_ndims(c->mesh[0]), shape, ndim, dtype) != DTR_OK ||
        dtr_spec_init(&c->dst[t], c->mesh[1], pb, dtr_mesh_ndims(c->mesh[1]), shape, ndim, to) != DTR_OK)
        return false;
    char sh[64], fa[512], fb[512];
    dtr_shape_format(shape, ndim, sh, sizeof sh);
    dtr_placements_format(pa, dtr_mesh_ndims(c->mesh[0]), fa, sizeof fa);
    dtr_placements_format(pb, dtr_mesh_ndims(c->mesh[1]), fb, sizeof fb);
    size_t at = strlen(c->text);
    snprintf(c->text + at, sizeof c->text - at, "%s--from '%s' --to '%s' --shape %s --dtype %s --to-dtype %s",
             t ? "; tensor: " : "", fa, fb, sh, dtr_dtype_name(dtype), dtr_dtype_name(to));
    return true;
}

/* Draws case k; false where the draw is no valid pair of specs (then nothing to free). */
static bool draw(xcase_t *c, int world, int k) {
    memset(c, 0, sizeof *c);
    c->mesh[0] = random_mesh(world, 1 + pick(world));
    c->mesh[1] = random_mesh(world, 1 + pick(world));
    c->relabel = k % 3 == 1;
    c->cap = k % 4 == 2 ? 16 + pick(300) : 0;
    char ma[32], mb[32], ra[256] = "", rb[256] = "";
    for (int s = 0; s < 2; s++) { /* the rank lists, row-major */
        char *to = s ? rb : ra;
        int64_t coord[3] = {0, 0, 0}, n = dtr_mesh_nranks(c->mesh[s]);
        for (int64_t p = 0; p < n; p++) {
            int r;
            dtr_mesh_rank_at(c->mesh[s], coord, &r);
            snprintf(to + strlen(to), 256 - strlen(to), "%s%d", p ? "," : "", r);
            for (int i = dtr_mesh_ndims(c->mesh[s]) - 1; i >= 0; i--) {
                if (++coord[i] < dtr_mesh_size(c->mesh[s], i)) break;
                coord[i] = 0;
            }
        }
    }
    dtr_mesh_format(c->mesh[0], ma, sizeof ma);
    dtr_mesh_format(c->mesh[1], mb, sizeof mb);
    snprintf(c->text, sizeof c->text, "--mesh %s --ranks %s --to-mesh %s --to-ranks %s%s", ma, ra,
             mb, rb, c->relabel ? " --relabel" : "");
    if (c->cap > 0)
        snprintf(c->text + strlen(c->text), sizeof c->text - strlen(c->text),
                 " --staging-cap %lld", (long long)c->cap);
    strcat(c->text, " ");
    if (!draw_tensor(c, 0, k)) {
        dtr_mesh_destroy(c->mesh[0]);
        dtr_mesh_destroy(c->mesh[1]);
        return false;
    }
    c->n = 1;
    for (int tries = 0; k % 5 == 4 && c->n < 3 && tries < 6; tries++) /* a batch */
        if (draw_tensor(c, c->n, k)) c->n++;
    return true;
}

/* This rank's buffers for one tensor of a case. */
typedef struct {
    bool in_src, in_dst;
    dtr_layout_t sl, dl;
    dtr_spec_t dst; /* as the plan delivers it */
    unsigned char *in, *copy, *out;
    dtr_fill_t fill;
} xbuf_t;

/* Tensor t's result on this rank: every element, the guard past the output, the input
 * intact. 0, or 1 with why. */
static int check_tensor(const xcase_t *c, int t, const xbuf_t *b, int rank, char *why, size_t len) {
    dtr_pattern_report_t rep = {0};
    if (b->in_dst && dtr_fill_check(&c->src[t], &b->dst, &b->fill, rank, b->out, (size_t)b->dl.bytes, &rep) != DTR_OK) {
        snprintf(why, len, "tensor %d: check: %s", t, dtr_last_error());
        return 1;
    }
    if (rep.mismatches > 0) {
        snprintf(why, len, "tensor %d: %lld of %lld values wrong, first at %lld: got %.9g, want %.9g", t,
                 (long long)rep.mismatches, (long long)rep.checked, (long long)rep.first, rep.got, rep.want);
        return 1;
    }
    for (int g = 0; g < GUARD && b->in_dst; g++)
        if (b->out[b->dl.bytes + g] != 0x5A) {
            snprintf(why, len, "tensor %d: a byte past the output was written", t);
            return 1;
        }
    if (memcmp(b->in, b->copy, (size_t)b->sl.bytes) != 0) {
        snprintf(why, len, "tensor %d: the input was written", t);
        return 1;
    }
    return 0;
}

/* Every third case runs through the non-blocking calls (_start, then dtr_request_test until
 * done); every fourth through the change object (dtr_change_create, dtr_change_run /
 * dtr_change_start), where its meshes differ. */
static bool nonblocking, via_change;

static dtr_status_t run_host(dtr_context_t *ctx, const dtr_cross_plan_t *plan,
                             const dtr_change_t *change, const xcase_t *c, xbuf_t *b);

/* --memory fake (on_fake, above): every case on a context whose memory is the fake device
 * (tagged addresses the executor must never touch itself: tests/support/fake_device.h), the
 * buffers copied there and back around the call. */
static void *fake_st; /* the test's own state for the space's calls (freed at the end) */

static dtr_status_t run_once(dtr_context_t *ctx, const dtr_cross_plan_t *plan,
                             const dtr_change_t *change, const xcase_t *c, xbuf_t *b) {
    if (!on_fake) return run_host(ctx, plan, change, c, b);
    const dtr_memory_ops_t *m = fake_device_ops();
    void *st = fake_st;
    xbuf_t d[3];
    void *hin[3], *hout[3];
    dtr_status_t s = DTR_OK;
    for (int t = 0; t < c->n; t++) {
        d[t] = b[t];
        d[t].in = d[t].out = NULL;
        if (s == DTR_OK) s = m->alloc(st, b[t].sl.bytes + 1, (void **)&d[t].in);
        if (s == DTR_OK) s = m->alloc(st, b[t].dl.bytes + GUARD, (void **)&d[t].out);
        if (s == DTR_OK) s = m->copy(st, d[t].in, b[t].in, b[t].sl.bytes, DTR_COPY_FROM_HOST);
        memset(b[t].out, 0x5A, (size_t)b[t].dl.bytes + GUARD);
        if (s == DTR_OK) s = m->copy(st, d[t].out, b[t].out, b[t].dl.bytes + GUARD, DTR_COPY_FROM_HOST);
        hin[t] = b[t].in, hout[t] = b[t].out;
    }
    if (s == DTR_OK) s = run_host(ctx, plan, change, c, d);
    /* the results, and the inputs back (the check finds them intact or not) */
    for (int t = 0; t < c->n && s == DTR_OK; t++) {
        s = m->copy(st, hout[t], d[t].out, b[t].dl.bytes + GUARD, DTR_COPY_TO_HOST);
        if (s == DTR_OK) s = m->copy(st, hin[t], d[t].in, b[t].sl.bytes, DTR_COPY_TO_HOST);
    }
    for (int t = 0; t < c->n; t++) {
        m->free(st, d[t].in);
        m->free(st, d[t].out);
        b[t].in = hin[t], b[t].out = hout[t];
    }
    return s;
}

/* One run of the case's plan (the batch call for several tensors). */
static dtr_status_t run_host(dtr_context_t *ctx, const dtr_cross_plan_t *plan,
                             const dtr_change_t *change, const xcase_t *c, xbuf_t *b) {
    const void *in[3];
    void *out[3];
    size_t ib[3], ob[3];
    for (int t = 0; t < c->n; t++) {
        if (!on_fake) memset(b[t].out, 0x5A, (size_t)b[t].dl.bytes + GUARD);
        in[t] = b[t].in_src ? b[t].in : NULL;
        out[t] = b[t].in_dst ? b[t].out : NULL;
        ib[t] = (size_t)b[t].sl.bytes;
        ob[t] = (size_t)b[t].dl.bytes;
    }
    if (nonblocking) {
        dtr_request_t *req = NULL;
        bool done = false;
        dtr_status_t st = change != NULL ? dtr_change_start(ctx, change, in, ib, out, ob, &req)
                          : c->n == 1    ? dtr_redistribute_cross_start(ctx, plan, in[0], ib[0],
                                                                        out[0], ob[0], &req)
                                         : dtr_redistribute_cross_batch_start(ctx, plan, in, ib,
                                                                              out, ob, &req);
        while (st == DTR_OK && !done) st = dtr_request_test(req, &done);
        return st;
    }
    if (change != NULL) return dtr_change_run(ctx, change, in, ib, out, ob);
    if (c->n == 1) return dtr_redistribute_cross(ctx, plan, in[0], ib[0], out[0], ob[0]);
    return dtr_redistribute_cross_batch(ctx, plan, in, ib, out, ob);
}

static int summed; /* cases whose plan sums a Partial at the receivers */
static int ragged_pre; /* cases whose plan reduces a ragged source's Partial on its mesh */

/* Does the plan run steps on the source mesh for a ragged source with a Partial? */
static bool reduces_ragged(const xcase_t *c, const dtr_cross_plan_t *plan) {
    dtr_cross_figures_t f;
    if (dtr_cross_plan_figures(plan, &f) != DTR_OK || f.pre_steps == 0) return false;
    for (int t = 0; t < c->n; t++)
        for (int i = 0; dtr_spec_ragged(&c->src[t]) && i < dtr_mesh_ndims(c->mesh[0]); i++)
            if (c->src[t].placements[i].kind == DTR_PARTIAL) return true;
    return false;
}

/* Whether a plan sums some tensor's Partial at the receivers (its JSON says so). */
static bool sums_at_receiver(const dtr_cross_plan_t *plan) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    bool yes = f != NULL && dtr_cross_plan_print_json(plan, f) == DTR_OK;
    if (f != NULL) fclose(f);
    yes = yes && strstr(text, "\"summed_at_receiver\"") != NULL;
    free(text);
    return yes;
}

/* One case on this rank: plan, run twice, check every tensor. 0, or 1 with why. */
static int run_case(dtr_context_t *ctx, const xcase_t *c, const dtr_fill_t *fill, int rank,
                    char *why, size_t len) {
    dtr_cross_plan_t *plan = NULL;
    dtr_cross_options_t opts = {.relabel = c->relabel, .staging_cap_bytes = c->cap};
    dtr_change_options_t copts = {.relabel = c->relabel, .staging_cap_bytes = c->cap};
    dtr_change_t *change = NULL;
    dtr_status_t st = via_change     ? dtr_change_create(c->n, c->src, c->dst, &copts, &change)
                      : c->n == 1    ? dtr_cross_plan_create(&c->src[0], &c->dst[0], &opts, &plan)
                                     : dtr_cross_plan_create_batch(c->n, c->src, c->dst, &opts,
                                                                   &plan);
    if (st == DTR_OK && change != NULL) {
        if (dtr_change_form(change) != (c->n == 1 ? DTR_CHANGE_CROSS : DTR_CHANGE_CROSS_BATCH)) {
            snprintf(why, len, "the change's form is %d", (int)dtr_change_form(change));
            dtr_change_destroy(change);
            return 1;
        }
        plan = (dtr_cross_plan_t *)dtr_change_cross_plan(change); /* (the change owns it) */
    }
    if (st != DTR_OK) {
        snprintf(why, len, "plan: %s", dtr_last_error());
        return 1;
    }
    summed += sums_at_receiver(plan);
    ragged_pre += reduces_ragged(c, plan);
    xbuf_t b[3];
    memset(b, 0, sizeof b);
    int bad = 0;
    bool any = false;
    for (int t = 0; t < c->n; t++) {
        dtr_cross_plan_dst(plan, t, &b[t].dst);
        b[t].in_src = dtr_spec_layout(&c->src[t], rank, &b[t].sl) == DTR_OK;
        b[t].in_dst = dtr_spec_layout(&b[t].dst, rank, &b[t].dl) == DTR_OK;
        b[t].in = malloc((size_t)b[t].sl.bytes + 1);
        b[t].copy = malloc((size_t)b[t].sl.bytes + 1);
        b[t].out = malloc((size_t)b[t].dl.bytes + GUARD);
        b[t].fill = *fill;
        b[t].fill.seed = fill->seed + (uint64_t)t;
        any |= b[t].in_src || b[t].in_dst;
        if (!bad && b[t].in_src && dtr_fill(&c->src[t], &b[t].fill, rank, b[t].in, (size_t)b[t].sl.bytes) != DTR_OK) {
            snprintf(why, len, "fill: %s", dtr_last_error());
            bad = 1;
        }
        memcpy(b[t].copy, b[t].in, (size_t)b[t].sl.bytes);
    }
    for (int round = 0; round < 2 && !bad; round++) {
        double t0 = test_job_now();
        if ((st = run_once(ctx, plan, change, c, b)) != DTR_OK) {
            snprintf(why, len, "round %d: %s", round, dtr_last_error());
            bad = 1;
        } else if (!any && test_job_now() - t0 > 0.5) {
            snprintf(why, len, "a rank in neither mesh waited %.2f s", test_job_now() - t0);
            bad = 1;
        }
    }
    for (int t = 0; t < c->n && !bad; t++) bad = check_tensor(c, t, &b[t], rank, why, len);
    for (int t = 0; t < c->n; t++) free(b[t].in), free(b[t].copy), free(b[t].out);
    if (change != NULL) dtr_change_destroy(change);
    else dtr_cross_plan_destroy(plan);
    return bad;
}

/* One rank's out_bytes too small: BUFFER_TOO_SMALL there, REMOTE on the others; the context
 * works again after. 0, or 1 with why. */
static int wrong_size(dtr_context_t *ctx, int rank, int world, char *why, size_t len) {
    int ra[64], rb[64];
    for (int k = 0; k < world; k++) ra[k] = rb[k] = k;
    dtr_mesh_t *a = NULL, *b = NULL;
    int64_t na = world, nb = world;
    dtr_mesh_create(1, &na, ra, world, &a);
    dtr_mesh_create(1, &nb, rb, world, &b);
    dtr_spec_t src, dst;
    int64_t shape[2] = {8, 4};
    dtr_placement_t s0 = dtr_shard(0), s1 = dtr_shard(1);
    dtr_spec_init(&src, a, &s0, 1, shape, 2, DTR_F32);
    dtr_spec_init(&dst, b, &s1, 1, shape, 2, DTR_F32);
    dtr_cross_plan_t *plan = NULL;
    dtr_cross_plan_create(&src, &dst, NULL, &plan);
    dtr_layout_t sl, dl;
    dtr_spec_layout(&src, rank, &sl);
    dtr_spec_layout(&dst, rank, &dl);
    float in[64] = {0}, out[64];
    size_t ob = rank == world - 1 ? (size_t)dl.bytes - 4 : (size_t)dl.bytes;
    dtr_status_t st = dtr_redistribute_cross(ctx, plan, in, (size_t)sl.bytes, out, ob);
    int bad = 0;
    if (rank == world - 1 ? st != DTR_ERR_BUFFER_TOO_SMALL || !strstr(dtr_last_error(), "out_bytes")
                          : st != DTR_ERR_REMOTE) {
        snprintf(why, len, "one rank's out_bytes short: %s (%s)", dtr_status_name(st), dtr_last_error());
        bad = 1;
    }
    if (!bad && dtr_redistribute_cross(ctx, plan, in, (size_t)sl.bytes, out, (size_t)dl.bytes) != DTR_OK) {
        snprintf(why, len, "the good call after it: %s", dtr_last_error());
        bad = 1;
    }
    dtr_cross_plan_destroy(plan);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
    return bad;
}

/* A ragged source's Partial combined at the receivers by each op it may be (max, min, sum):
 * S(0){3,5},P(op) on 2 x world/2 ranks to S(1) on every rank in reverse, random values,
 * every element checked (run_case), the plan combining at the receivers; and P(avg), which
 * only the steps on the source mesh reduce (planner/ragged.c), also from S(0){0,8}. 4 ranks
 * or more. */
static int ragged_partials(dtr_context_t *ctx, bool mpi, int rank, int world, char *why,
                           size_t len) {
    const dtr_reduce_op_t ops[] = {DTR_REDUCE_MAX, DTR_REDUCE_MIN, DTR_REDUCE_SUM,
                                   DTR_REDUCE_AVG, DTR_REDUCE_AVG};
    int bad = 0; /* (every op runs on every rank, failed or not: the ranks stay in step) */
    via_change = false; /* (the planner's own choice and costs, whatever the last case set) */
    unsetenv("DTR_CROSS_REDUCE");
    unsetenv("DTR_ALPHA_US");
    for (int k = 0; k < 5; k++) {
        xcase_t c;
        memset(&c, 0, sizeof c);
        /* (the last with an empty first slice: the reduced blocks' room is the largest's) */
        int64_t sa[2] = {2, world / 2}, nb = 2 * (world / 2), sizes[2] = {k < 4 ? 3 : 0, k < 4 ? 5 : 8},
                shape[2] = {8, 6};
        int rb[64];
        for (int r = 0; r < nb; r++) rb[r] = (int)nb - 1 - r;
        dtr_mesh_create(2, sa, NULL, 0, &c.mesh[0]);
        dtr_mesh_create(1, &nb, rb, nb, &c.mesh[1]);
        dtr_placement_t pa[2] = {dtr_shard(0), dtr_partial(ops[k])}, pb = dtr_shard(1);
        pa[0].nsizes = 2;
        pa[0].sizes = sizes;
        c.n = 1;
        snprintf(c.text, sizeof c.text, "S(0){%lld,%lld},P(%s) -> S(1)", (long long)sizes[0],
                 (long long)sizes[1], dtr_reduce_op_name(ops[k]));
        char inner[400] = "";
        int here = 0, before = summed, before_pre = ragged_pre;
        if (dtr_spec_init(&c.src[0], c.mesh[0], pa, 2, shape, 2, DTR_F32) != DTR_OK ||
            dtr_spec_init(&c.dst[0], c.mesh[1], &pb, 1, shape, 2, DTR_F32) != DTR_OK) {
            snprintf(inner, sizeof inner, "specs: %.300s", dtr_last_error());
            here = 1;
        }
        dtr_fill_t fill = {.kind = DTR_FILL_RANDOM, .seed = 7 + (uint64_t)k};
        /* (the empty first slice on a fresh MPI context: no scratch left by earlier cases
         * may hide a room made too small) */
        void *state = NULL;
        dtr_context_t *fresh = NULL;
        if (k == 4 && mpi &&
            (dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state) != DTR_OK ||
             dtr_context_create(dtr_backend_mpi_ops(), state, &fresh) != DTR_OK)) {
            snprintf(inner, sizeof inner, "a fresh context: %.300s", dtr_last_error());
            here = 1;
        }
        if (!here) here = run_case(fresh != NULL ? fresh : ctx, &c, &fill, rank, inner, sizeof inner);
        dtr_context_destroy(fresh);
        if (!here && ops[k] != DTR_REDUCE_AVG && summed != before + 1) {
            snprintf(inner, sizeof inner, "not combined at the receivers");
            here = 1;
        }
        if (!here && ops[k] == DTR_REDUCE_AVG && ragged_pre != before_pre + 1) {
            snprintf(inner, sizeof inner, "not reduced on the source mesh");
            here = 1;
        }
        if (here && !bad) snprintf(why, len, "%.100s: %.380s", c.text, inner);
        bad |= here;
        dtr_mesh_destroy(c.mesh[0]);
        dtr_mesh_destroy(c.mesh[1]);
    }
    return bad;
}

/* The last rank alone with other ragged sizes (the same sum, other blocks): its plan differs,
 * so every rank fails with MISMATCH, nothing written, and the next call runs. */
static int other_sizes(dtr_context_t *ctx, int rank, int world, char *why, size_t len) {
    dtr_mesh_t *a = NULL;
    int64_t n = world, shape[2] = {3 * world, 2}, sizes[64];
    dtr_mesh_create(1, &n, NULL, 0, &a);
    for (int k = 0; k < world; k++) sizes[k] = 3;
    if (rank == world - 1) sizes[0] = 4, sizes[1] = 2;
    dtr_placement_t ps = dtr_shard(0), pd = dtr_shard(1);
    ps.nsizes = world;
    ps.sizes = sizes;
    dtr_spec_t src, dst;
    dtr_spec_init(&src, a, &ps, 1, shape, 2, DTR_F32);
    dtr_spec_init(&dst, a, &pd, 1, shape, 2, DTR_F32);
    dtr_cross_plan_t *plan = NULL;
    int bad = dtr_cross_plan_create(&src, &dst, NULL, &plan) != DTR_OK;
    dtr_layout_t sl, dl;
    dtr_spec_layout(&src, rank, &sl);
    dtr_spec_layout(&dst, rank, &dl);
    float in[64] = {0}, out[64];
    for (int k = 0; k < 64; k++) out[k] = -1;
    dtr_status_t st = bad ? DTR_OK : dtr_redistribute_cross(ctx, plan, in, (size_t)sl.bytes, out, (size_t)dl.bytes);
    if (bad || st != DTR_ERR_MISMATCH || out[0] != -1) {
        snprintf(why, len, "the last rank's other ragged sizes: %s (%s)", dtr_status_name(st),
                 dtr_last_error());
        bad = 1;
    }
    dtr_cross_plan_destroy(plan);
    ps.sizes = sizes;
    for (int k = 0; k < world; k++) sizes[k] = 3; /* the same sizes everywhere again */
    dtr_spec_init(&src, a, &ps, 1, shape, 2, DTR_F32);
    dtr_spec_layout(&src, rank, &sl);
    if (!bad && (dtr_cross_plan_create(&src, &dst, NULL, &plan) != DTR_OK ||
                 dtr_redistribute_cross(ctx, plan, in, (size_t)sl.bytes, out, (size_t)dl.bytes) != DTR_OK)) {
        snprintf(why, len, "the good call after other ragged sizes: %s", dtr_last_error());
        bad = 1;
    }
    dtr_cross_plan_destroy(plan);
    dtr_mesh_destroy(a);
    return bad;
}

/* The MPI backend with its all-to-all-v counted: started, and completed by test or wait. */
static dtr_backend_ops_t counted;
static int a2a_started, a2a_completed;
static dtr_backend_req_t *a2a_req; /* the all-to-all-v in flight (others are not counted) */

static dtr_status_t counted_a2av(void *group, const void *send, const int64_t *sc,
                                 const int64_t *sd, void *recv, const int64_t *rc,
                                 const int64_t *rd, dtr_backend_req_t *req) {
    a2a_started++;
    a2a_req = req;
    return dtr_backend_mpi_ops()->all_to_allv(group, send, sc, sd, recv, rc, rd, req);
}

static dtr_status_t counted_test(void *group, dtr_backend_req_t *req, bool *done) {
    dtr_status_t st = dtr_backend_mpi_ops()->test(group, req, done);
    if (st == DTR_OK && *done && req == a2a_req) a2a_completed++, a2a_req = NULL;
    return st;
}

static dtr_status_t counted_wait(void *group, dtr_backend_req_t *req) {
    if (req == a2a_req) a2a_completed++, a2a_req = NULL;
    return dtr_backend_mpi_ops()->wait(group, req);
}

/* dtr_redistribute_cross_start returns before the other ranks have called: on a context
 * whose backend counts its operations, rank 0's R (4 MiB) moved to rank 1 (a second time:
 * the first makes the groups, which every rank waits in), rank 1 starts first and only then
 * tells rank 0 to start (a message rank 0 waits for, up to 60 s: were
 * the start to wait for rank 0, the message would never come), and each start returns with
 * its agreement in flight and no exchange begun; the wait completes the move, with exactly
 * one exchange, and every element is checked. 0, or 1 with why. */
static int start_returns_in_flight(int rank, char *why, size_t len) {
    counted = *dtr_backend_mpi_ops();
    counted.all_to_allv = counted_a2av;
    counted.test = counted_test;
    counted.wait = counted_wait;
    counted.agree = NULL, counted.cancel = NULL; /* (the agreement as a plain all-reduce) */
    void *state = NULL;
    dtr_context_t *ctx = NULL;
    if (dtr_backend_mpi_state_create(MPI_COMM_WORLD, &state) != DTR_OK ||
        dtr_context_create(&counted, state, &ctx) != DTR_OK) {
        snprintf(why, len, "the counted context: %s", dtr_last_error());
        return 1;
    }
    int ra[1] = {0}, rb[1] = {1};
    int64_t one = 1, n = 1 << 20;
    dtr_mesh_t *a = NULL, *b = NULL;
    dtr_mesh_create(1, &one, ra, 1, &a);
    dtr_mesh_create(1, &one, rb, 1, &b);
    dtr_spec_t src, dst;
    dtr_placement_t r = dtr_replicate();
    dtr_spec_init(&src, a, &r, 1, &n, 1, DTR_F32);
    dtr_spec_init(&dst, b, &r, 1, &n, 1, DTR_F32);
    dtr_cross_plan_t *plan = NULL;
    float *buf = calloc((size_t)n, sizeof *buf);
    int bad = dtr_cross_plan_create(&src, &dst, NULL, &plan) != DTR_OK || buf == NULL;
    if (bad) snprintf(why, len, "the plan: %s", dtr_last_error());
    for (int64_t k = 0; !bad && rank == 0 && k < n; k++) buf[k] = (float)k;
    /* a first move makes the group of both meshes' ranks, a collective each waits in */
    if (!bad && dtr_redistribute_cross(ctx, plan, rank == 0 ? buf : NULL,
                                       rank == 0 ? (size_t)n * 4 : 0, rank == 1 ? buf : NULL,
                                       rank == 1 ? (size_t)n * 4 : 0) != DTR_OK) {
        snprintf(why, len, "the first move: %s", dtr_last_error());
        bad = 1;
    }
    dtr_request_t *req = NULL;
    int started = a2a_started, completed = a2a_completed, token = 0;
    bool told = rank != 0;
    if (rank == 0) { /* rank 1 starts first, then says so (the caller runs this on 2+ ranks) */
        MPI_Request mr;
        MPI_Irecv(&token, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, &mr);
        for (double t0 = MPI_Wtime(); !told && MPI_Wtime() - t0 < 60;) {
            int flag = 0;
            MPI_Test(&mr, &flag, MPI_STATUS_IGNORE);
            told = flag != 0;
        }
        if (!told) MPI_Cancel(&mr), MPI_Request_free(&mr);
    }
    dtr_status_t st = bad ? DTR_OK
                          : dtr_redistribute_cross_start(ctx, plan, rank == 0 ? buf : NULL,
                                                         rank == 0 ? (size_t)n * 4 : 0,
                                                         rank == 1 ? buf : NULL,
                                                         rank == 1 ? (size_t)n * 4 : 0, &req);
    int begun = a2a_started - started;
    if (rank == 1) MPI_Send(&token, 1, MPI_INT, 0, 77, MPI_COMM_WORLD);
    if (!told) {
        snprintf(why, len, "rank 1's start did not return before rank 0 called");
        bad = 1;
    }
    if (!bad && (st != DTR_OK || begun != 0)) {
        snprintf(why, len, "start: %s, %d exchanges begun at its return (want 0: the "
                 "agreement first)", st == DTR_OK ? "ok" : dtr_last_error(), begun);
        bad = 1;
    }
    if (st == DTR_OK && req != NULL && dtr_request_wait(req) != DTR_OK && !bad) {
        snprintf(why, len, "wait: %s", dtr_last_error());
        bad = 1;
    }
    int moved = a2a_completed - completed;
    if (!bad && rank <= 1 && (a2a_started - started != 1 || moved != 1)) {
        snprintf(why, len, "%d exchanges begun, %d completed (want 1 and 1)",
                 a2a_started - started, moved);
        bad = 1;
    }
    for (int64_t k = 0; !bad && rank == 1 && k < n; k++)
        if (buf[k] != (float)k) {
            snprintf(why, len, "element %lld: %g", (long long)k, buf[k]);
            bad = 1;
        }
    free(buf);
    dtr_cross_plan_destroy(plan);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
    dtr_context_destroy(ctx);
    return bad;
}

/* A destination mesh naming a rank past the communicator: rank 0 (the only other member)
 * gets the error naming it, at once, and the others are bystanders.
 * 0, or 1 with why. */
static int out_of_comm(dtr_context_t *ctx, int rank, int world, char *why, size_t len) {
    int ra[1] = {0}, rb[1] = {world};
    int64_t one = 1;
    dtr_mesh_t *a = NULL, *b = NULL;
    dtr_mesh_create(1, &one, ra, 1, &a);
    dtr_mesh_create(1, &one, rb, 1, &b);
    dtr_spec_t src, dst;
    int64_t shape[1] = {4};
    dtr_placement_t r = dtr_replicate();
    dtr_spec_init(&src, a, &r, 1, shape, 1, DTR_F32);
    dtr_spec_init(&dst, b, &r, 1, shape, 1, DTR_F32);
    dtr_cross_plan_t *plan = NULL;
    dtr_cross_plan_create(&src, &dst, NULL, &plan);
    float in[4] = {1, 2, 3, 4};
    dtr_status_t st = dtr_redistribute_cross(ctx, plan, in, sizeof in, NULL, 0);
    int bad = 0;
    bool named = strstr(dtr_last_error(), "not in the context's communicator") != NULL ||
                 strstr(dtr_last_error(), "outside the") != NULL; /* (gloo's words) */
    if (rank == 0 ? st != DTR_ERR_INVALID_ARGUMENT || !named : st != DTR_OK) {
        snprintf(why, len, "a mesh past the communicator: %s (%s)", dtr_status_name(st), dtr_last_error());
        bad = 1;
    }
    dtr_cross_plan_destroy(plan);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(b);
    return bad;
}

int main(int argc, char **argv) {
    test_job_t job;
    test_job_start(&argc, &argv, &job);
    int rank = job.rank, world = job.world, cases = 100, passed = 0, failed = 0;
    uint64_t seed = 20261127;
    for (int k = 1; k + 1 < argc; k += 2) {
        if (strcmp(argv[k], "--cases") == 0) cases = atoi(argv[k + 1]);
        if (strcmp(argv[k], "--seed") == 0) seed = strtoull(argv[k + 1], NULL, 10);
        if (strcmp(argv[k], "--memory") == 0) on_fake = strcmp(argv[k + 1], "fake") == 0;
    }
    dtr_context_t *ctx = job.ctx, *fctx = NULL;
    if (on_fake && (!job.mpi || dtr_context_create_mpi(MPI_COMM_WORLD, &fctx) != DTR_OK ||
                    dtr_context_set_memory(fctx, fake_device_ops(), fake_device_state()) != DTR_OK)) {
        printf("FAIL: --memory fake needs MPI and a context on the fake device: %s\n", dtr_last_error());
        return 1;
    }
    if (fctx != NULL) ctx = fctx, fake_st = fake_device_state();
    int kinds[3] = {0, 0, 0}; /* disjoint, overlapping, the same set of ranks */
    int ragged = 0;           /* cases with ragged shards */
    for (int k = 0; k < cases; k++) {
        rng_state = seed * 1000003ull + (uint64_t)k;
        xcase_t c;
        if (!draw(&c, world, k)) continue;
        if (getenv("XTRACE") && rank == 0) printf("case %d (%d tensors): %s\n", k, c.n, c.text), fflush(stdout);
        dtr_fill_t fill = {.kind = k % 2 ? DTR_FILL_RANDOM : DTR_FILL_PATTERN, .seed = seed + (uint64_t)k};
        nonblocking = k % 3 == 1;
        /* where a Partial(sum) is reduced: the planner's choice, or forced either way */
        const char *reduce_at[] = {"receiver", "receiver", "source", "auto", "auto"};
        setenv("DTR_CROSS_REDUCE", reduce_at[k % 5], 1);
        /* one case in three planned with no message start-up cost: a replicated block's
         * boxes are then cut among its holders, however small (dtr__xshare) */
        setenv("DTR_ALPHA_US", k % 3 == 0 ? "0" : "5", 1);
        if (getenv("XTRACE") && rank == 0) printf("  DTR_CROSS_REDUCE=%s\n", reduce_at[k % 5]);
        via_change = k % 4 == 3 && !dtr_mesh_equal(c.mesh[0], c.mesh[1]);
        char why[512] = "";
        int bad = run_case(ctx, &c, &fill, rank, why, sizeof why);
        if (bad) printf("FAIL seed %llu case %d: %s: rank %d: %s\n", (unsigned long long)seed, k, c.text, rank, why);
        if (test_job_max(&job, bad))
            failed++;
        else
            passed++;
        int shared = 0, na = (int)dtr_mesh_nranks(c.mesh[0]), nb = (int)dtr_mesh_nranks(c.mesh[1]);
        for (int r = 0; r < world; r++) {
            int64_t coord[3];
            shared += dtr_mesh_coord(c.mesh[0], r, coord) == DTR_OK && dtr_mesh_coord(c.mesh[1], r, coord) == DTR_OK;
        }
        kinds[shared == 0 ? 0 : shared == na && shared == nb ? 2 : 1]++;
        for (int t = 0, any = 0; t < c.n && !any; t++)
            ragged += any = dtr_spec_ragged(&c.src[t]) || dtr_spec_ragged(&c.dst[t]);
        dtr_mesh_destroy(c.mesh[0]);
        dtr_mesh_destroy(c.mesh[1]);
    }
    if (fctx != NULL) {
        fake_device_counts_t n = fake_device_counts();
        int bad = n.refused != 0 || (world >= 2 && cases >= 50 && n.cast == 0);
        if (bad) printf("FAIL: fake device: %lld refused addresses, %lld casts\n", (long long)n.refused, (long long)n.cast);
        bad = test_job_max(&job, bad);
        failed += bad, passed += !bad;
        dtr_context_destroy(fctx);
        free(fake_st);
        ctx = job.ctx;
    }
    char why[512] = "";
    int bad = world >= 2 ? wrong_size(ctx, rank, world, why, sizeof why) : 0;
    if (!bad && world >= 2) bad = other_sizes(ctx, rank, world, why, sizeof why);
    if (!bad && world >= 4 && !on_fake) bad = ragged_partials(ctx, job.mpi, rank, world, why, sizeof why);
    if (!bad) bad = out_of_comm(ctx, rank, world, why, sizeof why);
    if (!bad && world >= 2 && job.mpi) bad = start_returns_in_flight(rank, why, sizeof why);
    if (bad) printf("FAIL hostile: rank %d: %s\n", rank, why);
    if (test_job_max(&job, bad))
        failed++;
    else
        passed++;
    unsetenv("DTR_CROSS_REDUCE");
    unsetenv("DTR_ALPHA_US");
    if (rank == 0 && world >= 2 && cases >= 50 && summed == 0) {
        printf("FAIL: no case's plan summed a Partial at the receivers\n");
        failed++;
    }
    if (rank == 0 && world >= 2 && cases >= 50 && ragged == 0) {
        printf("FAIL: no case drew a ragged shard\n");
        failed++;
    }

    if (rank == 0 && world >= 2 && cases >= 50 && (kinds[0] == 0 || kinds[1] == 0 || kinds[2] == 0)) {
        printf("FAIL: the draws missed a kind of rank sets (disjoint %d, overlapping %d, the same %d)\n",
               kinds[0], kinds[1], kinds[2]);
        failed++;
    }
    if (rank == 0)
        printf("cross on %d ranks (%s), seed %llu: rank sets disjoint %d, overlapping %d, the "
               "same %d; %d plans summed a Partial at the receivers; %d cases with ragged "
               "shards, %d reducing a ragged source on its mesh\ncross: %d passed, %d failed\n",
               world, job.backend, (unsigned long long)seed, kinds[0], kinds[1], kinds[2], summed,
               ragged, ragged_pre, passed, failed);
    test_job_end(&job);
    return failed > 0;
}
