/*
 * Block-scaled fp8 changes (dtr_change_options_t.block_scale) on the backend --backend
 * names, random cases: every rank draws the same case from the seed: a source mesh of 1 to
 * 3 dims over a random subset of the world's ranks, a destination mesh that is the same one
 * (one case in four) or another random one (disjoint, overlapping, the same ranks
 * reshaped), 1 to 3 tensors of 0 to 3 dims (uneven and zero lengths; one in four up to 300
 * long with blocks of 128, so that blocks cross shard boundaries), blocks of 1 to 128,
 * f32 / f64 / f16 / bf16 sources to f8e4m3 or f8e5m2, Shard and Replicate on both sides.
 * Even cases fill the source with the pattern, odd ones with random values. One case in three
 * runs through dtr_change_start with work done between the start and the wait, one in four
 * between meshes relabeled. Each destination rank checks every byte and every scale
 * against the reference quantizer (pattern.h, dtr_fill_check_fp8: each block's amax from
 * all its elements, each code by search), that no byte past its outputs was written, and
 * each source rank that its input is intact; and every rank that each tensor's and each
 * scale tensor's digest as sent (dtr_change_sent) equals its digest as delivered. Then one
 * source rank's wrong in_bytes: its
 * error there, an error on every other rank of both meshes, and the next call good.
 *
 * Usage: mpirun -n N fp8_test [--cases N | --case K] [--seed S] [--backend mpi|gloo] (--case:
 * case K alone; XTRACE=1: print
 * each case before it runs, to find one that hangs). Prints one line
 * per failing case (seed and case number) and "fp8: N passed, N failed".
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtr.h"
#include "pattern/pattern.h"
#include "tests/support/job.h"
#include "tests/support/rand_cases.h"

#define GUARD 16

typedef struct {
    dtr_mesh_t *mesh[2];
    int n;
    dtr_spec_t src[3], dst[3];
    int64_t block;
    bool relabel;
    char text[1024];
} fcase_t;

static dtr_placement_t shard_or_rep(int ndim) {
    return ndim > 0 && pick(3) != 0 ? dtr_shard(pick(ndim)) : dtr_replicate();
}

static bool draw(fcase_t *c, int world) {
    static const dtr_dtype_t srcs[4] = {DTR_F32, DTR_F64, DTR_F16, DTR_BF16};
    static const int64_t blocks[7] = {1, 2, 3, 5, 8, 16, 128};
    memset(c, 0, sizeof *c);
    c->mesh[0] = random_mesh(world, 1 + pick(world));
    c->mesh[1] = pick(4) == 0 ? NULL : random_mesh(world, 1 + pick(world));
    const dtr_mesh_t *b = c->mesh[1] != NULL ? c->mesh[1] : c->mesh[0];
    c->n = pick(4) == 0 ? 1 + pick(3) : 1;
    bool big = pick(4) == 0;
    c->block = big ? 128 : blocks[pick(6)];
    c->relabel = pick(4) == 0 && !dtr_mesh_equal(c->mesh[0], b);
    int at = snprintf(c->text, sizeof c->text, "block %lld%s:", (long long)c->block,
                      c->relabel ? " relabel" : "");
    int na = dtr_mesh_ndims(c->mesh[0]), nb = dtr_mesh_ndims(b);
    for (int t = 0; t < c->n; t++) {
        int nd = big ? 1 + pick(2) : pick(4);
        int64_t shape[3];
        for (int k = 0; k < nd; k++) shape[k] = big ? 1 + pick(300) : pick(6) == 0 ? 0 : 1 + pick(30);
        dtr_placement_t pa[3], pb[3];
        for (int k = 0; k < na; k++) pa[k] = shard_or_rep(nd);
        for (int k = 0; k < nb; k++) pb[k] = shard_or_rep(nd);
        dtr_dtype_t f8 = pick(2) ? DTR_F8E4M3 : DTR_F8E5M2;
        if (dtr_spec_init(&c->src[t], c->mesh[0], pa, na, shape, nd, srcs[pick(4)]) != DTR_OK ||
            dtr_spec_init(&c->dst[t], b, pb, nb, shape, nd, f8) != DTR_OK)
            return false;
        char ps[128], pd[128], sh[64] = "";
        dtr_placements_format(pa, na, ps, sizeof ps);
        dtr_placements_format(pb, nb, pd, sizeof pd);
        for (int k = 0, o = 0; k < nd; k++)
            o += snprintf(sh + o, sizeof sh - (size_t)o, "%s%lld", k ? "x" : "", (long long)shape[k]);
        at += snprintf(c->text + at, sizeof c->text - (size_t)at, " [%s %s %s -> %s %s]", sh,
                       dtr_dtype_name(c->src[t].dtype), ps, pd, dtr_dtype_name(f8));
    }
    return true;
}

/* Work between the start and the wait: the request tested now and then. */
static dtr_status_t finish(dtr_request_t *req) {
    volatile double sink = 0;
    bool done = false;
    for (int k = 0; k < 64 && !done; k++) {
        for (int j = 0; j < 2000; j++) sink += j * 0.5;
        dtr_status_t st = dtr_request_test(req, &done);
        if (st != DTR_OK || done) return st;
    }
    return dtr_request_wait(req);
}

/* The case's buffers on this rank: in[t] (its source block, filled), out[t] and out[n + t]
 * (the weights' and scales' blocks, with GUARD bytes of 0xee past each). */
typedef struct {
    void *in[3], *copy[3], *out[6];
    size_t in_bytes[3], out_bytes[6];
} fbuf_t;

/* The first rank (row-major) of mesh, which contributes a mesh's digest to the tally. */
static int first_rank(const dtr_mesh_t *mesh) {
    int64_t zero[DTR_MAX_MESH_DIMS] = {0};
    int r = -1;
    dtr_mesh_rank_at(mesh, zero, &r);
    return r;
}

/* Proof of delivery: each of the 2n tensors' digest as the source ranks sent it
 * (dtr_change_sent: the quantized tensors, then their scales) and as it arrived (d[i], out),
 * brought to every rank (each mesh's first rank contributes, the others INT64_MIN, the max
 * over the job) and compared. Collective over the job, after a run that succeeded. */
static int digests_agree(dtr_context_t *ctx, const dtr_mesh_t *all, const dtr_change_t *ch,
                         int n, const dtr_spec_t *d, const fbuf_t *b, int rank, char *why,
                         size_t len) {
    int64_t mine[12], got[12];
    dtr_status_t st = DTR_OK;
    for (int i = 0; i < 2 * n; i++) {
        dtr_spec_t s;
        const void *buf = NULL;
        size_t bytes = 0;
        uint64_t a = 0, z = 0;
        dtr_layout_t l;
        mine[i] = mine[2 * n + i] = INT64_MIN;
        if (st == DTR_OK) st = dtr_change_sent(ch, i, &s, &buf, &bytes);
        if (st == DTR_OK && dtr_spec_layout(&s, rank, &l) == DTR_OK) {
            st = dtr_digest(ctx, &s, buf, (int64_t)bytes, &a);
            if (rank == first_rank(s.mesh)) mine[i] = (int64_t)a;
        }
        if (st == DTR_OK && dtr_spec_layout(&d[i], rank, &l) == DTR_OK) {
            st = dtr_digest(ctx, &d[i], b->out[i], (int64_t)b->out_bytes[i], &z);
            if (rank == first_rank(d[i].mesh)) mine[2 * n + i] = (int64_t)z;
        }
    }
    if (st != DTR_OK) return snprintf(why, len, "digests: %s", dtr_last_error()) > 0;
    if (dtr_all_reduce(ctx, all, 1u, mine, got, 4 * n, DTR_I64, DTR_REDUCE_MAX) != DTR_OK)
        return snprintf(why, len, "digests' tally: %s", dtr_last_error()) > 0;
    for (int i = 0; i < 2 * n; i++)
        if (got[i] != got[2 * n + i])
            return snprintf(why, len, "%s %d: sent digest 0x%016llx, delivered 0x%016llx",
                            i < n ? "tensor" : "scales of tensor", i % n,
                            (unsigned long long)got[i], (unsigned long long)got[2 * n + i]) > 0;
    return 0;
}

static int run_case(dtr_context_t *ctx, const dtr_mesh_t *all, const fcase_t *c,
                    const dtr_fill_t *fill, int rank, bool nonblocking, char *why, size_t len) {
    dtr_change_options_t o = {.block_scale = c->block, .relabel = c->relabel};
    dtr_change_t *ch = NULL;
    if (dtr_change_create(c->n, c->src, c->dst, &o, &ch) != DTR_OK) {
        snprintf(why, len, "create: %s", dtr_last_error());
        return 1;
    }
    fbuf_t b = {0};
    int bad = 0, n = c->n;
    dtr_spec_t d[6];
    for (int t = 0; t < n && !bad; t++) {
        dtr_layout_t l;
        if (dtr_spec_layout(&c->src[t], rank, &l) == DTR_OK) {
            b.in[t] = malloc((size_t)l.bytes + 1);
            b.copy[t] = malloc((size_t)l.bytes + 1);
            b.in_bytes[t] = (size_t)l.bytes;
            dtr_fill(&c->src[t], fill, rank, b.in[t], b.in_bytes[t]);
            memcpy(b.copy[t], b.in[t], b.in_bytes[t]);
        }
        if (dtr_change_dst(ch, t, &d[t]) != DTR_OK || dtr_change_scales(ch, t, &d[n + t]) != DTR_OK)
            bad = snprintf(why, len, "dst or scales %d: %s", t, dtr_last_error()) > 0;
    }
    for (int t = 0; t < 2 * n && !bad; t++) {
        dtr_layout_t l;
        if (dtr_spec_layout(&d[t], rank, &l) != DTR_OK) continue;
        b.out[t] = malloc((size_t)l.bytes + GUARD);
        memset(b.out[t], 0xee, (size_t)l.bytes + GUARD);
        b.out_bytes[t] = (size_t)l.bytes;
    }
    dtr_status_t st = DTR_OK;
    dtr_request_t *req = NULL;
    if (!bad) {
        st = nonblocking ? dtr_change_start(ctx, ch, (const void *const *)b.in, b.in_bytes, b.out, b.out_bytes, &req)
                         : dtr_change_run(ctx, ch, (const void *const *)b.in, b.in_bytes, b.out, b.out_bytes);
        if (st == DTR_OK && req != NULL) st = finish(req);
        if (st != DTR_OK) bad = snprintf(why, len, "run: %s", dtr_last_error()) > 0;
        else bad = digests_agree(ctx, all, ch, n, d, &b, rank, why, len);
    }
    for (int t = 0; t < n && !bad; t++) {
        if (b.in[t] != NULL && memcmp(b.in[t], b.copy[t], b.in_bytes[t]) != 0)
            bad = snprintf(why, len, "tensor %d: the input was written", t) > 0;
        for (int k = 0; k < 2 && !bad && b.out[t + k * n] != NULL; k++) {
            const unsigned char *g = (const unsigned char *)b.out[t + k * n] + b.out_bytes[t + k * n];
            for (int j = 0; j < GUARD; j++)
                if (g[j] != 0xee) bad = snprintf(why, len, "tensor %d: written past its %s", t, k ? "scales" : "weights") > 0;
        }
        if (bad || b.out[t] == NULL) continue;
        dtr_pattern_report_t w, s;
        if (dtr_fill_check_fp8(&c->src[t], &d[t], &d[n + t], c->block, fill, rank, b.out[t],
                               b.out_bytes[t], b.out[n + t], b.out_bytes[n + t], &w, &s) != DTR_OK)
            bad = snprintf(why, len, "check: %s", dtr_last_error()) > 0;
        else if (w.mismatches || s.mismatches)
            bad = snprintf(why, len, "tensor %d: %lld of %lld bytes and %lld of %lld scales "
                           "differ; the first %s at local %lld: got %g, want %g", t,
                           (long long)w.mismatches, (long long)w.checked, (long long)s.mismatches,
                           (long long)s.checked, w.mismatches ? "byte" : "scale",
                           (long long)(w.mismatches ? w.first : s.first),
                           w.mismatches ? w.got : s.got, w.mismatches ? w.want : s.want) > 0;
    }
    for (int t = 0; t < 2 * n; t++) free(b.out[t]);
    for (int t = 0; t < n; t++) free(b.in[t]), free(b.copy[t]);
    dtr_change_destroy(ch);
    return bad;
}

/* Ranks 0..h-1 the source mesh, h..world-1 the destination; the source's first rank passes
 * a wrong in_bytes: its error names it, every other rank errs too, the next call is good. */
static int wrong_size(dtr_context_t *ctx, int rank, int world, char *why, size_t len) {
    int h = world / 2, ra[8], rb[8];
    for (int k = 0; k < world; k++) *(k < h ? &ra[k] : &rb[k - h]) = k;
    int64_t sa = h, sb = world - h, shape[2] = {200, 130};
    dtr_mesh_t *a = NULL, *m = NULL;
    dtr_mesh_create(1, &sa, ra, h, &a);
    dtr_mesh_create(1, &sb, rb, world - h, &m);
    dtr_placement_t s0 = dtr_shard(0), s1 = dtr_shard(1);
    dtr_spec_t src, dst;
    dtr_spec_init(&src, a, &s0, 1, shape, 2, DTR_BF16);
    dtr_spec_init(&dst, m, &s1, 1, shape, 2, DTR_F8E4M3);
    dtr_change_options_t o = {.block_scale = 128};
    dtr_change_t *ch = NULL;
    int bad = dtr_change_create(1, &src, &dst, &o, &ch) != DTR_OK;
    dtr_layout_t ls = {0}, lw = {0}, lsc = {0};
    dtr_spec_t sc;
    dtr_spec_layout(&src, rank, &ls);
    dtr_spec_layout(&dst, rank, &lw);
    if (!bad) dtr_change_scales(ch, 0, &sc), dtr_spec_layout(&sc, rank, &lsc);
    char *in = calloc((size_t)ls.bytes + 2, 1), *out = calloc((size_t)lw.bytes + 1, 1),
         *sout = calloc((size_t)lsc.bytes + 1, 1);
    for (int pass = 0; pass < 2 && !bad; pass++) {
        const void *ins[1] = {in};
        void *outs[2] = {out, sout};
        size_t inb[1] = {(size_t)ls.bytes + (pass == 0 && rank == 0)}, outb[2] = {(size_t)lw.bytes, (size_t)lsc.bytes};
        dtr_status_t st = dtr_change_run(ctx, ch, ins, inb, outs, outb);
        if (pass == 1 && st != DTR_OK)
            bad = snprintf(why, len, "the good call after it: %s", dtr_last_error()) > 0;
        else if (pass == 0 && st == DTR_OK)
            bad = snprintf(why, len, "rank 0's wrong in_bytes: DTR_OK here") > 0;
        else if (pass == 0 && rank == 0 && strstr(dtr_last_error(), "in_bytes[0]") == NULL)
            bad = snprintf(why, len, "the error does not name in_bytes[0]: %s", dtr_last_error()) > 0;
        /* what was sent: nothing after the failed call, on every rank; the good one's after */
        dtr_spec_t ss;
        const void *sb = NULL;
        size_t sbytes = 0;
        st = dtr_change_sent(ch, 1, &ss, &sb, &sbytes);
        if (!bad && pass == 0 && st != DTR_ERR_INVALID_ARGUMENT)
            bad = snprintf(why, len, "dtr_change_sent after the failed call: %d, not "
                           "INVALID_ARGUMENT", (int)st) > 0;
        if (!bad && pass == 1 && (st != DTR_OK || (rank < h) != (sb != NULL) ||
                                  sbytes != (rank < h ? 16u : 0u))) /* (2x2 f32 scales, R) */
            bad = snprintf(why, len, "dtr_change_sent after the good call: %s, %zu bytes",
                           st == DTR_OK ? "OK" : dtr_last_error(), sbytes) > 0;
    }
    free(in), free(out), free(sout);
    dtr_change_destroy(ch);
    dtr_mesh_destroy(a);
    dtr_mesh_destroy(m);
    return bad;
}

int main(int argc, char **argv) {
    test_job_t job;
    test_job_start(&argc, &argv, &job);
    int rank = job.rank, world = job.world, cases = 100, passed = 0, failed = 0, only = -1;
    uint64_t seed = 20261130;
    for (int k = 1; k + 1 < argc; k += 2) {
        if (strcmp(argv[k], "--cases") == 0) cases = atoi(argv[k + 1]);
        if (strcmp(argv[k], "--seed") == 0) seed = strtoull(argv[k + 1], NULL, 10);
        if (strcmp(argv[k], "--case") == 0) only = atoi(argv[k + 1]);
    }
    for (int k = only >= 0 ? only : 0; k < (only >= 0 ? only + 1 : cases); k++) {
        rng_state = seed * 1000003ull + (uint64_t)k;
        fcase_t c;
        bool ok = draw(&c, world);
        char why[512] = "";
        int bad = 0;
        if (ok && getenv("XTRACE") && rank == 0) {
            char ma[64], mb[64];
            dtr_mesh_format(c.mesh[0], ma, sizeof ma);
            dtr_mesh_format(c.mesh[1] != NULL ? c.mesh[1] : c.mesh[0], mb, sizeof mb);
            printf("case %d: mesh %s -> %s, %s\n", k, ma, mb, c.text);
            fflush(stdout);
        }
        if (ok) {
            dtr_fill_t fill = {.kind = k % 2 ? DTR_FILL_RANDOM : DTR_FILL_PATTERN,
                               .seed = seed + (uint64_t)k};
            bad = run_case(job.ctx, job.all, &c, &fill, rank, k % 3 == 1, why, sizeof why);
            if (bad) printf("FAIL seed %llu case %d: %s: rank %d: %s\n", (unsigned long long)seed, k, c.text, rank, why);
            if (test_job_max(&job, bad)) failed++;
            else passed++;
        }
        dtr_mesh_destroy(c.mesh[0]);
        dtr_mesh_destroy(c.mesh[1]);
    }
    char why[512] = "";
    int bad = world >= 2 ? wrong_size(job.ctx, rank, world, why, sizeof why) : 0;
    if (bad) printf("FAIL hostile: rank %d: %s\n", rank, why);
    if (test_job_max(&job, bad)) failed++;
    else passed++;
    if (rank == 0)
        printf("fp8 on %d ranks (%s), seed %llu\nfp8: %d passed, %d failed\n", world, job.backend,
               (unsigned long long)seed, passed, failed);
    test_job_end(&job);
    return failed > 0;
}
